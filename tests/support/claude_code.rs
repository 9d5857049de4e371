//! A test project as Claude Code runs Warden's hook in it, shared by the test files that drive
//! `warden hook claude-code` (`tests/claude_code.rs`, and `tests/postgres.rs` on PostgreSQL):
//! a folder with a transcript, the payload fixtures of `tests/claude-code/` with the project's
//! paths filled in, and one `warden` process per hook.

#![allow(dead_code)] // each test file uses its own part

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// `tests/claude-code`: payload fixtures, a transcript, the installation's `warden.toml`.
pub fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/claude-code")
}

pub struct Project {
    pub dir: tempfile::TempDir,
    session: String,
    /// The id of the last model call written to the transcript: the `tool_use` of its tool
    /// calls is named after it, and a `PreToolUse` payload names that `tool_use`, as Claude
    /// Code's do.
    last_call: std::cell::RefCell<Option<String>>,
    /// `--db`: a SQLite file in the project's folder, or a PostgreSQL URL.
    db: String,
    /// The installation's `warden.toml`: `tests/claude-code/warden.toml`, or a copy of it with
    /// more settings ([`Project::with_settings`]).
    config: PathBuf,
}

impl Project {
    /// A project whose database is a SQLite file in its folder.
    pub fn new(session: &str) -> Project {
        Project::with_db(session, None)
    }

    /// A project whose database is `db` (a URL), or a SQLite file in its folder.
    pub fn with_db(session: &str, db: Option<&str>) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        let db = db.map_or_else(
            || dir.path().join("warden.db").display().to_string(),
            str::to_string,
        );
        let p = Project {
            dir,
            session: session.to_string(),
            last_call: std::cell::RefCell::new(None),
            db,
            config: data().join("warden.toml"),
        };
        let transcript = p.fill(&std::fs::read_to_string(data().join("transcript.jsonl")).unwrap());
        std::fs::write(p.transcript(), transcript).unwrap();
        p
    }

    /// The project, whose hooks and commands read `tests/claude-code/warden.toml` with the
    /// tables of `settings` added (`"[database]\nlock_timeout = 60\n"`): a copy in the project's
    /// folder, its folders named as the original names them.
    pub fn with_settings(mut self, settings: &str) -> Project {
        let original = std::fs::read_to_string(&self.config).unwrap();
        let mut config: toml::Table = toml::from_str(&original).unwrap();
        for list in ["rules", "plugins"] {
            if let Some(toml::Value::Array(folders)) = config.get_mut(list) {
                for folder in folders {
                    *folder = data()
                        .join(folder.as_str().unwrap())
                        .display()
                        .to_string()
                        .into();
                }
            }
        }
        let settings: toml::Table = toml::from_str(settings).unwrap();
        for (name, table) in settings {
            let toml::Value::Table(table) = table else {
                panic!("{name}: settings are tables of warden.toml")
            };
            match config.get_mut(&name) {
                Some(toml::Value::Table(into)) => into.extend(table),
                _ => {
                    config.insert(name, toml::Value::Table(table));
                }
            }
        }
        self.config = self.dir.path().join("warden.toml");
        std::fs::write(&self.config, toml::to_string(&config).unwrap()).unwrap();
        self
    }

    /// The installation's `warden.toml`.
    pub fn config(&self) -> &Path {
        &self.config
    }

    pub fn transcript(&self) -> PathBuf {
        self.dir.path().join("transcript.jsonl")
    }

    /// The database, as `--db` takes it.
    pub fn db(&self) -> &str {
        &self.db
    }

    /// `text` with the placeholders filled in.
    pub fn fill(&self, text: &str) -> String {
        text.replace("$PROJECT", &self.dir.path().display().to_string())
            .replace("$TRANSCRIPT", &self.transcript().display().to_string())
            .replace("$SESSION", &self.session)
    }

    /// The payload fixture `name`, with `set` merged over it.
    pub fn payload(&self, name: &str, set: Option<&Value>) -> Value {
        let text = std::fs::read_to_string(data().join("payloads").join(format!("{name}.json")))
            .unwrap_or_else(|e| panic!("payload {name}: {e}"));
        let mut v: Value = serde_json::from_str(&self.fill(&text)).unwrap();
        if let (Some(call), Value::Object(map)) = (&*self.last_call.borrow(), &mut v)
            && name == "PreToolUse"
        {
            map.insert("tool_use_id".into(), json!(format!("toolu_{call}")));
        }
        if let (Some(Value::Object(set)), Value::Object(map)) = (set, &mut v) {
            for (k, x) in set {
                map.insert(
                    k.clone(),
                    serde_json::from_str(&self.fill(&x.to_string())).unwrap(),
                );
            }
        }
        v
    }

    /// The transcript gains a model call (`id`), whose context holds `tokens` tokens, and which
    /// asks for a tool (`toolu_{id}`).
    pub fn model_call(&self, id: &str, tokens: u64) {
        *self.last_call.borrow_mut() = Some(id.to_string());
        let line = json!({
            "parentUuid": "u", "isSidechain": false, "type": "assistant",
            "message": {
                "id": id, "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [
                    {"type": "text", "text": "..."},
                    {"type": "tool_use", "id": format!("toolu_{id}"), "name": "Bash", "input": {}}
                ],
                "usage": {
                    "input_tokens": 10, "cache_creation_input_tokens": 1000,
                    "cache_read_input_tokens": tokens - 1100, "output_tokens": 90
                }
            },
            "uuid": format!("u-{id}")
        });
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.transcript())
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    /// A hook process, as Claude Code starts one.
    pub fn hook_command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_warden"));
        c.arg("hook")
            .arg("claude-code")
            .arg("--config")
            .arg(&self.config)
            .arg("--db")
            .arg(&self.db)
            .env("CLAUDE_PROJECT_DIR", self.dir.path())
            // The home folder shell commands are judged against (`rm -rf ~`), the same on
            // every machine.
            .env("HOME", "/home/ada")
            .env_remove("WARDEN_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// A hook process started with `input` on its stdin (closed after it).
    pub fn spawn_hook(&self, input: &[u8]) -> std::process::Child {
        let mut child = self.hook_command().spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child
    }

    /// Runs one hook: its answer (`null` when it printed nothing). Every hook exits 0.
    pub fn hook(&self, payload: &Value) -> Value {
        let child = self.spawn_hook(payload.to_string().as_bytes());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{payload}: exit {:?}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        if stdout.trim().is_empty() {
            return Value::Null;
        }
        assert_eq!(
            stdout.trim().lines().count(),
            1,
            "one JSON line on stdout: {stdout}"
        );
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{payload}: not JSON ({e}): {stdout}"))
    }

    /// A `warden` command on the project's installation and database: its stdout.
    pub fn warden(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_warden"))
            .arg("--config")
            .arg(&self.config)
            .arg("--db")
            .arg(&self.db)
            .env_remove("WARDEN_CONFIG")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// What the answers say, with the project's folder written as `$PROJECT`.
    pub fn normalize(&self, v: &Value) -> Value {
        serde_json::from_str(
            &v.to_string()
                .replace(&self.dir.path().display().to_string(), "$PROJECT"),
        )
        .unwrap()
    }
}
