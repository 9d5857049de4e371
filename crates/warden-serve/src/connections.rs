//! Taking connections, with the limits a server on a network needs: a connection that sends
//! nothing (before its first request, or between two) is closed after
//! [`ServeOptions::header_timeout`], and so is one whose request head takes longer than that
//! to arrive (a slow-header attack); past [`ServeOptions::max_connections`] open at once, new
//! connections wait in the system's queue until one closes. Without these, idle and slow
//! connections held open the server's files until none was left and every request timed out,
//! before any token was checked. (The body of a request is read by its handler, within
//! [`ServeOptions::request_timeout`].)
//!
//! [`ServeOptions::header_timeout`]: crate::ServeOptions::header_timeout
//! [`ServeOptions::max_connections`]: crate::ServeOptions::max_connections
//! [`ServeOptions::request_timeout`]: crate::ServeOptions::request_timeout

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::tls::Tls;

/// How long to wait before accepting again after the system refused a connection for want of
/// resources (no file left): the connections open meanwhile may close.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` (over TLS when `tls` is given) until `shutdown` completes;
/// then stops taking connections, closes the idle ones, lets every request in flight finish
/// and returns when the last connection has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Tls>,
    header_timeout: Duration,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) {
    let max_connections = max_connections.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let open = Arc::new(Semaphore::new(max_connections));
    let (stop, stopping) = watch::channel(false);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A place first: past the limit, connections wait in the listen queue.
        let place = tokio::select! {
            place = open.clone().acquire_owned() => place.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM, or a connection reset before it was
                    // taken: none ends the server.
                    tracing::warn!(error = %e, "could not accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Small answers must not wait for Nagle's algorithm.
        let _ = tcp.set_nodelay(true);
        let (http, router, stopping) = (http.clone(), router.clone(), stopping.clone());
        match &tls {
            None => {
                tokio::spawn(async move {
                    let _place = place;
                    serve_one(TokioIo::new(tcp), &http, router, stopping).await;
                });
            }
            Some(tls) => {
                let acceptor = tls.acceptor();
                tokio::spawn(async move {
                    let _place = place;
                    // A handshake is held to the header timeout too: a client that never
                    // finishes one holds nothing.
                    match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            serve_one(TokioIo::new(stream), &http, router, stopping).await;
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake not finished in time"),
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    // Every place back: every connection closed.
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    let _ = open.acquire_many(all).await;
}

/// Serves one connection until it closes, or closes it gracefully once the server stops.
async fn serve_one<I>(
    io: I,
    http: &http1::Builder,
    router: Router,
    mut stopping: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let connection = http.serve_connection(io, TowerToHyperService::new(router));
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = async {
            // (The guard `wait_for` returns is not `Send`: dropped here.)
            let _ = stopping.wait_for(|s| *s).await;
        } => {
            // Idle: closed now; in a request: closed after its answer.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
