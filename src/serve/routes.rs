//! The route table: every route is added through [`Routes`], which records
//! its method and path as it adds it to the axum router, so the OpenAPI
//! check can compare the document with what is really served.

use axum::handler::Handler;
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use super::state::AppState;

/// Builds the router and remembers each (method, path).
pub struct Routes {
    router: Router<AppState>,
    listed: Vec<(&'static str, &'static str)>,
}

impl Routes {
    /// No routes yet.
    pub fn new() -> Routes {
        Routes {
            router: Router::new(),
            listed: Vec::new(),
        }
    }

    fn add(mut self, method: &'static str, path: &'static str, m: MethodRouter<AppState>) -> Self {
        self.router = self.router.route(path, m);
        self.listed.push((method, path));
        self
    }

    /// A GET route.
    pub fn get<H, T>(self, path: &'static str, h: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("get", path, get(h))
    }

    /// A POST route.
    pub fn post<H, T>(self, path: &'static str, h: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("post", path, post(h))
    }

    /// The router, and the routes it serves.
    pub fn finish(self) -> (Router<AppState>, Vec<(&'static str, &'static str)>) {
        (self.router, self.listed)
    }
}

impl Default for Routes {
    fn default() -> Self {
        Routes::new()
    }
}
