//! Symbolic links inside the project that lead out of it, read on disk.

use warden_shell::{Env, Place, analyze};

#[test]
fn a_link_inside_the_project_that_leads_out_is_outside() {
    // Not below /tmp: everything there is a temporary file already.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let project = dir.path().join("app");
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(project.join("plain")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();
    let env = Env::for_project(&project);
    let a = analyze("rm -rf link/x plain/x", &env);
    assert_eq!(a.deletes[0].place, Place::Outside);
    assert_eq!(a.deletes[1].place, Place::Inside);
    assert!(a.destroys(), "{a:#?}");
    // Without reading the disk, the link is taken at its word.
    let lexical = Env {
        follow_links: false,
        ..Env::for_project(&project)
    };
    assert!(!analyze("rm -rf link/x", &lexical).destroys());
}
