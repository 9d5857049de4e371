//! `GET /v1/openapi.json`: the API described in OpenAPI 3.1, written by hand
//! (`openapi.json` beside this crate's `Cargo.toml`). The tests keep it true: every route of
//! the router is in it and every path in it is a route, and every example in it, and the
//! real server's answers, fit the schemas it declares.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// The document, as served by a server with tokens.
pub const DOCUMENT: &str = include_str!("../openapi.json");

/// `GET /v1/openapi.json`: on a server without tokens (loopback only), the document without
/// its bearer-token requirement, which such a server does not make.
pub(crate) async fn document(State(app): State<AppState>) -> Response {
    let body = if app.options.tokens.required() {
        DOCUMENT
    } else {
        without_tokens()
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// [`DOCUMENT`] with no security requirement, made once.
pub(crate) fn without_tokens() -> &'static str {
    static TOKENLESS: OnceLock<String> = OnceLock::new();
    TOKENLESS.get_or_init(|| {
        let mut doc: serde_json::Value =
            serde_json::from_str(DOCUMENT).expect("the document is JSON");
        doc["security"] = serde_json::json!([]);
        serde_json::to_string_pretty(&doc).expect("a JSON value serializes")
    })
}
