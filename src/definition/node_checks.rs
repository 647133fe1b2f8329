//! The node-level checks of a definition file: upstreams, trigger rule,
//! pool, target, task (command, HTTP, sensor, registered task), mapping,
//! retry, timeout and templates, each fault naming the node and field.

use std::path::Path;

use weir_core::graph::{NodeDef, TaskSpec};
use weir_core::mapped::{MapSource, MapSpec};
use weir_core::names::Name;
use weir_core::retry::RetryPolicy;
use weir_core::sensor::{OnTimeout, SensorPolicy};
use weir_core::template::Place;
use weir_core::trigger::TriggerRule;

use crate::task::command::{CommandConfig, COMMAND_TASK};

use super::checks::{dur, field_msg};
use super::shapes::{HttpFile, NodeFile, RetryFile, SensorFile};

/// A sensor's waiting from its fields, over the defaults.
pub(super) fn sensor_policy(sn: &SensorFile) -> Result<SensorPolicy, Vec<String>> {
    let mut faults = Vec::new();
    let mut p = SensorPolicy::default();
    match dur("every", &sn.every) {
        Ok(Some(v)) => p.every_ms = v,
        Ok(None) => {}
        Err(e) => faults.push(e),
    }
    match dur("timeout", &sn.timeout) {
        Ok(Some(v)) => p.timeout_ms = v,
        Ok(None) => {}
        Err(e) => faults.push(e),
    }
    match sn.on_timeout.as_deref() {
        None | Some("fail") => {}
        Some("skip") => p.on_timeout = OnTimeout::Skip,
        Some(other) => faults.push(format!(
            "field on_timeout: {other:?} is not one of fail, skip"
        )),
    }
    if faults.is_empty() {
        if let Err(e) = p.validate() {
            faults.push(e);
        }
    }
    if faults.is_empty() {
        Ok(p)
    } else {
        Err(faults)
    }
}

/// A retry policy from its fields, over the defaults; every bad field is a
/// fault.
pub(super) fn retry_policy(r: &RetryFile) -> Result<RetryPolicy, Vec<String>> {
    let mut faults = Vec::new();
    let mut p = RetryPolicy::default();
    if let Some(v) = r.attempts {
        p.attempts_max = v;
    }
    let mut d = |field: &str, v: &Option<String>| {
        dur(field, v).unwrap_or_else(|e| {
            faults.push(e);
            None
        })
    };
    let initial = d("retry.initial", &r.initial);
    let max = d("retry.max", &r.max);
    let deadline = d("retry.deadline", &r.deadline);
    if let Some(v) = initial {
        p.initial_ms = v;
    }
    if let Some(v) = r.multiplier {
        p.multiplier = v;
    }
    if let Some(v) = max {
        p.max_ms = v;
    } else if p.max_ms < p.initial_ms {
        p.max_ms = p.initial_ms;
    }
    if let Some(v) = r.jitter {
        p.jitter = v;
    }
    p.deadline_ms = deadline;
    if faults.is_empty() {
        if let Err(e) = p.validate() {
            faults.push(format!("field retry: {e}"));
        }
    }
    if faults.is_empty() {
        Ok(p)
    } else {
        Err(faults)
    }
}

impl NodeFile {
    /// Every template of the node: its field (`command[2]`, `env.KEY`,
    /// `http.url`, …), its text and where it is rendered.
    pub(super) fn templates(&self) -> Vec<(String, String, Place)> {
        let mut out = Vec::new();
        for (i, a) in self.command.iter().flatten().enumerate() {
            out.push((format!("command[{i}]"), a.clone(), Place::Command));
        }
        for (k, v) in &self.env {
            out.push((format!("env.{k}"), v.clone(), Place::Command));
        }
        if let Some(h) = &self.http {
            out.push(("http.url".into(), h.url.clone(), Place::Http));
            for (k, v) in &h.headers {
                out.push((format!("http.headers.{k}"), v.clone(), Place::Http));
            }
            if let Some(b) = &h.body {
                out.push(("http.body".into(), b.clone(), Place::Http));
            }
        }
        if let Some(sn) = &self.sensor {
            if let Some(f) = &sn.file {
                out.push(("sensor.file".into(), f.clone(), Place::Command));
            }
            for (i, a) in sn.command.iter().flatten().enumerate() {
                out.push((format!("sensor.command[{i}]"), a.clone(), Place::Command));
            }
            if let Some(u) = &sn.http {
                out.push(("sensor.http".into(), u.clone(), Place::Http));
            }
        }
        out
    }

    /// The node's definition, or every fault of its fields.
    pub(super) fn into_node(self, dir: &Path) -> Result<NodeDef, Vec<String>> {
        let node = self.name.as_str();
        let mut faults: Vec<String> = Vec::new();
        let f = |field: &str, what: String| field_msg(node, field, what);
        let nname = Name::new(node).map_err(|e| faults.push(f("name", e.to_string())));
        let mut upstreams = Vec::new();
        for u in &self.upstreams {
            match Name::new(u.as_str()) {
                Ok(n) => upstreams.push(n),
                Err(e) => faults.push(f("upstreams", e.to_string())),
            }
        }
        if self.command.is_none()
            && (!self.artifacts.is_empty()
                || self.artifact_bytes_max.is_some()
                || self.artifacts_bytes_max.is_some())
        {
            faults.push(f(
                "artifacts",
                "artifacts belong to command nodes: the command writes them under $WEIR_ARTIFACTS_OUT".into(),
            ));
        }
        let task = match (&self.command, &self.task, &self.http, &self.sensor) {
            (None, None, None, Some(sn)) => self.sensor_task(sn, dir, &mut faults),
            (_, _, _, Some(_)) => {
                faults.push(f(
                    "sensor",
                    "a sensor node checks its condition itself: give sensor without command, task or http".into(),
                ));
                None
            }
            (None, None, Some(h), None) => self.http_task(h, &mut faults),
            (_, _, Some(_), None) => {
                faults.push(f("http", "give one of command, task or http".into()));
                None
            }
            (Some(argv), None, None, None) => self.command_task(argv, dir, &mut faults),
            (None, Some(t), None, None) => {
                if !self.permanent_exit_codes.is_empty()
                    || !self.env.is_empty()
                    || self.cwd.is_some()
                {
                    faults.push(f(
                        "task",
                        "permanent_exit_codes, env and cwd belong to command nodes".into(),
                    ));
                }
                let config = match &self.config {
                    None => Some(serde_json::Value::Null),
                    Some(v) => serde_json::to_value(v)
                        .map_err(|e| faults.push(f("config", e.to_string())))
                        .ok(),
                };
                let task = Name::new(t.as_str())
                    .map_err(|e| faults.push(f("task", e.to_string())))
                    .ok();
                task.zip(config)
                    .map(|(task, config)| TaskSpec { task, config })
            }
            (Some(_), Some(_), None, None) => {
                faults.push(f("task", "give command or task, not both".into()));
                None
            }
            (None, None, None, None) => {
                faults.push(f(
                    "command",
                    "a node needs a command (argv), an http call, a sensor or a task".into(),
                ));
                None
            }
        };
        let trigger_rule = match &self.trigger_rule {
            None => TriggerRule::default(),
            Some(r) => r.parse::<TriggerRule>().unwrap_or_else(|e| {
                faults.push(f("trigger_rule", e.to_string()));
                TriggerRule::default()
            }),
        };
        let pool = self.pool.as_ref().and_then(|p| {
            Name::new(p.as_str())
                .map_err(|e| faults.push(f("pool", e.to_string())))
                .ok()
        });
        let target = self.target.as_ref().and_then(|t| {
            Name::new(t.as_str())
                .map_err(|e| faults.push(f("target", e.to_string())))
                .ok()
        });
        let sla_ms = match dur("sla", &self.sla) {
            Ok(Some(0)) => {
                faults.push(field_msg(node, "sla", "must be above 0"));
                None
            }
            Ok(v) => v,
            Err(e) => {
                faults.push(format!("node {node:?}: {e}"));
                None
            }
        };
        let timeout_ms = dur("timeout", &self.timeout).unwrap_or_else(|e| {
            faults.push(format!("node {node:?}: {e}"));
            None
        });
        let priority = match self.priority {
            None => 0,
            Some(p) => i32::try_from(p).unwrap_or_else(|_| {
                faults.push(f(
                    "priority",
                    format!("{p} is outside {}..={}", i32::MIN, i32::MAX),
                ));
                0
            }),
        };
        let map = match (&self.map_over, &self.items) {
            (Some(_), Some(_)) => {
                faults.push(f("items", "give map_over or items, not both".into()));
                None
            }
            (Some(u), None) => Name::new(u.as_str())
                .map_err(|e| faults.push(f("map_over", e.to_string())))
                .ok()
                .map(|n| MapSpec::new(MapSource::Upstream(n))),
            (None, Some(items)) => {
                let values: Result<Vec<serde_json::Value>, _> =
                    items.iter().map(serde_json::to_value).collect();
                match values {
                    Ok(v) => match weir_core::mapped::check_items(&v) {
                        Ok(()) => Some(MapSpec::new(MapSource::Items(v))),
                        Err(e) => {
                            faults.push(f("items", e.to_string()));
                            None
                        }
                    },
                    Err(e) => {
                        faults.push(f("items", e.to_string()));
                        None
                    }
                }
            }
            (None, None) => None,
        };
        let map = match (map, self.max_active_members) {
            (Some(mut m), Some(n)) => {
                if n == 0 {
                    faults.push(f("max_active_members", "must be at least 1".into()));
                }
                m.max_active_members = n;
                Some(m)
            }
            (None, Some(_)) => {
                faults.push(f(
                    "max_active_members",
                    "belongs to a mapped node (one with map_over or items)".into(),
                ));
                None
            }
            (m, None) => m,
        };
        let mut produces = Vec::new();
        for a in &self.produces {
            match Name::new(a.as_str()) {
                Ok(n) if produces.contains(&n) => faults.push(f(
                    "produces",
                    format!("asset {a:?} is listed more than once"),
                )),
                Ok(n) => produces.push(n),
                Err(e) => faults.push(f("produces", e.to_string())),
            }
        }
        let sensor = self.sensor.as_ref().and_then(|sn| {
            sensor_policy(sn)
                .map_err(|e| faults.extend(e.into_iter().map(|e| f("sensor", e))))
                .ok()
        });
        let retry = self.retry.as_ref().map(|r| {
            retry_policy(r).unwrap_or_else(|e| {
                faults.extend(e.into_iter().map(|e| format!("node {node:?}: {e}")));
                RetryPolicy::default()
            })
        });
        match (nname, task) {
            (Ok(nname), Some(task)) if faults.is_empty() => {
                let mut def = NodeDef::new(nname, upstreams, task);
                def.trigger_rule = trigger_rule;
                if let Some(p) = pool {
                    def.pool = p;
                }
                def.target = target;
                def.timeout_ms = timeout_ms;
                if sensor.is_some() && timeout_ms.is_none() {
                    // A check that hangs must not wait out the sensor.
                    def.timeout_ms = Some(crate::task::sensor::CHECK_TIMEOUT_MS_DEFAULT);
                }
                def.priority = priority;
                def.sla_ms = sla_ms;
                def.map = map;
                def.sensor = sensor;
                def.produces = produces;
                if let Some(r) = retry {
                    def.retry = r;
                }
                Ok(def)
            }
            _ => Err(faults),
        }
    }

    /// An HTTP node's task: its call, checked.
    pub(super) fn http_task(&self, h: &HttpFile, faults: &mut Vec<String>) -> Option<TaskSpec> {
        let node = self.name.as_str();
        let before = faults.len();
        if !self.permanent_exit_codes.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
            faults.push(field_msg(
                node,
                "http",
                "permanent_exit_codes, env and cwd belong to command nodes",
            ));
        }
        if self.config.is_some() {
            faults.push(field_msg(node, "config", "an http node takes no config"));
        }
        let config = crate::task::http::HttpConfig {
            method: h
                .method
                .clone()
                .unwrap_or_else(|| "GET".into())
                .to_uppercase(),
            url: h.url.clone(),
            headers: h.headers.clone(),
            body: h.body.clone(),
            expect: h
                .expect
                .map_or(weir_core::http::EXPECT_DEFAULT, |[lo, hi]| (lo, hi)),
        };
        for fault in crate::task::http::check(&config) {
            faults.push(field_msg(node, "http", fault));
        }
        if faults.len() > before {
            return None;
        }
        let value = serde_json::to_value(&config)
            .map_err(|e| faults.push(field_msg(node, "http", e.to_string())))
            .ok()?;
        Some(TaskSpec {
            task: Name::new(crate::task::http::HTTP_TASK).ok()?,
            config: value,
        })
    }

    /// A command node's task: its argv, env and working directory, checked.
    pub(super) fn command_task(
        &self,
        argv: &[String],
        dir: &Path,
        faults: &mut Vec<String>,
    ) -> Option<TaskSpec> {
        let node = self.name.as_str();
        let before = faults.len();
        if argv.is_empty() {
            faults.push(field_msg(
                node,
                "command",
                "the argv is empty: give at least the program",
            ));
        }
        if argv.iter().any(|a| a.contains('\0')) {
            faults.push(field_msg(node, "command", "an argument holds a NUL byte"));
        }
        if self.config.is_some() {
            faults.push(field_msg(
                node,
                "config",
                "a command node takes no config (use env)",
            ));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                faults.push(field_msg(
                    node,
                    "env",
                    format!("key {k:?}: a variable name is not empty and holds no '=' or NUL"),
                ));
            }
            if v.contains('\0') {
                faults.push(field_msg(
                    node,
                    "env",
                    format!("the value of {k:?} holds a NUL byte"),
                ));
            }
        }
        let cwd = match &self.cwd {
            Some(c) => {
                let p = dir.join(c);
                if !p.is_dir() {
                    faults.push(field_msg(
                        node,
                        "cwd",
                        format!(
                            "{} is not a directory (a relative cwd is relative to the definition's folder)",
                            p.display()
                        ),
                    ));
                }
                p
            }
            None => dir.to_path_buf(),
        };
        if let Err(e) = weir_core::artifact::Patterns::new(&self.artifacts) {
            faults.push(field_msg(node, "artifacts", e));
        }
        let mut limits = weir_core::artifact::Limits::default();
        for (field, value, into) in [
            (
                "artifact_bytes_max",
                &self.artifact_bytes_max,
                &mut limits.bytes_max,
            ),
            (
                "artifacts_bytes_max",
                &self.artifacts_bytes_max,
                &mut limits.node_bytes_max,
            ),
        ] {
            if let Some(v) = value {
                match weir_core::artifact::parse_bytes(v) {
                    Ok(0) => faults.push(field_msg(node, field, "must be above 0")),
                    Ok(n) => *into = n,
                    Err(e) => faults.push(field_msg(node, field, e)),
                }
                if self.artifacts.is_empty() {
                    faults.push(field_msg(node, field, "the node declares no artifacts"));
                }
            }
        }
        if faults.len() > before {
            return None;
        }
        let config = CommandConfig {
            argv: argv.to_vec(),
            permanent_exit_codes: self.permanent_exit_codes.clone(),
            env: self.env.clone(),
            cwd: cwd.to_string_lossy().into_owned(),
            artifacts: self.artifacts.clone(),
            artifact_limits: (!self.artifacts.is_empty()
                && limits != weir_core::artifact::Limits::default())
            .then_some(limits),
        };
        match serde_json::to_value(&config) {
            Ok(config) => Some(TaskSpec {
                task: Name::new(COMMAND_TASK).expect("valid"),
                config,
            }),
            Err(e) => {
                faults.push(field_msg(node, "command", e));
                None
            }
        }
    }
}

impl NodeFile {
    /// A sensor node's task: its check, checked.
    pub(super) fn sensor_task(
        &self,
        sn: &SensorFile,
        dir: &Path,
        faults: &mut Vec<String>,
    ) -> Option<TaskSpec> {
        use crate::task::sensor::{SensorCheck, SensorConfig, SENSOR_TASK};
        let node = self.name.as_str();
        let before = faults.len();
        if !self.permanent_exit_codes.is_empty() || !self.env.is_empty() || self.config.is_some() {
            faults.push(field_msg(
                node,
                "sensor",
                "permanent_exit_codes, env and config belong to command and task nodes",
            ));
        }
        let check = match (&sn.file, &sn.command, &sn.http) {
            (Some(f), None, None) => {
                if sn.status.is_some() {
                    faults.push(field_msg(node, "sensor.status", "belongs to an http check"));
                }
                if f.is_empty() {
                    faults.push(field_msg(node, "sensor.file", "the path is empty"));
                }
                Some(SensorCheck::File { path: f.clone() })
            }
            (None, Some(argv), None) => {
                if sn.status.is_some() {
                    faults.push(field_msg(node, "sensor.status", "belongs to an http check"));
                }
                if argv.is_empty() {
                    faults.push(field_msg(
                        node,
                        "sensor.command",
                        "the argv is empty: give at least the program",
                    ));
                }
                if argv.iter().any(|a| a.contains('\0')) {
                    faults.push(field_msg(
                        node,
                        "sensor.command",
                        "an argument holds a NUL byte",
                    ));
                }
                Some(SensorCheck::Command { argv: argv.clone() })
            }
            (None, None, Some(url)) => {
                let status = sn.status.unwrap_or(200);
                if !(100..=599).contains(&status) {
                    faults.push(field_msg(
                        node,
                        "sensor.status",
                        format!("{status} is not an HTTP status (100..=599)"),
                    ));
                }
                for fault in crate::task::sensor::check_url(url) {
                    faults.push(field_msg(node, "sensor.http", fault));
                }
                Some(SensorCheck::Http {
                    url: url.clone(),
                    status,
                })
            }
            _ => {
                faults.push(field_msg(
                    node,
                    "sensor",
                    "give exactly one check: file = \"path\", command = [\"program\", …] or http = \"url\"",
                ));
                None
            }
        };
        let cwd = match &self.cwd {
            Some(c) => {
                let p = dir.join(c);
                if !p.is_dir() {
                    faults.push(field_msg(
                        node,
                        "cwd",
                        format!(
                            "{} is not a directory (a relative cwd is relative to the definition's folder)",
                            p.display()
                        ),
                    ));
                }
                p
            }
            None => dir.to_path_buf(),
        };
        if faults.len() > before {
            return None;
        }
        let config = SensorConfig {
            check: check?,
            cwd: cwd.to_string_lossy().into_owned(),
        };
        match serde_json::to_value(&config) {
            Ok(config) => Some(TaskSpec {
                task: Name::new(SENSOR_TASK).expect("valid"),
                config,
            }),
            Err(e) => {
                faults.push(field_msg(node, "sensor", e));
                None
            }
        }
    }
}
