//! The checks every request passes before its handler: the token its route requires (a
//! bearer token, or the Settings page's sign-in cookie), and, on a server without tokens,
//! that the request names this machine as its host (a web page cannot reach a loopback
//! server through a DNS name of its own). Cross-site requests are refused by tower-http's
//! `CsrfLayer` (see `routes.rs`), and state-changing requests must be JSON (see
//! [`crate::error::JsonBody`]).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::error::ApiError;
use crate::state::AppState;
use crate::tokens::Access;

/// The name of the Settings page's sign-in cookie.
pub(crate) const COOKIE: &str = "warden_sign_in";

/// The longest user or project id accepted in a query.
const MAX_NAME: usize = 128;

/// `?user=` and `?project=`: whom a request acts for (the server's defaults when absent).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Scope {
    /// The user.
    pub user: Option<String>,
    /// The project.
    pub project: Option<String>,
}

impl Scope {
    /// Checks the names: not empty, not too long, no control characters.
    pub(crate) fn check(&self) -> Result<(), ApiError> {
        for (what, v) in [("user", &self.user), ("project", &self.project)] {
            if let Some(v) = v
                && (v.is_empty() || v.chars().count() > MAX_NAME || v.chars().any(char::is_control))
            {
                return Err(ApiError::bad_request(format!(
                    "`{what}` must be 1 to {MAX_NAME} characters, without control characters"
                ))
                .with("parameter", what));
            }
        }
        Ok(())
    }
}

/// The bearer token of a request, if any.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at(value.iter().position(|&b| b == b' ')?);
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| token.trim_ascii())
}

/// The sign-in cookie of a request, if any.
pub(crate) fn sign_in_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Whether the request's host is this machine by a loopback name.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        // HTTP/1.0 without a Host: no browser sends that.
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Lets a request through if it may use a route of `access`.
pub(crate) async fn check(
    State((app, access)): State<(AppState, Access)>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let tokens = &app.options.tokens;
    if !tokens.required() && !loopback_host(headers) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "this server has no token, so it answers only requests addressed to localhost or a loopback address",
        )
        .into_response();
    }
    if tokens.required() && access != Access::Public {
        let presented = bearer(headers);
        let signed_in =
            presented.is_none() && sign_in_cookie(headers).is_some_and(|c| app.signed_in(c));
        if !signed_in && !tokens.allows(access, presented) {
            return match presented {
                Some(p) if tokens.allows(Access::Agent, Some(p)) => ApiError::new(
                    StatusCode::FORBIDDEN,
                    "this token opens the agent API only; management needs the management token",
                )
                .into_response(),
                _ => {
                    let mut r = ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "this server requires a token: send `Authorization: Bearer TOKEN`",
                    )
                    .into_response();
                    r.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static("Bearer realm=\"warden\""),
                    );
                    r
                }
            };
        }
    }
    next.run(request).await
}

/// Counts every answer's status (fallbacks and refusals included).
pub(crate) async fn count(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    app.metrics.record_status(response.status().as_u16());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost:7878",
            "127.0.0.1:1",
            "[::1]:80",
            "LOCALHOST",
            "127.3.4.5",
        ] {
            assert!(loopback_host(&with(header::HOST, ok)), "{ok}");
        }
        for bad in [
            "evil.example:7878",
            "10.0.0.1:7878",
            "localhost.evil.example",
            "[::2]:1",
        ] {
            assert!(!loopback_host(&with(header::HOST, bad)), "{bad}");
        }
    }

    #[test]
    fn bearer_and_cookie_are_read() {
        let h = with(header::AUTHORIZATION, "Bearer  abc ");
        assert_eq!(bearer(&h), Some(&b"abc"[..]));
        assert_eq!(bearer(&with(header::AUTHORIZATION, "Basic abc")), None);
        let h = with(header::COOKIE, "a=1; warden_sign_in=xyz; b=2");
        assert_eq!(sign_in_cookie(&h), Some("xyz"));
    }
}
