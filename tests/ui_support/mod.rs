//! Shared setup for the UI's browser tests: Debian's headless Chromium
//! driven over WebDriver (chromedriver) with fantoccini, against a real
//! `weir serve` on an ephemeral loopback port (see `serve_support`).
//!
//! Without Chromium the tests print why and pass — unless
//! `WEIR_UI_REQUIRED=1` (set by `.ci/run`, which installs Chromium), when
//! a missing browser fails them.

#![allow(dead_code)]

use super::serve_support::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// How long a page condition may take to hold.
pub const WAIT: Duration = Duration::from_secs(20);
/// The window of the wide layout.
pub const WIDE: (u32, u32) = (1280, 800);
/// A phone's width.
pub const NARROW: (u32, u32) = (390, 844);

fn find(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(env) {
        return Some(PathBuf::from(p));
    }
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Browsers at once: a Chromium per test on a 2-core machine makes every
/// wait a race, so tests take turns.
pub const BROWSERS_AT_ONCE: usize = 2;
static BROWSER_SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(BROWSERS_AT_ONCE);

/// A headless Chromium under chromedriver, and where screenshots go.
pub struct Browser {
    pub client: Client,
    _slot: tokio::sync::SemaphorePermit<'static>,
    driver: Child,
    profile: tempfile::TempDir,
    shots: PathBuf,
    test: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Starts a browser for `test`, or says why there is none (`None`).
pub async fn browser(test: &str) -> Option<Browser> {
    let chromium = find(
        "WEIR_CHROMIUM",
        &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
    );
    let driver = find("WEIR_CHROMEDRIVER", &["/usr/bin/chromedriver"]);
    let (Some(chromium), Some(driver_bin)) = (chromium, driver) else {
        let reason = "no Chromium and ChromeDriver (apt-get install chromium chromium-driver; .ci/run installs them)";
        if std::env::var("WEIR_UI_REQUIRED").is_ok_and(|v| v == "1") {
            panic!("{test}: {reason}, and WEIR_UI_REQUIRED=1");
        }
        eprintln!("SKIPPED browser test {test}: {reason}");
        return None;
    };
    let slot = BROWSER_SLOTS.acquire().await.unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut last_err = String::new();
    // A port picked free can be taken before chromedriver binds it: retry.
    for _ in 0..5 {
        let port = free_port();
        let mut child = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver_bin.display()));
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                    "--disable-extensions", "--hide-scrollbars",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={},{}", WIDE.0, WIDE.1),
                ],
            },
        });
        let caps = match caps {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            let conn = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(conn)
                .capabilities(caps.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => {
                    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots");
                    std::fs::create_dir_all(&shots).unwrap();
                    return Some(Browser {
                        client,
                        _slot: slot,
                        driver: child,
                        profile,
                        shots,
                        test: test.to_string(),
                    });
                }
                Err(e) => {
                    last_err = e.to_string();
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("{test}: chromedriver did not give a session: {last_err}");
}

impl Browser {
    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Polls `script` until it returns a truthy value; that value.
    pub async fn wait_js(&self, what: &str, script: &str) -> Value {
        let t0 = Instant::now();
        let mut last = Value::Null;
        while t0.elapsed() < WAIT {
            last = self.js(script, vec![]).await;
            let truthy = match &last {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shot(&format!("timeout-{}", what.replace(' ', "-")))
            .await;
        let text = self
            .js("return document.body.innerText.slice(0, 3000);", vec![])
            .await;
        panic!("timed out waiting for {what} (last {last}); page text:\n{text}");
    }

    /// The visible text of the page.
    pub async fn text(&self) -> String {
        self.js("return document.body.innerText;", vec![])
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        self.wait_js(
            &format!("{css} to be present"),
            &format!("return !!document.querySelector({});", json!(css)),
        )
        .await;
        // Live pages redraw as events come: an element found a moment ago
        // may have been replaced. Find it again and retry.
        let mut tries = 0;
        loop {
            let found = self.client.find(Locator::Css(css)).await;
            let clicked = match found {
                Ok(el) => el.click().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match clicked {
                Ok(()) => return,
                Err(e) if tries < 40 && (e.contains("stale") || e.contains("no such element")) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("click {css}: {e}"),
            }
        }
    }

    /// Presses Tab until the focused element matches `css` (at most 40
    /// times), then Enter: what a keyboard user does.
    pub async fn tab_to_and_enter(&self, css: &str) {
        for _ in 0..40 {
            let el = self.client.active_element().await.unwrap();
            el.send_keys("\u{E004}").await.unwrap();
            let here = self
                .js(
                    &format!(
                        "return !!document.activeElement && document.activeElement.matches({});",
                        json!(css)
                    ),
                    vec![],
                )
                .await;
            if here == json!(true) {
                let el = self.client.active_element().await.unwrap();
                el.send_keys("\u{E007}").await.unwrap();
                return;
            }
        }
        panic!("Tab never reached {css}");
    }

    /// Types `text` into the input matching `css`.
    pub async fn fill(&self, css: &str, text: &str) {
        let el = self.client.find(Locator::Css(css)).await.unwrap();
        el.clear().await.unwrap();
        el.send_keys(text).await.unwrap();
    }

    /// Confirms the open action dialog and waits for the API's answer;
    /// the answer's text.
    pub async fn confirm(&self) -> String {
        self.click("#confirm-ok").await;
        let answer = self
            .wait_js(
                "the action's answer",
                "const a = document.querySelector('#confirm .answer'); return a && a.dataset.ok ? a.dataset.ok + ': ' + a.innerText : null;",
            )
            .await;
        // Close the dialog (the button now says Close).
        self.click("#confirm-ok").await;
        self.wait_js(
            "the dialog to close",
            "return !document.querySelector('#confirm').open;",
        )
        .await;
        answer.as_str().unwrap_or_default().to_string()
    }

    /// Logs in at `url` with `token` and waits for the first page.
    pub async fn login(&self, url: &str, token: &str) {
        self.goto(&format!("{url}/")).await;
        self.wait_js(
            "the login form",
            "return !!document.querySelector('#token');",
        )
        .await;
        self.fill("#token", token).await;
        self.click("#login button[type=submit]").await;
        self.wait_js(
            "the graphs page",
            "return !!document.querySelector('table.graphs') || document.body.innerText.includes('No graph');",
        )
        .await;
    }

    /// Saves a PNG of the page as `target/ui-screenshots/<test>-<name>.png`.
    pub async fn shot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a screenshot is a PNG");
        let path = self.shots.join(format!("{}-{name}.png", self.test));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Resizes the window.
    pub async fn size(&self, (w, h): (u32, u32)) {
        self.client.set_window_size(w, h).await.unwrap();
    }

    /// The edges of the page's DAG that run through a node's box, as
    /// `from->to through node` (each edge sampled every 2 px).
    pub async fn edges_through_boxes(&self) -> Vec<String> {
        let v = self
            .js(
                "const boxes = [...document.querySelectorAll('svg.dag g.dag-node')].map(g => {
                   const m = g.transform.baseVal.consolidate().matrix; const r = g.querySelector('rect');
                   return { n: g.dataset.node, x: m.e, y: m.f, w: r.width.baseVal.value, h: r.height.baseVal.value };
                 });
                 const bad = new Set();
                 for (const p of document.querySelectorAll('svg.dag path.dag-edge')) {
                   const len = p.getTotalLength();
                   for (let l = 0; l <= len; l += 2) {
                     const pt = p.getPointAtLength(l);
                     for (const b of boxes) {
                       if (pt.x > b.x + 1 && pt.x < b.x + b.w - 1 && pt.y > b.y + 1 && pt.y < b.y + b.h - 1) {
                         bad.add(`${p.dataset.from}->${p.dataset.to} through ${b.n}`);
                       }
                     }
                   }
                 }
                 return [...bad];",
                vec![],
            )
            .await;
        serde_json::from_value(v).unwrap()
    }

    /// What the run page's layout cuts or breaks: a node's name over two
    /// lines, a table of the node panel wider than the panel, an attempt's
    /// stderr cut.
    pub async fn run_page_faults(&self) -> Vec<String> {
        let v = self
            .js(
                "const bad = [];
                 for (const a of document.querySelectorAll('table.nodes tbody th a')) {
                   if (a.getClientRects().length !== 1) bad.push(`node name ${a.textContent} breaks over lines`);
                 }
                 const panel = document.querySelector('#node-panel');
                 const right = panel.getBoundingClientRect().right;
                 for (const w of panel.querySelectorAll('.table-wrap')) {
                   const t = w.querySelector('table');
                   if (w.scrollWidth > w.clientWidth + 1 || t.getBoundingClientRect().right > right + 1) {
                     bad.push(`${t.className} table wider than the panel (${w.scrollWidth} > ${w.clientWidth})`);
                   }
                 }
                 for (const pre of panel.querySelectorAll('pre.stderr')) {
                   if (pre.scrollHeight > pre.clientHeight + 1 || pre.scrollWidth > pre.clientWidth + 1) bad.push('a stderr tail is cut');
                 }
                 return bad;",
                vec![],
            )
            .await;
        serde_json::from_value(v).unwrap()
    }

    /// Ends the session.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

/// A route of the UI: `#/run/g/p` with each part encoded as the page does.
pub fn route(parts: &[&str]) -> String {
    let enc: Vec<String> = parts
        .iter()
        .map(|p| {
            p.bytes()
                .map(|b| match b {
                    b'A'..=b'Z'
                    | b'a'..=b'z'
                    | b'0'..=b'9'
                    | b'-'
                    | b'_'
                    | b'.'
                    | b'!'
                    | b'~'
                    | b'*'
                    | b'\''
                    | b'('
                    | b')' => (b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect()
        })
        .collect();
    format!("#/{}", enc.join("/"))
}
