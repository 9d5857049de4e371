//! A project in a temporary folder: notes, a sources file, and loading it.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use warden_knowledge::{Knowledge, LoadError, Refusal};

pub struct Project {
    pub dir: tempfile::TempDir,
    /// A folder next to the project, outside it.
    pub outside: tempfile::TempDir,
}

impl Project {
    pub fn new() -> Self {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        };
        fs::write(
            p.outside.path().join("secret.md"),
            "# Secret\n\nOutside the project.\n",
        )
        .unwrap();
        p
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The name of the folder next to the project (`outside`), for paths that climb into it.
    pub fn outside_name(&self) -> String {
        let name = self.outside.path().file_name().unwrap();
        name.to_string_lossy().into_owned()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) -> &Self {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        self
    }

    /// Writes `sources.toml` with `knowledge` (the `[knowledge]` table's body) and one source
    /// per `(id, path, extra)`.
    pub fn sources(&self, knowledge: &str, sources: &[(&str, &str, &str)]) -> &Self {
        let mut text = format!("[knowledge]\nenabled = true\n{knowledge}\n");
        for (id, path, extra) in sources {
            text.push_str(&format!(
                "\n[[source]]\nid = \"{id}\"\npath = {}\ntags = [\"core\"]\n{extra}\n",
                toml_string(path)
            ));
        }
        self.write("sources.toml", &text)
    }

    pub fn load(&self) -> Result<Knowledge, LoadError> {
        Knowledge::load(self.path("sources.toml"), self.root())
    }

    /// Loads a project with the one source `path` and returns its refusal.
    pub fn refusal(&self, path: &str, extra: &str) -> Refusal {
        self.sources("", &[("probe", path, extra)]);
        let k = self.load().unwrap();
        assert!(k.sources().is_empty(), "{path:?} loaded: {:?}", k.sources());
        k.refused()[0].clone()
    }
}

/// `s` as a TOML basic string, with every control character escaped.
pub fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
