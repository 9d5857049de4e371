//! The listener: one connection of its own (not the pool's) that `LISTEN`s for changed users'
//! choices and counts what it hears, so a node learns of a rule switched off on another node
//! within the commit's delivery, without asking the database at every tick.
//!
//! The count also grows each time the listener (re)connects: what changed while it was not
//! listening is then read again too. While the database is unreachable the count stays still,
//! and the choices last read stay in force.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

/// A process that ends within this long of asking never connects a listener (a hook process
/// runs one tick and exits); what changes meanwhile is caught by the count's bump on connect.
const START_DELAY: Duration = Duration::from_millis(200);

/// How long the listener waits on its socket before it checks whether it should stop.
const WAKE: Duration = Duration::from_millis(500);

/// How often an idle listener asks the server whether the connection still stands.
const PING: Duration = Duration::from_secs(10);

/// The longest wait between two attempts to reconnect.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A running listener; stops when dropped.
pub(crate) struct Listener {
    stop: Arc<AtomicBool>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts listening on `channel` for notifications whose payload is `schema`, counting each
/// (and each connection made) in `count`.
pub(crate) fn start(
    config: postgres::Config,
    channel: &'static str,
    schema: String,
    label: String,
    count: Arc<AtomicI64>,
) -> Listener {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let db = label.clone();
    let spawned = std::thread::Builder::new()
        .name("warden-listen".into())
        .spawn(move || run(&config, channel, &schema, &label, &count, &flag));
    if let Err(e) = spawned {
        tracing::warn!(%db, error = %e, "the listener for changed choices could not start; changes made on other nodes are seen only after a restart");
    }
    Listener { stop }
}

/// Sleeps `d` in short steps; false once told to stop.
fn pause(d: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    !stop.load(Ordering::Relaxed)
}

fn run(
    config: &postgres::Config,
    channel: &str,
    schema: &str,
    label: &str,
    count: &AtomicI64,
    stop: &AtomicBool,
) {
    if !pause(START_DELAY, stop) {
        return;
    }
    let mut backoff = Duration::from_millis(100);
    let mut warned = false;
    while !stop.load(Ordering::Relaxed) {
        match connect(config, channel) {
            Ok(mut client) => {
                if warned {
                    tracing::info!(db = %label, "listening for changed choices again");
                }
                warned = false;
                backoff = Duration::from_millis(100);
                // Whatever changed before now is read again.
                count.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = listen(&mut client, schema, count, stop) {
                    tracing::warn!(db = %label, error = %crate::error::describe_pg(&e), "the listener for changed choices lost its connection; reconnecting (the choices last read stay in force meanwhile)");
                    warned = true;
                }
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(db = %label, error = %crate::error::describe_pg(&e), "the listener for changed choices cannot connect; retrying (the choices last read stay in force meanwhile)");
                    warned = true;
                }
            }
        }
        if !pause(backoff, stop) {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

fn connect(config: &postgres::Config, channel: &str) -> Result<Client, postgres::Error> {
    let mut config = config.clone();
    // A server that vanished without closing the connection is noticed within this.
    config.tcp_user_timeout(PING);
    let mut client = config.connect(NoTls)?;
    client.batch_execute(&format!("LISTEN {channel}"))?;
    Ok(client)
}

/// Counts notifications until told to stop (`Ok`) or the connection fails.
fn listen(
    client: &mut Client,
    schema: &str,
    count: &AtomicI64,
    stop: &AtomicBool,
) -> Result<(), postgres::Error> {
    let mut pinged = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        {
            let started = Instant::now();
            let mut notifications = client.notifications();
            let mut iter = notifications.timeout_iter(WAKE);
            // Counted as each is heard: other installations' notifications may keep coming.
            while let Some(n) = iter.next()? {
                if n.payload() == schema {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                if started.elapsed() >= WAKE || stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        if client.is_closed() {
            return client.simple_query("").map(|_| ());
        }
        if pinged.elapsed() >= PING {
            client.simple_query("")?;
            pinged = Instant::now();
        }
    }
    Ok(())
}
