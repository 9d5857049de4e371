//! `warden serve`: the supervisor as an HTTP service, for agent loops in any language and in
//! many processes, and the Settings page where people switch rules and change settings.
//!
//! A thin adapter over the engine: it translates HTTP into `Session::tick` and the engine's
//! control API (`Warden::rule_list`, `set_rule_enabled`, `set_setting`...) and back, and holds
//! no rule logic. On tokio, axum and tower-http: routing, JSON, gzip, body limits, timeouts, a
//! tracing span per request, and a graceful shutdown that lets the ticks in flight finish.
//!
//! - the agent API: `POST /v1/sessions/{id}/events` (an event in the trace format, the outcome
//!   back), `GET`/`DELETE /v1/sessions/{id}`, `GET /v1/events` (server-sent events), and
//!   `POST /v1/claude-code` (Claude Code's `http` hook, answered by `warden-agents`);
//! - the management API: `GET /v1/rules`, `PUT /v1/rules/{id}/enabled`,
//!   `PUT /v1/plugins/{id}/settings`, `POST /v1/rules/{id}/test`, `GET /v1/log`...;
//! - `GET /v1/health`, `GET /v1/metrics` (Prometheus), `GET /v1/openapi.json`;
//! - the Settings page at `/`.
//!
//! ```no_run
//! use warden_core::Warden;
//! use warden_serve::{ServeOptions, Server, shutdown_signal};
//!
//! # async fn run() -> Result<(), warden_serve::ServeError> {
//! let warden = Warden::builder().builtin_rules().build().expect("the built-in rules load");
//! let server = Server::bind(warden, ServeOptions::default()).await?;
//! println!("listening on http://{}", server.local_addr());
//! server.run(shutdown_signal()).await
//! # }
//! ```
//!
//! Modules, lowest first: `error` (how the service says no, the extractors), `tokens` (who
//! may call what), `metrics`, `feed` (the live feed), `sessions` (the sessions the server
//! holds: the only module that knows how they are kept), `state` (what handlers share),
//! `guard` (the checks before a handler), `trial` (the Test button), `api` (the agent API),
//! `claude` (Claude Code's `http` hook),
//! `manage` (the management API), `page` (the Settings page), `openapi`, `routes`.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod api;
mod claude;
mod connections;
mod error;
mod feed;
mod guard;
mod manage;
mod metrics;
mod openapi;
mod page;
mod routes;
mod sessions;
mod state;
mod tls;
mod tokens;
mod trial;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::sync::watch;
use warden_core::{Warden, Watch};

pub use openapi::DOCUMENT as OPENAPI;
pub use state::{DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_PORT, ServeOptions};
pub use tls::TlsFiles;
pub use tokens::{Access, MIN_TOKEN_LEN, TokenError, Tokens};

/// Why the server could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The tokens are missing where required, or unusable.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
    /// Plain HTTP on an address other machines reach, not asked for.
    #[error(
        "refusing to serve plain HTTP on {addr}: the tokens and the Settings page's sign-in would cross the network in clear. Give --tls-cert FILE and --tls-key FILE, or, behind a proxy that terminates TLS, --plain-http"
    )]
    PlainHttp {
        /// The address.
        addr: SocketAddr,
    },
    /// The TLS certificate or key could not be used.
    #[error("{0}")]
    Tls(String),
    /// The rule files could not be watched.
    #[error("cannot watch the rule files: {0}")]
    Watch(String),
}

/// A server bound to its address, not yet serving.
pub struct Server {
    listener: TcpListener,
    tls: Option<tls::Tls>,
    app: state::AppState,
    down: watch::Sender<bool>,
    watch: Option<Watch>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local", &self.app.local)
            .finish()
    }
}

/// Every route: method, path and who may call it (what the OpenAPI document must describe).
pub fn route_table() -> Vec<(String, &'static str, Access)> {
    routes::routes()
        .into_iter()
        .map(|r| (r.method.to_string(), r.path, r.access))
        .collect()
}

/// How often a server copies the database's write-ahead log into the file (SQLite).
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl Server {
    /// Checks the tokens against the address (an address other machines can reach needs
    /// one), and binds it.
    pub async fn bind(warden: Warden, options: ServeOptions) -> Result<Server, ServeError> {
        options.check_address()?;
        if !options.listen.ip().is_loopback() && options.tls.is_none() {
            tracing::warn!(
                addr = %options.listen,
                "serving plain HTTP on an address other machines reach: put a proxy that terminates TLS in front"
            );
        }
        let tls = options
            .tls
            .as_ref()
            .map(tls::Tls::load)
            .transpose()
            .map_err(ServeError::Tls)?;
        let listener =
            TcpListener::bind(options.listen)
                .await
                .map_err(|source| ServeError::Bind {
                    addr: options.listen,
                    source,
                })?;
        let local = listener.local_addr()?;
        // Copying the write-ahead log into the database file (and syncing it) happens on a
        // thread of its own, not in the tick whose commit made the log long: that tick, and
        // every tick waiting for the database meanwhile, made the tail of the latencies.
        if let Err(e) = warden.store().checkpoint_in_background(CHECKPOINT_EVERY) {
            tracing::warn!(error = %e, "checkpoints stay in the ticks' commits");
        }
        let (down, shutdown) = watch::channel(false);
        let app = Arc::new(state::App {
            sessions: sessions::Sessions::new(
                warden.clone(),
                options.max_sessions,
                options.durable,
            ),
            warden,
            metrics: metrics::Metrics::default(),
            feed: feed::Feed::default(),
            options,
            local,
            started: Instant::now(),
            sign_ins: Mutex::new(HashMap::new()),
            not_reloaded: Mutex::new(Vec::new()),
            shutdown,
            ticks: tokio::sync::Semaphore::new(
                2 * std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            ),
        });
        Ok(Server {
            listener,
            tls,
            app,
            down,
            watch: None,
        })
    }

    /// The address it listens on (with the port chosen, when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.app.local
    }

    /// Reloads the rules when their files change, as `warden watch` does: a change that
    /// breaks something keeps the last good rules. Each reload is logged and reaches the live
    /// feed (a `reload` event).
    pub fn watch_files(&mut self) -> Result<(), ServeError> {
        let feed = self.app.feed.clone();
        let app = Arc::downgrade(&self.app);
        let watch = self
            .app
            .warden
            .watch_with(move |report| {
                if let Some(app) = app.upgrade() {
                    *app.not_reloaded.lock().unwrap_or_else(|p| p.into_inner()) =
                        report.introduced.iter().map(ToString::to_string).collect();
                }
                if report.applied {
                    tracing::info!(
                        generation = report.generation,
                        "rules reloaded after a file change"
                    );
                } else {
                    for d in &report.introduced {
                        tracing::error!("not reloaded, the previous rules stay in force: {d}");
                    }
                }
                feed.publish(feed::FeedItem::Reload {
                    applied: report.applied,
                    generation: report.generation,
                    errors: report.introduced.iter().map(ToString::to_string).collect(),
                });
            })
            .map_err(|e| ServeError::Watch(e.to_string()))?;
        self.watch = Some(watch);
        Ok(())
    }

    /// Serves until `shutdown` completes; then stops taking connections, ends the event
    /// streams, and waits for the requests in flight (their ticks finish, and their sessions
    /// with them) for at most [`ServeOptions::shutdown_grace`].
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let Server {
            listener,
            tls,
            app,
            down,
            watch: _watch,
        } = self;
        let forward = tokio::spawn(app.feed.clone().forward(app.warden.subscribe()));
        let grace = app.options.shutdown_grace;
        let mut stopping = app.shutdown.clone();
        let header_timeout = app.options.header_timeout;
        let max_connections = app.options.max_connections;
        let reload = tls.clone().map(|tls| tokio::spawn(reload_at_sighup(tls)));
        let server = connections::serve(
            listener,
            routes::router(app),
            tls,
            header_timeout,
            max_connections,
            async move {
                shutdown.await;
                tracing::info!("shutting down: finishing the requests in flight");
                let _ = down.send(true);
            },
        );
        let mut serving = tokio::spawn(server);
        let result = tokio::select! {
            r = &mut serving => r,
            () = async {
                let _ = stopping.wait_for(|d| *d).await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!(?grace, "gave up waiting for requests still in flight");
                serving.abort();
                Ok(())
            }
        };
        forward.abort();
        if let Some(reload) = reload {
            reload.abort();
        }
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.is_cancelled() => Ok(()),
            Err(e) => Err(ServeError::Io(std::io::Error::other(e.to_string()))),
        }
    }
}

/// Reads the TLS certificate and key again at every SIGHUP (after a renewal): new
/// connections get the new certificate; a reload that fails keeps the old one and says why.
async fn reload_at_sighup(tls: tls::Tls) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: the TLS certificate is read at start only");
                return;
            }
        };
        while hangup.recv().await.is_some() {
            match tls.reload() {
                Ok(()) => tracing::info!("SIGHUP: reloaded the TLS certificate and key"),
                Err(e) => tracing::error!("SIGHUP: {e}; the certificate in use stays"),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tls;
}

/// Completes at SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM ({e}); stop the server with Ctrl-C");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The runtime `warden serve` runs on: one worker per core (where ticks run on a SQLite
/// store), and a blocking pool (where they run on PostgreSQL) a few times larger, so ticks do
/// not queue behind each other but do not outnumber the cores by much either.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .max_blocking_threads(cores * 4)
        .enable_all()
        .build()
}
