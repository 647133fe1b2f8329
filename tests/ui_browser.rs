//! The web UI in a real browser: headless Chromium driven over WebDriver
//! against a `weir serve` on an ephemeral loopback port. Each test saves
//! PNG screenshots under `target/ui-screenshots/`.

mod artifacts_support;
mod replica_support;
mod serve_support;
mod ui_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use serve_support::{start, start_on, wait_for, write_def};
use ui_support::{browser, route, NARROW, WIDE};

fn sh_node(name: &str, ups: &[&str], extra: &str, cmd: &str) -> String {
    let ups: Vec<String> = ups.iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        "\n[[nodes]]\nname = \"{name}\"\nupstreams = [{}]\n{extra}\ncommand = [\"sh\", \"-c\", {}]\n",
        ups.join(", "),
        toml::Value::String(cmd.to_string())
    )
}

fn six_def() -> String {
    let mut d = String::from(
        "name = \"six\"\npartitioning = \"daily\"\nmax_active_runs = 3\n[pools]\ndefault = 4\n",
    );
    d += &sh_node("extract", &[], "", "true");
    d += &sh_node("clean", &["extract"], "", "true");
    d += &sh_node("enrich", &["extract"], "", "true");
    d += &sh_node("agg", &["extract"], "", "true");
    d += &sh_node("load", &["clean", "enrich", "agg"], "", "true");
    d += &sh_node("report", &["load"], "trigger_rule = \"all_done\"", "true");
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_page_draws_the_dag_and_the_grid_of_a_backfill() {
    let Some(b) = browser("graph").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(&defs, "six", &six_def());
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    b.login(&engine.url, &engine.token).await;

    // By keyboard: Tab to the graph's link, Enter.
    b.tab_to_and_enter(&format!("a[href=\"{}\"]", route(&["graph", "six"])))
        .await;
    let nodes = b
        .wait_js(
            "the DAG",
            "const n = document.querySelectorAll('svg.dag g.dag-node'); return n.length ? [...n].map(g => g.dataset.node) : null;",
        )
        .await;
    let nodes: BTreeSet<String> = serde_json::from_value(nodes).unwrap();
    assert_eq!(
        nodes,
        ["agg", "clean", "enrich", "extract", "load", "report"]
            .map(String::from)
            .into()
    );
    let edges = b
        .js(
            "return [...document.querySelectorAll('svg.dag path.dag-edge')].map(e => [e.dataset.from, e.dataset.to, e.getAttribute('marker-end')]);",
            vec![],
        )
        .await;
    let edges: BTreeSet<(String, String, String)> = serde_json::from_value(edges).unwrap();
    let want: BTreeSet<(String, String, String)> = [
        ("extract", "clean"),
        ("extract", "enrich"),
        ("extract", "agg"),
        ("clean", "load"),
        ("enrich", "load"),
        ("agg", "load"),
        ("load", "report"),
    ]
    .iter()
    .map(|(a, c)| (a.to_string(), c.to_string(), "url(#arrow)".to_string()))
    .collect();
    assert_eq!(edges, want, "edges with arrowheads");
    // The layered layout: each edge goes left to right.
    let backwards = b
        .js(
            "const x = n => { const t = document.querySelector(`g.dag-node[data-node='${n}']`).getAttribute('transform'); return Number(/translate\\(([\\d.]+)/.exec(t)[1]); };
             return [...document.querySelectorAll('path.dag-edge')].filter(e => x(e.dataset.from) >= x(e.dataset.to)).length;",
            vec![],
        )
        .await;
    assert_eq!(backwards, json!(0), "every edge runs left to right");
    let rule = b
        .js(
            "const r = document.querySelector(\"g.dag-node[data-node='report'] .dag-rule\"); return r && r.textContent;",
            vec![],
        )
        .await;
    assert_eq!(
        rule,
        json!("all_done"),
        "a rule other than all_success is shown"
    );
    assert_eq!(
        b.js(
            "return document.querySelectorAll('g.dag-node .dag-rule').length;",
            vec![]
        )
        .await,
        json!(1)
    );

    // A 3-day backfill from the form.
    b.click("#act-backfill").await;
    b.fill("#f-from", "2026-11-01").await;
    b.fill("#f-to", "2026-11-03").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "backfill answer: {answer}");
    let cols = b
        .wait_js(
            "3 complete runs in the grid",
            "const c = [...document.querySelectorAll('table.grid thead th[data-partition]')];
             return c.length === 3 && c.every(th => th.querySelector('.sq').dataset.state === 'complete') ? c.map(th => th.dataset.partition) : null;",
        )
        .await;
    assert_eq!(
        cols,
        json!(["2026-11-03", "2026-11-02", "2026-11-01"]),
        "newest first"
    );
    let rows = b
        .js(
            "return [...document.querySelectorAll('table.grid tbody tr')].map(r => [r.dataset.node, [...r.querySelectorAll('.sq')].map(s => s.dataset.state)]);",
            vec![],
        )
        .await;
    let rows: Vec<(String, Vec<String>)> = serde_json::from_value(rows).unwrap();
    assert_eq!(rows.len(), 6, "a row per node: {rows:?}");
    assert_eq!(rows[0].0, "extract", "rows in topological order");
    assert_eq!(rows[5].0, "report");
    for (node, states) in &rows {
        assert_eq!(states, &vec!["succeeded".to_string(); 3], "{node}");
    }
    // The DAG is coloured by the newest run, with the state as text too.
    b.wait_js(
        "the DAG coloured by the newest run",
        "return [...document.querySelectorAll('g.dag-node')].every(g => g.dataset.state === 'succeeded' && g.querySelector('.dag-state').textContent.includes('succeeded'));",
    )
    .await;
    b.shot("graph-page").await;

    // Pause, then unpause, from the buttons; the page follows.
    b.click("#act-pause").await;
    assert!(b.confirm().await.starts_with("true"));
    b.wait_js(
        "the paused badge",
        "return !!document.querySelector('#act-unpause') && document.querySelector('#graph-head').innerText.includes('paused');",
    )
    .await;
    let paused = engine.http().get("/api/v1/graphs/six").json();
    assert_eq!(paused["summary"]["paused"], json!(true));
    b.click("#act-unpause").await;
    assert!(b.confirm().await.starts_with("true"));
    b.wait_js(
        "the pause button",
        "return !!document.querySelector('#act-pause');",
    )
    .await;
    // Trigger now: the newest closed window gets a run, a fourth column.
    b.click("#act-trigger").await;
    assert!(b.confirm().await.starts_with("true"));
    b.wait_js(
        "a fourth run",
        "return document.querySelectorAll('table.grid thead th[data-partition]').length === 4;",
    )
    .await;

    // Selecting an older run colours the DAG by it.
    b.click("table.grid thead th[data-partition='2026-11-01'] a")
        .await;
    b.wait_js(
        "the selected run",
        "return document.querySelector('#dag p a') && document.querySelector('#dag p a').textContent === '2026-11-01';",
    )
    .await;

    // The graphs list shows the runs as squares.
    b.click("a[data-nav=graphs]").await;
    let squares = b
        .wait_js(
            "the graphs list",
            "const r = document.querySelector(\"tr[data-graph='six'] .squares\"); return r && r.querySelectorAll('.sq').length;",
        )
        .await;
    assert_eq!(
        squares,
        json!(4),
        "the backfill's 3 runs and the triggered one"
    );

    // The queue page: pools with their slots.
    b.click("a[data-nav=queue]").await;
    let slots = b
        .wait_js(
            "the pools table",
            "const r = document.querySelector(\"tr[data-pool='default']\"); return r && r.children[1].textContent;",
        )
        .await;
    assert_eq!(slots, json!("4"));
    b.shot("queue-page").await;

    // A phone's width: nothing but tables scrolls sideways.
    b.size(NARROW).await;
    b.goto(&format!("{}/{}", engine.url, route(&["graph", "six"])))
        .await;
    b.wait_js(
        "the DAG on a narrow screen",
        "return document.querySelectorAll('svg.dag g.dag-node').length === 6;",
    )
    .await;
    let overflow = b
        .js(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            vec![],
        )
        .await;
    assert!(
        overflow.as_i64().unwrap() <= 1,
        "the page is wider than a phone by {overflow} px"
    );
    b.shot("graph-page-narrow").await;
    b.size(WIDE).await;
    b.close().await;
}

fn live_def() -> String {
    let mut d =
        String::from("name = \"live\"\npartitioning = \"none\"\n[pools]\ndefault = 4\none = 1\n");
    d += &sh_node(
        "a",
        &[],
        "pool = \"one\"",
        "sleep 1.5; printf '{\"who\": \"a\", \"rows\": [1, 2]}' > \"$WEIR_OUTPUT\"",
    );
    d += &sh_node("b", &[], "pool = \"one\"", "sleep 1.5");
    d += &sh_node("c", &["a", "b"], "", "echo c ran");
    d += &sh_node(
        "bad",
        &[],
        "retry = { attempts = 1 }",
        "echo 'boom: <b>disk</b> on fire' >&2; exit 3",
    );
    d
}

/// The states a node showed, in order, without repeats.
fn push_state(seen: &mut Vec<String>, s: &str) {
    if seen.last().map(String::as_str) != Some(s) {
        seen.push(s.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_from_the_ui_is_followed_live_and_rerun() {
    let Some(b) = browser("run").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(&defs, "live", &live_def());
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    b.login(&engine.url, &engine.token).await;
    b.click(&format!("a[href=\"{}\"]", route(&["graph", "live"])))
        .await;
    b.wait_js(
        "the DAG",
        "return document.querySelectorAll('g.dag-node').length === 4;",
    )
    .await;
    // Set on this page: a reload would lose it.
    b.js("window.__kept = 'no reload'; return true;", vec![])
        .await;

    b.click("#act-start").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "start answer: {answer}");
    b.click("#dag p a").await;
    b.wait_js(
        "the run page",
        "return document.querySelectorAll('table.nodes tbody tr').length === 4;",
    )
    .await;
    // Watch a and b (one slot between them): one waits queued, then runs,
    // then succeeds — shown as the events come, without a reload.
    let mut seen: [Vec<String>; 2] = Default::default();
    let t0 = std::time::Instant::now();
    loop {
        let v = b
            .js(
                "return ['a', 'b'].map(n => document.querySelector(`tr[data-node='${n}']`).dataset.state);",
                vec![],
            )
            .await;
        let v: Vec<String> = serde_json::from_value(v).unwrap();
        push_state(&mut seen[0], &v[0]);
        push_state(&mut seen[1], &v[1]);
        if v.iter().all(|s| s == "succeeded") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "a and b did not succeed: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let order = ["queued", "running", "succeeded"];
    let rank = |s: &str| order.iter().position(|o| *o == s);
    for (node, states) in ["a", "b"].iter().zip(&seen) {
        let ranks: Vec<_> = states.iter().map(|s| rank(s)).collect();
        assert!(
            ranks.iter().all(Option::is_some) && ranks.windows(2).all(|w| w[0] < w[1]),
            "{node} went {states:?}"
        );
    }
    assert!(
        seen.iter().any(|s| s == &order.map(String::from).to_vec()),
        "one of a and b showed queued, then running, then succeeded: {seen:?}"
    );
    assert_eq!(
        b.js("return window.__kept;", vec![]).await,
        json!("no reload")
    );
    b.wait_js(
        "the run to settle",
        "return document.querySelector(\"#run-head [data-state='failed']\");",
    )
    .await;
    // Settled: its span tree, as `weir trace` prints it (#43 item 4):
    // the run, each node under it, each attempt under its node; a failed
    // one marked.
    let spans = b
        .wait_js(
            "the run's trace",
            "const rows = [...document.querySelectorAll('table.trace tbody tr')];
             return rows.length ? rows.map(r => [r.dataset.span, r.dataset.depth, r.classList.contains('span-error')]) : null;",
        )
        .await;
    let spans: Vec<(String, String, bool)> = serde_json::from_value(spans).unwrap();
    assert!(
        spans[0].0.starts_with("run ") && spans[0].1 == "0",
        "{spans:?}"
    );
    let at = |name: &str| {
        spans
            .iter()
            .position(|s| s.0 == name)
            .unwrap_or_else(|| panic!("{name}: {spans:?}"))
    };
    assert_eq!(
        spans[at("node a")],
        ("node a".into(), "1".into(), false),
        "{spans:?}"
    );
    assert_eq!(
        spans[at("node a") + 1].1,
        "2",
        "an attempt under its node: {spans:?}"
    );
    assert!(spans[at("node bad")].2, "bad's span failed: {spans:?}");
    let id = b
        .js(
            "return document.querySelector('#trace-id').textContent;",
            vec![],
        )
        .await;
    assert!(
        id.as_str()
            .is_some_and(|t| t.len() == 32 && t.chars().all(|c| c.is_ascii_hexdigit())),
        "{id}"
    );

    // A node's panel: its output, pretty-printed.
    b.click("tr[data-node='a'] th a").await;
    let output = b
        .wait_js(
            "a's output",
            "const o = document.querySelector('#node-output'); return o && o.textContent;",
        )
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(output.as_str().unwrap()).unwrap(),
        json!({"who": "a", "rows": [1, 2]})
    );
    assert!(
        output.as_str().unwrap().contains("\n  \"who\""),
        "pretty-printed: {output}"
    );

    // Rerun a with its downstreams: a and c show rerun 1, b stays 0.
    b.click("#act-rerun").await;
    let checked = b
        .js(
            "return document.querySelector('#f-downstream').checked;",
            vec![],
        )
        .await;
    assert_eq!(checked, json!(true), "downstreams are rerun by default");
    let answer = b.confirm().await;
    assert!(answer.contains("submitted"), "rerun answer: {answer}");
    let reruns = b
        .wait_js(
            "a and c rerun",
            "const r = n => document.querySelector(`tr[data-node='${n}']`);
             const v = ['a', 'b', 'c'].map(n => [r(n).querySelector('td.rerun').textContent, r(n).dataset.state]);
             return v[0][0] === '1' && v[2][0] === '1' && v[2][1] === 'succeeded' ? v : null;",
        )
        .await;
    assert_eq!(
        reruns[1],
        json!(["0", "succeeded"]),
        "b is not a downstream of a"
    );
    // The Gantt has a bar per attempt of the current instances; a's is
    // its rerun's, which started after b's ended.
    let bars = b
        .wait_js(
            "the Gantt of the rerun",
            "const x = n => Number(document.querySelector(`rect.gantt-bar[data-node='${n}']`).getAttribute('x'));
             const bars = document.querySelectorAll('svg.gantt rect.gantt-bar');
             return bars.length === 4 && x('a') > x('b') ? bars.length : null;",
        )
        .await;
    assert_eq!(bars, json!(4));
    // The failing node's panel shows its stderr, as text.
    b.click("tr[data-node='bad'] th a").await;
    let stderr = b
        .wait_js(
            "bad's stderr in its panel",
            "const p = document.querySelector('#node-panel'); const l = document.querySelector('#log-lines');
             return p && l && l.textContent.includes('boom') ? p.innerText : null;",
        )
        .await;
    let stderr = stderr.as_str().unwrap();
    assert!(
        stderr.contains("boom: <b>disk</b> on fire"),
        "stderr shown as text: {stderr}"
    );
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#node-panel b').length;",
            vec![]
        )
        .await,
        json!(0),
        "no markup from the log"
    );
    let exit = b
        .js(
            "return document.querySelector(\"tr[data-node='bad'] td.exit\").textContent;",
            vec![],
        )
        .await;
    assert_eq!(exit, json!("3"), "the exit code is shown");
    b.shot("run-page").await;

    // Clear failed: bad runs again (and fails again: rerun 1).
    b.click("#act-clear").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "clear answer: {answer}");
    b.wait_js(
        "bad rerun and failed again",
        "const r = document.querySelector(\"tr[data-node='bad']\"); return r.querySelector('td.rerun').textContent === '1' && r.dataset.state === 'failed';",
    )
    .await;
    // Mark it succeeded: the run completes.
    b.click("tr[data-node='bad'] th a").await;
    b.click("#act-mark-succeeded").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "mark answer: {answer}");
    b.wait_js(
        "bad marked and the run complete",
        "return document.querySelector(\"tr[data-node='bad']\").dataset.state === 'succeeded' && !!document.querySelector(\"#run-head [data-state='complete']\");",
    )
    .await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_run_is_cancelled_from_its_page() {
    let Some(b) = browser("cancel").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let mut d = String::from(
        "name = \"slow\"\npartitioning = \"none\"\n[params]\nwho = \"ops\"\n[pools]\ndefault = 2\n",
    );
    d += &sh_node(
        "wait",
        &[],
        "",
        "echo first line; sleep 1; echo 'second <i>line</i>'; sleep 30",
    );
    d += &sh_node("after", &["wait"], "", "true");
    write_def(&defs, "slow", &d);
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    let a = engine.http().post(
        "/api/v1/graphs/slow/runs",
        &json!({"partitions": ["none"], "params": {"who": "<i>dev</i>"}}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    b.login(&engine.url, &engine.token).await;
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "slow", "none"])
    ))
    .await;
    b.wait_js(
        "wait running",
        "const r = document.querySelector(\"tr[data-node='wait']\"); return r && r.dataset.state === 'running';",
    )
    .await;
    // The run's params, as text.
    let param = b
        .wait_js(
            "the run's params",
            "const p = document.querySelector(\"#run-head [data-param='who']\"); return p && p.textContent;",
        )
        .await;
    assert_eq!(param, json!("who=<i>dev</i>"));
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#run-head i').length;",
            vec![]
        )
        .await,
        json!(0),
        "no markup from a param"
    );
    // Its panel follows the running attempt's log live.
    b.click("tr[data-node='wait'] th a").await;
    b.wait_js(
        "the log followed",
        "const s = document.querySelector('#log-status'); return s && s.dataset.following === 'true';",
    )
    .await;
    let log = b
        .wait_js(
            "the second line, live",
            "const l = document.querySelector('#log-lines'); return l && l.textContent.includes('second') ? l.textContent : null;",
        )
        .await;
    let log = log.as_str().unwrap();
    assert!(log.contains("first line"), "{log}");
    assert!(log.contains("second <i>line</i>"), "as text: {log}");
    assert_eq!(
        log.matches("first line").count(),
        1,
        "each line once: {log}"
    );
    b.click("#act-cancel").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "cancel answer: {answer}");
    let states = b
        .wait_js(
            "the run cancelled",
            "return document.querySelector(\"#run-head [data-state='cancelled']\") ? [...document.querySelectorAll('table.nodes tbody tr')].map(r => r.dataset.state) : null;",
        )
        .await;
    // The downstream of a cancelled node never ran: it shows cancelled,
    // not upstream_failed (#31 item 16).
    assert_eq!(states, json!(["cancelled", "cancelled"]), "{states}");
    assert!(
        b.js("return !document.querySelector('#act-cancel');", vec![])
            .await
            .as_bool()
            .unwrap(),
        "no cancel button on a settled run"
    );
    b.close().await;
}

const HOSTILE: &str = "<img src=x onerror=alert(1)>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_text_shows_as_text_and_actions_need_the_csrf_token() {
    let Some(b) = browser("escape").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("keys.txt"), format!("{HOSTILE}\nplain\n")).unwrap();
    let mut d = String::from(
        "name = \"keys\"\npartitioning = \"keyed\"\n[keyed]\ninventory = { file = \"keys.txt\" }\ninterval = \"1h\"\n[pools]\ndefault = 2\n",
    );
    d += &sh_node(
        "probe",
        &[],
        "",
        "echo '<script>window.__pwned = 1</script>'; printf '{\"html\": \"<img src=y onerror=window.__pwned=2>\"}' > \"$WEIR_OUTPUT\"",
    );
    write_def(&defs, "keys", &d);
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));

    // A wrong token is refused, and the session cookie is HttpOnly.
    b.goto(&format!("{}/", engine.url)).await;
    b.wait_js(
        "the login form",
        "return !!document.querySelector('#token');",
    )
    .await;
    b.fill("#token", "not-the-token").await;
    b.click("#login button[type=submit]").await;
    let err = b
        .wait_js(
            "the login error",
            "return document.querySelector('#login-error').textContent;",
        )
        .await;
    assert!(
        err.as_str().unwrap().contains("not one of this engine's"),
        "{err}"
    );
    b.login(&engine.url, &engine.token).await;
    assert_eq!(
        b.js("return document.cookie.includes('weir_session');", vec![])
            .await,
        json!(false),
        "the session cookie is not readable by scripts"
    );

    b.click(&format!("a[href=\"{}\"]", route(&["graph", "keys"])))
        .await;
    let key_text = b
        .wait_js(
            "the keys table",
            "const k = [...document.querySelectorAll('table.keys tbody tr')].map(r => r.dataset.key); return k.length === 2 ? k : null;",
        )
        .await;
    assert!(
        key_text.as_array().unwrap().contains(&json!(HOSTILE)),
        "{key_text}"
    );
    let cell = b
        .js(
            "return [...document.querySelectorAll('table.keys tbody th')].map(t => t.textContent);",
            vec![],
        )
        .await;
    assert!(cell.as_array().unwrap().contains(&json!(HOSTILE)));
    // Both keys run at inventory load; the grid has their columns.
    b.wait_js(
        "both keys' runs complete",
        "const c = [...document.querySelectorAll('table.grid thead th[data-partition] .sq')]; return c.length === 2 && c.every(s => s.dataset.state === 'complete');",
    )
    .await;
    // Signal the hostile key from its button.
    b.click(&format!(
        "tr[data-key=\"{}\"] button.signal",
        HOSTILE.replace('"', "\\\"")
    ))
    .await;
    b.click("#f-immediate").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "signal answer: {answer}");
    assert!(answer.contains(HOSTILE), "{answer}");

    // The hostile key's run: the output and the log are text.
    b.click("table.grid tbody td a.sq[aria-label^='probe in key=<img']")
        .await;
    b.wait_js(
        "the run page",
        "return document.querySelectorAll('table.nodes tbody tr').length === 1;",
    )
    .await;
    b.click("tr[data-node='probe'] th a").await;
    let shown = b
        .wait_js(
            "the probe's output and log",
            "const o = document.querySelector('#node-output'); const l = document.querySelector('#log-lines');
             return o && l && l.textContent.includes('script') ? [o.textContent, l.textContent, document.querySelector('h1').textContent] : null;",
        )
        .await;
    assert!(
        shown[0]
            .as_str()
            .unwrap()
            .contains("<img src=y onerror=window.__pwned=2>"),
        "{shown}"
    );
    assert!(
        shown[1]
            .as_str()
            .unwrap()
            .contains("<script>window.__pwned = 1</script>"),
        "{shown}"
    );
    assert!(shown[2].as_str().unwrap().contains(HOSTILE), "{shown}");
    let counts = b
        .js(
            "return [document.querySelectorAll('img').length, document.querySelectorAll('script').length, window.__pwned === undefined];",
            vec![],
        )
        .await;
    assert_eq!(
        counts,
        json!([0, 1, true]),
        "no element and no script from the engine's text ran"
    );
    b.shot("hostile-run").await;

    // An action with the cookie but without the anti-CSRF header is
    // refused; with the header (which the page reads from its session
    // route) it is done.
    let results = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             (async () => {
               const no = await fetch('/api/v1/graphs/keys/pause', {method: 'POST'});
               const noBody = await no.json();
               const g1 = await (await fetch('/api/v1/graphs/keys')).json();
               const wrong = await fetch('/api/v1/graphs/keys/pause', {method: 'POST', headers: {'x-weir-csrf': 'forged'}});
               const s = await (await fetch('/ui-session')).json();
               const yes = await fetch('/api/v1/graphs/keys/pause', {method: 'POST', headers: {'x-weir-csrf': s.csrf}});
               const g2 = await (await fetch('/api/v1/graphs/keys')).json();
               done([no.status, noBody.error.message, g1.summary.paused, wrong.status, yes.status, g2.summary.paused]);
             })();",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(results[0], json!(403), "{results}");
    assert!(
        results[1].as_str().unwrap().contains("x-weir-csrf"),
        "{results}"
    );
    assert_eq!(results[2], json!(false), "the refused pause did nothing");
    assert_eq!(results[3], json!(403), "a forged token is refused");
    assert_eq!(results[4], json!(200));
    assert_eq!(results[5], json!(true));
    b.close().await;
}

/// Opens `graph`'s page and the run page of `partition`, checking both
/// draw without an error; screenshots named `name`.
async fn check_example(b: &ui_support::Browser, url: &str, graph: &str, nodes: usize, name: &str) {
    b.goto(&format!("{url}/{}", route(&["graph", graph]))).await;
    b.wait_js(
        &format!("{graph}'s DAG"),
        &format!("return document.querySelectorAll('svg.dag g.dag-node').length === {nodes} && document.querySelectorAll('table.grid thead th[data-partition]').length > 0;"),
    )
    .await;
    let through = b.edges_through_boxes().await;
    assert!(
        through.is_empty(),
        "{graph}: edges under node boxes: {through:?}"
    );
    b.shot(&format!("{name}-graph")).await;
    b.click("table.grid thead th[data-partition] a").await;
    b.click("#dag p a").await;
    b.wait_js(
        &format!("{graph}'s run page"),
        &format!("return document.querySelectorAll('table.nodes tbody tr').length === {nodes} && document.querySelectorAll('svg.gantt rect.gantt-bar').length > 0;"),
    )
    .await;
    b.click("table.nodes tbody tr th a").await;
    b.wait_js(
        "the node panel",
        "return document.querySelector('#node-panel h2');",
    )
    .await;
    assert_eq!(
        b.js("return document.querySelector('#page-error');", vec![])
            .await,
        Value::Null
    );
    let faults = b.run_page_faults().await;
    assert!(
        faults.is_empty(),
        "{graph}'s run page at 1280 px: {faults:?}"
    );
    b.shot(&format!("{name}-run")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_pages_draw() {
    let Some(b) = browser("examples").await else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let tmp = tempfile::tempdir().unwrap();

    let etl = start(&["serve"], &root.join("etl"), &tmp.path().join("etl"));
    let http = etl.http();
    let a = http.post(
        "/api/v1/graphs/etl/backfills",
        &json!({"from": "2026-11-01", "to": "2026-11-02"}),
    );
    assert_eq!(a.status, 202, "{}", a.body);
    etl.wait_run("etl", "2026-11-02", "complete");
    etl.wait_run("etl", "2026-11-01", "complete");
    b.login(&etl.url, &etl.token).await;
    check_example(&b, &etl.url, "etl", 6, "etl").await;
    drop(etl);

    let fanout = start(&["serve"], &root.join("fanout"), &tmp.path().join("fanout"));
    let a = fanout.http().post(
        "/api/v1/graphs/fanout/runs",
        &json!({"partitions": ["none"]}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    fanout.wait_run("fanout", "none", "complete");
    b.login(&fanout.url, &fanout.token).await;
    let nodes = fanout.json(&["status", "fanout", "none"])["nodes"]
        .as_array()
        .unwrap()
        .len();
    check_example(&b, &fanout.url, "fanout", nodes, "fanout").await;
    drop(fanout);

    let hosts = start(&["serve"], &root.join("hosts"), &tmp.path().join("hosts"));
    wait_for("a hosts run", Duration::from_secs(30), || {
        let v = hosts
            .http()
            .get("/api/v1/runs?graph=hosts&state=complete&limit=1")
            .json();
        (!v["runs"].as_array()?.is_empty()).then_some(())
    });
    b.login(&hosts.url, &hosts.token).await;
    b.goto(&format!("{}/{}", hosts.url, route(&["graph", "hosts"])))
        .await;
    b.wait_js(
        "the hosts' keys",
        "return document.querySelectorAll('table.keys tbody tr').length >= 3;",
    )
    .await;
    // A keyed grid's columns name the key and the time it was due.
    let label = b
        .wait_js(
            "a keyed column's label",
            "const l = document.querySelector('table.grid thead .col-label'); return l && l.textContent;",
        )
        .await;
    let label = label.as_str().unwrap_or_default();
    assert!(
        label
            .split_once(' ')
            .is_some_and(|(_, t)| t.len() == 8 && t.as_bytes()[2] == b':'),
        "{label:?}"
    );
    check_example(&b, &hosts.url, "hosts", 2, "hosts").await;
    b.goto(&format!("{}/{}", hosts.url, route(&["queue"])))
        .await;
    b.wait_js(
        "the ssh breaker",
        "return !!document.querySelector(\"tr[data-target='ssh']\");",
    )
    .await;
    // flaky-1 spends its tries: its dead letter has a requeue button.
    let dead = b
        .wait_js(
            "a dead letter",
            "const r = document.querySelector('table.dead tbody tr'); return r && r.dataset.key;",
        )
        .await;
    assert!(dead.as_str().unwrap().contains("flaky-1"), "{dead}");
    b.shot("hosts-queue").await;
    b.click("table.dead tbody tr button").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "requeue answer: {answer}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_reconnects_and_the_page_follows_again() {
    let Some(b) = browser("reconnect").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(&defs, "six", &six_def());
    let data = tmp.path().join("data");
    let first = start(&["serve"], &defs, &data);
    let listen = first.url.trim_start_matches("http://").to_string();
    b.login(&first.url, &first.token).await;
    b.goto(&format!("{}/{}", first.url, route(&["graph", "six"])))
        .await;
    b.wait_js(
        "the live stream",
        "return document.querySelector('#live').dataset.state === 'live';",
    )
    .await;
    b.js("window.__kept = 'no reload'; return true;", vec![])
        .await;
    // kill -9: the stream drops.
    drop(first);
    b.wait_js(
        "the page to notice the drop",
        "return document.querySelector('#live').dataset.state === 'reconnecting';",
    )
    .await;
    // The engine comes back on the same address; the page reconnects by
    // itself (its resume id is from the old engine: it is told to reset,
    // and refetches).
    let second = start_on(&["serve"], &defs, &data, &listen);
    b.wait_js(
        "the stream back",
        "return document.querySelector('#live').dataset.state === 'live';",
    )
    .await;
    let a = second.http().post(
        "/api/v1/graphs/six/runs",
        &json!({"partitions": ["2026-11-05"]}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    b.wait_js(
        "the new run in the grid, without a reload",
        "const c = document.querySelector(\"table.grid thead th[data-partition='2026-11-05'] .sq\"); return c && c.dataset.state === 'complete';",
    )
    .await;
    assert_eq!(
        b.js("return window.__kept;", vec![]).await,
        json!("no reload")
    );
    b.close().await;
}

/// Copies `examples/NAME` into `dir` (its commands write beside their
/// definitions, which must not be the source tree's folder).
fn example_copy(name: &str, dir: &Path) -> std::path::PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    to
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_nodes_members_and_the_asset_lineage_show() {
    let Some(b) = browser("mapped").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = example_copy("orders", tmp.path());
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    let a = engine.http().post(
        "/api/v1/graphs/orders/runs",
        &json!({"partitions": ["2026-11-02"]}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    engine.wait_run("orders", "2026-11-02", "complete");
    // The asset started the summary of the week holding the day.
    engine.wait_run("summary", "2026-W45", "complete");
    b.login(&engine.url, &engine.token).await;
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "orders", "2026-11-02", "count"])
    ))
    .await;
    let members = b
        .wait_js(
            "the members of count",
            "const r = [...document.querySelectorAll('#members tbody tr')]; return r.length === 3 ? r.map(x => [x.dataset.member, x.dataset.state, x.querySelector('code').textContent]) : null;",
        )
        .await;
    assert_eq!(
        members,
        json!([
            ["0", "succeeded", "{\"name\":\"apac\"}"],
            ["1", "succeeded", "{\"name\":\"eu\"}"],
            ["2", "succeeded", "{\"name\":\"us\"}"]
        ])
    );
    // A member's logs.
    b.click("#members tbody tr[data-member='1'] td a").await;
    let log = b
        .wait_js(
            "member 1's log",
            "const l = document.querySelector('#member-log-lines'); return l && l.textContent.includes('orders') ? l.textContent : null;",
        )
        .await;
    assert!(log.as_str().unwrap().contains("eu: "), "{log}");
    b.shot("mapped-run").await;
    // At 1280 px the members table fits the panel, its Error column too.
    let faults = b.run_page_faults().await;
    assert!(faults.is_empty(), "orders' run page: {faults:?}");
    // The sensor's node shows its kind.
    let kinds = b
        .js(
            "return [...document.querySelectorAll('table.nodes tbody tr')].filter(r => r.querySelector('small.kind')).map(r => [r.dataset.node, r.querySelector('small.kind').textContent.trim()]);",
            vec![],
        )
        .await;
    assert_eq!(
        kinds,
        json!([
            ["landed", "sensor"],
            ["receiver_up", "sensor"],
            ["count", "mapped"]
        ])
    );
    // No edge of orders' DAG runs under a node's box (receiver_up →
    // publish crosses count's layer through a lane of its own).
    b.goto(&format!("{}/{}", engine.url, route(&["graph", "orders"])))
        .await;
    b.wait_js(
        "orders' DAG",
        "return !!document.querySelector('svg.dag path.dag-edge');",
    )
    .await;
    let through = b.edges_through_boxes().await;
    assert!(
        through.is_empty(),
        "orders: edges under node boxes: {through:?}"
    );
    b.shot("orders-graph").await;
    b.goto(&format!("{}/", engine.url)).await;
    let lineage = b
        .wait_js(
            "the asset lineage",
            "const r = document.querySelector(\"#assets tr[data-asset='orders.daily']\"); return r ? [...r.children].map(c => c.textContent.trim()) : null;",
        )
        .await;
    let cells: Vec<String> = serde_json::from_value(lineage).unwrap();
    assert_eq!(cells[0], "orders/publish");
    assert_eq!(cells[1], "→ orders.daily →");
    assert_eq!(cells[2], "summary");
    assert!(cells[3].starts_with("orders 2026-11-02"), "{cells:?}");
    b.shot("assets-lineage").await;
    b.close().await;
}

/// Issue #40: a node's panel lists its artifacts (name, size, the start
/// of the hash) as links, and a link fetches the artifact's bytes with the
/// session cookie alone (no token in the page): their blake3 hash is the
/// one listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_artifacts_are_listed_and_download_with_the_session() {
    let Some(b) = browser("artifacts").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(
        &defs,
        "fan",
        &artifacts_support::fan_graph("fan", 2, 100_000, ""),
    );
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    engine.ok(&["start", "fan", "2026-11-01"]);
    engine.wait_run("fan", "2026-11-01", "complete");
    let listed = engine.json(&["artifacts", "fan", "2026-11-01", "make"]);
    let want: Vec<(String, u64, String)> = listed["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["bytes"].as_u64().unwrap(),
                a["hash"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(want.len(), 2, "{listed}");

    b.login(&engine.url, &engine.token).await;
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "fan", "2026-11-01", "make"])
    ))
    .await;
    let rows = b
        .wait_js(
            "make's artifacts",
            "const r = [...document.querySelectorAll('#artifacts tbody tr')];
             return r.length === 2 ? r.map(x => [x.dataset.artifact, Number(x.children[1].dataset.bytes), x.children[1].textContent, x.querySelector('code').dataset.hash, x.querySelector('code').textContent, x.querySelector('a').getAttribute('download')]) : null;",
        )
        .await;
    let rows: Vec<(String, u64, String, String, String, String)> =
        serde_json::from_value(rows).unwrap();
    for (row, (name, bytes, hash)) in rows.iter().zip(&want) {
        assert_eq!((&row.0, row.1, &row.3), (name, *bytes, hash), "{rows:?}");
        assert_eq!(row.4, hash[..12], "the start of the hash is shown");
        assert_eq!(row.5, name.replace('/', "_"), "the file name it saves as");
    }
    assert_eq!(rows[0].2, "97.7 KiB");
    assert_eq!(rows[1].2, "11 B");
    b.js(
        "document.querySelector('#artifacts').scrollIntoView(); return true;",
        vec![],
    )
    .await;
    b.shot("artifacts").await;
    // At 1280 px the list fits the panel.
    let faults = b.run_page_faults().await;
    assert!(faults.is_empty(), "fan's run page: {faults:?}");

    // Each link, fetched as the browser follows it (the session cookie,
    // no token): the listed bytes.
    for (name, bytes, hash) in &want {
        b.js(
            "window.__dl = null;
             const a = document.querySelector(`#artifacts tr[data-artifact='${arguments[0]}'] a`);
             fetch(a.href, { credentials: 'same-origin' }).then(async (r) => {
               const buf = new Uint8Array(await r.arrayBuffer());
               window.__dl = [r.status, r.headers.get('content-disposition'), Array.from(buf, (x) => x.toString(16).padStart(2, '0')).join('')];
             }, (e) => { window.__dl = [0, String(e), ''] });
             return true;",
            vec![json!(name)],
        )
        .await;
        let got = b
            .wait_js(&format!("the download of {name}"), "return window.__dl;")
            .await;
        let (status, disposition, hex): (u16, String, String) =
            serde_json::from_value(got).unwrap();
        assert_eq!(status, 200, "{name}: {disposition}");
        assert!(
            disposition.starts_with("attachment"),
            "{name}: {disposition}"
        );
        let body: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(body.len() as u64, *bytes, "{name}");
        assert_eq!(blake3::hash(&body).to_hex().to_string(), *hash, "{name}");
    }
    // A node without artifacts shows no list.
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "fan", "2026-11-01", "join"])
    ))
    .await;
    b.wait_js(
        "join's panel",
        "const h = document.querySelector('#node-panel h2'); return h && h.textContent === 'Node join';",
    )
    .await;
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#artifacts').length;",
            vec![]
        )
        .await,
        json!(0)
    );
    b.close().await;
}

/// Issues #29 and #31: a zoned graph's runs show local instants with their
/// offsets, in the CLI and on the UI's pages (the 23-hour day of Berlin's
/// spring-forward; an hour named without its offset resolved in the
/// graph's zone, or refused with both names across a fall-back); the node
/// panel names the worker; an SLA miss is a badge on the run page and the
/// grid; "Start run…" lists the params with their defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_sla_workers_and_params_show_in_the_cli_and_the_ui() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let mut day = String::from(
        "name = \"berlin\"\npartitioning = \"daily\"\ntimezone = \"Europe/Berlin\"\ncron = \"30 2 * * *\"\n",
    );
    day += &sh_node("load", &[], "", "true");
    write_def(&defs, "berlin", &day);
    let mut hour =
        String::from("name = \"hours\"\npartitioning = \"hourly\"\ntimezone = \"Europe/Berlin\"\n");
    hour += &sh_node("load", &[], "", "true");
    write_def(&defs, "hours", &hour);
    let mut pr = String::from("name = \"pr\"\n[params]\nregion = \"eu\"\ntier = \"gold\"\n");
    pr += &sh_node("a", &[], "", "echo {params.region}");
    write_def(&defs, "pr", &pr);
    let mut late = String::from("name = \"late\"\n");
    late += &sh_node("slow", &[], "sla = \"100ms\"", "sleep 1");
    write_def(&defs, "late", &late);
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    engine.ok(&["start", "berlin", "2026-03-29"]);
    engine.ok(&["start", "late", "none"]);
    let status = wait_for("the run to complete", Duration::from_secs(30), || {
        let s = engine.ok(&["status", "berlin", "2026-03-29"]);
        s.contains("state complete").then_some(s)
    });
    assert!(
        status.contains(
            "window 2026-03-29T00:00:00+01:00 .. 2026-03-30T00:00:00+02:00 (23h00m, Europe/Berlin)"
        ),
        "{status}"
    );
    assert!(status.contains("started 2026-"), "{status}");
    let started = status
        .lines()
        .find(|l| l.starts_with("started "))
        .unwrap_or_default();
    assert!(
        started.contains("+01:00") || started.contains("+02:00"),
        "{started}"
    );
    // An hour without its offset is the zone's; a repeated one is refused.
    engine.ok(&["start", "hours", "2026-10-25T01"]);
    let runs = engine.ok(&["runs", "--graph", "hours"]);
    assert!(runs.contains("2026-10-25T01:00+02:00"), "{runs}");
    let refused = engine.cli(&["start", "hours", "2026-10-25T02"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{err}");
    assert!(
        err.contains("2026-10-25T02:00+02:00 or 2026-10-25T02:00+01:00"),
        "{err}"
    );

    let Some(b) = browser("zones").await else {
        return;
    };
    b.login(&engine.url, &engine.token).await;
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "berlin", "2026-03-29"])
    ))
    .await;
    let window = b
        .wait_js(
            "the run's window",
            "const w = document.querySelector('#run-window'); return w && w.textContent;",
        )
        .await;
    assert_eq!(
        window,
        json!("2026-03-29T00:00:00+01:00 .. 2026-03-30T00:00:00+02:00 (23 h 0 min, Europe/Berlin)")
    );
    let text = b.text().await;
    assert!(
        text.contains("+01:00") || text.contains("+02:00"),
        "requested and settled are local: {text}"
    );
    b.shot("zones-run").await;
    // The node panel names where the attempt ran.
    b.click("table.nodes tbody tr th a").await;
    let worker = b
        .wait_js(
            "the node panel's worker",
            "const w = document.querySelector('#node-worker'); return w && w.textContent;",
        )
        .await;
    assert_eq!(worker, json!("local"));
    b.goto(&format!("{}/{}", engine.url, route(&["graph", "berlin"])))
        .await;
    b.wait_js(
        "the graph's zone",
        "return document.body.textContent.includes('Europe/Berlin') && document.body.textContent.includes(':30:00+0');",
    )
    .await;

    // An SLA miss: a badge on the run page and in the grid's column head.
    engine.wait_run("late", "none", "complete");
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "late", "none"])
    ))
    .await;
    let sla = b
        .wait_js(
            "the run's SLA badge",
            "const s = document.querySelector('#run-sla .sla-badge'); return s && s.textContent;",
        )
        .await;
    assert!(
        sla.as_str()
            .is_some_and(|t| t.starts_with("missed: slow by ")),
        "{sla}"
    );
    // The attempts chart fits its box and shows every bar whole, at 1280
    // px and at a phone's width (#31 item 13).
    const FITS: &str = "const box = document.querySelector('#gantt'); const svg = box && box.querySelector('svg.gantt'); if (!svg) return null; const s = svg.getBoundingClientRect(); const bars = [...svg.querySelectorAll('rect.gantt-bar')]; return [s.width <= box.clientWidth + 1, bars.length, bars.every(r => { const b = r.getBoundingClientRect(); return b.width > 0 && b.left >= s.left && b.right <= s.right + 0.5; })];";
    assert_eq!(b.wait_js("the chart", FITS).await, json!([true, 1, true]));
    b.size(NARROW).await;
    b.goto(&format!(
        "{}/{}",
        engine.url,
        route(&["run", "late", "none"])
    ))
    .await;
    // Redrawn at the phone's width (a resize redraws it).
    b.wait_js(
        "the chart redrawn",
        "const svg = document.querySelector('#gantt svg.gantt'); return svg && Number(svg.getAttribute('width')) < 400;",
    )
    .await;
    assert_eq!(
        b.wait_js("the chart on a phone", FITS).await,
        json!([true, 1, true])
    );
    let widths = b
        .js(
            "const box = document.querySelector('#gantt'); return [document.documentElement.scrollWidth - window.innerWidth, box.getBoundingClientRect().right - window.innerWidth];",
            vec![],
        )
        .await;
    assert!(
        widths[0].as_f64().unwrap() <= 1.0 && widths[1].as_f64().unwrap() <= 0.5,
        "page and chart within a phone's width: {widths}"
    );
    b.shot("zones-gantt-narrow").await;
    b.size(WIDE).await;
    b.goto(&format!("{}/{}", engine.url, route(&["graph", "late"])))
        .await;
    b.wait_js(
        "the grid's SLA badge",
        "return document.querySelector(\"table.grid thead th[data-partition='none'] .sla-badge\");",
    )
    .await;
    b.shot("zones-sla-grid").await;

    // "Start run…" lists the graph's params with their defaults (#31
    // item 17); a changed one reaches the run, the others keep theirs.
    b.goto(&format!("{}/{}", engine.url, route(&["graph", "pr"])))
        .await;
    b.click("#act-start").await;
    let defaults = b
        .wait_js(
            "the params' fields",
            "const r = document.querySelector('#f-param-region'), t = document.querySelector('#f-param-tier'); return r && t ? [r.value, t.value] : null;",
        )
        .await;
    assert_eq!(defaults, json!(["eu", "gold"]));
    b.fill("#f-param-region", "us").await;
    let answer = b.confirm().await;
    assert!(answer.starts_with("true"), "start answer: {answer}");
    engine.wait_run("pr", "none", "complete");
    let run = engine.json(&["status", "pr", "none"]);
    assert_eq!(
        run["params"],
        json!({"region": "us", "tier": "gold"}),
        "{run}"
    );
    b.close().await;
}

/// A viewer's session shows no action, an operator's the actions on work
/// but not an admin's, and an admin's the audit page, listing what was done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_sees_only_its_actions_and_an_admin_the_audit_log() {
    let Some(b) = browser("roles").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let mut d = String::from("name = \"slow\"\npartitioning = \"none\"\n[pools]\ndefault = 2\n");
    d += &sh_node("wait", &[], "", "sleep 60");
    write_def(&defs, "slow", &d);
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));
    let viewer = engine.token("dash", "viewer", None);
    let operator = engine.token("oncall", "operator", None);
    let a = engine
        .http_as(&operator)
        .post("/api/v1/graphs/slow/runs", &json!({"partitions": ["none"]}));
    assert_eq!(a.status, 200, "{}", a.body);
    // The login page names the admin token's file to a browser on the
    // engine's machine (#31 item 12).
    b.goto(&format!("{}/", engine.url)).await;
    let hint = b
        .wait_js(
            "the token's path",
            "const c = document.querySelector('#token-path'); return c && c.textContent.startsWith('cat /') ? c.textContent : null;",
        )
        .await;
    assert_eq!(
        hint,
        json!(format!("cat {}", engine.data.join("token").display()))
    );
    let graph_page = format!("{}/{}", engine.url, route(&["graph", "slow"]));
    let run_page = format!("{}/{}", engine.url, route(&["run", "slow", "none"]));
    // (token, who, actions on the graph and run pages, the audit link)
    let cases = [
        (&viewer, "dash (viewer)", false, false),
        (&operator, "oncall (operator)", true, false),
        (&engine.token, "admin (admin)", true, true),
    ];
    for (token, who, acts, audit) in cases {
        b.login(&engine.url, token).await;
        let shown = b
            .wait_js(
                "whoami",
                "return document.querySelector('#whoami').textContent || null;",
            )
            .await;
        assert_eq!(shown, json!(who));
        b.goto(&graph_page).await;
        b.wait_js("the dag", "return !!document.querySelector('#dag svg');")
            .await;
        let buttons = b
            .js("return ['#act-pause', '#act-trigger', '#act-start'].map(s => !!document.querySelector(s));", vec![])
            .await;
        assert_eq!(
            buttons,
            json!([acts, acts, acts]),
            "{who} on the graph page"
        );
        b.goto(&run_page).await;
        b.wait_js(
            "the running node",
            "const r = document.querySelector(\"tr[data-node='wait']\"); return r && r.dataset.state === 'running';",
        )
        .await;
        let cancel = b
            .js("return !!document.querySelector('#act-cancel');", vec![])
            .await;
        assert_eq!(cancel, json!(acts), "{who} on the run page");
        let link = b
            .js(
                "return !document.querySelector('#nav-audit').hidden;",
                vec![],
            )
            .await;
        assert_eq!(link, json!(audit), "{who}: the audit link");
        if audit {
            b.click("#nav-audit").await;
            let rows = b
                .wait_js(
                    "the audit log",
                    "const r = [...document.querySelectorAll('#audit-body tr[data-who]')]; return r.length >= 3 ? r.map(x => x.dataset.who + ' ' + x.querySelector('code').textContent) : null;",
                )
                .await;
            let text = rows.to_string();
            assert!(
                text.contains("oncall POST /api/v1/graphs/slow/runs"),
                "{text}"
            );
            assert!(text.contains("admin POST /api/v1/tokens"), "{text}");
            b.shot("audit").await;
            b.fill("#audit-who", "oncall").await;
            b.click("#audit-filter button[type=submit]").await;
            b.wait_js(
                "the filtered log",
                "const r = [...document.querySelectorAll('#audit-body tr[data-who]')]; return r.length > 0 && r.every(x => x.dataset.who === 'oncall');",
            )
            .await;
        }
        b.click("#logout").await;
        b.wait_js("logged out", "return !!document.querySelector('#token');")
            .await;
    }
    b.close().await;
}

/// A replicated engine's UI, opened on a follower: the header names the
/// member and the leader, and after the leader is killed it names the new
/// one without a reload, while the page keeps working through the
/// follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_engines_ui_names_the_leader_and_follows_a_failover() {
    let Some(b) = browser("replicated").await else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let defs = replica_support::chain_defs(&dir, "0");
    let (mut g, leader) = tokio::task::spawn_blocking(move || {
        let g = replica_support::Group::start(&dir, &defs, 3, &[]);
        let leader = g.leader().unwrap();
        (g, leader)
    })
    .await
    .unwrap();
    let follower = *g.members.keys().find(|id| **id != leader).unwrap();
    let url = format!("http://{}", g.members[&follower].api);
    b.login(&url, &g.token).await;
    let shown = b
        .wait_js(
            "the leader in the header",
            "const l = document.querySelector('#leader'); return l && !l.hidden && l.textContent.includes('leader') ? l.textContent : null;",
        )
        .await;
    assert_eq!(
        shown,
        json!(format!(
            "member {follower} · leader {leader} (term {})",
            g.view(leader).unwrap()["term"]
        )),
    );
    assert!(
        b.text().await.contains("chain"),
        "the graphs page, through the follower"
    );
    b.shot("leader").await;
    // The Members page, from the nav: every member with its role.
    b.click("#nav-members").await;
    b.wait_js(
        "three members on the Members page",
        "return document.querySelectorAll('#members tr[data-member]').length === 3 ? true : null;",
    )
    .await;
    let roles = b
        .js(
            "return [...document.querySelectorAll('#members tr[data-member]')].map(r => r.dataset.member + ' ' + r.dataset.role);",
            vec![],
        )
        .await;
    let roles: Vec<String> = serde_json::from_value(roles).unwrap();
    assert!(roles.contains(&format!("{leader} leader")), "{roles:?}");
    assert_eq!(
        roles.iter().filter(|r| r.ends_with(" follower")).count(),
        2,
        "{roles:?}"
    );
    b.shot("members").await;
    let killed = leader;
    let mut g = tokio::task::spawn_blocking(move || {
        g.kill(killed);
        g.wait_leader(Duration::from_secs(15));
        g
    })
    .await
    .unwrap();
    let now = b
        .wait_js(
            "a new leader in the header",
            &format!(
                "const l = document.querySelector('#leader'); return l && l.dataset.leader && l.dataset.leader !== '{killed}' ? l.textContent : null;"
            ),
        )
        .await;
    let new_leader = g.leader().unwrap();
    assert!(
        now.as_str()
            .unwrap()
            .contains(&format!("leader {new_leader} ")),
        "{now}"
    );
    // The Members page follows the failover without a reload: the killed
    // member unreachable, the new one leading.
    b.wait_js(
        "the failover on the Members page",
        &format!(
            "const r = (id) => (document.querySelector(`#members tr[data-member='${{id}}']`) || {{dataset: {{}}}}).dataset.role; \
             return r('{killed}') === 'unreachable' && r('{new_leader}') === 'leader' ? true : null;"
        ),
    )
    .await;
    b.shot("members-failover").await;
    b.goto(&url).await;
    // The page still works: a run started from the CLI shows on it.
    let part = "2026-01-05";
    let r = g.api(
        "POST",
        "/api/v1/graphs/chain/runs",
        Some(&json!({"partitions": [part]})),
        Duration::from_secs(20),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    b.goto(&format!("{url}/{}", route(&["graph", "chain"])))
        .await;
    b.wait_js(
        "the run on the graph page",
        &format!("return document.body.innerText.includes('{part}') ? true : null;"),
    )
    .await;
    g.kill(new_leader);
    b.close().await;
}
