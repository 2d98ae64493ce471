//! Reading a pull's answer: the daemon's sealed memfd of records
//! `[u32 LE length][frame header + payload]`, checked as it is read.

use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use tagwire_wire::frame::FrameHeader;

use crate::{Error, Message, Result};

/// The messages in a pull's memfd (`count` records in `len` bytes).
pub(crate) fn decode(fd: OwnedFd, count: u32, len: u64) -> Result<Vec<Message>> {
    let bad = |what: &str| Error::Protocol(format!("malformed pull answer: {what}"));
    let len = usize::try_from(len).map_err(|_| bad("length"))?;
    let mut bytes = vec![0u8; len];
    // pread, not mmap: a file shorter than announced is an error, not a SIGBUS.
    std::fs::File::from(fd)
        .read_exact_at(&mut bytes, 0)
        .map_err(|e| Error::Io(format!("reading a pull answer: {e}")))?;
    let mut out = Vec::with_capacity((count as usize).min(len / 4));
    let mut rest = &bytes[..];
    while let Some((head, tail)) = rest.split_first_chunk::<4>() {
        let n = u32::from_le_bytes(*head) as usize;
        let record = tail.get(..n).ok_or_else(|| bad("record past the end"))?;
        rest = &tail[n..];
        let (h, payload) = FrameHeader::parse(record).map_err(|e| bad(&e.to_string()))?;
        let mut payload = payload.to_vec();
        let info = crate::describe(&h, &mut payload)?;
        out.push(Message::from_parts(payload, info));
    }
    if !rest.is_empty() || out.len() != count as usize {
        return Err(bad("record count"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tagwire_wire::frame::HEADER_LEN;
    use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum};

    fn memfd(bytes: &[u8]) -> OwnedFd {
        let fd = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let mut f = std::fs::File::from(fd);
        f.write_all(bytes).unwrap();
        f.into()
    }

    fn record(seq: u64, payload: &[u8]) -> Vec<u8> {
        let h = FrameHeader {
            flags: 0,
            sender: SenderInfo {
                pid: Pid(3),
                node: NodeAddr::LOCALHOST,
            },
            stream: 0,
            seq: SeqNum(seq),
            timestamp_ns: 5,
        };
        let mut out = ((HEADER_LEN + payload.len()) as u32).to_le_bytes().to_vec();
        let mut hb = [0u8; HEADER_LEN];
        h.emit(&mut hb).unwrap();
        out.extend_from_slice(&hb);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn records_decode_and_malformed_answers_are_errors() {
        let mut b = record(1, b"one");
        b.extend(record(2, b"two"));
        let m = decode(memfd(&b), 2, b.len() as u64).unwrap();
        assert_eq!((m[1].seq.0, &m[1].payload[..]), (2, &b"two"[..]));
        assert!(decode(memfd(&b), 3, b.len() as u64).is_err(), "count");
        let cut = &b[..b.len() - 1];
        assert!(
            decode(memfd(cut), 2, cut.len() as u64).is_err(),
            "truncated"
        );
        assert!(
            decode(memfd(&b), 2, b.len() as u64 + 10).is_err(),
            "short file"
        );
        let mut junk = b.clone();
        junk[4] ^= 0xff; // the first header's magic
        assert!(
            decode(memfd(&junk), 2, junk.len() as u64).is_err(),
            "bad header"
        );
    }
}
