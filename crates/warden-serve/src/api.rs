//! The agent API: an event in, the supervisor's outcome out (`POST /v1/sessions/{id}/events`),
//! a session looked at or ended, the live event stream, and the service's health and metrics.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use warden_wire::v1;
use warden_wire::v1::line::parse_value;

use crate::error::{ApiError, JsonBody, PathParam, QueryParams};
use crate::guard::Scope;
use crate::sessions::{SessionError, valid_id};
use crate::state::AppState;

/// Seconds since the Unix epoch.
pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::InvalidId(_) => ApiError::bad_request(e.to_string()),
            SessionError::Unreadable(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            SessionError::Store(_) | SessionError::Panicked => ApiError::internal(e.to_string()),
            SessionError::Full(_) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        }
    }
}

/// `POST /v1/sessions/{id}/events`: one event, in the trace format.
pub(crate) async fn post_event(
    State(app): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(scope): QueryParams<Scope>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    scope.check()?;
    valid_id(&id)?;
    let event = parse_value(0, body).map_err(|e| ApiError::unprocessable(e.message))?;
    let owner = app.owner(scope.user.as_deref(), scope.project.as_deref());
    let hook = event.hook;
    let (outcome, took) = if app.sessions.ticks_here() {
        // A client that goes away does not cancel a tick whose save is under way: the wait
        // leaves a task to settle it (its events and log lines go out once it is saved).
        let _counted = app.metrics.tick_started();
        let start = Instant::now();
        let outcome = app
            .sessions
            .tick_here(&id, &owner, event.hook, Arc::unwrap_or_clone(event.event))
            .await;
        (outcome, start.elapsed())
    } else {
        let session = id.clone();
        app.on_blocking_pool("tick", move |app| {
            let _counted = app.metrics.tick_started();
            let start = Instant::now();
            let outcome = app.sessions.tick(
                &session,
                &owner,
                event.hook,
                Arc::unwrap_or_clone(event.event),
            );
            (outcome, start.elapsed())
        })
        .await?
    };
    let outcome = outcome?;
    let at = now();
    app.metrics.record_tick(hook, took, &outcome, at);
    app.feed.publish_outcome(&id, &outcome, at);
    let body = serde_json::to_vec(&v1::Outcome::of(&id, &outcome))
        .map_err(|e| ApiError::internal(format!("the outcome could not be written: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `GET /v1/sessions/{id}`.
pub(crate) async fn get_session(
    State(app): State<AppState>,
    PathParam(id): PathParam,
) -> Result<Json<Value>, ApiError> {
    valid_id(&id)?;
    let worker = app.clone();
    let wanted = id.clone();
    let view = tokio::task::spawn_blocking(move || worker.sessions.view(&wanted))
        .await
        .map_err(|_| ApiError::internal("reading the session panicked"))??;
    match view {
        Some(v) => Ok(Json(serde_json::to_value(v).unwrap_or_default())),
        None => Err(ApiError::not_found(format!("no session `{id}`"))),
    }
}

/// `DELETE /v1/sessions/{id}`: forgets the session, here and in the store.
pub(crate) async fn delete_session(
    State(app): State<AppState>,
    PathParam(id): PathParam,
) -> Result<StatusCode, ApiError> {
    valid_id(&id)?;
    let worker = app.clone();
    let wanted = id.clone();
    let existed = tokio::task::spawn_blocking(move || worker.sessions.delete(&wanted))
        .await
        .map_err(|_| ApiError::internal("deleting the session panicked"))??;
    if existed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no session `{id}`")))
    }
}

/// `GET /v1/health`.
pub(crate) async fn health(State(app): State<AppState>) -> Json<v1::Health> {
    let program = app.warden.program();
    Json(v1::Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        generation: program.generation(),
        rules: program.rule_keys().count(),
        sessions: app.sessions.count(),
        uptime_seconds: app.started.elapsed().as_secs_f64(),
    })
}

/// `GET /v1/metrics`, in Prometheus's text format.
pub(crate) async fn metrics(State(app): State<AppState>) -> Response {
    let text = app.metrics.render(
        app.sessions.count(),
        app.started.elapsed(),
        app.warden.program().generation(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /v1/events`: the live feed as server-sent events. A first `ready` event says the
/// subscription is in place; a subscriber that falls behind gets a `lagged` event with the
/// number of items it missed. The stream ends when the server shuts down.
pub(crate) async fn events(
    State(app): State<AppState>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let rx = app.feed.subscribe();
    let ready = SseEvent::default()
        .event("ready")
        .data(json_text(&v1::FeedReady {
            generation: app.warden.program().generation(),
        }));
    let state = (Some(ready), rx, app.shutdown.clone());
    let stream = futures_util::stream::unfold(state, |(first, mut rx, mut shutdown)| async move {
        if let Some(ready) = first {
            return Some((Ok(ready), (None, rx, shutdown)));
        }
        let event = tokio::select! {
            r = rx.recv() => match r {
                Ok(item) => SseEvent::default()
                    .event(item.name())
                    .data(crate::feed::to_json(&item).to_string()),
                Err(RecvError::Lagged(n)) => SseEvent::default()
                    .event("lagged")
                    .data(json_text(&v1::FeedLagged { missed: n })),
                Err(RecvError::Closed) => return None,
            },
            _ = shutdown.wait_for(|down| *down) => return None,
        };
        Some((Ok(event), (None, rx, shutdown)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// A small body of the live feed as JSON text (numbers only: writing it does not fail).
fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
