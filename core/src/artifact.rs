//! Artifacts: files a node hands to its downstreams through an object
//! store, named in its definition and recorded, by content, in its record.
//!
//! A command node declares patterns (`artifacts = ["raw.csv",
//! "reports/*.html"]`); after its command succeeds, every file under its
//! `WEIR_ARTIFACTS_OUT` that a pattern matches is uploaded under its
//! content's blake3 hash ([`object_key`]) and listed in the node's record
//! as an [`ArtifactRef`]. This module holds the decisions, with no I/O:
//! which names and patterns are allowed, which produced files are the
//! node's artifacts and whether they are within the limits
//! ([`select`]), and which stored objects the collector may delete
//! ([`collect`]).

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

/// The longest artifact name or pattern, in bytes.
pub const NAME_BYTES_MAX: usize = 512;
/// The most patterns a node declares.
pub const PATTERNS_MAX: usize = 64;
/// The most artifacts one attempt of a node leaves.
pub const PER_NODE_MAX: usize = 1_000;
/// The largest artifact, unless the node sets `artifact_bytes_max`.
pub const BYTES_MAX_DEFAULT: u64 = 5 << 30;
/// The most bytes of artifacts one attempt leaves, unless the node sets
/// `artifacts_bytes_max`.
pub const NODE_BYTES_MAX_DEFAULT: u64 = 20 << 30;
/// Where artifacts live under the store's URL: `artifacts/blake3/<hex>`.
pub const KEY_PREFIX: &str = "artifacts/blake3";

/// An artifact as a node's record keeps it: its name (a path relative to
/// the node's `WEIR_ARTIFACTS_OUT`), its size and its content's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactRef {
    /// Its path under the node's `WEIR_ARTIFACTS_OUT` (`reports/a.html`).
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The blake3 hash of its content, 64 lowercase hex digits.
    pub hash: String,
}

/// The limits an attempt's artifacts are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The largest artifact.
    pub bytes_max: u64,
    /// The most bytes of all of an attempt's artifacts.
    pub node_bytes_max: u64,
    /// The most artifacts.
    pub count_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bytes_max: BYTES_MAX_DEFAULT,
            node_bytes_max: NODE_BYTES_MAX_DEFAULT,
            count_max: PER_NODE_MAX,
        }
    }
}

/// Parses a size: a number and a unit of B, KB, MB, GB, TB (powers of
/// 1000) or KiB, MiB, GiB, TiB (powers of 1024); a bare number is bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let scale: u64 = match unit {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => {
            return Err(format!(
                "{text:?}: the unit {other:?} is not one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 512MiB"))?;
    let v = n * scale as f64;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(v as u64)
}

/// The object key of content hashed `hash` (relative to the store's URL).
pub fn object_key(hash: &str) -> String {
    format!("{KEY_PREFIX}/{hash}")
}

/// The hash an object key names, when it is an artifact's key.
pub fn hash_of_key(key: &str) -> Option<&str> {
    let hash = key.strip_prefix(KEY_PREFIX)?.strip_prefix('/')?;
    is_hash(hash).then_some(hash)
}

/// Whether `s` is a blake3 hash as keys and records write it.
pub fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks a relative path an artifact is named by (or a pattern, when
/// `glob`): not empty, relative, no `.` or `..` segment, no empty segment,
/// no NUL or other control character, no backslash, at most
/// [`NAME_BYTES_MAX`] bytes. The error says what is wrong.
pub fn check_name(name: &str, glob: bool) -> Result<(), String> {
    if name.is_empty() {
        return Err("an artifact name is empty".into());
    }
    if name.len() > NAME_BYTES_MAX {
        return Err(format!(
            "{}… is {} bytes, over the limit of {NAME_BYTES_MAX}",
            &name[..name.floor_char_boundary(40)],
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!(
            "{name:?} holds the control character {c:?} (NUL and other control characters cannot name a file portably)"
        ));
    }
    if name.starts_with('/') {
        return Err(format!(
            "{name:?} is absolute: name it relative to $WEIR_ARTIFACTS_OUT"
        ));
    }
    if name.contains('\\') {
        return Err(format!(
            "{name:?} holds a backslash: separate folders with /"
        ));
    }
    for seg in name.split('/') {
        match seg {
            "" => return Err(format!("{name:?} has an empty path segment")),
            "." | ".." => {
                return Err(format!(
                    "{name:?} has a {seg:?} segment: an artifact stays inside $WEIR_ARTIFACTS_OUT"
                ))
            }
            _ => {}
        }
    }
    if !glob && name.contains(['*', '?', '[', ']', '{', '}']) {
        return Err(format!(
            "{name:?} holds a glob character: a file an artifact is made of cannot"
        ));
    }
    Ok(())
}

/// A node's declared patterns, checked and compiled: a `*` or `?` never
/// crosses a `/`, `**` does.
#[derive(Debug, Clone)]
pub struct Patterns {
    texts: Vec<String>,
    globs: Vec<globset::GlobMatcher>,
}

impl Patterns {
    /// Checks and compiles `texts`; the error names the pattern.
    pub fn new(texts: &[String]) -> Result<Patterns, String> {
        if texts.len() > PATTERNS_MAX {
            return Err(format!(
                "{} artifact patterns, over the limit of {PATTERNS_MAX}",
                texts.len()
            ));
        }
        let mut globs = Vec::with_capacity(texts.len());
        let mut seen = BTreeSet::new();
        for t in texts {
            check_name(t, true)?;
            if !seen.insert(t.as_str()) {
                return Err(format!("the artifact pattern {t:?} is declared twice"));
            }
            let g = globset::GlobBuilder::new(t)
                .literal_separator(true)
                .backslash_escape(false)
                .build()
                .map_err(|e| format!("the artifact pattern {t:?} is not a glob: {e}"))?;
            globs.push(g.compile_matcher());
        }
        Ok(Patterns {
            texts: texts.to_vec(),
            globs,
        })
    }

    /// Whether no pattern is declared.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// A produced file: its path under `WEIR_ARTIFACTS_OUT` and its size.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Produced {
    /// Its relative path, `/`-separated.
    pub name: String,
    /// Its size.
    pub bytes: u64,
}

/// Which of the `produced` files are the node's artifacts, in name order:
/// those a pattern matches. Every pattern must match at least one file (a
/// declared artifact that is not there fails the attempt, as a missing
/// output does in Argo), each file's name must be a valid name, and the
/// artifacts must be within `limits`. Files no pattern matches are left
/// alone. The error names the pattern, the file or the limit.
pub fn select(
    patterns: &Patterns,
    produced: &[Produced],
    limits: &Limits,
) -> Result<Vec<Produced>, String> {
    let mut picked: Vec<Produced> = Vec::new();
    let mut matched = vec![false; patterns.globs.len()];
    for file in produced {
        let mut any = false;
        for (i, g) in patterns.globs.iter().enumerate() {
            if g.is_match(&file.name) {
                matched[i] = true;
                any = true;
            }
        }
        if !any {
            continue;
        }
        check_name(&file.name, false).map_err(|e| format!("artifact {e}"))?;
        if file.bytes > limits.bytes_max {
            return Err(format!(
                "artifact {:?} is {} bytes, over the limit of {} bytes (artifact_bytes_max)",
                file.name, file.bytes, limits.bytes_max
            ));
        }
        picked.push(file.clone());
    }
    if let Some(i) = matched.iter().position(|m| !m) {
        return Err(format!(
            "the artifact pattern {:?} matched no file under $WEIR_ARTIFACTS_OUT",
            patterns.texts[i]
        ));
    }
    if picked.len() > limits.count_max {
        return Err(format!(
            "{} artifacts, over the limit of {} per node",
            picked.len(),
            limits.count_max
        ));
    }
    let total: u64 = picked.iter().map(|p| p.bytes).sum();
    if total > limits.node_bytes_max {
        return Err(format!(
            "the artifacts add up to {total} bytes, over the limit of {} bytes per node (artifacts_bytes_max)",
            limits.node_bytes_max
        ));
    }
    picked.sort();
    Ok(picked)
}

/// A stored artifact object as the collector lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its content hash.
    pub hash: String,
    /// When it was last written (ms since the epoch).
    pub modified_ms: u64,
}

/// Which stored objects the collector deletes: those no live record
/// references and that were last written more than `grace_ms` before
/// `now_ms`. The grace covers an upload whose record is not yet journaled
/// (and a writer that found its content stored: it writes the object again
/// when it is older than half the grace, see [`fresh_enough`]), so the
/// listing must be taken before the references are read.
pub fn collect(
    stored: &[Stored],
    referenced: &HashSet<String>,
    now_ms: u64,
    grace_ms: u64,
) -> Vec<String> {
    stored
        .iter()
        .filter(|s| !referenced.contains(&s.hash))
        .filter(|s| now_ms.saturating_sub(s.modified_ms) > grace_ms)
        .map(|s| s.hash.clone())
        .collect()
}

/// Whether an object already stored with the same content (written at
/// `modified_ms`) may stand for a new upload: only while it is younger
/// than half the collector's grace, so that the collector cannot take it
/// between the upload that found it and the record that names it.
pub fn fresh_enough(modified_ms: u64, now_ms: u64, grace_ms: u64) -> bool {
    now_ms.saturating_sub(modified_ms) < grace_ms / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(v: &[(&str, u64)]) -> Vec<Produced> {
        v.iter()
            .map(|(n, b)| Produced {
                name: n.to_string(),
                bytes: *b,
            })
            .collect()
    }

    #[test]
    fn names_stay_inside_the_folder() {
        for bad in [
            "",
            "/etc/passwd",
            "../up",
            "a/../b",
            "a/./b",
            "a//b",
            "a\0b",
            "a\\b",
            "a/",
        ] {
            assert!(check_name(bad, true).is_err(), "{bad:?} was accepted");
        }
        assert!(check_name("raw.csv", false).is_ok());
        assert!(check_name("reports/2026/a.html", false).is_ok());
        assert!(check_name("reports/*.html", true).is_ok());
        assert!(check_name("reports/*.html", false).is_err());
        assert!(check_name(&"x".repeat(NAME_BYTES_MAX + 1), false).is_err());
    }

    #[test]
    fn patterns_pick_their_files_and_each_must_match() {
        let p = Patterns::new(&["raw.csv".into(), "reports/*.html".into()]).unwrap();
        let got = select(
            &p,
            &files(&[
                ("reports/b.html", 2),
                ("raw.csv", 1),
                ("scratch.tmp", 9),
                ("reports/deep/c.html", 3),
            ]),
            &Limits::default(),
        )
        .unwrap();
        let names: Vec<&str> = got.iter().map(|f| f.name.as_str()).collect();
        // `*` does not cross a folder; unmatched files are left alone.
        assert_eq!(names, ["raw.csv", "reports/b.html"]);
        let e = select(&p, &files(&[("raw.csv", 1)]), &Limits::default()).unwrap_err();
        assert!(
            e.contains("reports/*.html") && e.contains("matched no file"),
            "{e}"
        );
        let deep = Patterns::new(&["**/*.html".into()]).unwrap();
        assert_eq!(
            select(&deep, &files(&[("a/b/c.html", 1)]), &Limits::default())
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_bytes("10MiB"), Ok(10 << 20));
        assert_eq!(parse_bytes("1.5 KB"), Ok(1_500));
        assert_eq!(parse_bytes("7"), Ok(7));
        assert!(parse_bytes("10 bananas").unwrap_err().contains("bananas"));
        assert!(parse_bytes("MiB").is_err());
        assert!(parse_bytes("1e30TiB").is_err());
    }

    #[test]
    fn limits_name_themselves() {
        let p = Patterns::new(&["*.bin".into()]).unwrap();
        let limits = Limits {
            bytes_max: 10,
            node_bytes_max: 15,
            count_max: 2,
        };
        let e = select(&p, &files(&[("a.bin", 11)]), &limits).unwrap_err();
        assert!(
            e.contains("artifact_bytes_max") && e.contains("10 bytes"),
            "{e}"
        );
        let e = select(&p, &files(&[("a.bin", 8), ("b.bin", 8)]), &limits).unwrap_err();
        assert!(e.contains("artifacts_bytes_max"), "{e}");
        let e = select(
            &p,
            &files(&[("a.bin", 1), ("b.bin", 1), ("c.bin", 1)]),
            &limits,
        )
        .unwrap_err();
        assert!(e.contains("limit of 2"), "{e}");
        assert!(Patterns::new(&["a".into(), "a".into()]).is_err());
        assert!(Patterns::new(&["[a".into()]).is_err());
    }

    #[test]
    fn the_collector_spares_referenced_and_young_objects() {
        let h = |c: char| c.to_string().repeat(64);
        let stored = vec![
            Stored {
                hash: h('a'),
                modified_ms: 0,
            },
            Stored {
                hash: h('b'),
                modified_ms: 0,
            },
            Stored {
                hash: h('c'),
                modified_ms: 9_500,
            },
        ];
        let referenced: HashSet<String> = [h('a')].into();
        assert_eq!(collect(&stored, &referenced, 10_000, 1_000), vec![h('b')]);
        assert!(fresh_enough(9_600, 10_000, 1_000));
        assert!(!fresh_enough(9_000, 10_000, 1_000));
        assert_eq!(hash_of_key(&object_key(&h('c'))), Some(h('c').as_str()));
        assert_eq!(hash_of_key("artifacts/blake3/zz"), None);
    }
}
