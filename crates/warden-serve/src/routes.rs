//! The routes, in one table ([`routes`]: method, path, who may call it, handler), and the
//! layers every request passes: a tracing span, the status count, cross-site request
//! refusal, gzip, the body limit and the request timeout. The table is also what the tests
//! compare with the OpenAPI document, so a route cannot go undocumented.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{from_fn_with_state, map_response};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::csrf::CsrfLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::error::ApiError;
use crate::guard;
use crate::state::AppState;
use crate::tokens::Access;
use crate::{api, claude, manage, openapi, page};

/// One route.
pub(crate) struct Route {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: Method,
    /// The path, with `{name}` parameters as the OpenAPI document writes them.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    handler: MethodRouter<AppState>,
}

fn route(
    method: Method,
    path: &'static str,
    access: Access,
    handler: MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        access,
        handler,
    }
}

/// Every route of the server.
pub(crate) fn routes() -> Vec<Route> {
    use Access::{Agent, Management, Public};
    vec![
        route(Method::GET, "/", Public, get(page::settings)),
        route(Method::POST, "/sign-in", Public, post(page::sign_in)),
        route(Method::POST, "/sign-out", Public, post(page::sign_out)),
        route(Method::GET, "/assets/warden.css", Public, get(page::css)),
        route(Method::GET, "/assets/settings.js", Public, get(page::js)),
        route(
            Method::GET,
            "/assets/favicon.svg",
            Public,
            get(page::favicon),
        ),
        route(Method::GET, "/v1/health", Public, get(api::health)),
        route(
            Method::GET,
            "/v1/openapi.json",
            Public,
            get(openapi::document),
        ),
        route(
            Method::POST,
            "/v1/sessions/{id}/events",
            Agent,
            post(api::post_event),
        ),
        route(
            Method::GET,
            "/v1/sessions/{id}",
            Agent,
            get(api::get_session),
        ),
        route(
            Method::DELETE,
            "/v1/sessions/{id}",
            Agent,
            delete(api::delete_session),
        ),
        route(Method::GET, "/v1/events", Agent, get(api::events)),
        route(Method::POST, "/v1/claude-code", Agent, post(claude::hook)),
        route(Method::GET, "/v1/metrics", Management, get(api::metrics)),
        route(
            Method::GET,
            "/v1/rules",
            Management,
            get(manage::list_rules),
        ),
        route(
            Method::GET,
            "/v1/rules/{id}",
            Management,
            get(manage::get_rule),
        ),
        route(
            Method::PUT,
            "/v1/rules/{id}/enabled",
            Management,
            put(manage::put_enabled),
        ),
        route(
            Method::DELETE,
            "/v1/rules/{id}/enabled",
            Management,
            delete(manage::reset_enabled),
        ),
        route(
            Method::PUT,
            "/v1/rules/{id}/state",
            Management,
            put(manage::put_state),
        ),
        route(
            Method::DELETE,
            "/v1/rules/{id}/state",
            Management,
            delete(manage::reset_enabled),
        ),
        route(
            Method::PUT,
            "/v1/plugins/{id}/state",
            Management,
            put(manage::put_plugin_state),
        ),
        route(
            Method::DELETE,
            "/v1/plugins/{id}/state",
            Management,
            delete(manage::reset_plugin_state),
        ),
        route(
            Method::POST,
            "/v1/rules/{id}/test",
            Management,
            post(manage::test_rule),
        ),
        route(
            Method::GET,
            "/v1/plugins",
            Management,
            get(manage::list_plugins),
        ),
        route(
            Method::PUT,
            "/v1/plugins/{id}/settings",
            Management,
            put(manage::put_settings),
        ),
        route(Method::GET, "/v1/log", Management, get(manage::log)),
    ]
}

/// The application: every route behind its access check, and the layers.
pub(crate) fn router(app: AppState) -> Router {
    let mut router: Router<AppState> = Router::new();
    for r in routes() {
        let check = from_fn_with_state((app.clone(), r.access), guard::check);
        router = router.route(r.path, r.handler.route_layer(check));
    }
    let csrf = CsrfLayer::new().with_rejection_response(|e: tower_http::csrf::ProtectionError| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            format!("refused as a cross-site request ({e}); this server's pages call it from its own origin only"),
        )
        .into_response()
    });
    let compress = SizeAbove::new(1024)
        .and(NotForContentType::GRPC)
        .and(NotForContentType::IMAGES)
        .and(NotForContentType::const_new("text/event-stream"));
    let tls = app.options.tls.is_some();
    let router = router
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(app.options.body_limit))
        .layer(map_response(json_method_not_allowed))
        .layer(CompressionLayer::new().compress_when(compress))
        .layer(csrf)
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            app.options.request_timeout,
        ))
        .layer(from_fn_with_state(app.clone(), guard::count))
        .layer(TraceLayer::new_for_http())
        .with_state(app);
    if !tls {
        return router;
    }
    // Over TLS, every answer tells browsers to come back over TLS only (for a year, as usual).
    router.layer(map_response(|mut r: Response| async move {
        r.headers_mut().insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
        r
    }))
}

/// Unknown paths: a 404 that helps with the usual mistake, a plugin rule's `/` not encoded.
async fn not_found(uri: Uri) -> ApiError {
    let path = uri.path();
    let hint = match path.strip_prefix("/v1/rules/") {
        Some(rest) if rest.contains('/') => {
            " (a plugin rule's id has a `/`: send it percent-encoded, as `plugin%2Frule`)"
        }
        _ => "",
    };
    ApiError::not_found(format!(
        "no route `{path}`{hint}; GET /v1/openapi.json lists them"
    ))
}

/// axum answers a wrong method with an empty 405; give it a JSON body like every error.
async fn json_method_not_allowed(response: Response) -> Response {
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        let allow = response.headers().get(axum::http::header::ALLOW).cloned();
        let mut r = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "this path does not take that method",
        )
        .into_response();
        if let Some(a) = allow {
            r.headers_mut().insert(axum::http::header::ALLOW, a);
        }
        return r;
    }
    response
}
