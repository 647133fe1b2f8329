//! The report as one self-contained HTML page: the figures' table, a Gantt
//! of each graph's runs, the breakers' open intervals, the queue's depth
//! and each pool's utilisation, drawn as inline SVG. No script, no fetch:
//! it opens offline.

use std::fmt::Write;

use weir_core::duration::human_ms;

use super::table::words;
use super::{Report, RunRow};

/// Width of the charts' plot area, px.
const PLOT_W: f64 = 900.0;
/// Left margin for labels, px.
const LABEL_W: f64 = 160.0;

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// x of instant `t` in the plot.
fn x(r: &Report, t: u64) -> f64 {
    let span = (r.until_ms - r.from_ms).max(1) as f64;
    LABEL_W + (t.clamp(r.from_ms, r.until_ms) - r.from_ms) as f64 / span * PLOT_W
}

fn colour(state: &str) -> &'static str {
    match state {
        "complete" => "#3a7d44",
        "failed" => "#c0392b",
        "cancelled" => "#888888",
        _ => "#e0a800",
    }
}

/// Day ticks along the top of a chart `h` px high.
fn axis(out: &mut String, r: &Report, h: f64) {
    let day = 86_400_000u64;
    let span = r.until_ms - r.from_ms;
    let step = if span > 14 * day {
        7 * day
    } else if span >= 2 * day {
        day
    } else {
        3_600_000 * 6
    };
    let mut t = r.from_ms;
    while t <= r.until_ms {
        let px = x(r, t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="14" x2="{px:.1}" y2="{h:.1}" stroke="#ddd"/><text x="{px:.1}" y="11" font-size="10" text-anchor="middle">{}</text>"##,
            if t == r.from_ms {
                "start".to_string()
            } else {
                format!("+{}", human_ms(t - r.from_ms))
            }
        );
        t += step;
    }
}

fn gantt(out: &mut String, r: &Report, graph: &str, runs: &[RunRow]) {
    let row_h = if runs.len() > 60 { 3.0 } else { 12.0 };
    let h = 20.0 + row_h * runs.len() as f64 + 6.0;
    let _ = write!(
        out,
        r#"<h3>{} — runs</h3><svg width="{}" height="{h:.0}" xmlns="http://www.w3.org/2000/svg">"#,
        esc(graph),
        LABEL_W + PLOT_W + 10.0
    );
    axis(out, r, h);
    for (i, run) in runs.iter().enumerate() {
        let y = 20.0 + row_h * i as f64;
        let x0 = x(r, run.started_ms);
        let x1 = x(r, run.settled_ms.unwrap_or(r.until_ms)).max(x0 + 1.0);
        if row_h >= 10.0 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"#,
                LABEL_W - 4.0,
                y + row_h - 3.0,
                esc(&run.partition)
            );
        }
        let _ = write!(
            out,
            r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {}: {}</title></rect>"#,
            x1 - x0,
            (row_h - 1.0).max(1.0),
            colour(&run.state),
            esc(&run.partition),
            esc(&run.state),
            run.settled_ms
                .map(|s| format!(
                    "{} after its due time",
                    human_ms(s.saturating_sub(run.due_ms))
                ))
                .unwrap_or_else(|| "unsettled".into())
        );
    }
    out.push_str("</svg>");
}

/// A series of `values` (one per bucket) as a filled line, scaled to `max`.
fn series(out: &mut String, r: &Report, title: &str, values: &[f64], max: f64, label: &str) {
    let h = 110.0;
    let _ = write!(
        out,
        r#"<h3>{}</h3><svg width="{}" height="{h:.0}" xmlns="http://www.w3.org/2000/svg">"#,
        esc(title),
        LABEL_W + PLOT_W + 10.0
    );
    axis(out, r, h);
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="24" font-size="10" text-anchor="end">{}</text><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">0</text>"#,
        LABEL_W - 4.0,
        esc(label),
        LABEL_W - 4.0,
        h - 4.0
    );
    let n = values.len().max(1) as f64;
    let mut pts = format!("{LABEL_W:.1},{:.1}", h - 4.0);
    for (i, v) in values.iter().enumerate() {
        let y = h - 4.0 - (v / max.max(f64::MIN_POSITIVE)).min(1.0) * (h - 24.0);
        let x0 = LABEL_W + PLOT_W * i as f64 / n;
        let x1 = LABEL_W + PLOT_W * (i as f64 + 1.0) / n;
        let _ = write!(pts, " {x0:.1},{y:.1} {x1:.1},{y:.1}");
    }
    let _ = write!(pts, " {:.1},{:.1}", LABEL_W + PLOT_W, h - 4.0);
    let _ = write!(
        out,
        "<polygon points=\"{pts}\" fill=\"#8ab6d6\" stroke=\"#2c6e9e\"/></svg>"
    );
}

/// The page.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<!doctype html><html><head><meta charset="utf-8"><title>weir simulate: {}</title><style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}</style></head><body>"#,
        esc(&r.scenario)
    );
    let _ = write!(
        out,
        "<h1>weir simulate</h1><p>{} — seed {} — {:.1} virtual days — {} events</p>",
        esc(&r.scenario),
        r.seed,
        (r.until_ms - r.from_ms) as f64 / 86_400_000.0,
        r.events
    );
    out.push_str("<table><tr><th>graph</th><th>started</th><th>completed</th><th>failed</th><th>unsettled</th><th>late p50</th><th>late p99</th><th>late max</th><th>SLA misses</th><th>retries</th><th>deferred</th><th>dead</th></tr>");
    for (g, gr) in &r.graphs {
        let f = &gr.figures;
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(g),
            f.runs_started,
            f.runs_completed,
            f.runs_failed,
            f.runs_unsettled,
            words(f.lateness_p50),
            words(f.lateness_p99),
            words(f.lateness_max),
            f.sla_misses,
            f.retries,
            f.deferrals,
            f.dead
        );
    }
    out.push_str("</table>");
    for (g, gr) in &r.graphs {
        gantt(&mut out, r, g, &gr.runs);
        if gr.runs_omitted > 0 {
            let _ = write!(
                out,
                "<p>The first {} runs by start are drawn; {} more are in the figures only.</p>",
                gr.runs.len(),
                gr.runs_omitted
            );
        }
    }
    if !r.breakers.is_empty() {
        // One row per target, its intervals side by side.
        let mut targets: Vec<&str> = r.breakers.iter().map(|b| b.target.as_str()).collect();
        targets.dedup();
        targets.sort_unstable();
        targets.dedup();
        let h = 20.0 + 14.0 * targets.len() as f64;
        let _ = write!(
            out,
            r#"<h3>breakers open</h3><svg width="{}" height="{h:.0}" xmlns="http://www.w3.org/2000/svg">"#,
            LABEL_W + PLOT_W + 10.0
        );
        axis(&mut out, r, h);
        for (i, t) in targets.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"#,
                LABEL_W - 4.0,
                28.0 + 14.0 * i as f64,
                esc(t)
            );
        }
        for b in &r.breakers {
            let i = targets.iter().position(|t| *t == b.target).unwrap_or(0);
            let y = 18.0 + 14.0 * i as f64;
            let (x0, x1) = (x(r, b.from_ms), x(r, b.until_ms));
            let _ = write!(
                out,
                r##"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="11" fill="#c0392b"><title>{} open for {}</title></rect>"##,
                (x1 - x0).max(1.0),
                esc(&b.target),
                words(b.until_ms - b.from_ms)
            );
        }
        out.push_str("</svg>");
    }
    let depth: Vec<f64> = r.queue_depth.iter().map(|&d| d as f64).collect();
    let max = depth.iter().copied().fold(1.0, f64::max);
    series(
        &mut out,
        r,
        "queue depth (tickets waiting, highest per bucket)",
        &depth,
        max,
        &format!("{max:.0}"),
    );
    for (p, pr) in &r.pools {
        series(
            &mut out,
            r,
            &format!("pool {p}: utilisation of {} slots", pr.slots),
            &pr.utilisation,
            1.0,
            "100%",
        );
    }
    out.push_str("</body></html>\n");
    out
}
