//! How the service says no: [`ApiError`], a status and a JSON body (`{"error": "..."}` plus
//! fields that name what was wrong), and the extractors that turn bad requests into one. Bad
//! input is always a 4xx that says what to change; a 5xx means the server failed.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};
use warden_core::ControlError;

/// An error answered to a client.
#[derive(Debug)]
pub(crate) struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// More fields of the body (the setting, the bounds, a suggestion...).
    pub fields: Map<String, Json>,
}

impl ApiError {
    /// An error with a status and a message.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            fields: Map::new(),
        }
    }

    /// 400: the request is malformed.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: no such thing.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 422: well-formed, but the values do not fit.
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    /// 500: the server failed (never for bad input).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Adds a field to the body.
    pub(crate) fn with(mut self, key: &str, value: impl Into<Json>) -> Self {
        self.fields.insert(key.to_string(), value.into());
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, "{}", self.message);
        }
        let body = warden_wire::v1::ErrorBody {
            error: &self.message,
            fields: &self.fields,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

/// The engine's refusals, as HTTP: an unknown rule or setting is a 404, a core rule a 409, a
/// value out of bounds a 422; the store failing is the server's fault.
impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        let message = e.to_string();
        match e {
            ControlError::UnknownRule { suggestion, .. } => {
                let err = ApiError::not_found(message);
                match suggestion {
                    Some(s) => err.with("suggestion", s),
                    None => err,
                }
            }
            ControlError::UnknownPlugin { suggestion, .. } => {
                let err = ApiError::not_found(message);
                match suggestion {
                    Some(s) => err.with("suggestion", s),
                    None => err,
                }
            }
            ControlError::AmbiguousRule { candidates, .. } => {
                ApiError::bad_request(message).with("candidates", candidates)
            }
            ControlError::CoreRule { rule, .. } => {
                ApiError::new(StatusCode::CONFLICT, message).with("rule", rule)
            }
            ControlError::UnknownSetting { key, suggestion } => {
                let err = ApiError::unprocessable(message).with("setting", key);
                match suggestion {
                    Some(s) => err.with("suggestion", s),
                    None => err,
                }
            }
            ControlError::InvalidValue { key, .. } => {
                ApiError::unprocessable(message).with("setting", key)
            }
            ControlError::Settings { problems, .. } => {
                let errors: Vec<Json> = problems
                    .iter()
                    .map(|p| {
                        serde_json::to_value(warden_wire::v1::SettingProblem::from(p))
                            .unwrap_or_default()
                    })
                    .collect();
                ApiError::unprocessable(message).with("errors", errors)
            }
            ControlError::Store(_) => ApiError::internal(message),
        }
    }
}

/// Whether the request says its body is JSON (`application/json`, or `application/...+json`).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .is_some_and(|m| {
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
}

/// A JSON request body, parsed but not yet typed. Refuses a body that is not declared JSON
/// (415: this is also what keeps other sites' plain forms out; no body at all needs no
/// type, and reads as `null`), too large (413), or
/// malformed or naming a key twice in an object (400, with the parser's line and column). An
/// empty body reads as `null`.
#[derive(Debug)]
pub(crate) struct JsonBody(pub Json);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json(req.headers());
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        // No body at all needs no type (a route whose body is optional).
        if bytes.is_empty() || (json && bytes.iter().all(u8::is_ascii_whitespace)) {
            return Ok(JsonBody(Json::Null));
        }
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON, with the header `content-type: application/json`",
            ));
        }
        // A key given twice is refused, as in a trace line: readers disagree on which counts.
        warden_wire::v1::line::read_json_unique(&bytes)
            .map(JsonBody)
            .map_err(|e| {
                let message = match e.classify() {
                    serde_json::error::Category::Data => {
                        format!("the body is JSON, but {e}; give each field once")
                    }
                    _ => format!("the body is not valid JSON: {e}"),
                };
                ApiError::bad_request(message)
                    .with("line", e.line())
                    .with("column", e.column())
            })
    }
}

fn body_rejection(e: BytesRejection) -> ApiError {
    let status = e.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "the body is too large for this server (see `--body-limit`)".to_string()
    } else {
        format!("the body could not be read: {}", e.body_text())
    };
    ApiError::new(status, message)
}

/// A path parameter, percent-decoded (a plugin rule's `/` arrives as `%2F`).
#[derive(Debug)]
pub(crate) struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|p| PathParam(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request(format!("the path is not valid: {}", e.body_text()))
            })
    }
}

/// The query string, read into `T`; an unknown or malformed parameter is a 400 that names it.
#[derive(Debug)]
pub(crate) struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| QueryParams(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request(format!("the query string is not valid: {}", e.body_text()))
            })
    }
}

/// Reads a typed value out of a JSON body, as a 422 naming the field on a mismatch.
pub(crate) fn typed<T: DeserializeOwned>(value: Json, what: &str) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::unprocessable(format!("{what}: {e}")))
}
