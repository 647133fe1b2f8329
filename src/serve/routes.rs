//! The route table: every route is added through [`Routes`], which records
//! its method, path and the role it needs as it adds it to the axum router,
//! so the OpenAPI check can compare the document with what is really
//! served, and the access middleware knows each route's role.

use axum::handler::Handler;
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use super::access::Role;
use super::state::AppState;

/// A served route: method (lower case), path, the role it needs.
pub type RouteSpec = (&'static str, &'static str, Role);

/// Builds the router and remembers each (method, path).
pub struct Routes {
    router: Router<AppState>,
    listed: Vec<RouteSpec>,
}

impl Routes {
    /// No routes yet.
    pub fn new() -> Routes {
        Routes {
            router: Router::new(),
            listed: Vec::new(),
        }
    }

    fn add(
        mut self,
        method: &'static str,
        path: &'static str,
        role: Role,
        m: MethodRouter<AppState>,
    ) -> Self {
        self.router = self.router.route(path, m);
        self.listed.push((method, path, role));
        self
    }

    /// A GET route any caller may read.
    pub fn get<H, T>(self, path: &'static str, h: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("get", path, Role::Viewer, get(h))
    }

    /// A GET route that needs `role`.
    pub fn get_as<H, T>(self, role: Role, path: &'static str, h: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("get", path, role, get(h))
    }

    /// A POST route that needs `role`.
    pub fn post<H, T>(self, role: Role, path: &'static str, h: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("post", path, role, post(h))
    }

    /// The router, and the routes it serves.
    pub fn finish(self) -> (Router<AppState>, Vec<RouteSpec>) {
        (self.router, self.listed)
    }
}

impl Default for Routes {
    fn default() -> Self {
        Routes::new()
    }
}
