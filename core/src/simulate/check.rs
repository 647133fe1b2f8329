//! `--check` expressions: `METRIC OP VALUE`, where METRIC is a report
//! figure (`sla_misses`, `dead`, `lateness_p99`, …) over all graphs, or
//! `GRAPH.METRIC` for one graph; OP is one of `== != < <= > >=`; VALUE is
//! a number or a duration (`10m`, `1.5s`, `250ms`, `2h`, `1d`), durations
//! being compared in ms. A user's CI gates a definition change on them.

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    /// How it is written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// A parsed check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// As the user wrote it.
    pub text: String,
    /// The graph it is about; none: the totals.
    pub graph: Option<String>,
    /// The figure.
    pub metric: String,
    /// The comparison.
    pub op: Op,
    /// The value compared with (durations in ms).
    pub value: f64,
}

impl Check {
    /// Whether `actual` passes.
    pub fn holds(&self, actual: f64) -> bool {
        match self.op {
            Op::Eq => actual == self.value,
            Op::Ne => actual != self.value,
            Op::Lt => actual < self.value,
            Op::Le => actual <= self.value,
            Op::Gt => actual > self.value,
            Op::Ge => actual >= self.value,
        }
    }
}

/// Parses a check; the error says what is wrong with it.
pub fn parse(text: &str) -> Result<Check, String> {
    let t = text.trim();
    // Two-character operators first, so `<=` is not read as `<`.
    let ops = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    let (at, sym, op) = ops
        .iter()
        .filter_map(|(s, op)| t.find(s).map(|at| (at, *s, *op)))
        .min_by_key(|(at, s, _)| (*at, std::cmp::Reverse(s.len())))
        .ok_or_else(|| format!("check {text:?}: no comparison (one of == != < <= > >=)"))?;
    let left = t[..at].trim();
    let right = t[at + sym.len()..].trim();
    if left.is_empty() {
        return Err(format!("check {text:?}: no figure before {sym:?}"));
    }
    if right.is_empty() {
        return Err(format!("check {text:?}: no value after {sym:?}"));
    }
    let value = parse_value(right).ok_or_else(|| {
        format!("check {text:?}: {right:?} is neither a number nor a duration (10m, 1.5s, 250ms)")
    })?;
    let (graph, metric) = match left.rsplit_once('.') {
        Some((g, m)) => (Some(g.to_string()), m),
        None => (None, left),
    };
    let well_formed = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    if !well_formed(metric) || graph.as_deref().is_some_and(|g| !well_formed(g)) {
        return Err(format!(
            "check {text:?}: {left:?} is not a figure (METRIC or GRAPH.METRIC)"
        ));
    }
    Ok(Check {
        text: text.to_string(),
        graph,
        metric: metric.to_string(),
        op,
        value,
    })
}

/// A number, or a duration in ms.
pub fn parse_value(s: &str) -> Option<f64> {
    if let Ok(v) = s.parse::<f64>() {
        return v.is_finite().then_some(v);
    }
    parse_duration_ms(s)
}

/// A duration in words (`10m`, `1.5s`, `250ms`, `2h`, `1d`) in ms.
pub fn parse_duration_ms(s: &str) -> Option<f64> {
    let units = [
        ("ms", 1.0),
        ("s", 1_000.0),
        ("m", 60_000.0),
        ("h", 3_600_000.0),
        ("d", 86_400_000.0),
    ];
    for (unit, ms) in units {
        if let Some(n) = s.strip_suffix(unit) {
            if let Ok(v) = n.trim().parse::<f64>() {
                if v.is_finite() && v >= 0.0 {
                    return Some(v * ms);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an expression parses to: graph, figure, comparison, value.
    type Parsed = (Option<&'static str>, &'static str, Op, f64);

    /// One row per expression: what it parses to, or that it is refused.
    #[test]
    fn expressions_table() {
        let cases: &[(&str, Option<Parsed>)] = &[
            ("sla_misses == 0", Some((None, "sla_misses", Op::Eq, 0.0))),
            ("dead==0", Some((None, "dead", Op::Eq, 0.0))),
            (
                "lateness_p99 < 10m",
                Some((None, "lateness_p99", Op::Lt, 600_000.0)),
            ),
            (
                "lateness_max <= 1.5s",
                Some((None, "lateness_max", Op::Le, 1_500.0)),
            ),
            ("retries >= 3", Some((None, "retries", Op::Ge, 3.0))),
            ("runs_failed != 2", Some((None, "runs_failed", Op::Ne, 2.0))),
            (
                "etl.sla_misses > 0",
                Some((Some("etl"), "sla_misses", Op::Gt, 0.0)),
            ),
            (
                "my.graph.dead < 250ms",
                Some((Some("my.graph"), "dead", Op::Lt, 250.0)),
            ),
            ("sla_misses", None),
            ("== 0", None),
            ("dead ==", None),
            ("dead == lots", None),
            ("de ad == 0", None),
            ("dead == -1m", None),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let got = parse(text);
            match (want, &got) {
                (None, Err(_)) => {}
                (Some((g, m, op, v)), Ok(c)) => {
                    assert_eq!(
                        (c.graph.as_deref(), c.metric.as_str(), c.op, c.value),
                        (*g, *m, *op, *v),
                        "#{i}: {text:?}"
                    );
                }
                _ => panic!("#{i}: {text:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn comparisons_hold_as_written() {
        let c = |t: &str| parse(t).unwrap();
        assert!(c("dead == 0").holds(0.0));
        assert!(!c("dead == 0").holds(1.0));
        assert!(c("lateness_p99 < 10m").holds(599_999.0));
        assert!(!c("lateness_p99 < 10m").holds(600_000.0));
        assert!(c("lateness_p99 <= 10m").holds(600_000.0));
        assert!(c("retries > 2").holds(3.0));
        assert!(c("retries != 2").holds(3.0));
        assert!(c("retries >= 3").holds(3.0));
    }
}
