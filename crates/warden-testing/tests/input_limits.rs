//! Test files are operator input too: read bounded, never blocking on a pipe, and found only
//! inside the folders given.

use std::fs;
use std::sync::mpsc;
use std::time::Duration;

use warden_testing::{
    MAX_TEST_FILE_BYTES, discover_test_files, find_test_files, read_test_file, read_test_files,
};

#[test]
fn a_named_pipe_is_not_read_as_a_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("f.test.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&pipe)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("mkfifo is not available; skipped");
        return;
    }
    fs::write(dir.path().join("g.test.toml"), "").unwrap();

    // Given by name: refused at once (opening a pipe would wait for a writer forever).
    let (tx, rx) = mpsc::channel();
    let given = pipe.clone();
    std::thread::spawn(move || tx.send(read_test_file(&given)).unwrap());
    let refused = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("reading a named pipe as a test file must not wait")
        .unwrap_err();
    assert_eq!(refused.path(), pipe);
    assert!(refused.is_error());
    assert!(
        refused
            .message()
            .contains("not a regular file (a named pipe)"),
        "{refused}"
    );
    assert!(refused.to_string().contains("f.test.toml"), "{refused}");

    // Found in a folder: reported, not run, and the regular test file beside it is found.
    let (files, diagnostics) = discover_test_files(&[dir.path().to_path_buf()]);
    assert_eq!(files, vec![dir.path().join("g.test.toml")]);
    assert_eq!(find_test_files(&[dir.path().to_path_buf()]), files);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].path(), pipe);
    assert!(
        diagnostics[0].message().contains("not a regular file")
            && diagnostics[0].message().contains("not run"),
        "{}",
        diagnostics[0]
    );
}

#[cfg(unix)]
#[test]
fn links_to_test_files_are_found_inside_the_folder_only() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("real.test.toml"), "").unwrap();
    fs::write(outside.path().join("secret.test.toml"), "").unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("real.test.toml"),
        dir.path().join("inside.test.toml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.test.toml"),
        dir.path().join("out.test.toml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("missing"),
        dir.path().join("dangling.test.toml"),
    )
    .unwrap();
    let (files, diagnostics) = discover_test_files(&[dir.path().to_path_buf()]);
    assert_eq!(
        files,
        vec![
            dir.path().join("inside.test.toml"),
            dir.path().join("real.test.toml")
        ]
    );
    let text: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 2, "{text:#?}");
    assert!(text[0].contains("dangling.test.toml") && text[0].contains("cannot be followed"));
    assert!(text[1].contains("out.test.toml") && text[1].contains("outside the folder"));
}

#[test]
fn an_oversized_test_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.test.toml");
    let at_limit = "#".repeat(MAX_TEST_FILE_BYTES as usize);
    fs::write(&path, &at_limit).unwrap();
    assert_eq!(read_test_file(&path).unwrap().len(), at_limit.len());

    fs::write(&path, format!("{at_limit}\n")).unwrap();
    let refused = read_test_file(&path).unwrap_err();
    assert!(refused.is_error());
    assert_eq!(refused.path(), path);
    assert!(
        refused.message().contains(&format!(
            "is {} bytes; test files are limited to",
            MAX_TEST_FILE_BYTES + 1
        )),
        "{refused}"
    );

    fs::write(&path, [b'#', 0xff, b'\n']).unwrap();
    assert!(
        read_test_file(&path)
            .unwrap_err()
            .message()
            .contains("not UTF-8")
    );
    let missing = read_test_file(&dir.path().join("none.test.toml")).unwrap_err();
    assert!(missing.message().contains("cannot read"), "{missing}");

    // Several at once: those read, and a diagnostic for each of the others.
    let good = dir.path().join("good.test.toml");
    fs::write(&good, "").unwrap();
    let (files, diagnostics) = read_test_files(&[path.clone(), good.clone()]);
    assert_eq!(files, vec![(good, String::new())]);
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].path(), path);
}
