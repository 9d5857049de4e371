//! What the server is started with ([`ServeOptions`]) and what every request handler shares
//! ([`App`]): the supervisor, the sessions, the counters, the live feed, the tokens, the
//! Settings page's sign-ins.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use warden_core::{ClaudeCodeConfig, DEFAULT_ID, Warden};

use crate::error::ApiError;
use crate::feed::Feed;
use crate::metrics::Metrics;
use crate::sessions::{Owner, Sessions};
use crate::tokens::Tokens;

/// How long a sign-in to the Settings page lasts.
pub(crate) const SIGN_IN_TTL: Duration = Duration::from_secs(12 * 3600);

/// How a server is started.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where to listen (default `127.0.0.1:7878`).
    pub listen: SocketAddr,
    /// The tokens requests must carry (none: a loopback address only).
    pub tokens: Tokens,
    /// The user a request acts for when it names none (`?user=`).
    pub user: String,
    /// The project a request acts in when it names none (`?project=`).
    pub project: String,
    /// The largest request body accepted, in bytes (413 above).
    pub body_limit: usize,
    /// How long a request may take before it is answered 408 (the event stream excepted).
    pub request_timeout: Duration,
    /// How long a connection may send nothing, or take to send a request's head: before its
    /// first request, and between two on a kept-alive connection. Past it, the connection is
    /// closed (an idle client reconnects; a slow-header attack holds nothing).
    pub header_timeout: Duration,
    /// How many connections may be open at once; more wait in the system's listen queue until
    /// one closes. Keep it below the process's limit of open files.
    pub max_connections: usize,
    /// Serve HTTPS with this certificate and key (read again at SIGHUP). The sign-in cookie
    /// is then `Secure`, and answers carry `Strict-Transport-Security`.
    pub tls: Option<crate::TlsFiles>,
    /// Serve plain HTTP on an address other machines reach (behind a proxy that terminates
    /// TLS). Without it, such an address needs `tls`: the tokens and the sign-in cookie would
    /// cross the network in clear.
    pub plain_http: bool,
    /// How many sessions the server keeps in memory (the least recently used is put down past
    /// that: it is in the store, and read back at its next event).
    pub max_sessions: usize,
    /// How long a shutdown waits for requests in flight before it gives up on them.
    pub shutdown_grace: Duration,
    /// Whether sessions are saved in the store after every event (a restart loses none); when
    /// false they live in this process's memory only, which is faster.
    pub durable: bool,
    /// How Claude Code's hooks are answered (`[claude_code]` in warden.toml).
    pub claude_code: ClaudeCodeConfig,
}

/// How long a connection may be silent, or take to send a request's head, by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections may be open at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The default port: `warden serve` listens on 127.0.0.1:7878.
pub const DEFAULT_PORT: u16 = 7878;

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            tokens: Tokens::none(),
            user: DEFAULT_ID.to_string(),
            project: DEFAULT_ID.to_string(),
            body_limit: 1 << 20,
            request_timeout: Duration::from_secs(30),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tls: None,
            plain_http: false,
            max_sessions: 100_000,
            shutdown_grace: Duration::from_secs(30),
            durable: true,
            claude_code: ClaudeCodeConfig::default(),
        }
    }
}

impl ServeOptions {
    /// Checks what the address asks for: an address other machines reach needs a token, and
    /// TLS unless `plain_http` says a proxy provides it.
    pub fn check_address(&self) -> Result<(), crate::ServeError> {
        self.tokens.check_listen(self.listen)?;
        if !self.listen.ip().is_loopback() && self.tls.is_none() && !self.plain_http {
            return Err(crate::ServeError::PlainHttp { addr: self.listen });
        }
        Ok(())
    }
}

/// What every handler shares.
pub(crate) struct App {
    /// The supervisor.
    pub warden: Warden,
    /// The sessions.
    pub sessions: Sessions,
    /// The counters.
    pub metrics: Metrics,
    /// The live feed.
    pub feed: Feed,
    /// The options the server started with.
    pub options: ServeOptions,
    /// The address it listens on.
    pub local: SocketAddr,
    /// When it started.
    pub started: Instant,
    /// Sign-ins to the Settings page: cookie value -> when it expires.
    pub sign_ins: Mutex<HashMap<String, Instant>>,
    /// Why the last change of the rule files was not applied (empty when it was, or none
    /// happened): the Settings page says so, not only the log.
    pub not_reloaded: Mutex<Vec<String>>,
    /// Becomes true when the server shuts down (the event streams end then).
    pub shutdown: watch::Receiver<bool>,
    /// Permits to tick: two per core. One per core left the store idle while a finished tick
    /// handed over to the next (durable load on 2 cores: 9,200-9,500 ev/s, p99 3.3-3.8 ms; two
    /// per core: 11,600-12,300 ev/s, p99 2.8-3.1 ms; four: 15,000-16,600 ev/s, p99 4.8-5.8 ms).
    pub ticks: tokio::sync::Semaphore,
}

/// The shared state of the handlers.
pub(crate) type AppState = Arc<App>;

impl App {
    /// Runs `f` on tokio's blocking pool, under one of the tick permits (two per core: the
    /// next tick is ready on the pool when one ends; many more would only wait for each other
    /// and for the store). `what` names the work in the error, should it panic.
    pub(crate) async fn on_blocking_pool<R: Send + 'static>(
        self: &Arc<Self>,
        what: &str,
        f: impl FnOnce(&App) -> R + Send + 'static,
    ) -> Result<R, ApiError> {
        let _permit = self
            .ticks
            .acquire()
            .await
            .map_err(|_| ApiError::internal("the server is shutting down"))?;
        let app = self.clone();
        tokio::task::spawn_blocking(move || f(&app))
            .await
            .map_err(|_| {
                ApiError::internal(format!(
                    "the {what} panicked (a bug in Warden; the server log has it)"
                ))
            })
    }

    /// Who a new session is for, and whom a management request acts for, when the request
    /// names nobody.
    pub(crate) fn owner(&self, user: Option<&str>, project: Option<&str>) -> Owner {
        Owner {
            user: user.unwrap_or(&self.options.user).to_string(),
            project: project.unwrap_or(&self.options.project).to_string(),
        }
    }

    /// Whether a page sign-in cookie is valid now.
    pub(crate) fn signed_in(&self, cookie: &str) -> bool {
        let mut s = self.sign_ins.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        s.retain(|_, until| *until > now);
        s.contains_key(cookie)
    }
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("local", &self.local).finish()
    }
}
