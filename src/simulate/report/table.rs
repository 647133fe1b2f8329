//! The report as text for a terminal: one row per graph, then breakers,
//! the queue and the pools.

use std::fmt::Write;

use super::{Figures, Report};

/// A duration in words, its two largest units: `17m57s`, `2h5m`, `1d3h`,
/// `850ms`.
pub fn words(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    let mut out = String::new();
    let mut rest = ms;
    let mut shown = 0;
    for (unit, name) in units {
        if rest >= unit || (shown == 1) {
            let n = rest / unit;
            rest %= unit;
            if n > 0 {
                out.push_str(&format!("{n}{name}"));
            }
            shown += 1;
            if shown == 2 {
                break;
            }
        }
    }
    out
}

fn late(ms: u64) -> String {
    words(ms)
}

fn row(name: &str, f: &Figures) -> [String; 11] {
    [
        name.to_string(),
        f.runs_started.to_string(),
        f.runs_completed.to_string(),
        f.runs_failed.to_string(),
        late(f.lateness_p50),
        late(f.lateness_p99),
        late(f.lateness_max),
        f.sla_misses.to_string(),
        f.retries.to_string(),
        f.deferrals.to_string(),
        f.dead.to_string(),
    ]
}

/// The report as a table.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "simulated {} of {} (seed {}): {} engine events",
        words(r.until_ms - r.from_ms),
        r.scenario,
        r.seed,
        r.events
    );
    let header = [
        "graph",
        "started",
        "completed",
        "failed",
        "late p50",
        "late p99",
        "late max",
        "sla miss",
        "retries",
        "deferred",
        "dead",
    ]
    .map(String::from);
    let mut rows = vec![header];
    for (g, gr) in &r.graphs {
        rows.push(row(g, &gr.figures));
    }
    if r.graphs.len() > 1 {
        rows.push(row("(all)", &r.totals));
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for (i, cells) in rows.iter().enumerate() {
        let line: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
        if i == 0 {
            let _ = writeln!(
                out,
                "{}",
                "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
            );
        }
    }
    for (g, gr) in &r.graphs {
        if gr.figures.runs_unsettled > 0 || gr.figures.runs_cancelled > 0 {
            let _ = writeln!(
                out,
                "{g}: {} runs still active at the span's end, {} cancelled",
                gr.figures.runs_unsettled, gr.figures.runs_cancelled
            );
        }
    }
    if r.breakers.is_empty() {
        let _ = writeln!(out, "breakers: none opened");
    } else {
        let _ = writeln!(out, "breakers open:");
        let mut per: std::collections::BTreeMap<&str, (u64, u64, u64, u64)> = Default::default();
        for b in &r.breakers {
            let e = per
                .entry(b.target.as_str())
                .or_insert((0, 0, b.from_ms, b.until_ms));
            e.0 += 1;
            e.1 += b.until_ms - b.from_ms;
            e.3 = e.3.max(b.until_ms);
        }
        for (target, (times, open_ms, first, last)) in per {
            let _ = writeln!(
                out,
                "  {target}: opened {times} time{}, {} open in all, between +{} and +{}",
                if times == 1 { "" } else { "s" },
                late(open_ms),
                words(first - r.from_ms),
                words(last - r.from_ms)
            );
        }
    }
    let _ = writeln!(
        out,
        "queue depth: at most {} tickets waiting",
        r.queue_depth_max
    );
    for (p, pr) in &r.pools {
        let _ = writeln!(
            out,
            "pool {p}: {} slots, {:.1}% busy on average, {:.1}% at the busiest {}",
            pr.slots,
            pr.utilisation_mean * 100.0,
            pr.utilisation_max * 100.0,
            words(r.bucket_ms)
        );
    }
    if r.engine_restarts > 0 || r.actor_restarts > 0 {
        let _ = writeln!(
            out,
            "restarts: the engine {} time{}, actors {} time{}",
            r.engine_restarts,
            if r.engine_restarts == 1 { "" } else { "s" },
            r.actor_restarts,
            if r.actor_restarts == 1 { "" } else { "s" }
        );
    }
    if r.leader_losses > 0 {
        let _ = writeln!(
            out,
            "leader lost {} time{}: {} of failover in all",
            r.leader_losses,
            if r.leader_losses == 1 { "" } else { "s" },
            words(r.failover_ms)
        );
    }
    for refused in &r.refused {
        let _ = writeln!(out, "refused input: {refused}");
    }
    if r.events_lagged > 0 {
        let _ = writeln!(
            out,
            "warning: {} events were missed; counts may be low",
            r.events_lagged
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn durations_in_two_units() {
        let cases = [
            (850, "850ms"),
            (1_000, "1s"),
            (61_000, "1m1s"),
            (1_077_000, "17m57s"),
            (3_600_000, "1h"),
            (7_500_000, "2h5m"),
            (97_200_000, "1d3h"),
            (86_400_000 + 5_000, "1d"),
        ];
        for (i, (ms, want)) in cases.iter().enumerate() {
            assert_eq!(words(*ms), *want, "#{i}: {ms} ms");
        }
    }
}
