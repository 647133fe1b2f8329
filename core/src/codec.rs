//! The versioned envelope of everything weir stores: journal entries,
//! snapshots and records.
//!
//! An envelope is one format byte, then the value in rmp-serde's *named*
//! encoding (a map of field names), so a newer weir reads older entries
//! (missing fields take their serde default) and an older weir reads newer
//! ones (unknown fields are ignored). A new format byte is for changes that
//! named encoding cannot absorb. Decoding never panics: an empty buffer, an
//! unknown format byte or bytes that are not the expected value are typed
//! errors, which the store reports with the tree and key they came from.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format byte of rmp-serde named encoding.
pub const FORMAT_RMP_NAMED: u8 = 1;

/// Why bytes are not an envelope of the expected value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The buffer is empty: not even a format byte.
    #[error("empty entry: no format byte")]
    Empty,
    /// The format byte is not one this version of weir knows.
    #[error("unknown format byte {0} (this weir reads format {FORMAT_RMP_NAMED})")]
    UnknownFormat(u8),
    /// The bytes after the format byte do not decode.
    #[error("undecodable entry: {0}")]
    Decode(String),
    /// The value does not encode (a map key that is not a string, say).
    #[error("unencodable value: {0}")]
    Encode(String),
}

/// The envelope of `value`.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(64);
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Appends the envelope of `value` to `out` (reusing its allocation).
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), CodecError> {
    out.push(FORMAT_RMP_NAMED);
    let mut ser = rmp_serde::Serializer::new(&mut *out).with_struct_map();
    value
        .serialize(&mut ser)
        .map_err(|e| CodecError::Encode(e.to_string()))
}

/// The value in an envelope.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    match bytes.split_first() {
        None => Err(CodecError::Empty),
        Some((&FORMAT_RMP_NAMED, rest)) => {
            rmp_serde::from_slice(rest).map_err(|e| CodecError::Decode(e.to_string()))
        }
        Some((&other, _)) => Err(CodecError::UnknownFormat(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct V1 {
        a: u32,
        b: String,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct V2 {
        a: u32,
        b: String,
        #[serde(default)]
        c: Option<u64>,
    }

    #[test]
    fn round_trip_and_evolution() {
        let v1 = V1 {
            a: 7,
            b: "x".into(),
        };
        let bytes = encode(&v1).unwrap();
        assert_eq!(bytes[0], FORMAT_RMP_NAMED);
        assert_eq!(decode::<V1>(&bytes).unwrap(), v1);
        // An old entry read by a new reader: the new field takes its default.
        assert_eq!(
            decode::<V2>(&bytes).unwrap(),
            V2 {
                a: 7,
                b: "x".into(),
                c: None
            }
        );
        // A new entry read by an old reader: the unknown field is ignored.
        let new = encode(&V2 {
            a: 1,
            b: "y".into(),
            c: Some(3),
        })
        .unwrap();
        assert_eq!(
            decode::<V1>(&new).unwrap(),
            V1 {
                a: 1,
                b: "y".into()
            }
        );
    }

    #[test]
    fn errors_are_values() {
        assert_eq!(decode::<V1>(&[]), Err(CodecError::Empty));
        assert_eq!(decode::<V1>(&[9, 1, 2]), Err(CodecError::UnknownFormat(9)));
        assert!(matches!(
            decode::<V1>(&[FORMAT_RMP_NAMED, 0xc1]),
            Err(CodecError::Decode(_))
        ));
        let mut truncated = encode(&V1 {
            a: 7,
            b: "hello".into(),
        })
        .unwrap();
        truncated.truncate(truncated.len() - 2);
        assert!(matches!(
            decode::<V1>(&truncated),
            Err(CodecError::Decode(_))
        ));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<V2>(&bytes);
            let _ = decode::<crate::queue::Op>(&bytes);
        }
    }
}
