//! `GET /v1/openapi.json`: the API described in OpenAPI 3.1, written by hand
//! (`openapi.json` beside this crate's `Cargo.toml`). The tests keep it true: every route of
//! the router is in it and every path in it is a route, and every example in it, and the
//! real server's answers, fit the schemas it declares.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../openapi.json");

/// `GET /v1/openapi.json`.
pub async fn document() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT).into_response()
}
