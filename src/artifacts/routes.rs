//! The API's routes of artifacts (see `serve`).
