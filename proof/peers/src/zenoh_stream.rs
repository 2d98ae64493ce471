//! Zenoh flat out through a bottleneck (`tagwire perf napa`'s Zenoh rows):
//! one publisher (congestion control `Block`, so nothing is dropped: a
//! full link holds the publisher back) sends `size`-byte samples as fast
//! as Zenoh takes them, each stamped with the time it was handed to
//! Zenoh and its number; the subscriber records each sample's one-way
//! latency (both sides share one clock: network namespaces of one host).
//!
//! Sample layout: bytes 0..8 the send time (ns since the Unix epoch, little
//! endian), 8..16 the sample's number from 1; the rest filler.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use zenoh::qos::CongestionControl;
use zenoh::Wait as _;

const DATA: &str = "tagwire/perf/stream";
const END: &str = "tagwire/perf/stream/end";

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What the subscriber keeps of each sample: its number, send and
/// receive times (ns) and length.
#[derive(Clone, Copy)]
struct Got {
    n: u64,
    sent: u64,
    got: u64,
    len: usize,
}

/// Receives until the publisher's end marker; prints, over the samples
/// sent from `warm` seconds after the first one for `seconds`, the
/// delivered Mbit/s (payload, over their receipts' span), the one-way
/// latency's p50, p99 and max (ms), and how many samples were sent,
/// received and missing (by number) in all.
pub(crate) fn sub(listen: &str, warm: f64, seconds: f64) -> anyhow::Result<()> {
    let s = crate::zenoh_peer::open(Some(listen), None)?;
    let got: Arc<Mutex<Vec<Got>>> = Arc::default();
    let g = got.clone();
    let _sub = s
        .declare_subscriber(DATA)
        .callback(move |sample| {
            let at = now_ns();
            let bytes = sample.payload().to_bytes();
            let word = |i: usize| {
                bytes
                    .get(i..i + 8)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_le_bytes)
            };
            if let Ok(mut v) = g.lock() {
                v.push(Got {
                    n: word(8),
                    sent: word(0),
                    got: at,
                    len: bytes.len(),
                });
            }
        })
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let end = s
        .declare_subscriber(END)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let sent = crate::zenoh_peer::sent_count(&end, Duration::from_secs(120))?;
    // Samples sent before the end marker come before it (one link, one
    // priority); give the callback a moment to record them.
    let stop = Instant::now() + Duration::from_secs(5);
    loop {
        let n = got.lock().map_or(0, |v| v.len() as u64);
        if n >= sent || Instant::now() > stop {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let v = got
        .lock()
        .map_err(|_| anyhow::anyhow!("the callback panicked"))?
        .clone();
    let first = v.first().context("no sample received")?.sent;
    let from = first + (warm * 1e9) as u64;
    let until = from + (seconds * 1e9) as u64;
    let window: Vec<&Got> = v
        .iter()
        .filter(|g| g.sent >= from && g.sent < until)
        .collect();
    if window.is_empty() {
        bail!("no sample sent within the measured window");
    }
    let mut ms: Vec<f64> = window
        .iter()
        .map(|g| g.got.saturating_sub(g.sent) as f64 / 1e6)
        .collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    let span = window.iter().map(|g| g.got).max().unwrap_or(0)
        - window.iter().map(|g| g.got).min().unwrap_or(0);
    let payload: usize = window.iter().map(|g| g.len).sum();
    let mbit_s = payload as f64 * 8.0 / (span as f64 / 1e9).max(1e-9) / 1e6;
    // Missing numbers, and numbers out of order or twice.
    let mut expected = 1u64;
    let mut disordered = 0u64;
    for g in &v {
        if g.n != expected {
            disordered += 1;
        }
        expected = g.n + 1;
    }
    println!(
        "{{\"mbit_s\":{mbit_s:.3},\"p50_ms\":{:.4},\"p99_ms\":{:.4},\"max_ms\":{:.4},\
         \"n\":{},\"sent\":{sent},\"received\":{},\"lost\":{},\"disordered\":{disordered}}}",
        at(0.5),
        at(0.99),
        at(1.0),
        ms.len(),
        v.len(),
        sent.saturating_sub(v.len() as u64),
    );
    Ok(())
}

/// Publishes stamped, numbered `size`-byte samples flat out for
/// `seconds`, then the count on the end marker.
pub(crate) fn publish(connect: &str, size: usize, seconds: f64) -> anyhow::Result<()> {
    if size < 16 {
        bail!("a stamped sample needs at least 16 bytes, not {size}");
    }
    let s = crate::zenoh_peer::open(None, Some(connect))?;
    let p = s
        .declare_publisher(DATA)
        .congestion_control(CongestionControl::Block)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    crate::zenoh_peer::matched_subscriber(&p)?;
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let mut n: u64 = 0;
    let mut sample = vec![0x5au8; size];
    while Instant::now() < stop {
        n += 1;
        sample[0..8].copy_from_slice(&now_ns().to_le_bytes());
        sample[8..16].copy_from_slice(&n.to_le_bytes());
        p.put(sample.clone())
            .wait()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    crate::zenoh_peer::end_with_count(&s, END, n)
}
