//! The Rust a build needs is the Rust the project says it needs: `rust-version` in the workspace
//! `Cargo.toml` (and the README) is at least every locked dependency's own `rust-version` on
//! this platform. The machine has one toolchain and cannot fetch another to build with the
//! minimum itself, so the lock file is read instead (`cargo metadata`, offline: the build that
//! runs this test has every package already).

use std::process::Command;

/// `1.95` or `1.88.0` as numbers, to compare.
fn version(v: &str) -> Vec<u32> {
    v.split('.').map(|n| n.parse().unwrap_or(0)).collect()
}

#[test]
fn rust_version_covers_every_locked_dependency() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let declared = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("rust-version in the workspace Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let host = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .unwrap();
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap();
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let used: std::collections::HashSet<&str> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    let mut needs: Vec<(Vec<u32>, String)> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| used.contains(id)))
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            Some((
                version(v),
                format!("{} {} needs {v}", p["name"], p["version"]),
            ))
        })
        .collect();
    needs.sort();
    let (most, who) = needs.last().unwrap();
    assert!(
        version(declared) >= *most,
        "rust-version = \"{declared}\" in Cargo.toml, but {who}: raise it (and the README's)"
    );
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust {declared} or later")),
        "the README does not say Rust {declared} or later"
    );
}
