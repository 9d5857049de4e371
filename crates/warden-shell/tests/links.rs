//! Symbolic links inside the project that lead out of it, read on disk.

use warden_shell::{Env, Place, analyze};

#[test]
fn a_link_inside_the_project_that_leads_out_is_outside() {
    // The folder stands for the home folder, so that `elsewhere` is another of the user's
    // folders wherever the test runs (below /tmp, everything would be a temporary file).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let project = dir.path().join("app");
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(project.join("plain")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();
    let env = Env::for_project(&project).with_home(dir.path());
    let a = analyze("rm -rf link/x plain/x", &env);
    assert_eq!(a.deletes[0].place, Place::Outside);
    assert_eq!(a.deletes[1].place, Place::Inside);
    assert!(a.destroys(), "{a:#?}");
    // Without reading the disk, the link is taken at its word.
    let lexical = Env {
        follow_links: false,
        ..env
    };
    assert!(!analyze("rm -rf link/x", &lexical).destroys());
}
