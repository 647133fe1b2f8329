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
//!
//! Packed envelopes ([`encode_packed_into`], format byte 2) hold the same
//! named encoding compressed with LZ4: the store's large values, a journal
//! entry of many ops or a chunk of 16 tickets, repeat every field name of
//! every op or ticket, and a chunk of 4.6 KiB packs to about 400 bytes.
//! sled's open reads the whole log written since its last open, so the
//! bytes the store writes are what a recovery reads. [`decode`] reads both
//! formats; a weir older than format 2 refuses a packed value with
//! [`CodecError::UnknownFormat`], naming the byte, rather than misreading
//! it.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format byte of rmp-serde named encoding.
pub const FORMAT_RMP_NAMED: u8 = 1;

/// The format byte of a packed envelope: the plain length as 4 bytes
/// little-endian, then the named encoding as one LZ4 block.
pub const FORMAT_LZ4_NAMED: u8 = 2;

/// Values whose named encoding is shorter stay plain: LZ4 finds little to
/// take from a few field names, and the chain's small commits skip its
/// cost.
pub const PACK_BYTES_MIN: usize = 256;

/// The largest plain length a packed envelope may declare. A journal entry
/// holds at most `entry_ops_max` ops of at most `entry_bytes_max` each
/// (1 MiB by default); a declared length past this is damage, refused
/// before anything is allocated for it.
pub const UNPACKED_BYTES_MAX: usize = 1 << 30;

/// An LZ4 block cannot expand more than this many times (a match of 255
/// more bytes per length byte, plus its token and offset): a declared
/// length past it for the block's size is damage too, so a damaged short
/// value cannot ask for a large buffer.
const LZ4_EXPANSION_MAX: usize = 255;

/// Why bytes are not an envelope of the expected value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The buffer is empty: not even a format byte.
    #[error("empty entry: no format byte")]
    Empty,
    /// The format byte is not one this version of weir knows.
    #[error(
        "unknown format byte {0} (this weir reads formats {FORMAT_RMP_NAMED} and {FORMAT_LZ4_NAMED})"
    )]
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
    named_into(value, out)
}

/// Appends rmp-serde's named encoding of `value` to `out`, no format byte:
/// what both envelopes hold.
fn named_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let mut ser = rmp_serde::Serializer::new(out).with_struct_map();
    value
        .serialize(&mut ser)
        .map_err(|e| CodecError::Encode(e.to_string()))
}

/// Appends the envelope of `value` to `out`, packed when its encoding is
/// at least [`PACK_BYTES_MIN`] long and packing makes it shorter.
pub fn encode_packed_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let mut plain = Vec::with_capacity(256);
    named_into(value, &mut plain)?;
    pack_into(&plain, out);
    Ok(())
}

/// Appends the envelope of the named encoding `plain` to `out`: packed
/// if that is shorter, plain otherwise.
fn pack_into(plain: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let declared = u32::try_from(plain.len()).ok();
    if let (true, Some(declared)) = (plain.len() >= PACK_BYTES_MIN, declared) {
        out.push(FORMAT_LZ4_NAMED);
        out.extend_from_slice(&declared.to_le_bytes());
        let block_at = out.len();
        out.resize(
            block_at + lz4_flex::block::get_maximum_output_size(plain.len()),
            0,
        );
        if let Ok(block_len) = lz4_flex::block::compress_into(plain, &mut out[block_at..]) {
            // Never write what `unpack` refuses: a value past its limits
            // (settings that let a journal value pass 1 GiB) stays plain.
            if 5 + block_len < 1 + plain.len() && declarable(plain.len(), block_len) {
                out.truncate(block_at + block_len);
                return;
            }
        }
        out.truncate(start);
    }
    out.push(FORMAT_RMP_NAMED);
    out.extend_from_slice(plain);
}

/// The value in an envelope, plain or packed.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    match bytes.split_first() {
        None => Err(CodecError::Empty),
        Some((&FORMAT_RMP_NAMED, rest)) => {
            rmp_serde::from_slice(rest).map_err(|e| CodecError::Decode(e.to_string()))
        }
        Some((&FORMAT_LZ4_NAMED, rest)) => {
            let plain = unpack(rest)?;
            rmp_serde::from_slice(&plain).map_err(|e| CodecError::Decode(e.to_string()))
        }
        Some((&other, _)) => Err(CodecError::UnknownFormat(other)),
    }
}

/// Whether a packed value may declare `declared` plain bytes for a block
/// of `block_len`: within [`UNPACKED_BYTES_MAX`] and what LZ4 can expand
/// to. `pack_into` and `unpack` both ask, so no value is written packed
/// that reads back refused.
fn declarable(declared: usize, block_len: usize) -> bool {
    declared <= UNPACKED_BYTES_MAX && declared <= block_len.saturating_mul(LZ4_EXPANSION_MAX)
}

/// The named encoding inside a packed envelope (after its format byte),
/// its declared length checked before anything is allocated for it.
fn unpack(rest: &[u8]) -> Result<Vec<u8>, CodecError> {
    let Some((declared, block)) = rest.split_first_chunk::<4>() else {
        return Err(CodecError::Decode(format!(
            "packed value of {} bytes: shorter than its 4-byte length",
            rest.len()
        )));
    };
    let declared = u32::from_le_bytes(*declared) as usize;
    if !declarable(declared, block.len()) {
        return Err(CodecError::Decode(format!(
            "packed value declares {declared} bytes from a block of {}: damaged",
            block.len()
        )));
    }
    let mut plain = vec![0u8; declared];
    match lz4_flex::block::decompress_into(block, &mut plain) {
        Ok(n) if n == declared => Ok(plain),
        Ok(n) => Err(CodecError::Decode(format!(
            "packed value unpacks to {n} bytes, not the {declared} it declares"
        ))),
        Err(e) => Err(CodecError::Decode(format!("packed value: {e}"))),
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

    /// Sixteen values alike but for a number: the shape of a ticket chunk.
    fn alike(n: u32) -> Vec<V2> {
        (0..n)
            .map(|i| V2 {
                a: i,
                b: format!("pending-{i:08}"),
                c: Some(u64::from(i) * 1000),
            })
            .collect()
    }

    #[test]
    fn a_large_value_is_packed_and_reads_back() {
        let value = alike(16);
        let plain = encode(&value).unwrap();
        let mut packed = Vec::new();
        encode_packed_into(&value, &mut packed).unwrap();
        assert_eq!(packed[0], FORMAT_LZ4_NAMED);
        assert!(
            packed.len() * 2 < plain.len(),
            "packed {} bytes, plain {}",
            packed.len(),
            plain.len()
        );
        assert_eq!(decode::<Vec<V2>>(&packed).unwrap(), value);
        // Evolution holds through packing: an old reader ignores the field.
        let old: Vec<V1> = decode(&packed).unwrap();
        assert_eq!(old[3].b, "pending-00000003");
        // Appending keeps what `out` held.
        let mut out = vec![7u8];
        encode_packed_into(&value, &mut out).unwrap();
        assert_eq!(out[0], 7);
        assert_eq!(&out[1..], packed.as_slice());
    }

    #[test]
    fn a_small_or_incompressible_value_stays_plain() {
        let small = V1 {
            a: 1,
            b: "x".into(),
        };
        let mut out = Vec::new();
        encode_packed_into(&small, &mut out).unwrap();
        assert_eq!(out, encode(&small).unwrap());
        // Bytes with nothing repeated: packing would not shrink them.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: String = (0..600)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect();
        let value = V1 { a: 2, b: noise };
        let mut out = Vec::new();
        encode_packed_into(&value, &mut out).unwrap();
        assert_eq!(out[0], FORMAT_RMP_NAMED);
        assert_eq!(decode::<V1>(&out).unwrap(), value);
    }

    #[test]
    fn the_most_compressible_value_packs_within_what_unpack_accepts() {
        // 1 MiB of one byte: LZ4's best case, near its 255-fold limit.
        let value = V1 {
            a: 1,
            b: "a".repeat(1 << 20),
        };
        let mut out = Vec::new();
        encode_packed_into(&value, &mut out).unwrap();
        assert_eq!(out[0], FORMAT_LZ4_NAMED);
        assert!(out.len() < 8 << 10, "packed to {} bytes", out.len());
        assert_eq!(decode::<V1>(&out).unwrap(), value);
    }

    #[test]
    fn a_damaged_packed_value_is_an_error() {
        let mut packed = Vec::new();
        encode_packed_into(&alike(16), &mut packed).unwrap();
        assert_eq!(packed[0], FORMAT_LZ4_NAMED);
        let is_decode_error =
            |bytes: &[u8]| matches!(decode::<Vec<V2>>(bytes), Err(CodecError::Decode(_)));
        // Shorter than its length field.
        assert!(is_decode_error(&[FORMAT_LZ4_NAMED, 1, 0]));
        // A length no block of this size unpacks to: refused before any
        // buffer of that length is made.
        let mut huge = packed.clone();
        huge[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = decode::<Vec<V2>>(&huge).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
        // A length off by one either way.
        let declared = u32::from_le_bytes(packed[1..5].try_into().unwrap());
        for wrong in [declared - 1, declared + 1] {
            let mut off = packed.clone();
            off[1..5].copy_from_slice(&wrong.to_le_bytes());
            assert!(is_decode_error(&off), "declared {wrong} of {declared}");
        }
        // A block cut short.
        assert!(is_decode_error(&packed[..packed.len() - 3]));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<V2>(&bytes);
            let _ = decode::<crate::queue::Op>(&bytes);
            let mut packed = vec![FORMAT_LZ4_NAMED];
            packed.extend_from_slice(&bytes);
            let _ = decode::<V2>(&packed);
            let _ = decode::<Vec<V2>>(&packed);
        }

        #[test]
        fn a_packed_value_reads_back(n in 0u32..64, flip in any::<bool>()) {
            let mut value = alike(n);
            if flip {
                value.reverse();
            }
            let mut out = Vec::new();
            encode_packed_into(&value, &mut out).unwrap();
            prop_assert_eq!(decode::<Vec<V2>>(&out).unwrap(), value);
        }
    }
}
