//! A shared-memory segment with arbitrary contents (what a hostile peer could
//! write) handed to `Ring::open` and read from: must be refused or read safely.
//! The control segment (doorbell, gates: what readers write) is as hostile,
//! but for its magic word.
//! Its send ticket, as hostile as the rest, is claimed and closed too, and
//! the room its (hostile) lossless gates leave is asked for. A seat (what a
//! subscriber writes), as hostile but for its magic word, is given to the
//! writer, whose gates and sleepers then read it.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use rustix::fs::{MemfdFlags, SealFlags};
use tagwire_shm::{ReadOutcome, Ring, Seat, Segment, TICKET_DESTS};

fuzz_target!(|data: &[u8]| {
    if data.is_empty() || data.len() > 1 << 20 {
        return;
    }
    let fd = rustix::fs::memfd_create("fuzz", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).expect("memfd");
    let mut f = std::fs::File::from(fd);
    f.write_all(data).expect("write");
    rustix::fs::fcntl_add_seals(&f, SealFlags::SHRINK | SealFlags::GROW).expect("seal");
    let Ok(seg) = Segment::open(f.into()) else { return };
    let fd = rustix::fs::memfd_create("fuzz-ctl", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).expect("memfd");
    let mut ctl = vec![0u8; 4096];
    ctl[..8].copy_from_slice(b"TAGWCTL2");
    let n = data.len().min(ctl.len() - 8);
    ctl[8..8 + n].copy_from_slice(&data[..n]);
    let mut f = std::fs::File::from(fd);
    f.write_all(&ctl).expect("write");
    rustix::fs::fcntl_add_seals(&f, SealFlags::SHRINK | SealFlags::GROW).expect("seal");
    let Ok(ctl) = Segment::open(f.into()) else { return };
    let Ok(ring) = Ring::open(seg, ctl) else { return };
    let mut cur = ring.cursor_from(0, 64);
    let mut buf = Vec::new();
    let mut empty = 0;
    for _ in 0..64 {
        match ring.read(&mut cur, &mut buf) {
            ReadOutcome::Record => assert!(buf.len() <= ring.max_record()),
            // The first empty read after a record looks only at slots; the
            // second takes the hostile `head` into account too.
            ReadOutcome::Empty => {
                empty += 1;
                if empty == 2 {
                    break;
                }
                continue;
            }
            _ => {}
        }
        empty = 0;
    }
    let ticket = ring.ticket();
    for i in [0, cur.position(), u64::MAX] {
        if let Some(c) = ticket.claim(i) {
            assert!(c.dests().count() <= TICKET_DESTS);
            let _ = c.max_len();
        }
        let _ = ticket.close(i, std::time::Duration::ZERO);
    }
    let _ = ring.lossless_room();
    let fd = rustix::fs::memfd_create("fuzz-seat", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).expect("memfd");
    let mut seat = vec![0u8; 256];
    seat[..8].copy_from_slice(b"TAGWSEAT");
    let n = data.len().min(seat.len() - 8);
    seat[8..8 + n].copy_from_slice(&data[data.len() - n..]);
    let mut f = std::fs::File::from(fd);
    f.write_all(&seat).expect("write");
    rustix::fs::fcntl_add_seals(&f, SealFlags::SHRINK | SealFlags::GROW).expect("seal");
    let Ok(seat) = Segment::open(f.into()) else { return };
    if let Ok(seat) = Seat::open(seat) {
        let _ = ring.add_seat(std::sync::Arc::new(seat));
    }
    let _ = ring.lowest_gate();
    let _ = ring.lossless_room();
    let _ = ring.waiter_count();
    let _ = ring.publish_gated(&[b"x"], std::time::Duration::ZERO);
});
