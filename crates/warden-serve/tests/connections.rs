//! Connections on the real server: one that sends nothing, one that sends its request's head a
//! byte at a time and one kept alive after its answer are all closed after the header timeout;
//! thousands of idle connections held open leave every request answered; past the connection
//! limit, a request waits for a place instead of failing; a script that runs until its time
//! limit holds up no other request. (Latencies are printed, not asserted:
//! `benches/serve-load.sh` measures them.)

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{Running, warden};
use warden_serve::ServeOptions;

/// Longer than any timeout these tests set, by far: a connection still open after it was not
/// closed at all.
const NEVER: Duration = Duration::from_secs(30);

async fn start(options: ServeOptions) -> (tempfile::TempDir, Running) {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(warden(dir.path(), None), options).await;
    (dir, server)
}

fn short_timeout() -> ServeOptions {
    ServeOptions {
        header_timeout: Duration::from_millis(500),
        ..ServeOptions::default()
    }
}

/// Reads until the server closes the connection; what it sent. Fails if it is still open
/// after [`NEVER`].
fn closed_by_server(mut s: TcpStream) -> String {
    s.set_read_timeout(Some(NEVER)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                return String::from_utf8_lossy(&got).into_owned();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the connection is still open after {NEVER:?}")
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn health_request(port: u16, close: bool) -> String {
    format!(
        "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
}

/// One request on a new connection; its status.
fn status_of_request(port: u16) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(health_request(port, true).as_bytes()).unwrap();
    let answer = closed_by_server(s);
    answer
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_is_closed() {
    let (_dir, server) = start(short_timeout()).await;
    let port = server.addr.port();
    let answer = tokio::task::spawn_blocking(move || {
        closed_by_server(TcpStream::connect(("127.0.0.1", port)).unwrap())
    })
    .await
    .unwrap();
    assert!(!answer.contains("200 OK"), "{answer}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_sent_a_byte_at_a_time_is_cut_off() {
    let (_dir, server) = start(short_timeout()).await;
    let port = server.addr.port();
    let cut = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // A head that never ends: header after header, a byte every 100 ms, each well within
        // the timeout of the one before; only a timeout on the whole head ends it.
        let head = format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
        let bytes = head.bytes().chain(b"X-Slow: a\r\n".iter().copied().cycle());
        let started = Instant::now();
        for b in bytes {
            // A write fails once the server has closed the connection.
            if s.write_all(&[b]).is_err() || started.elapsed() > NEVER {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        started.elapsed()
    })
    .await
    .unwrap();
    assert!(cut < NEVER, "a slow head was never cut off");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_is_closed_when_it_goes_quiet() {
    let (_dir, server) = start(short_timeout()).await;
    let port = server.addr.port();
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(health_request(port, false).as_bytes()).unwrap();
        closed_by_server(s)
    })
    .await
    .unwrap();
    // Answered, then closed without a second request.
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    server.stop().await.unwrap();
}

/// Raises this process's open-file limit as far as it goes; how many it now allows.
fn raise_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            limit.rlim_cur = limit.rlim_max;
        }
    }
    limit.rlim_cur
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_leave_every_request_answered() {
    // Each idle connection is two files here: the test's end and the server's.
    let files = raise_file_limit();
    let idle = 5_000.min(files.saturating_sub(512) / 2) as usize;
    if idle < 5_000 {
        eprintln!("the open-file limit is {files}: holding {idle} idle connections, not 5,000");
    }
    let (_dir, server) = start(ServeOptions::default()).await;
    let port = server.addr.port();
    let latencies = tokio::task::spawn_blocking(move || {
        let held: Vec<TcpStream> = (0..idle)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let mut latencies: Vec<Duration> = (0..300)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(status_of_request(port), 200);
                started.elapsed()
            })
            .collect();
        drop(held);
        latencies.sort();
        latencies
    })
    .await
    .unwrap();
    eprintln!(
        "with {idle} idle connections held: 300 requests, median {:?}, p99 {:?}",
        latencies[150], latencies[296]
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_limit_a_request_waits_for_a_place() {
    let options = ServeOptions {
        max_connections: 20,
        ..short_timeout()
    };
    let (_dir, server) = start(options).await;
    let port = server.addr.port();
    let status = tokio::task::spawn_blocking(move || {
        // Every place taken by a connection that says nothing...
        let held: Vec<TcpStream> = (0..20)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        // ...until the timeout closes them: the request then gets a place.
        let status = status_of_request(port);
        drop(held);
        status
    })
    .await
    .unwrap();
    assert_eq!(status, 200);
    server.stop().await.unwrap();
}

/// A tick whose script runs until its time limit (`spin.lua`), on a server with one runtime
/// worker (a server on one core has one): the server answers other requests meanwhile.
/// Without the hand-over of a run that goes on past a millisecond (`AsyncSession` sets it:
/// `warden_lua::set_hand_over`), the worker runs the script and nothing else, and no thread
/// polls the sockets: every connection waits until the script's time limit (with more workers
/// too, which sleep until a task wakes them). The test's own requests run on the same
/// runtime, so there they would not even be sent.
async fn answers_beside(spin: &str) {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("spin.lua"), spin).unwrap();
    std::fs::write(
        rules.join("spin.toml"),
        "[rule]\nid = \"spin\"\nname = \"Spin\"\ntrigger = \"on_turn_start\"\n\n[condition]\nscript = \"spin.lua\"\n\n[action]\ntype = \"notify_self\"\nmessage = \"done\"\n",
    )
    .unwrap();
    // The default time limit (5 s), far past what two requests take, however slow the
    // machine: the tick is in flight for all of it.
    let w = warden_core::Warden::builder()
        .rules_dir(&rules)
        .store(warden_core::Store::open(dir.path().join("warden.db")).unwrap())
        .build()
        .unwrap();
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:?}",
        w.diagnostics()
    );
    let server = Running::start(w, ServeOptions::default()).await;
    let c = server.client();
    // The session's first tick reads the store, and hands its thread over for that: the
    // session is made first, so that the spinning tick is one that reads nothing.
    let first = c
        .post(
            "/v1/sessions/spin/events",
            &serde_json::json!({"hook": "on_query_start", "query": "go"}),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.text());
    let spinning = tokio::spawn(async move {
        c.post(
            "/v1/sessions/spin/events",
            &serde_json::json!({"hook": "on_turn_start"}),
        )
        .await
    });
    // Two answers in a row while the tick is in flight: the first could have waited for the
    // tick's end and still counted it (its gauge falls after the answer is made), the second
    // could not.
    let probe = server.client();
    let mut in_flight = 0;
    while in_flight < 2 {
        let metrics = probe.get("/v1/metrics").await.text();
        if metrics.contains("warden_ticks_in_flight 1") {
            in_flight += 1;
        } else {
            assert_eq!(
                in_flight, 0,
                "the tick ended before the server answered a second request beside it"
            );
            assert!(!spinning.is_finished(), "the tick never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(!spinning.is_finished());
    // The script's time limit stops it: the tick's answer says so.
    let r = spinning.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let o = r.json();
    assert!(
        o["errors"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("time limit")),
        "{o}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_script_that_runs_until_its_time_limit_holds_up_no_other_request() {
    answers_beside("while true do end\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn nor_does_one_that_spins_in_a_coroutine_it_made() {
    answers_beside("coroutine.wrap(function() while true do end end)()\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn nor_one_that_spins_in_a_callback_called_from_c() {
    answers_beside("table.sort({2, 1}, function() while true do end end)\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn nor_a_straight_line_one_in_the_pattern_matcher() {
    answers_beside("return ('a'):rep(40):find(('a?'):rep(40) .. ('a'):rep(41))\n").await;
}
