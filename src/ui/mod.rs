//! The web UI: hand-written HTML, CSS and JavaScript modules compiled into
//! the binary and served by the engine at `/` — no Node toolchain, no
//! second service. The pages' only data source is the JSON API and its
//! event stream; this module serves the files and the login that turns the
//! engine token into a session cookie ([`session`]).

pub mod code_routes;
pub mod codes;
mod hardened;
pub mod session;

use hardened::hardened;
pub use hardened::CSP;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;

use crate::serve::access::{caller_of, tokens, Caller, Role};
use crate::serve::error::ApiError;
use crate::serve::state::AppState;
use session::Session;

/// One file of the UI: its path under `/ui/`, content type and bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file the UI is made of. A page loads `index.html`, which loads
/// `app.js`; the modules import each other by relative path.
const ASSETS: &[Asset] = &[
    Asset {
        path: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_str!("assets/index.html"),
    },
    Asset {
        path: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/style.css"),
    },
    Asset {
        path: "app.js",
        content_type: JS,
        body: include_str!("assets/app.js"),
    },
    Asset {
        path: "api.js",
        content_type: JS,
        body: include_str!("assets/api.js"),
    },
    Asset {
        path: "dom.js",
        content_type: JS,
        body: include_str!("assets/dom.js"),
    },
    Asset {
        path: "live.js",
        content_type: JS,
        body: include_str!("assets/live.js"),
    },
    Asset {
        path: "dag.js",
        content_type: JS,
        body: include_str!("assets/dag.js"),
    },
    Asset {
        path: "role.js",
        content_type: JS,
        body: include_str!("assets/role.js"),
    },
    Asset {
        path: "pages/audit.js",
        content_type: JS,
        body: include_str!("assets/pages/audit.js"),
    },
    Asset {
        path: "actions.js",
        content_type: JS,
        body: include_str!("assets/actions.js"),
    },
    Asset {
        path: "pages/graphs.js",
        content_type: JS,
        body: include_str!("assets/pages/graphs.js"),
    },
    Asset {
        path: "pages/graph.js",
        content_type: JS,
        body: include_str!("assets/pages/graph.js"),
    },
    Asset {
        path: "pages/run.js",
        content_type: JS,
        body: include_str!("assets/pages/run.js"),
    },
    Asset {
        path: "pages/queue.js",
        content_type: JS,
        body: include_str!("assets/pages/queue.js"),
    },
    Asset {
        path: "pages/members.js",
        content_type: JS,
        body: include_str!("assets/pages/members.js"),
    },
];

/// The UI's routes: the page, its files, and the session's login, check
/// and logout. None needs the token: the files hold no data, and the
/// session routes are what checks it.
pub fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/", get(index))
        .route("/ui/{*path}", get(asset))
        .route("/ui-session", get(session_check).delete(logout))
        .route("/ui-session/login", post(login))
        .route("/ui-session/hint", get(hint))
        .route("/ui-session/code", get(code_routes::redeem))
}

fn serve_asset(path: &str) -> Response {
    match ASSETS.iter().find(|a| a.path == path) {
        Some(a) => hardened(([(header::CONTENT_TYPE, a.content_type)], a.body).into_response()),
        None => hardened(
            (
                StatusCode::NOT_FOUND,
                format!("the UI has no file {path:?}\n"),
            )
                .into_response(),
        ),
    }
}

async fn index() -> Response {
    serve_asset("index.html")
}

async fn asset(axum::extract::Path(path): axum::extract::Path<String>) -> Response {
    serve_asset(&path)
}

/// The session's answer: the anti-CSRF token the page sends with actions,
/// and who the session is (the page shows only what the role allows).
#[derive(Debug, serde::Serialize)]
struct SessionBody {
    csrf: String,
    name: String,
    role: Role,
}

fn session_body(caller: &Caller) -> SessionBody {
    SessionBody {
        csrf: Session::new(&caller.name, &caller.hash).csrf().to_string(),
        name: caller.name.clone(),
        role: caller.role,
    }
}

async fn session_check(State(s): State<AppState>, headers: HeaderMap) -> Response {
    match caller_of(&s, &axum::http::Method::GET, &headers) {
        Ok(caller) if Session::name_in(&headers).is_some() => {
            hardened(Json(session_body(&caller)).into_response())
        }
        Ok(_) | Err(_) => hardened(
            ApiError::unauthorized("no session: log in with a token (DATA/token is the admin's)")
                .into_response(),
        ),
    }
}

/// Where the admin's token is, for the login page: told only to a browser
/// on this machine (a path is no secret there, and it is what the person
/// at the keyboard needs); others get an empty answer.
#[derive(Debug, serde::Serialize)]
struct HintBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    token_file: Option<String>,
}

async fn hint(State(s): State<AppState>, req: axum::extract::Request) -> Response {
    let local = req
        .extensions()
        .get::<axum::extract::ConnectInfo<crate::serve::listen::ClientAddr>>()
        .is_some_and(|c| c.0 .0.ip().is_loopback());
    let token_file = s
        .access
        .token_file
        .as_ref()
        .filter(|_| local)
        .map(|p| p.display().to_string());
    hardened(Json(HintBody { token_file }).into_response())
}

/// `POST /ui-session/login`: a token, once.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    token: String,
}

async fn login(
    State(s): State<AppState>,
    body: Result<Json<LoginBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    // A JSON body only: a cross-site form cannot send one without a
    // preflight, so a page elsewhere cannot log a browser in.
    let Ok(Json(body)) = body else {
        return hardened(
            ApiError::bad("body: a JSON object {\"token\": \"...\"} is expected").into_response(),
        );
    };
    let caller = match tokens::authenticate(
        s.engine.store(),
        &s.token,
        body.token.trim(),
        s.engine.now_ms(),
    ) {
        Ok(c) => c,
        Err(tokens::AuthError::Refused(why)) => {
            tracing::warn!(reason = %why, "ui login refused");
            return hardened(
                ApiError::unauthorized(format!("{why} (the admin's token is in DATA/token)"))
                    .into_response(),
            );
        }
        Err(tokens::AuthError::Store(e)) => return hardened(ApiError::from(e).into_response()),
    };
    tracing::info!(who = %caller.name, role = %caller.role, "ui login");
    let session = Session::new(&caller.name, &caller.hash);
    let mut r = Json(session_body(&caller)).into_response();
    if let Ok(v) = HeaderValue::from_str(&session.set_cookie(s.access.tls)) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    hardened(r)
}

async fn logout(State(s): State<AppState>, headers: HeaderMap) -> Response {
    // A logout is a change: with a session, it needs the anti-CSRF header.
    if Session::name_in(&headers).is_some() {
        if let Err(e) = caller_of(&s, &axum::http::Method::DELETE, &headers) {
            if e.status == StatusCode::FORBIDDEN {
                return hardened(e.into_response());
            }
        }
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    if let Ok(v) = HeaderValue::from_str(&Session::clear_cookie(s.access.tls)) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    hardened(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_found_and_unknown_paths_are_404() {
        for a in ASSETS {
            let r = serve_asset(a.path);
            assert_eq!(r.status(), StatusCode::OK, "{}", a.path);
            assert!(r.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        }
        assert_eq!(serve_asset("../Cargo.toml").status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn every_module_import_names_an_asset() {
        // A module importing a file the table lacks would fail in the
        // browser only: check the relative imports here.
        for a in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            let dir = a.path.rsplit_once('/').map_or("", |(d, _)| d);
            let mut seen = 0;
            for line in a.body.lines() {
                // `import ... from "./x.js";`, on one line or closing a
                // multi-line import.
                let Some((_, rest)) = line.split_once(" from \"") else {
                    continue;
                };
                let Some(spec) = rest.split('"').next() else {
                    continue;
                };
                seen += 1;
                let mut parts: Vec<&str> = if dir.is_empty() {
                    vec![]
                } else {
                    dir.split('/').collect()
                };
                for seg in spec.split('/') {
                    match seg {
                        "." => {}
                        ".." => {
                            parts.pop();
                        }
                        s => parts.push(s),
                    }
                }
                let target = parts.join("/");
                assert!(
                    ASSETS.iter().any(|x| x.path == target),
                    "{} imports {spec} ({target}), which is not served",
                    a.path
                );
            }
            if a.path == "app.js" {
                assert!(seen >= 6, "app.js imports its pages: {seen}");
            }
        }
    }
}
