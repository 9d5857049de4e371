//! `POST /v1/claude-code`: Claude Code's `http` hook. Claude Code posts the payload a command
//! hook reads on stdin and reads the same JSON answer; both are answered by the one
//! translation of `warden-agents` (`answer_with`), so a team can point all its Claude Code
//! users at one Warden. The session is the one the server keeps (the sessions the events API
//! ticks), so an event costs no read of the session from the store.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use warden_agents::{Agent, MAX_PAYLOAD, Options, answer_with};

use crate::error::{ApiError, QueryParams, is_json};
use crate::guard::Scope;
use crate::state::AppState;

/// `POST /v1/claude-code`. The answer is Claude Code's JSON (`{}` when Warden has nothing to
/// say); a failure of Warden itself is answered as the hook command answers it (a
/// `systemMessage`, or a denial when `[claude_code] on_failure = "closed"`), never with an
/// error status, so the user's session goes on.
pub(crate) async fn hook(
    State(app): State<AppState>,
    QueryParams(scope): QueryParams<Scope>,
    request: Request,
) -> Result<Response, ApiError> {
    scope.check()?;
    if !is_json(request.headers()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send Claude Code's payload as JSON, with the header `content-type: application/json`",
        ));
    }
    let bytes = Bytes::from_request(request, &()).await.map_err(|e| {
        ApiError::new(
            e.status(),
            format!("the payload could not be read: {}", e.body_text()),
        )
    })?;
    if bytes.len() > MAX_PAYLOAD {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a Claude Code payload is at most {MAX_PAYLOAD} bytes"),
        ));
    }
    // The transcript is a file on the user's machine. A server that other machines reach
    // must not read whatever path a request names, so only a loopback server (on the user's
    // own machine) follows it; elsewhere token usage is not read from it.
    let payload = if app.local.ip().is_loopback() {
        bytes.to_vec()
    } else {
        without_transcript(&bytes)
    };
    let owner = app.owner(scope.user.as_deref(), scope.project.as_deref());
    let opts = Options {
        user: owner.user.clone(),
        project: owner.project.clone(),
        project_dir: None,
    };
    let out = app
        .on_blocking_pool("hook", move |app| {
            answer_with(
                Agent::ClaudeCode,
                &app.warden,
                &app.options.claude_code,
                &opts,
                &payload,
                |id, run| {
                    app.sessions
                        .with_session(id, &owner, run)
                        .map_err(|e| e.to_string())
                },
            )
        })
        .await?;
    for line in &out.log {
        tracing::debug!(target: "warden_serve::claude_code", "{line}");
    }
    let body = out
        .json
        .unwrap_or_else(|| Value::Object(Default::default()));
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response())
}

/// The payload without its `transcript_path` (unchanged when it is not a JSON object: the
/// translation answers that).
fn without_transcript(bytes: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(mut m)) => {
            m.remove("transcript_path");
            Value::Object(m).to_string().into_bytes()
        }
        _ => bytes.to_vec(),
    }
}
