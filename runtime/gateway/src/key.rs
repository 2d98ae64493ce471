//! Where a topic's key is in its samples: the mapping option
//! `key=TYPE@OFFSET[,TYPE@OFFSET…]`.
//!
//! The gateway does not read types (XTypes type information is ignored),
//! so a keyed mapping says where each key field is: its type (`i8`, `u8`,
//! `i16`, `u16`, `i32`, `u32`, `i64`, `u64`, `string`) and its byte offset
//! in the serialized sample after the 4-byte encapsulation header. From
//! them the gateway makes the instance's key as DDS does (each field
//! big-endian, a string as its u32 length with the NUL, its bytes, the
//! NUL; DDSI-RTPS §9.6.4.8), reads the key of a DDS dispose (only the key
//! fields, in order, aligned), and writes the key of a tagwire dispose for
//! DDS readers.

use tagwire::Key;

/// The most key fields a mapping names.
pub const MAX_FIELDS: usize = 8;

/// A key field's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// A 1-, 2-, 4- or 8-byte integer (its size).
    Int(usize),
    /// A CDR string.
    String,
}

impl Field {
    fn size(self) -> usize {
        match self {
            Self::Int(n) => n,
            Self::String => 4,
        }
    }
}

/// The key fields of a topic, each at its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    fields: Vec<(Field, usize)>,
}

impl KeySpec {
    /// Parses `u32@4,string@8`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut fields = Vec::new();
        for part in s.split(',') {
            let (ty, off) = part
                .split_once('@')
                .ok_or_else(|| format!("key field `{part}` is not TYPE@OFFSET"))?;
            let field = match ty {
                "i8" | "u8" => Field::Int(1),
                "i16" | "u16" => Field::Int(2),
                "i32" | "u32" => Field::Int(4),
                "i64" | "u64" => Field::Int(8),
                "string" => Field::String,
                other => {
                    return Err(format!(
                    "key field type `{other}` is not one of i8 u8 i16 u16 i32 u32 i64 u64 string"
                ))
                }
            };
            let off: usize = off
                .parse()
                .ok()
                .filter(|o: &usize| *o < 1 << 20)
                .ok_or_else(|| format!("key field offset `{off}` is not a number below 1 MiB"))?;
            fields.push((field, off));
        }
        if fields.len() > MAX_FIELDS {
            return Err(format!("at most {MAX_FIELDS} key fields"));
        }
        Ok(Self { fields })
    }

    /// The key (fields big-endian) of a whole serialized sample; `None` if
    /// the sample is too short for it or not in a CDR encapsulation.
    pub fn of_sample(&self, sample: &[u8]) -> Option<Vec<u8>> {
        let le = little_endian(sample)?;
        let body = &sample[4..];
        let mut key = Vec::new();
        for &(f, off) in &self.fields {
            read_field(body, off, f, le, &mut key)?;
        }
        Some(key)
    }

    /// The key of a DDS dispose or unregister: its payload is the key
    /// fields only, one after the other, each aligned to its size.
    pub fn of_key_payload(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let le = little_endian(payload)?;
        let body = &payload[4..];
        let mut key = Vec::new();
        let mut at: usize = 0;
        for &(f, _) in &self.fields {
            at = at.next_multiple_of(f.size());
            at = read_field(body, at, f, le, &mut key)?;
        }
        Some(key)
    }

    /// The serialized key (CDR little-endian, key fields only) of the
    /// instance whose hash is `key`, for a dispose sent to DDS readers:
    /// possible when the key fields are integers of 16 bytes in all (the
    /// hash is then the fields themselves); `None` otherwise.
    pub fn key_payload(&self, key: &Key) -> Option<Vec<u8>> {
        let mut out = vec![0x00, 0x01, 0x00, 0x00];
        let mut at = 0;
        for &(f, _) in &self.fields {
            let Field::Int(n) = f else { return None };
            let bytes = key.0.get(at..at + n)?;
            at += n;
            while (out.len() - 4) % n != 0 {
                out.push(0);
            }
            out.extend(bytes.iter().rev());
        }
        Some(out)
    }
}

/// The byte order of a CDR encapsulation (`00 00`/`00 06` big-endian,
/// `00 01`/`00 07` little-endian; XCDR1 and final XCDR2 alike).
fn little_endian(sample: &[u8]) -> Option<bool> {
    match sample.get(..2)? {
        [0, 0] | [0, 6] => Some(false),
        [0, 1] | [0, 7] => Some(true),
        _ => None,
    }
}

/// Appends field `f` at `off` of `body` to `key` big-endian; returns where
/// the field ends.
fn read_field(body: &[u8], off: usize, f: Field, le: bool, key: &mut Vec<u8>) -> Option<usize> {
    let n = f.size();
    let raw = body.get(off..off.checked_add(n)?)?;
    let mut v = raw.to_vec();
    if le {
        v.reverse();
    }
    match f {
        Field::Int(_) => {
            key.extend_from_slice(&v);
            Some(off + n)
        }
        Field::String => {
            let len = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            let chars = body.get(off + 4..(off + 4).checked_add(len as usize)?)?;
            key.extend_from_slice(&len.to_be_bytes());
            key.extend_from_slice(chars);
            Some(off + 4 + len as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_seq_key_is_its_keyval_big_endian() {
        // ddsperf's KeyedSeq: u32 seq, @key u32 keyval, sequence<octet>.
        let k = KeySpec::parse("u32@4").unwrap();
        let sample = [0, 1, 0, 0, 9, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(k.of_sample(&sample), Some(vec![0, 0, 0, 5]));
        let big = [0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 5];
        assert_eq!(k.of_sample(&big), Some(vec![0, 0, 0, 5]));
        // A dispose carries the key alone.
        assert_eq!(
            k.of_key_payload(&[0, 1, 0, 0, 5, 0, 0, 0]),
            Some(vec![0, 0, 0, 5])
        );
        assert_eq!(
            k.key_payload(&Key::of(&[0, 0, 0, 5])),
            Some(vec![0, 1, 0, 0, 5, 0, 0, 0])
        );
        assert_eq!(k.of_sample(&sample[..10]), None, "too short");
        assert_eq!(k.of_sample(&[9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), None);
    }

    #[test]
    fn several_fields_and_strings() {
        let k = KeySpec::parse("u8@0,u32@4").unwrap();
        assert_eq!(
            k.key_payload(&Key::of(&[7, 0, 0, 1, 2])),
            Some(vec![0, 1, 0, 0, 7, 0, 0, 0, 2, 1, 0, 0])
        );
        assert_eq!(
            k.of_key_payload(&[0, 1, 0, 0, 7, 0, 0, 0, 2, 1, 0, 0]),
            Some(vec![7, 0, 0, 1, 2])
        );
        let s = KeySpec::parse("string@0").unwrap();
        let sample = [0, 1, 0, 0, 3, 0, 0, 0, b'a', b'b', 0, 0];
        assert_eq!(s.of_sample(&sample), Some(vec![0, 0, 0, 3, b'a', b'b', 0]));
        assert_eq!(s.key_payload(&Key::of(b"x")), None, "a hash of a string");
        let hostile = [0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, b'a'];
        assert_eq!(s.of_sample(&hostile), None);
    }

    #[test]
    fn bad_specs_say_why() {
        assert!(KeySpec::parse("u32").unwrap_err().contains("TYPE@OFFSET"));
        assert!(KeySpec::parse("f32@0").unwrap_err().contains("i8 u8"));
        assert!(KeySpec::parse("u32@x").unwrap_err().contains("offset"));
        let many = ["u8@0"; 9].join(",");
        assert!(KeySpec::parse(&many).unwrap_err().contains("at most"));
    }
}
