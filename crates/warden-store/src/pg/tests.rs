//! What only PostgreSQL has: a server that may be unreachable, connections that go stale in
//! the pool, a listener that must reconnect, schemas that keep installations apart. A small
//! TCP proxy in front of the real server cuts and restores the connections.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::testdb::{TestDb, eventually, server_url, unique_schema, with_option};
use crate::{RuleState, StateScope, StateWrite, Store, StoreError};

/// A loopback proxy to the test server that can drop every connection and refuse new ones.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn to(upstream: (String, u16)) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect((upstream.0.as_str(), upstream.1)) else {
                    continue;
                };
                for s in [&client, &server] {
                    if let Ok(clone) = s.try_clone() {
                        o.lock().unwrap().push(clone);
                    }
                }
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy { port, cut, open }
    }

    /// Every connection dropped, new ones refused.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// The test server's host and port.
fn upstream(url: &str) -> (String, u16) {
    let config = super::url::PgUrl::parse(url).expect("test URL").config;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_string(),
    };
    (host, config.get_ports().first().copied().unwrap_or(5432))
}

/// `url` pointed at `port` of this machine instead.
fn through(url: &str, port: u16) -> String {
    let (host, real) = upstream(url);
    url.replacen(&format!("{host}:{real}"), &format!("127.0.0.1:{port}"), 1)
}

#[test]
fn an_unreachable_server_is_said_plainly_without_the_password() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Store::open(format!(
        "postgres://warden:s3cret@127.0.0.1:{port}/warden?connect_timeout=1"
    ))
    .expect_err("nothing listens");
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("postgres://warden@127.0.0.1:{port}/warden"))
            && msg.contains("cannot be reached")
            && !msg.contains("s3cret"),
        "{msg}"
    );
    let bad = Store::open("postgres://warden:s3cret@h/db?pool_size=0").expect_err("bad");
    assert!(matches!(bad, StoreError::BadUrl { .. }), "{bad:?}");
    assert!(!bad.to_string().contains("s3cret"), "{bad}");
}

/// The server goes away and comes back: what needs it fails within the bound, at once while
/// it is known to be down, and works again afterwards on fresh connections; the listener
/// reconnects and counts a change, so choices made meanwhile are read again.
#[ignore = "needs a PostgreSQL server: set WARDEN_TEST_POSTGRES_URL and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_server_that_goes_away_and_comes_back() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let proxy = Proxy::to(upstream(&db.location));
    let mut s = Store::open(through(&db.location, proxy.port)).expect("open through the proxy");
    s.set_lock_timeout(Duration::from_millis(300))
        .expect("timeout");
    let other = db.open();
    let sc = StateScope::new("ann", "p", "x");
    let write = |s: &Store, n: i64| -> Result<(), StoreError> {
        let tx = s.tick();
        tx.write_groups(&[vec![StateWrite::set(sc.clone(), "n", json!(n))]])?;
        tx.commit(None).map(|_| ())
    };
    // The pool waits no longer than the lock timeout for a connection, which a loaded machine
    // may take longer to make: the first write is tried until its connection is in the pool.
    assert!(
        eventually(|| write(&s, 1).is_ok()),
        "never through the proxy"
    );
    let first = s.data_version().unwrap();
    assert!(
        eventually(|| s.data_version().unwrap() != first),
        "the listener never connected"
    );
    let listening = s.data_version().unwrap();

    proxy.cut();
    let cut = Instant::now();
    let err = write(&s, 2).expect_err("the server is gone");
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err}");
    // A hang detector: the failure comes within the lock timeout, 300 ms.
    assert!(cut.elapsed() < crate::testdb::PATIENCE, "bounded");
    // Known to be down: the next fails at once, without trying to connect (its reason says
    // so). That lasts `DOWN_FOR` from the failure; a machine that stalled past it tries again,
    // rightly, and then the reason is the connection's.
    let err = s.state_get(&sc, "n").expect_err("still gone");
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err}");
    if cut.elapsed() < super::DOWN_FOR - Duration::from_millis(10) {
        assert!(err.to_string().contains("trying again in"), "{err}");
    }
    // A choice made meanwhile, on another node.
    other.set_toggle("ann", "r", Some(RuleState::Off)).unwrap();

    proxy.restore();
    // Back once the known-down spell is over (at least `DOWN_FOR`) and a connection is made.
    assert!(eventually(|| write(&s, 3).is_ok()), "never back");
    assert_eq!(other.state_get(&sc, "n").unwrap(), Some(json!(3)));
    assert!(
        eventually(|| s.data_version().unwrap() != listening),
        "the listener never reconnected"
    );
    assert_eq!(s.toggles().unwrap().len(), 1);
}

/// Two installations in two schemas of one database share nothing: not state, not choices,
/// not notifications.
#[ignore = "needs a PostgreSQL server: set WARDEN_TEST_POSTGRES_URL and run `cargo test -- --ignored` (CI does)"]
#[test]
fn schemas_keep_installations_apart() {
    let Some(url) = server_url() else {
        return;
    };
    let (a_schema, b_schema) = (unique_schema(), unique_schema());
    let a = Store::open(with_option(&url, "schema", &a_schema)).unwrap();
    let b = Store::open(with_option(&url, "schema", &b_schema)).unwrap();
    assert!(a.label().contains(&a_schema), "{}", a.label());
    let sc = StateScope::new("ann", "p", "x");
    a.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .unwrap();
    assert_eq!(b.state_get(&sc, "k").unwrap(), None);
    let seen = b.data_version().unwrap();
    assert!(
        eventually(|| b.data_version().unwrap() != seen),
        "b's listener never connected"
    );
    let listening = b.data_version().unwrap();
    // a's change, then b's own. Notifications reach a listener in the order their changes
    // committed, so b hears a's (and ignores it) before its own: when b has heard a change, it
    // has counted one, its own. (Were a's counted, b would count two, a moment apart.)
    a.set_toggle("ann", "r", Some(RuleState::Off)).unwrap();
    b.set_toggle("bob", "s", Some(RuleState::Off)).unwrap();
    assert!(
        eventually(|| b.data_version().unwrap() != listening),
        "b never heard its own change"
    );
    assert_eq!(
        b.data_version().unwrap(),
        listening + 1,
        "a's change is not b's"
    );
    let users: Vec<String> = b
        .toggles()
        .unwrap()
        .into_iter()
        .map(|t| t.user_id)
        .collect();
    assert_eq!(users, ["bob"], "a's choices are not b's");
    let mut client: postgres::Client = url
        .parse::<postgres::Config>()
        .unwrap()
        .connect(postgres::NoTls)
        .unwrap();
    for schema in [a_schema, b_schema] {
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .unwrap();
    }
}

/// A tick holds one pooled connection from its first statement to its end, and gives it back:
/// a pool of one serves tick after tick, and a second store's tick waits for the first's
/// locks, not for its connection.
#[ignore = "needs a PostgreSQL server: set WARDEN_TEST_POSTGRES_URL and run `cargo test -- --ignored` (CI does)"]
#[test]
fn a_pool_of_one_serves_tick_after_tick() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let s = Store::open(with_option(&db.location, "pool_size", "1")).unwrap();
    let sc = StateScope::new("ann", "p", "x");
    for n in 0..20 {
        let tx = s.tick();
        let read = tx.state_all(&sc).unwrap();
        assert_eq!(read.get("n").cloned(), (n > 0).then(|| json!(n - 1)));
        tx.write_groups(&[vec![StateWrite::set(sc.clone(), "n", json!(n))]])
            .unwrap();
        tx.commit(None).unwrap();
        // Between ticks the one connection serves the rest of the API.
        assert_eq!(s.state_get(&sc, "n").unwrap(), Some(json!(n)));
    }
}

/// An async host may call the store from a task, and drop it there: the driver's own runtime
/// must not start (nor be dropped) on a thread that drives tokio tasks. On both kinds of
/// runtime, every kind of call works, a tick included, and so does dropping the store.
#[ignore = "needs a PostgreSQL server: set WARDEN_TEST_POSTGRES_URL and run `cargo test -- --ignored` (CI does)"]
#[test]
fn an_async_host_may_call_the_store_from_a_task() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let current = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for (n, runtime) in [multi, current].into_iter().enumerate() {
        let location = db.location.clone();
        let n = i64::try_from(n).unwrap();
        runtime.block_on(async move {
            let task = tokio::spawn(async move {
                let s = Store::open(&location).unwrap();
                let sc = StateScope::new("ann", "p", "x");
                s.set_toggle(
                    "ann",
                    "r",
                    Some(if n == 0 {
                        RuleState::On
                    } else {
                        RuleState::Off
                    }),
                )
                .unwrap();
                let tx = s.tick();
                let before = tx.state_all(&sc).unwrap().len();
                tx.write_groups(&[vec![StateWrite::set(sc.clone(), "n", json!(n))]])
                    .unwrap();
                tx.commit(None).unwrap();
                // A tick dropped unfinished gives its connection back from the task too.
                let abandoned = s.tick();
                abandoned.state_all(&sc).unwrap();
                drop(abandoned);
                assert_eq!(s.state_get(&sc, "n").unwrap(), Some(json!(n)));
                drop(s);
                before
            });
            task.await.unwrap()
        });
    }
}
