//! The UI's session and files over plain HTTP (the browser tests check
//! the same from a real browser): login, the cookie's attributes, the
//! anti-CSRF header on every cookie-authenticated action, the files'
//! security headers, and the grid route the graph page draws from.

mod serve_support;

use serde_json::json;
use serve_support::{served, Http};

fn cookie_of(headers: &str) -> Option<String> {
    headers
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .map(|l| l.split_once(':').unwrap().1.trim().to_string())
}

#[test]
fn a_session_cookie_stands_for_the_token_and_actions_need_the_csrf_header() {
    let (_tmp, engine) = served("c");
    let anon = Http {
        addr: engine.url.trim_start_matches("http://").to_string(),
        token: None,
    };

    // The page and its files need no token, and carry the CSP.
    let page = anon.get("/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/ui/app.js"), "{}", page.body);
    let h = page.headers.to_ascii_lowercase();
    assert!(
        h.contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{h}"
    );
    assert!(h.contains("x-content-type-options: nosniff"));
    assert_eq!(anon.get("/ui/app.js").status, 200);
    assert_eq!(anon.get("/ui/nothing.js").status, 404);
    // But no data does.
    assert_eq!(anon.get("/api/v1/graphs").status, 401);
    assert_eq!(anon.get("/ui-session").status, 401);

    // A wrong token: 401, no cookie.
    let bad = anon.post("/ui-session/login", &json!({"token": "nope"}));
    assert_eq!(bad.status, 401);
    assert!(cookie_of(&bad.headers).is_none());
    // A form post (not JSON) is refused: a page elsewhere cannot log in.
    let form = anon.send(
        "POST",
        "/ui-session/login",
        Some(format!("token={}", engine.token).as_bytes()),
        &[("Content-Type", "application/x-www-form-urlencoded")],
    );
    assert_eq!(form.status, 400, "{}", form.body);

    let ok = anon.post("/ui-session/login", &json!({"token": engine.token}));
    assert_eq!(ok.status, 200, "{}", ok.body);
    let csrf = ok.json()["csrf"].as_str().unwrap().to_string();
    let set = cookie_of(&ok.headers).expect("a session cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(!set.contains(&engine.token), "the cookie is not the token");
    let cookie = set.split(';').next().unwrap().to_string();

    // The cookie reads.
    let g = anon.send("GET", "/api/v1/graphs", None, &[("Cookie", &cookie)]);
    assert_eq!(g.status, 200, "{}", g.body);
    let s = anon.send("GET", "/ui-session", None, &[("Cookie", &cookie)]);
    assert_eq!(s.json()["csrf"], json!(csrf));
    // An action with the cookie alone is refused, and does nothing.
    let no = anon.send(
        "POST",
        "/api/v1/graphs/c/pause",
        None,
        &[("Cookie", &cookie)],
    );
    assert_eq!(no.status, 403, "{}", no.body);
    assert_eq!(no.json()["error"]["kind"], json!("forbidden"));
    let forged = anon.send(
        "POST",
        "/api/v1/graphs/c/pause",
        None,
        &[("Cookie", &cookie), ("X-Weir-CSRF", "0000")],
    );
    assert_eq!(forged.status, 403);
    let paused = engine.http().get("/api/v1/graphs/c").json()["summary"]["paused"].clone();
    assert_eq!(paused, json!(false));
    // With the header, it is done.
    let yes = anon.send(
        "POST",
        "/api/v1/graphs/c/pause",
        None,
        &[("Cookie", &cookie), ("X-Weir-CSRF", &csrf)],
    );
    assert_eq!(yes.status, 200, "{}", yes.body);
    let paused = engine.http().get("/api/v1/graphs/c").json()["summary"]["paused"].clone();
    assert_eq!(paused, json!(true));
    // A bearer token carries no ambient credential: no header needed.
    assert_eq!(
        engine
            .http()
            .post("/api/v1/graphs/c/unpause", &json!({}))
            .status,
        200
    );

    // Logging out clears the cookie.
    let out = anon.send(
        "DELETE",
        "/ui-session",
        None,
        &[("Cookie", &cookie), ("X-Weir-CSRF", &csrf)],
    );
    assert_eq!(out.status, 204);
    assert!(cookie_of(&out.headers).unwrap().contains("Max-Age=0"));
}

#[test]
fn the_grid_has_runs_as_columns_and_nodes_as_rows() {
    let (_tmp, engine) = served("c");
    let http = engine.http();
    let a = http.post(
        "/api/v1/graphs/c/backfills",
        &json!({"from": "2026-11-01", "to": "2026-11-03"}),
    );
    assert_eq!(a.status, 202, "{}", a.body);
    for d in ["2026-11-01", "2026-11-02", "2026-11-03"] {
        engine.wait_run("c", d, "complete");
    }
    let g = http.get("/api/v1/graphs/c/grid?limit=2").json();
    assert_eq!(g["nodes"], json!(["a", "b", "c"]));
    let parts: Vec<&str> = g["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partition"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["2026-11-03", "2026-11-02"], "newest first");
    for r in g["runs"].as_array().unwrap() {
        let cells: Vec<&str> = r["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["state"].as_str().unwrap())
            .collect();
        assert_eq!(cells, ["succeeded"; 3]);
    }
    let cursor = g["next_cursor"].as_str().expect("a next page");
    let next = http
        .get(&format!(
            "/api/v1/graphs/c/grid?limit=2&cursor={}",
            cursor.replace('\u{1f}', "%1F")
        ))
        .json();
    assert_eq!(next["runs"][0]["partition"], json!("2026-11-01"));
    assert!(next["next_cursor"].is_null());
    assert_eq!(http.get("/api/v1/graphs/c/grid?limit=0").status, 400);
    assert_eq!(http.get("/api/v1/graphs/nope/grid").status, 404);
}

/// `weir ui` (#43 item 7): a one-time login link. Opened, it sets the
/// session of the token that asked and leads to the UI; a second opening,
/// an unknown code or a code whose token was revoked log in nobody.
#[test]
fn a_login_link_logs_a_browser_in_once_as_the_token_that_asked() {
    let (_tmp, engine) = served("c");
    let anon = Http {
        addr: engine.url.trim_start_matches("http://").to_string(),
        token: None,
    };
    let link = |token: Option<&str>| -> String {
        let mut c = serve_support::weir();
        if let Some(t) = token {
            c.env("WEIR_TOKEN", t);
        }
        let o = c.args(["ui", "--data"]).arg(&engine.data).output().unwrap();
        assert!(o.status.success(), "{o:?}");
        let url = String::from_utf8(o.stdout).unwrap().trim().to_string();
        assert!(
            url.starts_with(&format!("{}/ui-session/code?c=", engine.url)),
            "{url}"
        );
        url.trim_start_matches(&engine.url).to_string()
    };

    // The admin's link: a 303 to the UI with the session cookie, which
    // then stands for the admin.
    let path = link(None);
    let opened = anon.get(&path);
    assert_eq!(opened.status, 303, "{opened:?}");
    assert!(
        opened
            .headers
            .to_ascii_lowercase()
            .contains("location: /\r"),
        "{opened:?}"
    );
    assert!(opened
        .headers
        .to_ascii_lowercase()
        .contains("cache-control: no-store"));
    let cookie = cookie_of(&opened.headers).expect("a session cookie");
    let pair = cookie.split(';').next().unwrap().to_string();
    let me = anon.send("GET", "/ui-session", None, &[("Cookie", &pair)]);
    assert_eq!(me.status, 200, "{me:?}");
    assert_eq!(me.json()["name"], "admin");
    // Once only.
    let again = anon.get(&path);
    assert_eq!(again.status, 401, "{again:?}");
    assert!(again.body.contains("weir ui"), "{}", again.body);
    assert!(cookie_of(&again.headers).is_none());
    assert_eq!(anon.get("/ui-session/code?c=0123").status, 401);
    assert_eq!(anon.get("/ui-session/code").status, 401);

    // A viewer's link logs in a viewer.
    let viewer = engine.token("dash", "viewer", None);
    let opened = anon.get(&link(Some(&viewer)));
    assert_eq!(opened.status, 303, "{opened:?}");
    let pair = cookie_of(&opened.headers)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let me = anon.send("GET", "/ui-session", None, &[("Cookie", &pair)]);
    assert_eq!(
        (me.json()["name"].clone(), me.json()["role"].clone()),
        (json!("dash"), json!("viewer"))
    );

    // A token revoked before its link is opened: nobody.
    let brief = engine.token("brief", "operator", None);
    let path = link(Some(&brief));
    engine.ok(&["token", "revoke", "brief"]);
    let opened = anon.get(&path);
    assert_eq!(opened.status, 401, "{opened:?}");
    assert!(opened.body.contains("revoked"), "{}", opened.body);
}
