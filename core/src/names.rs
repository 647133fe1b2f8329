//! Validated identifiers.
//!
//! Graphs, nodes, pools and targets are named with `[A-Za-z0-9_.-]`, 1 to
//! 128 bytes, so a name can stand in a store key, a file name, a log field
//! and a command argument without quoting. Keys (of keyed graphs and of
//! queue jobs) are wider: they may also hold `=`, `:` and `@` and be up to
//! [`KEY_BYTES_MAX`] long, but never `/` (the separator of store keys) or a
//! control character. A validated value cannot be built any other way, so
//! code that holds a [`Name`] or a [`Key`] never re-checks it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest name, in bytes.
pub const NAME_BYTES_MAX: usize = 128;
/// The longest key, in bytes.
pub const KEY_BYTES_MAX: usize = 512;

/// Why a string is not a valid name or key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The string is empty.
    #[error("{kind} is empty")]
    Empty {
        /// What was being named ("name" or "key").
        kind: &'static str,
    },
    /// The string is longer than the limit.
    #[error("{kind} {value:?} is {len} bytes, over the limit of {max}")]
    TooLong {
        /// What was being named.
        kind: &'static str,
        /// The string, cut to the limit.
        value: String,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The string holds a character that is not allowed.
    #[error("{kind} {value:?} holds {ch:?} at byte {at}; allowed: {allowed}")]
    BadChar {
        /// What was being named.
        kind: &'static str,
        /// The string.
        value: String,
        /// The character.
        ch: char,
        /// Its byte offset.
        at: usize,
        /// The allowed set, for the message.
        allowed: &'static str,
    },
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'
}

fn is_key_char(c: char) -> bool {
    !c.is_control() && c != '/'
}

fn check(
    value: &str,
    kind: &'static str,
    max: usize,
    ok: fn(char) -> bool,
    allowed: &'static str,
) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty { kind });
    }
    if value.len() > max {
        let mut cut = max;
        while !value.is_char_boundary(cut) {
            cut -= 1;
        }
        return Err(NameError::TooLong {
            kind,
            value: value[..cut].to_string(),
            len: value.len(),
            max,
        });
    }
    if let Some((at, ch)) = value.char_indices().find(|&(_, c)| !ok(c)) {
        return Err(NameError::BadChar {
            kind,
            value: value.to_string(),
            ch,
            at,
            allowed,
        });
    }
    Ok(())
}

/// A name of a graph, node, pool or target: `[A-Za-z0-9_.-]{1,128}`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

impl Name {
    /// Validates `value` as a name.
    pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
        let value = value.into();
        check(
            &value,
            "name",
            NAME_BYTES_MAX,
            is_name_char,
            "A-Z a-z 0-9 _ . -",
        )?;
        Ok(Name(value))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A name travels as its text.
impl schemars::JsonSchema for Name {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Name".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A name of a graph, node, pool or target",
            "pattern": "^[A-Za-z0-9_.-]{1,128}$",
        })
    }
}

/// A key of a keyed graph or a queue job: 1 to [`KEY_BYTES_MAX`] bytes, any
/// character but `/` and control characters.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(String);

/// A key travels as its text.
impl schemars::JsonSchema for Key {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Key".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A key of a keyed graph or a queue job: 1 to 512 bytes of UTF-8, any character but `/` and control characters",
            "minLength": 1,
            "maxLength": 512,
            "pattern": "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$",
        })
    }
}

impl Key {
    /// Validates `value` as a key.
    pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
        let value = value.into();
        check(
            &value,
            "key",
            KEY_BYTES_MAX,
            is_key_char,
            "any character but '/' and control characters",
        )?;
        Ok(Key(value))
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! string_like {
    ($t:ident) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
        impl FromStr for $t {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $t::new(s)
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl std::borrow::Borrow<str> for $t {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $t::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}
string_like!(Name);
string_like!(Key);

/// The file of a run's (or a plain job's) attempt records in its log
/// folder: `logs/<graph>/<partition>/@attempts.jsonl`, one JSON record a
/// line, appended. `@` is no name character, so no node's folder beside it
/// takes the name. The log writer, its readers and the expiry pass share it.
pub const ATTEMPT_RECORDS_FILE: &str = "@attempts.jsonl";

/// The longest file name component weir makes from a name or key, in
/// bytes: well under the 255-byte limit of common filesystems, with room
/// for the text around it (a log folder is `key=<key>@<instant>`).
pub const PATH_COMPONENT_BYTES_MAX: usize = 200;

/// The bytes of a name kept readable in a component that is too long or
/// holds a character a path cannot: the rest is a hash.
const PATH_COMPONENT_HEAD_BYTES: usize = 96;

/// A file name component for `part` (a run id's graph, partition, node or
/// rerun, or a job's key): `part` itself when it fits
/// ([`PATH_COMPONENT_BYTES_MAX`]) and holds no `\` or NUL; else its head
/// (those characters left out) and `~` and 32 hex digits of its blake3
/// hash, so every valid key has a folder of its own. Pure: the log writer,
/// its readers and the expiry pass name a folder alike.
pub fn path_component(part: &str) -> std::borrow::Cow<'_, str> {
    if part.len() <= PATH_COMPONENT_BYTES_MAX && !part.contains(['\\', '\0']) {
        return std::borrow::Cow::Borrowed(part);
    }
    let mut head = String::new();
    for c in part.chars().filter(|&c| c != '\\' && c != '\0') {
        if head.len() + c.len_utf8() > PATH_COMPONENT_HEAD_BYTES {
            break;
        }
        head.push(c);
    }
    let hash = blake3::hash(part.as_bytes()).to_hex();
    std::borrow::Cow::Owned(format!("{head}~{}", &hash[..32]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_components_fit_and_stay_apart() {
        assert_eq!(path_component("key=web-1@2026"), "key=web-1@2026");
        let long = format!("key={}@2026", "x".repeat(300));
        let c = path_component(&long);
        assert!(c.len() <= PATH_COMPONENT_BYTES_MAX, "{c}");
        assert!(c.starts_with("key=xxx"), "{c}");
        let other = format!("key={}y@2026", "x".repeat(299));
        assert_ne!(path_component(&other), c, "two long keys, two folders");
        let slash = path_component("key=a\\b@1");
        assert!(!slash.contains('\\'), "{slash}");
        assert_ne!(path_component("key=a\\b@1"), path_component("key=ab@1"));
        assert_eq!(path_component(&long), c, "the same key, the same folder");
    }
    use proptest::prelude::*;

    #[test]
    fn names_table() {
        // (input, is a valid name, is a valid key)
        let long_name = "a".repeat(NAME_BYTES_MAX);
        let too_long = "a".repeat(NAME_BYTES_MAX + 1);
        let cases: &[(&str, bool, bool)] = &[
            ("etl", true, true),
            ("etl.daily-v2_x", true, true),
            ("", false, false),
            ("a/b", false, false),
            ("a b", false, true),
            ("key=db1", false, true),
            ("user@host:5432", false, true),
            ("a\nb", false, false),
            ("a\u{7f}", false, false),
            ("ünï", false, true),
            (&long_name, true, true),
            (&too_long, false, true),
            ("a;rm -rf x", false, true),
        ];
        for (i, (input, name_ok, key_ok)) in cases.iter().enumerate() {
            assert_eq!(Name::new(*input).is_ok(), *name_ok, "#{i}: name {input:?}");
            assert_eq!(Key::new(*input).is_ok(), *key_ok, "#{i}: key {input:?}");
        }
    }

    #[test]
    fn errors_name_the_offence() {
        let e = Name::new("a/b").unwrap_err().to_string();
        assert!(e.contains("'/'") && e.contains("byte 1"), "{e}");
        let e = Key::new("x".repeat(KEY_BYTES_MAX + 3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("515 bytes") && e.contains("512"), "{e}");
    }

    #[test]
    fn serde_validates() {
        let bytes = rmp_serde::to_vec_named(&"a/b").unwrap();
        assert!(rmp_serde::from_slice::<Name>(&bytes).is_err());
        let bytes = rmp_serde::to_vec_named(&Name::new("ok").unwrap()).unwrap();
        assert_eq!(
            rmp_serde::from_slice::<Name>(&bytes).unwrap().as_str(),
            "ok"
        );
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = Name::new(s.clone());
            let _ = Key::new(s);
        }

        #[test]
        fn long_multibyte_cut_at_boundary(s in "[é]{65,100}") {
            let _ = Name::new(s.clone()).map(|_| ()).map_err(|e| e.to_string());
            let _ = Key::new(s.repeat(4)).map_err(|e| e.to_string());
        }
    }
}
