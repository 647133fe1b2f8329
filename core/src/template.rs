//! Templates in task configs: `{partition}`, `{partition.start}`,
//! `{upstream.extract.output.rows}`, `{params.region}` and the like, in a
//! command's argv elements and env values and in an HTTP call's URL,
//! headers and body.
//!
//! A template is parsed into literal text and references
//! ([`Template::parse`]) when its definition is validated, and every
//! reference is checked against the graph there ([`Template::check`]: the
//! node is an upstream of this one, the param is declared, the graph has
//! time windows), so `weir validate` names every bad reference with its
//! line. An attempt renders the template ([`Template::render`]) from a
//! [`Scope`] built from its ticket's payload alone — graph, partition,
//! node, attempt, run id, the upstreams' records and outputs, the run's
//! params — so rendering is a pure function of (template, scope) and runs
//! the same on a worker that holds no definition file. The stored
//! definition keeps the template as written (the text is what its content
//! hash covers); a worker parses the same text again, which gives the same
//! segments.
//!
//! Substitution is literal and happens once: a value is inserted as text
//! and never read as a template again, so a partition holding `{node}` or
//! an output holding `; rm -rf /` stays that text, and a rendered argv
//! element stays one argv element whatever it holds (no shell is
//! involved). A `{` that does not open a reference is literal text
//! (`{"day": 1}`, `{print $1}`, `${HOME}`), as it was when the five
//! original names were the only ones; a `{` followed by a reference's name
//! (`{partition.`, `{upstream.`, `{params.`) opens one, and a malformed one
//! is an error rather than text. There is no escape: a literal
//! `{partition}` cannot be written.
//!
//! The names: `{graph}`, `{partition}` (as written: `2026-11-29`,
//! `key=db1@…`), `{partition.start}` and `{partition.end}` (RFC 3339, of a
//! time window; the end is the first instant after it), `{partition.key}`
//! (a keyed run's key), `{node}`, `{attempt}` (1 for the first),
//! `{run_id}`, `{upstream.NODE.output}` (the output's text, trailing
//! newlines removed, as a shell's `$(…)` does) and
//! `{upstream.NODE.output.a.b[0]}` (a JSON path into the output: `.key`,
//! `["any key"]`, `[index]`; a string is inserted without quotes, anything
//! else as compact JSON), `{params.NAME}`; an HTTP call also has
//! `${env:NAME}`, read from the engine's environment at each attempt. A
//! node whose name holds a dot is written `{upstream["etl.v2"].output}`.
//! A mapped node's member also has `{item}` (its item: a string without
//! quotes, anything else as compact JSON) and `{item.field}`,
//! `{item[0]}` (a JSON path into it), which only a mapped node may write.
//! An unknown root is literal text.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use crate::partition::{Partition, Partitioning};
use crate::zone::Zone;

/// The most steps of one JSON path.
pub const PATH_STEPS_MAX: usize = 32;
/// The most references in one template.
pub const REFERENCES_MAX: usize = 256;
/// The longest argv element or env value a rendering may give: Linux's
/// `MAX_ARG_STRLEN` (128 KiB) less its terminating NUL.
pub const ARG_BYTES_MAX: usize = (128 << 10) - 1;

/// Where a template sits, for what it may hold: `${env:NAME}` is read only
/// in an HTTP call, where secrets belong in headers; a command gets the
/// engine's environment already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A command's argv element or env value.
    Command,
    /// An HTTP call's URL, header value or body.
    Http,
}

/// How a value is written into the text around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// As it is.
    None,
    /// Percent-encoded but for RFC 3986's unreserved characters, for a
    /// value inside a URL. `${env:NAME}` is inserted as it is.
    Url,
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// An object's member: `.key` or `["key"]`.
    Key(String),
    /// An array's element: `[0]`.
    Index(usize),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Key(k) if is_plain_key(k) => write!(f, ".{k}"),
            Step::Key(k) => write!(f, "[{}]", serde_json::Value::String(k.clone())),
            Step::Index(i) => write!(f, "[{i}]"),
        }
    }
}

fn path_text(path: &[Step]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// What a reference names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    /// `{graph}`.
    Graph,
    /// `{partition}`, as written.
    Partition,
    /// `{partition.start}`: a time window's first instant, RFC 3339.
    PartitionStart,
    /// `{partition.end}`: the first instant after a time window, RFC 3339.
    PartitionEnd,
    /// `{partition.start_utc}`: `{partition.start}` in UTC (`…Z`).
    PartitionStartUtc,
    /// `{partition.end_utc}`: `{partition.end}` in UTC (`…Z`).
    PartitionEndUtc,
    /// `{partition.key}`: a keyed run's key.
    PartitionKey,
    /// `{node}`.
    Node,
    /// `{attempt}`, 1 for the first.
    Attempt,
    /// `{run_id}`.
    RunId,
    /// `{upstream.NODE.output…}`: an upstream's output, whole or at a JSON
    /// path.
    Output {
        /// The upstream.
        node: String,
        /// The path into its output as JSON; empty: the output's text.
        path: Vec<Step>,
    },
    /// `{upstream.NODE.artifact.NAME}`: the local path of an upstream's
    /// artifact, fetched before the attempt.
    Artifact {
        /// The upstream.
        node: String,
        /// The artifact's name (`raw.csv`, `reports/a.html`, `3/raw.csv`
        /// for member 3 of a mapped upstream).
        name: String,
    },
    /// `{params.NAME}`.
    Param(String),
    /// `${env:NAME}` (HTTP calls only).
    Env(String),
    /// `{item…}`: a mapped node's member's item, whole or at a JSON path.
    Item {
        /// The path into the item; empty: the item itself.
        path: Vec<Step>,
    },
}

/// A piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Literal text.
    Text(String),
    /// A reference, with its text as written (for messages).
    Ref(Ref, String),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    segments: Vec<Segment>,
}

/// Why a template does not parse: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The template.
    pub template: String,
    /// The byte offset of the reference at fault.
    pub at: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "template {:?}, at byte {}: {}",
            self.template, self.at, self.what
        )
    }
}

impl std::error::Error for ParseError {}

/// Why a template does not render at an attempt: the template and the
/// reference, and what the scope lacks. Permanent: the same payload fails
/// the same way again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    /// The template, as written.
    pub template: String,
    /// The reference at fault, as written.
    pub reference: String,
    /// What is missing or wrong.
    pub what: String,
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "template {:?}: {}: {}",
            self.template, self.reference, self.what
        )
    }
}

impl std::error::Error for RenderError {}

/// An upstream as a rendering sees it.
#[derive(Debug, Clone, Copy)]
pub struct Upstream<'a> {
    /// How it ended, as records name it (`succeeded`, `failed`, …).
    pub status: &'a str,
    /// Whether it succeeded: only a succeeded upstream has an output.
    pub succeeded: bool,
    /// Its output, whole; `None` when the input names it without holding
    /// it (a blob not read back before the attempt).
    pub output: Option<&'a [u8]>,
    /// The names of its artifacts.
    pub artifacts: &'a [crate::artifact::ArtifactRef],
}

/// A variable of the environment by name (`${env:NAME}`).
pub type EnvLookup = dyn Fn(&str) -> Option<String>;

/// Everything a rendering may read: what a task input carries.
pub struct Scope<'a> {
    /// The graph.
    pub graph: &'a str,
    /// The partition, as written.
    pub partition: &'a str,
    /// The node (empty for a graph-level command).
    pub node: &'a str,
    /// The attempt, 1 for the first (0 for a graph-level command).
    pub attempt: u32,
    /// The run id.
    pub run_id: &'a str,
    /// The recorded upstreams, by node.
    pub upstreams: BTreeMap<&'a str, Upstream<'a>>,
    /// The run's params.
    pub params: &'a BTreeMap<String, String>,
    /// The environment `${env:NAME}` reads; `None`: every name is unset.
    pub env: Option<&'a EnvLookup>,
    /// A mapped node's member's item; `None` for any other attempt.
    pub item: Option<&'a serde_json::Value>,
    /// The graph's zone, which `{partition.start}` and `{partition.end}`
    /// are shown in.
    pub zone: Zone,
    /// The folder upstream artifacts are fetched into
    /// (`$WEIR_ARTIFACTS_IN`: `<folder>/<node>/<name>`); `None` where no
    /// attempt fetches them (`{upstream.NODE.artifact.NAME}` then fails).
    pub artifacts_in: Option<&'a str>,
    /// Upstream outputs parsed as JSON, once per scope.
    json: RefCell<BTreeMap<String, Rc<Result<serde_json::Value, String>>>>,
}

impl<'a> Scope<'a> {
    /// A scope without upstreams, params or environment.
    pub fn new(
        graph: &'a str,
        partition: &'a str,
        node: &'a str,
        attempt: u32,
        run_id: &'a str,
        params: &'a BTreeMap<String, String>,
    ) -> Scope<'a> {
        Scope {
            graph,
            partition,
            node,
            attempt,
            run_id,
            upstreams: BTreeMap::new(),
            params,
            env: None,
            item: None,
            zone: Zone::UTC,
            artifacts_in: None,
            json: RefCell::new(BTreeMap::new()),
        }
    }

    fn parsed(&self, node: &str, output: &[u8]) -> Rc<Result<serde_json::Value, String>> {
        if let Some(v) = self.json.borrow().get(node) {
            return v.clone();
        }
        let v = Rc::new(serde_json::from_slice(output).map_err(|e| e.to_string()));
        self.json.borrow_mut().insert(node.to_string(), v.clone());
        v
    }
}

/// What a check needs of the graph around a template.
pub struct Context<'a> {
    /// The node the template belongs to; `None` for a graph-level command
    /// (a notification), where node, attempt, run id and upstream
    /// references mean nothing.
    pub node: Option<&'a str>,
    /// The node's upstreams.
    pub upstreams: &'a [&'a str],
    /// Every node of the graph.
    pub nodes: &'a dyn Fn(&str) -> bool,
    /// The graph's params.
    pub params: &'a BTreeMap<String, String>,
    /// The graph's partitioning.
    pub partitioning: Partitioning,
    /// Whether the node is mapped (`map_over` or `items`): only its
    /// members have an `{item}`.
    pub mapped: bool,
}

/// The roots a `{` may open; any other name after `{` is literal text.
const ROOTS: [&str; 8] = [
    "graph",
    "partition",
    "node",
    "attempt",
    "run_id",
    "upstream",
    "params",
    "item",
];

fn is_plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_root_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A cursor over a reference's text.
struct Cursor<'t> {
    text: &'t str,
    pos: usize,
}

impl<'t> Cursor<'t> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// A run of bytes that `ok` accepts (ASCII only, so the cut is on a
    /// char boundary).
    fn take(&mut self, ok: impl Fn(u8) -> bool) -> &'t str {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii() && ok(b)) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    /// A JSON-style quoted string after its opening `"`: `\"` and `\\`
    /// escape, nothing else does.
    fn quoted(&mut self) -> Result<String, String> {
        let mut out = String::new();
        let rest = &self.text[self.pos..];
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    _ => return Err("in a quoted key, only \\\" and \\\\ escape".into()),
                },
                c => out.push(c),
            }
        }
        Err("a quoted key is not closed with \"".into())
    }
}

impl Template {
    /// Parses `text` as a template for `place`. Never panics; a malformed
    /// reference is an error naming its byte offset.
    pub fn parse(text: &str, place: Place) -> Result<Template, ParseError> {
        let mut segments: Vec<Segment> = Vec::new();
        let mut literal = String::new();
        let mut refs = 0usize;
        let bytes = text.as_bytes();
        let mut i = 0;
        let err = |at: usize, what: String| ParseError {
            template: text.to_string(),
            at,
            what,
        };
        while i < bytes.len() {
            let b = bytes[i];
            let opens_env = place == Place::Http && text[i..].starts_with("${env:");
            let opens_ref = b == b'{' && {
                let name_end = text[i + 1..]
                    .bytes()
                    .position(|c| !is_root_char(c))
                    .map_or(text.len(), |p| i + 1 + p);
                let root = &text[i + 1..name_end];
                ROOTS.contains(&root) && matches!(bytes.get(name_end), Some(b'}' | b'.' | b'['))
            };
            if !opens_env && !opens_ref {
                // Copy the whole char: `text` is UTF-8, `{` and `$` are
                // ASCII, so every other byte run is copied as it stands.
                let next = text[i..]
                    .char_indices()
                    .nth(1)
                    .map_or(text.len(), |(n, _)| i + n);
                literal.push_str(&text[i..next]);
                i = next;
                continue;
            }
            refs += 1;
            if refs > REFERENCES_MAX {
                return Err(err(
                    i,
                    format!("more than {REFERENCES_MAX} references in one template"),
                ));
            }
            let (r, end) = if opens_env {
                let start = i + "${env:".len();
                let Some(close) = text[start..].find('}') else {
                    return Err(err(i, "${env:…} is not closed with }".into()));
                };
                let name = &text[start..start + close];
                if name.is_empty() {
                    return Err(err(i, "${env:} names no variable".into()));
                }
                if name.contains(['{', '=', '\0']) {
                    return Err(err(i, format!("${{env:{name}}}: not a variable name")));
                }
                (Ref::Env(name.to_string()), start + close + 1)
            } else {
                let mut c = Cursor { text, pos: i + 1 };
                let r = parse_ref(&mut c).map_err(|what| err(i, what))?;
                if !c.eat(b'}') {
                    return Err(err(
                        i,
                        format!(
                            "{:?}: expected }} at byte {}",
                            &text[i..c.pos.min(text.len())],
                            c.pos
                        ),
                    ));
                }
                (r, c.pos)
            };
            if !literal.is_empty() {
                segments.push(Segment::Text(std::mem::take(&mut literal)));
            }
            segments.push(Segment::Ref(r, text[i..end].to_string()));
            i = end;
        }
        if !literal.is_empty() {
            segments.push(Segment::Text(literal));
        }
        Ok(Template {
            text: text.to_string(),
            segments,
        })
    }

    /// The template as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether it holds no reference: rendering gives its text.
    pub fn is_literal(&self) -> bool {
        self.segments.iter().all(|s| matches!(s, Segment::Text(_)))
    }

    /// Every reference that cannot render in `ctx`: a node that is not an
    /// upstream (or not a node at all), an undeclared param, a window's
    /// start or end without time windows, a key without keys, a node's
    /// name in a graph-level command. One message per fault, naming the
    /// reference.
    pub fn check(&self, ctx: &Context<'_>) -> Vec<String> {
        let mut faults = Vec::new();
        for seg in &self.segments {
            let Segment::Ref(r, written) = seg else {
                continue;
            };
            let mut fault = |what: String| faults.push(format!("{written}: {what}"));
            let time = !matches!(ctx.partitioning, Partitioning::None | Partitioning::Keyed);
            match r {
                Ref::Graph | Ref::Partition | Ref::Env(_) => {}
                Ref::PartitionStart
                | Ref::PartitionEnd
                | Ref::PartitionStartUtc
                | Ref::PartitionEndUtc
                    if !time =>
                {
                    fault(format!(
                        "the graph's partitioning is {}, which has no time windows",
                        partitioning_word(ctx.partitioning)
                    ))
                }
                Ref::PartitionStart
                | Ref::PartitionEnd
                | Ref::PartitionStartUtc
                | Ref::PartitionEndUtc => {}
                Ref::PartitionKey if ctx.partitioning != Partitioning::Keyed => fault(format!(
                    "the graph's partitioning is {}, not keyed",
                    partitioning_word(ctx.partitioning)
                )),
                Ref::PartitionKey => {}
                Ref::Node
                | Ref::Attempt
                | Ref::RunId
                | Ref::Output { .. }
                | Ref::Artifact { .. }
                | Ref::Item { .. }
                    if ctx.node.is_none() =>
                {
                    fault(
                        "a graph's notification runs for the whole run: it has graph, partition and params, not a node's names".into(),
                    )
                }
                Ref::Node | Ref::Attempt | Ref::RunId => {}
                Ref::Item { .. } if !ctx.mapped => fault(format!(
                    "{{item}} is a mapped node's item, and node {:?} is not mapped (give it map_over or items)",
                    ctx.node.unwrap_or_default()
                )),
                Ref::Item { .. } => {}
                Ref::Output { node, .. } | Ref::Artifact { node, .. } => {
                    let this = ctx.node.unwrap_or_default();
                    if ctx.upstreams.contains(&node.as_str()) {
                    } else if node == this {
                        fault(format!(
                            "node {node:?} is this node: a node reads the outputs of its upstreams"
                        ));
                    } else if (ctx.nodes)(node) {
                        fault(format!(
                            "node {node:?} is not an upstream of {this:?} (its upstreams: {}); add it to upstreams",
                            list(ctx.upstreams)
                        ));
                    } else {
                        fault(format!("node {node:?} is not a node of the graph"));
                    }
                }
                Ref::Param(name) => {
                    if !ctx.params.contains_key(name) {
                        let names: Vec<&str> = ctx.params.keys().map(String::as_str).collect();
                        fault(format!(
                            "param {name:?} is not declared under [params] (declared: {})",
                            list(&names)
                        ));
                    }
                }
            }
        }
        faults
    }

    /// The text with every reference filled from `scope`, written through
    /// `escape`, at most `bytes_max` bytes.
    pub fn render(
        &self,
        scope: &Scope<'_>,
        escape: Escape,
        bytes_max: usize,
    ) -> Result<String, RenderError> {
        let mut out = String::with_capacity(self.text.len());
        for seg in &self.segments {
            match seg {
                Segment::Text(t) => out.push_str(t),
                Segment::Ref(r, written) => {
                    let fail = |what: String| RenderError {
                        template: self.text.clone(),
                        reference: written.clone(),
                        what,
                    };
                    let value = value_of(r, scope).map_err(fail)?;
                    match (escape, r) {
                        (Escape::Url, Ref::Env(_)) | (Escape::None, _) => out.push_str(&value),
                        (Escape::Url, _) => url_encode_into(&value, &mut out),
                    }
                }
            }
            if out.len() > bytes_max {
                return Err(RenderError {
                    template: self.text.clone(),
                    reference: "the rendered text".into(),
                    what: format!("it is over the limit of {bytes_max} bytes"),
                });
            }
        }
        Ok(out)
    }

    /// The text with every reference written as a stand-in (`x`; `1` for
    /// the attempt), for checking the shape of what it renders to (an
    /// HTTP URL must parse).
    pub fn sample(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Text(t) => t.as_str(),
                Segment::Ref(Ref::Attempt, _) => "1",
                Segment::Ref(..) => "x",
            })
            .collect()
    }
}

/// Renders each template of `argv` into one element: the output has as
/// many elements as the input, whatever the values hold.
pub fn render_all(
    templates: &[Template],
    scope: &Scope<'_>,
    escape: Escape,
    bytes_max: usize,
) -> Result<Vec<String>, RenderError> {
    templates
        .iter()
        .map(|t| t.render(scope, escape, bytes_max))
        .collect()
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn partitioning_word(p: Partitioning) -> &'static str {
    match p {
        Partitioning::None => "none",
        Partitioning::Hourly => "hourly",
        Partitioning::Daily => "daily",
        Partitioning::Weekly => "weekly",
        Partitioning::Monthly => "monthly",
        Partitioning::Keyed => "keyed",
    }
}

/// A reference after its `{`, up to (not including) its `}`.
fn parse_ref(c: &mut Cursor<'_>) -> Result<Ref, String> {
    let root = c.take(is_root_char);
    let r = match root {
        "graph" => Ref::Graph,
        "node" => Ref::Node,
        "item" => Ref::Item {
            path: parse_path(c)?,
        },
        "attempt" => Ref::Attempt,
        "run_id" => Ref::RunId,
        "partition" => {
            if c.eat(b'.') {
                match c.take(is_root_char) {
                    "start" => Ref::PartitionStart,
                    "end" => Ref::PartitionEnd,
                    "start_utc" => Ref::PartitionStartUtc,
                    "end_utc" => Ref::PartitionEndUtc,
                    "key" => Ref::PartitionKey,
                    other => {
                        return Err(format!(
                            "{{partition.{other}}}: a partition has start, end, start_utc, end_utc and key"
                        ))
                    }
                }
            } else {
                Ref::Partition
            }
        }
        "params" => {
            if !c.eat(b'.') {
                return Err("write {params.NAME}".into());
            }
            let name = c.take(|b| is_root_char(b) || b == b'-');
            if name.is_empty() {
                return Err("write {params.NAME}: the name is missing".into());
            }
            Ref::Param(name.to_string())
        }
        "upstream" => {
            let node = if c.eat(b'.') {
                c.take(|b| is_root_char(b) || b == b'-').to_string()
            } else if c.eat(b'[') && c.eat(b'"') {
                let n = c.quoted()?;
                if !c.eat(b']') {
                    return Err("expected ] after the quoted node name".into());
                }
                n
            } else {
                return Err("write {upstream.NODE.output}".into());
            };
            if node.is_empty() {
                return Err("write {upstream.NODE.output}: the node is missing".into());
            }
            let at = c.pos;
            let word = if c.eat(b'.') {
                c.take(is_root_char)
            } else {
                ""
            };
            match word {
                "output" => Ref::Output {
                    node,
                    path: parse_path(c)?,
                },
                "artifact" => {
                    // The name runs to the closing brace (it may hold
                    // dots and slashes), or is quoted: `["a b.csv"]`.
                    let name = if c.eat(b'.') {
                        c.take(|b| b != b'}').to_string()
                    } else if c.eat(b'[') && c.eat(b'"') {
                        let n = c.quoted()?;
                        if !c.eat(b']') {
                            return Err("expected ] after the quoted artifact name".into());
                        }
                        n
                    } else {
                        return Err(format!(
                            "write {{upstream.{node}.artifact.NAME}} (at byte {})",
                            c.pos
                        ));
                    };
                    crate::artifact::check_name(&name, false)?;
                    Ref::Artifact { node, name }
                }
                _ => {
                    return Err(format!(
                        "after {{upstream.{node}, write .output or .artifact.NAME (at byte {at}; a node whose name holds a dot is written {{upstream[\"a.b\"].output}})"
                    ))
                }
            }
        }
        other => return Err(format!("{other:?} is not a reference")),
    };
    Ok(r)
}

/// A JSON path: `.key`, `["key"]`, `[index]`, until the `}`.
fn parse_path(c: &mut Cursor<'_>) -> Result<Vec<Step>, String> {
    let mut path = Vec::new();
    loop {
        let step = if c.eat(b'.') {
            let k = c.take(|b| is_root_char(b) || b == b'-');
            if k.is_empty() {
                return Err(
                    "a . of the path needs a key after it (a key with other characters is written [\"key\"])"
                        .into(),
                );
            }
            Step::Key(k.to_string())
        } else if c.eat(b'[') {
            let s = if c.eat(b'"') {
                Step::Key(c.quoted()?)
            } else {
                let digits = c.take(|b| b.is_ascii_digit());
                let n: usize = digits.parse().map_err(|_| {
                    "[…] holds an index (0, 1, …) or a quoted key ([\"key\"])".to_string()
                })?;
                Step::Index(n)
            };
            if !c.eat(b']') {
                return Err("a [ of the path is not closed with ]".into());
            }
            s
        } else {
            return Ok(path);
        };
        path.push(step);
        if path.len() > PATH_STEPS_MAX {
            return Err(format!("a path of more than {PATH_STEPS_MAX} steps"));
        }
    }
}

/// The value of one reference in `scope`.
fn value_of(r: &Ref, scope: &Scope<'_>) -> Result<String, String> {
    // In the graph's zone, with its offset (`Z` in UTC); `utc` always `Z`.
    let window = |end: bool, utc: bool| -> Result<String, String> {
        let p: Partition = scope
            .partition
            .parse()
            .map_err(|e| format!("the partition does not parse: {e}"))?;
        let ms = if end {
            p.end_ms(scope.zone)
        } else {
            p.start_ms(scope.zone)
        };
        let shown_in = if utc { Zone::UTC } else { scope.zone };
        ms.map(|ms| shown_in.rfc3339(ms))
            .ok_or_else(|| format!("partition {} is not a time window", scope.partition))
    };
    Ok(match r {
        Ref::Graph => scope.graph.to_string(),
        Ref::Partition => scope.partition.to_string(),
        Ref::PartitionStart => window(false, false)?,
        Ref::PartitionEnd => window(true, false)?,
        Ref::PartitionStartUtc => window(false, true)?,
        Ref::PartitionEndUtc => window(true, true)?,
        Ref::PartitionKey => {
            let p: Partition = scope
                .partition
                .parse()
                .map_err(|e| format!("the partition does not parse: {e}"))?;
            p.key()
                .map(|k| k.as_str().to_string())
                .ok_or_else(|| format!("partition {} has no key", scope.partition))?
        }
        Ref::Node => scope.node.to_string(),
        Ref::Attempt => scope.attempt.to_string(),
        Ref::RunId => scope.run_id.to_string(),
        Ref::Param(name) => scope
            .params
            .get(name)
            .cloned()
            .ok_or_else(|| format!("the run has no param {name:?}"))?,
        Ref::Env(name) => scope
            .env
            .and_then(|env| env(name))
            .ok_or_else(|| format!("${{env:{name}}} is not set in the engine's environment"))?,
        Ref::Item { path } => {
            let item = scope
                .item
                .ok_or("this attempt is not a mapped node's member: it has no item")?;
            let v = walk(item, path).map_err(|(at, what)| {
                let seen = path_text(&path[..at]);
                format!(
                    "path {} is missing from the item: item{seen} {what}",
                    path_text(path)
                )
            })?;
            match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        }
        Ref::Artifact { node, name } => {
            let up = scope.upstreams.get(node.as_str()).ok_or_else(|| {
                format!(
                    "upstream {node:?} has no record in this attempt's input (it has not ended)"
                )
            })?;
            if !up.succeeded {
                return Err(format!(
                    "upstream {node:?} ended {}, so it has no artifacts",
                    up.status
                ));
            }
            if !up.artifacts.iter().any(|a| &a.name == name) {
                let names: Vec<&str> = up.artifacts.iter().map(|a| a.name.as_str()).collect();
                return Err(format!(
                    "upstream {node:?} has no artifact {name:?} (its artifacts: {})",
                    list(&names)
                ));
            }
            let folder = scope.artifacts_in.ok_or_else(|| {
                format!("{{upstream.{node}.artifact.{name}}} is a path of a command's attempt, where artifacts are fetched")
            })?;
            format!("{folder}/{node}/{name}")
        }
        Ref::Output { node, path } => {
            let up = scope.upstreams.get(node.as_str()).ok_or_else(|| {
                format!(
                    "upstream {node:?} has no record in this attempt's input (it has not ended)"
                )
            })?;
            if !up.succeeded {
                return Err(format!(
                    "upstream {node:?} ended {}, so it has no output",
                    up.status
                ));
            }
            let output = up.output.ok_or_else(|| {
                format!(
                    "upstream {node:?}'s output was not read back from its blob before the attempt"
                )
            })?;
            if path.is_empty() {
                let text = std::str::from_utf8(output)
                    .map_err(|e| format!("upstream {node:?}'s output is not UTF-8 text: {e}"))?;
                return Ok(text.trim_end_matches(['\n', '\r']).to_string());
            }
            let parsed = scope.parsed(node, output);
            let root = parsed
                .as_ref()
                .as_ref()
                .map_err(|e| format!("upstream {node:?}'s output is not JSON: {e}"))?;
            let v = walk(root, path).map_err(|(at, what)| {
                let seen = path_text(&path[..at]);
                let shown = if seen.is_empty() {
                    "the output".to_string()
                } else {
                    format!("output{seen}")
                };
                format!(
                    "path {} is missing from upstream {node:?}'s output: {shown} {what}",
                    path_text(path)
                )
            })?;
            match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        }
    })
}

/// The value at `path` under `root`, or (the step that failed, why).
fn walk<'v>(
    root: &'v serde_json::Value,
    path: &[Step],
) -> Result<&'v serde_json::Value, (usize, String)> {
    use serde_json::Value;
    let mut v = root;
    for (i, step) in path.iter().enumerate() {
        v = match (step, v) {
            (Step::Key(k), Value::Object(m)) => {
                m.get(k).ok_or_else(|| (i, format!("has no key {k:?}")))?
            }
            (Step::Index(n), Value::Array(a)) => a
                .get(*n)
                .ok_or_else(|| (i, format!("has {} elements, no [{n}]", a.len())))?,
            (Step::Key(k), other) => {
                return Err((
                    i,
                    format!("is {}, not an object with key {k:?}", kind(other)),
                ))
            }
            (Step::Index(n), other) => {
                return Err((i, format!("is {}, not an array with [{n}]", kind(other))))
            }
        };
    }
    Ok(v)
}

fn kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Percent-encodes `v` into `out`: every byte but RFC 3986's unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`).
pub fn url_encode_into(v: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("region".to_string(), "eu west".to_string()),
            ("limit".to_string(), "10".to_string()),
        ])
    }

    const OUT: &[u8] = br#"{"rows": 3, "name": "x{node}y", "files": ["a.csv", {"path": "b.csv"}], "odd key.": true, "n": null}"#;

    fn scope<'a>(params: &'a BTreeMap<String, String>) -> Scope<'a> {
        let mut s = Scope::new(
            "etl",
            "2026-11-29",
            "load",
            2,
            "etl/2026-11-29/load/0",
            params,
        );
        s.upstreams.insert(
            "extract",
            Upstream {
                status: "succeeded",
                succeeded: true,
                output: Some(OUT),
                artifacts: &[],
            },
        );
        s.upstreams.insert(
            "text",
            Upstream {
                status: "succeeded",
                succeeded: true,
                output: Some(b"plain words\n\n"),
                artifacts: &[],
            },
        );
        s.upstreams.insert(
            "bad",
            Upstream {
                status: "failed",
                succeeded: false,
                output: Some(b""),
                artifacts: &[],
            },
        );
        s.upstreams.insert(
            "unread",
            Upstream {
                status: "succeeded",
                succeeded: true,
                output: None,
                artifacts: &[],
            },
        );
        s
    }

    #[test]
    fn artifact_references_render_to_local_paths() {
        let p = params();
        let arts = [crate::artifact::ArtifactRef {
            name: "reports/raw.csv".into(),
            bytes: 3,
            hash: "a".repeat(64),
        }];
        let mut s = scope(&p);
        s.upstreams.insert(
            "extract",
            Upstream {
                status: "succeeded",
                succeeded: true,
                output: Some(OUT),
                artifacts: &arts,
            },
        );
        let go = |s: &Scope<'_>, t: &str| {
            Template::parse(t, Place::Command)
                .map_err(|e| e.to_string())?
                .render(s, Escape::None, 4096)
                .map_err(|e| e.to_string())
        };
        let e = go(&s, "{upstream.extract.artifact.reports/raw.csv}").unwrap_err();
        assert!(e.contains("a command's attempt"), "{e}");
        s.artifacts_in = Some("/tmp/in");
        assert_eq!(
            go(&s, "--in={upstream.extract.artifact.reports/raw.csv}").unwrap(),
            "--in=/tmp/in/extract/reports/raw.csv"
        );
        assert_eq!(
            go(&s, "{upstream[\"extract\"].artifact[\"reports/raw.csv\"]}").unwrap(),
            "/tmp/in/extract/reports/raw.csv"
        );
        let e = go(&s, "{upstream.extract.artifact.nope.csv}").unwrap_err();
        assert!(
            e.contains("no artifact \"nope.csv\"") && e.contains("reports/raw.csv"),
            "{e}"
        );
        let e = go(&s, "{upstream.bad.artifact.x}").unwrap_err();
        assert!(e.contains("ended failed"), "{e}");
        let e = Template::parse("{upstream.extract.artifact.../x}", Place::Command).unwrap_err();
        assert!(e.to_string().contains(".."), "{e}");
        let e = Template::parse("{upstream.extract.files}", Place::Command).unwrap_err();
        assert!(e.to_string().contains(".artifact.NAME"), "{e}");
    }

    fn render(t: &str) -> Result<String, String> {
        let p = params();
        let s = scope(&p);
        Template::parse(t, Place::Command)
            .map_err(|e| e.to_string())?
            .render(&s, Escape::None, ARG_BYTES_MAX)
            .map_err(|e| e.to_string())
    }

    /// Rendering, one row a case: the template, what it gives.
    #[test]
    fn renders_table() {
        let cases: &[(&str, &str)] = &[
            (
                "{graph}/{partition}/{node}/{attempt}",
                "etl/2026-11-29/load/2",
            ),
            ("{run_id}", "etl/2026-11-29/load/0"),
            ("--from={partition.start}", "--from=2026-11-29T00:00:00Z"),
            ("{partition.end}", "2026-11-30T00:00:00Z"),
            ("{params.region}", "eu west"),
            ("{upstream.extract.output.rows}", "3"),
            ("{upstream.extract.output.name}", "x{node}y"),
            ("{upstream.extract.output.files[0]}", "a.csv"),
            ("{upstream.extract.output.files[1].path}", "b.csv"),
            ("{upstream.extract.output.files[1]}", r#"{"path":"b.csv"}"#),
            ("{upstream.extract.output[\"odd key.\"]}", "true"),
            ("{upstream.extract.output.n}", "null"),
            ("{upstream[\"text\"].output}", "plain words"),
            ("{upstream.text.output}!", "plain words!"),
            // Literal text: what opens no reference.
            (
                "{unknown} {print $1} ${HOME} {\"day\": 1} { } {",
                "{unknown} {print $1} ${HOME} {\"day\": 1} { } {",
            ),
            ("{{node}}", "{load}"),
            ("é{node}ü", "éloadü"),
            ("{partition_count}", "{partition_count}"),
            ("{node", "{node"),
            ("${env:X}", "${env:X}"),
            ("", ""),
        ];
        for (i, (t, want)) in cases.iter().enumerate() {
            assert_eq!(render(t).as_deref(), Ok(*want), "#{i}: template {t:?}");
        }
    }

    /// `{partition.start}` and `{partition.end}` carry the graph zone's
    /// offset at each end; the `_utc` forms are the same instants in UTC.
    #[test]
    fn window_references_carry_the_zone_s_offset() {
        let p = params();
        let t = "{partition.start} {partition.end} {partition.start_utc} {partition.end_utc}";
        let cases: &[(&str, &str, &str)] = &[
            (
                "Europe/Berlin",
                "2026-03-29",
                "2026-03-29T00:00:00+01:00 2026-03-30T00:00:00+02:00 2026-03-28T23:00:00Z 2026-03-29T22:00:00Z",
            ),
            (
                "Europe/Berlin",
                "2026-10-25T02:00+01:00",
                "2026-10-25T02:00:00+01:00 2026-10-25T03:00:00+01:00 2026-10-25T01:00:00Z 2026-10-25T02:00:00Z",
            ),
            (
                "Asia/Kathmandu",
                "2026-11",
                "2026-11-01T00:00:00+05:45 2026-12-01T00:00:00+05:45 2026-10-31T18:15:00Z 2026-11-30T18:15:00Z",
            ),
            (
                "UTC",
                "2026-11-29",
                "2026-11-29T00:00:00Z 2026-11-30T00:00:00Z 2026-11-29T00:00:00Z 2026-11-30T00:00:00Z",
            ),
        ];
        for (zone, partition, want) in cases {
            let mut s = Scope::new("etl", partition, "load", 1, "r", &p);
            s.zone = Zone::parse(zone).unwrap();
            let got = Template::parse(t, Place::Command)
                .unwrap()
                .render(&s, Escape::None, ARG_BYTES_MAX)
                .unwrap();
            assert_eq!(got, *want, "{zone} {partition}");
        }
    }

    /// What fails at an attempt: permanent, naming the template and the
    /// path.
    #[test]
    fn render_errors_table() {
        let cases: &[(&str, &str)] = &[
            (
                "{upstream.extract.output.files[5]}",
                "path .files[5] is missing from upstream \"extract\"'s output: output.files has 2 elements, no [5]",
            ),
            (
                "{upstream.extract.output.rows.x}",
                "output.rows is a number, not an object with key \"x\"",
            ),
            ("{upstream.extract.output.nope}", "the output has no key \"nope\""),
            ("{upstream.text.output.a}", "upstream \"text\"'s output is not JSON"),
            ("{upstream.bad.output}", "upstream \"bad\" ended failed, so it has no output"),
            ("{upstream.gone.output}", "upstream \"gone\" has no record"),
            (
                "{upstream.unread.output.a}",
                "upstream \"unread\"'s output was not read back from its blob",
            ),
            ("{params.nope}", "the run has no param \"nope\""),
            ("{partition.key}", "partition 2026-11-29 has no key"),
        ];
        for (i, (t, want)) in cases.iter().enumerate() {
            let got = render(t).unwrap_err();
            assert!(
                got.contains(want) && got.contains(&format!("template {t:?}")),
                "#{i}: template {t:?}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn parse_errors_table() {
        let cases: &[(&str, usize, &str)] = &[
            ("a{upstream.x}", 1, "write .output"),
            (
                "{upstream.etl.v2.output}",
                0,
                "written {upstream[\"a.b\"].output}",
            ),
            ("{upstream}", 0, "write {upstream.NODE.output}"),
            ("{params}", 0, "write {params.NAME}"),
            ("{params.}", 0, "the name is missing"),
            (
                "{partition.day}",
                0,
                "a partition has start, end, start_utc, end_utc and key",
            ),
            ("{upstream.x.output.a[}", 0, "an index"),
            ("{upstream.x.output.a[1}", 0, "not closed with ]"),
            ("{upstream.x.output.}", 0, "a . of the path needs a key"),
            ("{upstream.x.output[\"a}", 0, "not closed with \""),
            ("{upstream.x.output.a b}", 0, "expected }"),
            ("{graph.x}", 0, "expected }"),
        ];
        for (i, (t, at, want)) in cases.iter().enumerate() {
            let e = Template::parse(t, Place::Command).unwrap_err();
            assert!(
                e.at == *at && e.to_string().contains(want),
                "#{i}: template {t:?}: got {e}, want at {at}: {want:?}"
            );
        }
        let deep = format!("{{upstream.x.output{}}}", ".a".repeat(PATH_STEPS_MAX + 1));
        assert!(Template::parse(&deep, Place::Command).is_err());
        let many = "{graph}".repeat(REFERENCES_MAX + 1);
        assert!(Template::parse(&many, Place::Command).is_err());
        for bad in ["${env:", "${env:}", "${env:A=B}"] {
            assert!(Template::parse(bad, Place::Http).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_and_url_escaping_in_http() {
        let p = params();
        let mut s = scope(&p);
        let env = |n: &str| (n == "TOKEN").then(|| "s3cr3t/{node}".to_string());
        s.env = Some(&env);
        let t = Template::parse(
            "https://h/{params.region}?t=${env:TOKEN}&n={upstream.extract.output.name}",
            Place::Http,
        )
        .unwrap();
        assert_eq!(
            t.render(&s, Escape::Url, usize::MAX).unwrap(),
            "https://h/eu%20west?t=s3cr3t/{node}&n=x%7Bnode%7Dy"
        );
        let missing = Template::parse("${env:NOPE}", Place::Http).unwrap();
        let e = missing.render(&s, Escape::None, usize::MAX).unwrap_err();
        assert!(e.to_string().contains("${env:NOPE} is not set"), "{e}");
        assert_eq!(t.sample(), "https://h/x?t=x&n=x");
    }

    #[test]
    fn a_rendering_over_its_limit_fails() {
        let p = params();
        let s = scope(&p);
        let t = Template::parse("{params.region}{params.region}", Place::Command).unwrap();
        assert!(t.render(&s, Escape::None, 14).is_ok());
        let e = t.render(&s, Escape::None, 13).unwrap_err();
        assert!(e.to_string().contains("over the limit of 13 bytes"), "{e}");
    }

    #[test]
    fn checks_name_every_bad_reference() {
        let p = params();
        let nodes = |n: &str| ["extract", "load", "report", "other"].contains(&n);
        let ctx = Context {
            node: Some("load"),
            upstreams: &["extract"],
            nodes: &nodes,
            params: &p,
            partitioning: Partitioning::Daily,
            mapped: false,
        };
        let check =
            |t: &str, ctx: &Context<'_>| Template::parse(t, Place::Command).unwrap().check(ctx);
        assert!(check(
            "{upstream.extract.output.a} {params.region} {partition.start}",
            &ctx
        )
        .is_empty());
        let cases: &[(&str, &str)] = &[
            (
                "{upstream.other.output}",
                "node \"other\" is not an upstream of \"load\" (its upstreams: extract)",
            ),
            (
                "{upstream.nope.output}",
                "node \"nope\" is not a node of the graph",
            ),
            ("{upstream.load.output}", "is this node"),
            (
                "{params.zone}",
                "param \"zone\" is not declared under [params] (declared: limit, region)",
            ),
            (
                "{partition.key}",
                "the graph's partitioning is daily, not keyed",
            ),
        ];
        for (i, (t, want)) in cases.iter().enumerate() {
            let f = check(t, &ctx);
            assert!(
                f.len() == 1 && f[0].contains(want) && f[0].starts_with(t),
                "#{i}: {t}: {f:?}"
            );
        }
        let none = Context {
            partitioning: Partitioning::None,
            ..ctx
        };
        assert!(check("{partition.end}", &none)[0].contains("partitioning is none"));
        let graph_level = Context {
            node: None,
            upstreams: &[],
            ..none
        };
        assert!(check("{graph} {partition} {params.limit}", &graph_level).is_empty());
        assert_eq!(
            check(
                "{node} {attempt} {run_id} {upstream.extract.output} {item}",
                &graph_level
            )
            .len(),
            5
        );
        // `{item}` belongs to mapped nodes.
        let f = check("{item.path}", &ctx);
        assert!(
            f.len() == 1 && f[0].contains("node \"load\" is not mapped"),
            "{f:?}"
        );
        let mapped = Context {
            mapped: true,
            ..ctx
        };
        assert!(check("{item} {item.path} {item[0].a}", &mapped).is_empty());
    }

    /// A member's item, one row a case: the template, what it gives (or
    /// the error it names).
    #[test]
    fn items_render_table() {
        let p = params();
        let item =
            serde_json::json!({"path": "a b.csv", "rows": [1, 2], "n": null, "odd key": "v"});
        let text = serde_json::json!("plain {node}");
        let cases: &[(&serde_json::Value, &str, Result<&str, &str>)] = &[
            (&item, "{item.path}", Ok("a b.csv")),
            (&item, "{item.rows}", Ok("[1,2]")),
            (&item, "{item.rows[1]}", Ok("2")),
            (&item, "{item.n}", Ok("null")),
            (&item, "{item[\"odd key\"]}", Ok("v")),
            (&item, "--in={item.path}!", Ok("--in=a b.csv!")),
            (&text, "{item}", Ok("plain {node}")),
            (
                &item,
                "{item.nope}",
                Err("path .nope is missing from the item: item has no key \"nope\""),
            ),
            (
                &item,
                "{item.rows[5]}",
                Err("item.rows has 2 elements, no [5]"),
            ),
            (
                &text,
                "{item.a}",
                Err("item is a string, not an object with key \"a\""),
            ),
        ];
        for (i, (item, t, want)) in cases.iter().enumerate() {
            let mut s = scope(&p);
            s.item = Some(item);
            let got = Template::parse(t, Place::Command)
                .unwrap()
                .render(&s, Escape::None, ARG_BYTES_MAX)
                .map_err(|e| e.to_string());
            match want {
                Ok(w) => assert_eq!(got.as_deref(), Ok(*w), "#{i}: {t}"),
                Err(w) => assert!(
                    got.as_ref().is_err_and(|e| e.contains(w)),
                    "#{i}: {t}: got {got:?}, want {w:?}"
                ),
            }
        }
        // Outside a member there is no item.
        let s = scope(&p);
        let e = Template::parse("{item}", Place::Command)
            .unwrap()
            .render(&s, Escape::None, ARG_BYTES_MAX)
            .unwrap_err();
        assert!(e.to_string().contains("not a mapped node's member"), "{e}");
    }

    #[test]
    fn keyed_partitions_have_a_key() {
        let p = BTreeMap::new();
        let s = Scope::new("g", "key=db1@2026-11-29T10:00:00.000Z", "n", 1, "r", &p);
        let t = Template::parse("{partition.key}", Place::Command).unwrap();
        assert_eq!(t.render(&s, Escape::None, 100).unwrap(), "db1");
        let t = Template::parse("{partition.start}", Place::Command).unwrap();
        assert!(t
            .render(&s, Escape::None, 100)
            .unwrap_err()
            .to_string()
            .contains("not a time window"));
    }

    /// Pieces a template is made of: reference-shaped and not, so random
    /// concatenations hit well-formed, malformed and literal text.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => Just("{".to_string()),
            2 => Just("}".to_string()),
            1 => Just("${env:".to_string()),
            2 => prop::sample::select(vec![
                "{graph}", "{partition}", "{partition.start}", "{partition.key}", "{node}",
                "{attempt}", "{run_id}", "{params.p}", "{params.q}", "{upstream.u.output}",
                "{upstream.u.output.a}", "{upstream.u.output.a[0]}", "{upstream[\"u\"].output[\"a\"]}",
                "{upstream.v.output}", "{item}", "{item.a}", "upstream", "params", "partition", ".output", "[0]", "[\"",
                "\"]", ".", "[", "]", "\\", " ", "\"", ";", "'", "\n", "$", "é", "\u{0}",
            ])
            .prop_map(str::to_string),
            2 => "[a-z_. ]{0,6}",
        ]
    }

    fn template_text() -> impl Strategy<Value = String> {
        prop::collection::vec(piece(), 0..12).prop_map(|v| v.concat())
    }

    /// Values that look like templates, quotes and shell syntax.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("{partition}".to_string()),
            Just("{upstream.u.output}".to_string()),
            Just("\" ; rm -rf / ; echo '".to_string()),
            Just("a b\tc\nd".to_string()),
            any::<String>(),
        ]
    }

    /// Markers no template piece or marker-free value holds.
    fn marker(i: usize) -> String {
        format!("\u{E000}{i}\u{E001}")
    }

    fn scope_of<'a>(
        params: &'a BTreeMap<String, String>,
        out: &'a [u8],
        vals: [&'a str; 3],
    ) -> Scope<'a> {
        let mut s = Scope::new("g", vals[0], vals[1], 3, vals[2], params);
        s.upstreams.insert(
            "u",
            Upstream {
                status: "succeeded",
                succeeded: true,
                output: Some(out),
                artifacts: &[],
            },
        );
        s
    }

    proptest! {
        /// Parsing and rendering never panic; an argv renders into as many
        /// elements as it has; and substitution is literal: rendering with
        /// real values equals rendering with markers and then putting each
        /// value where its marker stands, so no value is ever read as a
        /// template or spills into the text around it.
        #[test]
        fn templates_never_panic_and_substitute_literally(
            argv in prop::collection::vec(template_text(), 0..5),
            values in prop::collection::vec(value(), 6),
            output_json in any::<bool>(),
        ) {
            let real_params = BTreeMap::from([("p".to_string(), values[0].clone()), ("q".to_string(), values[1].clone())]);
            let marked_params = BTreeMap::from([("p".to_string(), marker(0)), ("q".to_string(), marker(1))]);
            let out_of = |v: &str| if output_json { serde_json::json!({"a": [v]}).to_string() } else { v.to_string() };
            // Inside JSON, a value is written with JSON's escapes; keep to
            // characters it writes as they are, so the marker comparison
            // below stays a plain replacement.
            let v2: String = if output_json {
                values[2].chars().filter(|c| *c != '"' && *c != '\\' && !c.is_control()).collect()
            } else {
                values[2].clone()
            };
            let real_out = out_of(&v2);
            let marked_out = out_of(&marker(2));
            let mut templates = Vec::new();
            for t in &argv {
                for place in [Place::Command, Place::Http] {
                    if let Ok(t) = Template::parse(t, place) {
                        let _ = t.sample();
                        templates.push(t);
                    }
                }
            }
            let m = [marker(3), marker(4), marker(5)];
            // Partition, node and run id: real values, or markers.
            let real = scope_of(&real_params, real_out.as_bytes(), [&values[3], &values[4], &values[5]]);
            let marked = scope_of(&marked_params, marked_out.as_bytes(), [&m[0], &m[1], &m[2]]);
            let got = render_all(&templates, &real, Escape::None, usize::MAX);
            let with_markers = render_all(&templates, &marked, Escape::None, usize::MAX);
            // A reference that cannot render (a partition that does not
            // parse, JSON that is not) fails with markers too: never a
            // panic, and nothing to compare.
            if let (Ok(got), Ok(with_markers)) = (got, with_markers) {
                    prop_assert_eq!(got.len(), templates.len());
                    for (g, w) in got.iter().zip(&with_markers) {
                        let mut want = w.clone();
                        // The output's JSON string escapes are undone by
                        // the path walk: a marker inside JSON comes back
                        // as itself, so plain replacement holds.
                        let subs = [&values[0], &values[1], &v2, &values[3], &values[4], &values[5]];
                        for (i, v) in subs.iter().enumerate() {
                            want = want.replace(&marker(i), v);
                        }
                        let whole = !output_json && v2.ends_with(['\n', '\r']);
                        if !whole {
                            prop_assert_eq!(g, &want);
                        }
                    }
            }
        }
    }
}
