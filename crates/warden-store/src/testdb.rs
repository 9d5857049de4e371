//! A database of either back end for one test: SQLite in a temporary folder, or a fresh schema
//! of the PostgreSQL database `WARDEN_TEST_POSTGRES_URL` names (dropped at the end). Without
//! that variable the PostgreSQL tests pass without running, and say so once on standard error
//! (not captured by the test harness), so that a run shows what it did not test.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use crate::{Backend, Store};

/// How long a test waits for what comes within milliseconds (a notification, a listener that
/// connects, a server that is back): a hang detector, not a speed check. A wait polls, and ends
/// as soon as what it waits for comes; only what never comes waits this long.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `done` until it holds (true), or [`PATIENCE`] has passed (false).
pub(crate) fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `store` answers a read (a hang detector). A PostgreSQL store given a short lock
/// timeout waits no longer than that for a connection from its pool, which a loaded machine
/// may take longer to make; once made, the connection stays in the pool for what follows, so
/// that only the lock, not the making of a connection, meets that timeout.
pub(crate) fn warm(store: &Store) {
    let probe = crate::StateScope::new("warm", "warm", "warm");
    assert!(
        eventually(|| store.state_get(&probe, "warm").is_ok()),
        "the store never answered"
    );
}

/// The environment variable naming the PostgreSQL server the tests may use.
pub(crate) const URL_VAR: &str = "WARDEN_TEST_POSTGRES_URL";

/// A database for one test.
pub(crate) struct TestDb {
    pub backend: Backend,
    /// What `Store::open` takes: the file, or the URL with `schema=...`.
    pub location: String,
    _dir: Option<tempfile::TempDir>,
    /// The schema to drop at the end, and the URL to drop it with.
    schema: Option<(String, String)>,
}

static SKIP: Once = Once::new();

/// The server's URL, or `None` (saying so once).
pub(crate) fn server_url() -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            SKIP.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: the PostgreSQL tests of warden-store ({URL_VAR} is not set; CI sets it and runs them against a real server)"
                );
            });
            None
        }
    }
}

/// A schema name no other test uses.
pub(crate) fn unique_schema() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "warden_test_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` with `key=value` added to its options.
pub(crate) fn with_option(url: &str, key: &str, value: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{key}={value}")
}

impl TestDb {
    pub(crate) fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let location = dir.path().join("warden.db").display().to_string();
        TestDb {
            backend: Backend::Sqlite,
            location,
            _dir: Some(dir),
            schema: None,
        }
    }

    pub(crate) fn postgres() -> Option<TestDb> {
        let url = server_url()?;
        let schema = unique_schema();
        Some(TestDb {
            backend: Backend::Postgres,
            location: with_option(&url, "schema", &schema),
            _dir: None,
            schema: Some((schema, url)),
        })
    }

    /// A store on the database (each call another connection, as another process has).
    pub(crate) fn open(&self) -> Store {
        let s = Store::open(&self.location).expect("open the test database");
        assert_eq!(s.backend(), self.backend);
        s
    }

    /// The same, shareable between threads.
    pub(crate) fn open_arc(&self) -> Arc<Store> {
        Arc::new(self.open())
    }

    /// Runs `sql` written for this back end (`sqlite` or `postgres`).
    pub(crate) fn exec(&self, store: &Store, sqlite: &str, postgres: &str) {
        let sql = match self.backend {
            Backend::Sqlite => sqlite,
            Backend::Postgres => postgres,
        };
        store.exec(sql).expect("test SQL");
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((schema, url)) = &self.schema
            && let Ok(mut client) = url
                .parse::<postgres::Config>()
                .and_then(|c| c.connect(postgres::NoTls))
        {
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    }
}

/// Writes one test per back end for each function named, each taking `&TestDb`.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite_backend {
            $(
                #[test]
                fn $name() {
                    super::$name(&$crate::testdb::TestDb::sqlite());
                }
            )*
        }
        mod postgres_backend {
            $(
                #[test]
                #[ignore = "needs a PostgreSQL server: set WARDEN_TEST_POSTGRES_URL and run `cargo test -- --ignored` (CI does)"]
                fn $name() {
                    if let Some(db) = $crate::testdb::TestDb::postgres() {
                        super::$name(&db);
                    }
                }
            )*
        }
    };
}
pub(crate) use both_backends;
