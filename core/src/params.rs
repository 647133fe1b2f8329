//! Run params: named strings a definition declares with defaults
//! (`[params]`), which a start request may set per run
//! (`weir start GRAPH P --param k=v`, the API's start body).
//!
//! A run's params are resolved once, when it starts ([`resolve`]): the
//! definition's defaults with the request's values over them; a name the
//! definition does not declare is refused, naming it. The resolved set is
//! kept in the run's record, so it survives restarts and a rerun of any
//! node sees the values its run started with; cron firings and backfills
//! start runs with the defaults. Templates read them as `{params.NAME}`.
//!
//! Names are `[A-Za-z0-9_-]`, 1 to [`PARAM_NAME_BYTES_MAX`] bytes (no dot:
//! a template's path is written with dots); values are at most
//! [`PARAM_VALUE_BYTES_MAX`] bytes and hold no NUL (they may end up in an
//! argv element); a definition declares at most [`PARAMS_MAX`].

use std::collections::BTreeMap;

/// The most params a definition declares.
pub const PARAMS_MAX: usize = 64;
/// The longest param name, in bytes.
pub const PARAM_NAME_BYTES_MAX: usize = 64;
/// The longest param value, in bytes.
pub const PARAM_VALUE_BYTES_MAX: usize = 4 << 10;

/// Why a param name or value, or a set of them, is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A name is empty, too long or holds a character outside the set.
    #[error("param {0:?}: a name is 1 to {PARAM_NAME_BYTES_MAX} bytes of A-Z a-z 0-9 _ -")]
    BadName(String),
    /// A value is too long or holds a NUL.
    #[error("param {name:?}: its value is {len} bytes or holds a NUL byte (at most {PARAM_VALUE_BYTES_MAX} bytes, no NUL)")]
    BadValue {
        /// The param.
        name: String,
        /// The value's length.
        len: usize,
    },
    /// More params than [`PARAMS_MAX`].
    #[error("{0} params, over the limit of {PARAMS_MAX}")]
    TooMany(usize),
    /// A start names a param the definition does not declare.
    #[error("param {name:?} is not a param of graph {graph:?} (its params: {declared})")]
    Unknown {
        /// The graph.
        graph: String,
        /// The name given.
        name: String,
        /// The declared names, comma-separated, or `none`.
        declared: String,
    },
}

/// Checks a param name.
pub fn check_name(name: &str) -> Result<(), ParamError> {
    let ok = !name.is_empty()
        && name.len() <= PARAM_NAME_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ParamError::BadName(name.to_string()))
    }
}

/// Checks a param value.
pub fn check_value(name: &str, value: &str) -> Result<(), ParamError> {
    if value.len() > PARAM_VALUE_BYTES_MAX || value.contains('\0') {
        return Err(ParamError::BadValue {
            name: name.to_string(),
            len: value.len(),
        });
    }
    Ok(())
}

/// Checks a definition's declared params and their defaults.
pub fn check_declared(params: &BTreeMap<String, String>) -> Result<(), ParamError> {
    if params.len() > PARAMS_MAX {
        return Err(ParamError::TooMany(params.len()));
    }
    for (k, v) in params {
        check_name(k)?;
        check_value(k, v)?;
    }
    Ok(())
}

/// A run's params: `defaults` with `given` over them. Every name given
/// must be declared, and every value given must be a valid value.
pub fn resolve(
    graph: &str,
    defaults: &BTreeMap<String, String>,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ParamError> {
    let mut out = defaults.clone();
    for (k, v) in given {
        if !defaults.contains_key(k) {
            let declared: Vec<&str> = defaults.keys().map(String::as_str).collect();
            return Err(ParamError::Unknown {
                graph: graph.to_string(),
                name: k.clone(),
                declared: if declared.is_empty() {
                    "none".into()
                } else {
                    declared.join(", ")
                },
            });
        }
        check_value(k, v)?;
        out.insert(k.clone(), v.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn resolve_table() {
        let defaults = map(&[("region", "eu"), ("limit", "10")]);
        type Case = (
            BTreeMap<String, String>,
            Result<BTreeMap<String, String>, String>,
        );
        let cases: Vec<Case> = vec![
            (map(&[]), Ok(defaults.clone())),
            (
                map(&[("limit", "3")]),
                Ok(map(&[("region", "eu"), ("limit", "3")])),
            ),
            (
                map(&[("zone", "a")]),
                Err(r#"param "zone" is not a param of graph "g" (its params: limit, region)"#.into()),
            ),
            (
                map(&[("limit", "a\0b")]),
                Err(r#"param "limit": its value is 3 bytes or holds a NUL byte (at most 4096 bytes, no NUL)"#.into()),
            ),
        ];
        for (i, (given, want)) in cases.into_iter().enumerate() {
            let got = resolve("g", &defaults, &given).map_err(|e| e.to_string());
            assert_eq!(got, want, "#{i}: given {given:?}");
        }
        assert_eq!(
            resolve("g", &BTreeMap::new(), &map(&[("x", "1")]))
                .unwrap_err()
                .to_string(),
            r#"param "x" is not a param of graph "g" (its params: none)"#
        );
    }

    #[test]
    fn names_and_values() {
        for good in ["a", "A_b-9", &"x".repeat(PARAM_NAME_BYTES_MAX)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "a.b", "a b", "é", &"x".repeat(PARAM_NAME_BYTES_MAX + 1)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_value("v", &"x".repeat(PARAM_VALUE_BYTES_MAX)).is_ok());
        assert!(check_value("v", &"x".repeat(PARAM_VALUE_BYTES_MAX + 1)).is_err());
        let many: BTreeMap<String, String> = (0..=PARAMS_MAX)
            .map(|i| (format!("p{i}"), String::new()))
            .collect();
        assert_eq!(
            check_declared(&many),
            Err(ParamError::TooMany(PARAMS_MAX + 1))
        );
    }
}
