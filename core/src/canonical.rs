//! Canonical JSON: a value's JSON with every object's keys sorted (byte
//! order) and no whitespace, written straight from `Serialize` — the
//! encoding a definition's content hash is computed over (`graph`).
//!
//! It is byte for byte what `serde_json::to_value` followed by a sorted
//! write of the `Value` gives (the first form of the hash, which every
//! stored definition's hash came from), without building the `Value`:
//! that tree of maps and strings cost about half the validation of a
//! 100,000-node definition. So the rules are serde_json's: `None`, unit
//! and non-finite floats are `null`; an `f32` is written as the `f64` it
//! widens to; bytes are an array of numbers; a newtype variant is a
//! one-key object; a map key is a string (integers and unit variants in
//! their string form); a key given twice keeps its last value; numbers and
//! strings are formatted (and escaped) by serde_json itself.
//!
//! What this cannot write the same way — a float, bool or compound map
//! key, an integer beyond 64 bits, serde_json's private number and raw
//! value tokens — is an [`Unsupported`] error, and the caller falls back to
//! the `Value` path, so a hash never silently changes.
//!
//! An object's fields are written where they land in the output; only an
//! object whose keys did not come sorted is taken back and written again
//! in order. Structs whose fields are declared in key order (`graph`'s
//! canonical view of a definition), `BTreeMap`s and serde_json's maps come
//! sorted, so a definition's JSON is written once, without a copy.

use serde::ser::{self, Impossible, Serialize};

/// A value the canonical writer does not write as the `Value` path would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("canonical JSON: {0}")]
pub struct Unsupported(pub String);

impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, Unsupported>;

/// Appends the canonical JSON of `value` to `out`.
pub fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<()> {
    let mut pool = Pool::default();
    value.serialize(Ser {
        out,
        pool: &mut pool,
    })
}

/// Reused scratch buffers.
#[derive(Default)]
struct Pool {
    bytes: Vec<Vec<u8>>,
    entries: Vec<Vec<Entry>>,
}

impl Pool {
    fn bytes(&mut self) -> Vec<u8> {
        self.bytes.pop().unwrap_or_default()
    }
    fn entries(&mut self) -> Vec<Entry> {
        self.entries.pop().unwrap_or_default()
    }
    fn give_bytes(&mut self, mut bytes: Vec<u8>) {
        bytes.clear();
        self.bytes.push(bytes);
    }
    fn give_entries(&mut self, mut entries: Vec<Entry>) {
        entries.clear();
        self.entries.push(entries);
    }
}

/// A key of an object in the making, unescaped: a struct's field name, or
/// a map key's range in the object's key buffer.
#[derive(Clone, Copy)]
enum Key {
    Static(&'static str),
    Buf(usize, usize),
}

/// One field of an object in the making: its key, and where its value is
/// in the output.
#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    value: (usize, usize),
}

/// Writes a JSON string as serde_json escapes it: a string with no byte
/// that serde_json escapes (control characters, `"` and `\`) is written
/// as it is, the others by serde_json.
fn write_str(out: &mut Vec<u8>, s: &str) -> Result<()> {
    write_str_bytes(out, s.as_bytes())
}

/// [`write_str`] of bytes known to be UTF-8 (they came from a `&str`).
fn write_str_bytes(out: &mut Vec<u8>, s: &[u8]) -> Result<()> {
    if s.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s);
        out.push(b'"');
        return Ok(());
    }
    let s = std::str::from_utf8(s).map_err(|_| Unsupported("a string that is not UTF-8".into()))?;
    serde_json::to_writer(out, s).map_err(|e| Unsupported(e.to_string()))
}

fn write_display<T: std::fmt::Display>(out: &mut Vec<u8>, v: T) {
    use std::io::Write;
    let _ = write!(out, "{v}");
}

fn write_f64(out: &mut Vec<u8>, v: f64) -> Result<()> {
    if v.is_finite() {
        serde_json::to_writer(out, &v).map_err(|e| Unsupported(e.to_string()))
    } else {
        out.extend_from_slice(b"null");
        Ok(())
    }
}

/// The serializer: writes one value to `out`.
struct Ser<'a> {
    out: &'a mut Vec<u8>,
    pool: &'a mut Pool,
}

impl<'a> ser::Serializer for Ser<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Obj<'a>;
    type SerializeStruct = Obj<'a>;
    type SerializeStructVariant = Obj<'a>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<()> {
        match (u64::try_from(v), i64::try_from(v)) {
            (Ok(u), _) => self.serialize_u64(u),
            (_, Ok(i)) => self.serialize_i64(i),
            _ => Err(Unsupported(format!("integer {v} is beyond 64 bits"))),
        }
    }
    fn serialize_u8(self, v: u8) -> Result<()> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<()> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<()> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<()> {
        match u64::try_from(v) {
            Ok(u) => self.serialize_u64(u),
            Err(_) => Err(Unsupported(format!("integer {v} is beyond 64 bits"))),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<()> {
        write_f64(self.out, f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<()> {
        write_f64(self.out, v)
    }
    fn serialize_char(self, v: char) -> Result<()> {
        write_str(self.out, v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        write_str(self.out, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.out.push(b'[');
        for (k, b) in v.iter().enumerate() {
            if k > 0 {
                self.out.push(b',');
            }
            write_display(self.out, b);
        }
        self.out.push(b']');
        Ok(())
    }
    fn serialize_none(self) -> Result<()> {
        self.serialize_unit()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        write_str(self.out, variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        // `{"variant":value}`: an object of one key, sorted as it is.
        self.out.push(b'{');
        write_str(self.out, variant)?;
        self.out.push(b':');
        value.serialize(Ser {
            out: self.out,
            pool: self.pool,
        })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>> {
        self.out.push(b'[');
        Ok(Seq {
            out: self.out,
            pool: self.pool,
            first: true,
            close: b"]",
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>> {
        self.out.push(b'{');
        write_str(self.out, variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Seq {
            out: self.out,
            pool: self.pool,
            first: true,
            close: b"]}",
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Obj<'a>> {
        Obj::new(self.out, self.pool, None)
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Obj<'a>> {
        if name.starts_with("$serde_json::private::") {
            return Err(Unsupported(format!("serde_json's {name}")));
        }
        Obj::new(self.out, self.pool, None)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Obj<'a>> {
        Obj::new(self.out, self.pool, Some(variant))
    }
}

/// An array being written: elements go straight to the output.
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    pool: &'a mut Pool,
    first: bool,
    close: &'static [u8],
}

impl Seq<'_> {
    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Ser {
            out: self.out,
            pool: self.pool,
        })
    }
    fn finish(self) {
        self.out.extend_from_slice(self.close);
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTuple for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish();
        Ok(())
    }
}

/// An object being written. Its fields go straight to the output, in the
/// order they come; when their keys came in increasing order (a struct
/// whose fields are declared sorted, a `BTreeMap`, serde_json's map) the
/// output is the canonical object as it stands. Otherwise the object is
/// taken back out of the output at its end and written again, sorted.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    pool: &'a mut Pool,
    /// Where the object's `{` is in `out`.
    start: usize,
    /// Map keys, unescaped, back to back.
    keys: Vec<u8>,
    entries: Vec<Entry>,
    /// Whether every key so far was greater than the one before.
    in_order: bool,
    /// The key of the map whose value is due (`serialize_key` given).
    pending_key: Option<Key>,
    /// A struct variant's name: the object is the value of a one-key
    /// object under it.
    variant: Option<&'static str>,
}

impl<'a> Obj<'a> {
    fn new(
        out: &'a mut Vec<u8>,
        pool: &'a mut Pool,
        variant: Option<&'static str>,
    ) -> Result<Obj<'a>> {
        if let Some(v) = variant {
            out.push(b'{');
            write_str(out, v)?;
            out.push(b':');
        }
        let start = out.len();
        out.push(b'{');
        let keys = pool.bytes();
        let entries = pool.entries();
        Ok(Obj {
            out,
            pool,
            start,
            keys,
            entries,
            in_order: true,
            pending_key: None,
            variant,
        })
    }

    fn key_bytes<'k>(keys: &'k [u8], key: &Key) -> &'k [u8] {
        match *key {
            Key::Static(s) => s.as_bytes(),
            Key::Buf(a, b) => &keys[a..b],
        }
    }

    fn value<T: ?Sized + Serialize>(&mut self, key: Key, value: &T) -> Result<()> {
        if let Some(last) = self.entries.last() {
            if Self::key_bytes(&self.keys, &last.key) >= Self::key_bytes(&self.keys, &key) {
                self.in_order = false;
            }
            self.out.push(b',');
        }
        write_str_bytes(self.out, Self::key_bytes(&self.keys, &key))?;
        self.out.push(b':');
        let start = self.out.len();
        value.serialize(Ser {
            out: self.out,
            pool: self.pool,
        })?;
        self.entries.push(Entry {
            key,
            value: (start, self.out.len()),
        });
        Ok(())
    }

    fn finish(self) -> Result<()> {
        let Obj {
            out,
            pool,
            start,
            keys,
            mut entries,
            in_order,
            variant,
            ..
        } = self;
        if !in_order {
            // Take the object back and write it again, sorted. Stable: of
            // a key given twice, the last is kept (as a map's insert keeps
            // it).
            let mut written = pool.bytes();
            written.extend_from_slice(&out[start..]);
            out.truncate(start);
            entries
                .sort_by(|a, b| Self::key_bytes(&keys, &a.key).cmp(Self::key_bytes(&keys, &b.key)));
            out.push(b'{');
            let mut first = true;
            for (k, e) in entries.iter().enumerate() {
                let key = Self::key_bytes(&keys, &e.key);
                if entries
                    .get(k + 1)
                    .is_some_and(|next| Self::key_bytes(&keys, &next.key) == key)
                {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                write_str_bytes(out, key)?;
                out.push(b':');
                out.extend_from_slice(&written[e.value.0 - start..e.value.1 - start]);
            }
            pool.give_bytes(written);
        }
        out.push(b'}');
        if variant.is_some() {
            out.push(b'}');
        }
        pool.give_bytes(keys);
        pool.give_entries(entries);
        Ok(())
    }
}

impl ser::SerializeMap for Obj<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<()> {
        let start = self.keys.len();
        key.serialize(KeySer {
            out: &mut self.keys,
        })?;
        self.pending_key = Some(Key::Buf(start, self.keys.len()));
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| Unsupported("a map value without its key".into()))?;
        self.value(key, value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeStruct for Obj<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.value(Key::Static(key), value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Obj<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.value(Key::Static(key), value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

/// A map key: its string form, unescaped, appended to `out`.
struct KeySer<'a> {
    out: &'a mut Vec<u8>,
}

fn key_unsupported<T>(what: &str) -> Result<T> {
    Err(Unsupported(format!("a map key that is {what}")))
}

impl ser::Serializer for KeySer<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Impossible<(), Unsupported>;
    type SerializeTuple = Impossible<(), Unsupported>;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Impossible<(), Unsupported>;
    type SerializeStruct = Impossible<(), Unsupported>;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    fn serialize_bool(self, _v: bool) -> Result<()> {
        key_unsupported("a bool")
    }
    fn serialize_i8(self, v: i8) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<()> {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<()> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<()> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<()> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<()> {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, _v: f32) -> Result<()> {
        key_unsupported("a float")
    }
    fn serialize_f64(self, _v: f64) -> Result<()> {
        key_unsupported("a float")
    }
    fn serialize_char(self, v: char) -> Result<()> {
        self.out
            .extend_from_slice(v.encode_utf8(&mut [0u8; 4]).as_bytes());
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<()> {
        key_unsupported("bytes")
    }
    fn serialize_none(self) -> Result<()> {
        key_unsupported("none")
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _value: &T) -> Result<()> {
        key_unsupported("an option")
    }
    fn serialize_unit(self) -> Result<()> {
        key_unsupported("unit")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        key_unsupported("a unit struct")
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.out.extend_from_slice(variant.as_bytes());
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<()> {
        key_unsupported("a newtype variant")
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        key_unsupported("a sequence")
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        key_unsupported("a tuple")
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        key_unsupported("a tuple struct")
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        key_unsupported("a tuple variant")
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        key_unsupported("a map")
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        key_unsupported("a struct")
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        key_unsupported("a struct variant")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::Value;
    use std::collections::BTreeMap;

    /// The `Value` path: what the canonical writer must equal.
    fn reference<T: Serialize>(value: &T) -> String {
        let mut out = String::new();
        write_value(&serde_json::to_value(value).unwrap(), &mut out);
        out
    }

    fn write_value(value: &Value, out: &mut String) {
        use std::fmt::Write as _;
        match value {
            Value::Array(items) => {
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    write_value(item, out);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (k, (key, item)) in entries.into_iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    write!(out, "{}:", Value::String(key.clone())).unwrap();
                    write_value(item, out);
                }
                out.push('}');
            }
            scalar => write!(out, "{scalar}").unwrap(),
        }
    }

    fn canonical<T: Serialize>(value: &T) -> String {
        let mut out = Vec::new();
        write(value, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { zeta: f32, alpha: Option<bool> },
    }

    #[derive(Serialize)]
    struct Every {
        z: u64,
        a: i64,
        f: f64,
        nan: f64,
        small: f32,
        text: String,
        escaped: &'static str,
        c: char,
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
        none: Option<u8>,
        unit: (),
        shapes: Vec<Shape>,
        map: BTreeMap<u32, Vec<&'static str>>,
        wide: u128,
        neg: i128,
        json: Value,
    }

    #[test]
    fn it_writes_what_the_value_path_writes() {
        let every = Every {
            z: u64::MAX,
            a: i64::MIN,
            f: 0.1 + 0.2,
            nan: f64::NAN,
            small: 0.1,
            text: "héllo\u{1}".into(),
            escaped: "quote \" backslash \\ tab \t nl \n",
            c: '√',
            bytes: vec![0, 7, 255],
            none: None,
            unit: (),
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(9),
                Shape::Tuple(-3, "x".into()),
                Shape::Struct {
                    zeta: 1.5,
                    alpha: Some(true),
                },
            ],
            map: BTreeMap::from([(10, vec!["b"]), (9, vec![]), (100, vec!["a", "c"])]),
            wide: 18_000_000_000_000_000_000,
            neg: -5,
            json: serde_json::json!({"z": [1, 2.5, null, {"b": 1, "a": "x"}], "": true, "A": -0.0}),
        };
        assert_eq!(canonical(&every), reference(&every));
    }

    /// A map that gives a key twice, out of order: the last value stays.
    struct Repeats;

    impl Serialize for Repeats {
        fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut m = s.serialize_map(None)?;
            m.serialize_entry("b", &1)?;
            m.serialize_entry("a", &2)?;
            m.serialize_entry("b", &3)?;
            m.end()
        }
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_value() {
        assert_eq!(canonical(&Repeats), reference(&Repeats));
        assert_eq!(canonical(&Repeats), r#"{"a":2,"b":3}"#);
    }

    #[test]
    fn what_it_cannot_write_alike_is_an_error() {
        let mut out = Vec::new();
        assert!(write(&u128::MAX, &mut out).is_err());
        assert!(write(&i128::MIN, &mut out).is_err());
        let bool_key = BTreeMap::from([(true, 1)]);
        assert!(write(&bool_key, &mut out).is_err());
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "(?s).{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("(?s).{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_value_is_written_as_the_value_path_writes_it(v in json()) {
            prop_assert_eq!(canonical(&v), reference(&v));
        }
    }
}
