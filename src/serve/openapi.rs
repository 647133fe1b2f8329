//! The OpenAPI document, served at `/api/v1/openapi.json`. A test compares
//! its paths and methods with the routes the router serves, both ways;
//! another, its component schemas with those derived from the body types
//! ([`super::schemas::components`]); a third validates real responses of
//! every route against it.
//!
//! The document is written by hand but for its component schemas, which
//! `WEIR_WRITE_OPENAPI=1 cargo test --test serve_api openapi` rewrites from
//! the types ([`super::schemas`]; the test fails while they differ).

/// The document.
pub const DOCUMENT: &str = include_str!("openapi.json");

/// Its (method, path) pairs, lower-case methods.
pub fn operations() -> Vec<(String, String)> {
    let doc: serde_json::Value = serde_json::from_str(DOCUMENT).expect("the document is JSON");
    let mut out = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) {
        for (path, ops) in paths {
            if let Some(ops) = ops.as_object() {
                for method in ops.keys() {
                    out.push((method.clone(), path.clone()));
                }
            }
        }
    }
    out.sort();
    out
}
