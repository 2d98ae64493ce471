//! `tagwire record` and `tagwire play` at 100,000 mixed messages (16 B
//! to 64 KiB) of three publishers on three tags: flat out, every message
//! recorded and played in its publisher's order; at 10 kHz each, played
//! back at the recorded timing (how closely: `tagwire perf play`). A
//! binary of its own, its tests one at a time: the timing is measured on
//! two cores that nothing else of the tests' shares meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod local;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use local::{mcap_records, stdout_of, Local, Mcap};
use tagwire::Domain;

/// One test at a time.
static ALONE: Mutex<()> = Mutex::new(());

/// Message `i` of publisher `p`: mostly 16-1015 bytes, every hundredth
/// 4 KiB, every thousandth 64 KiB (larger than a slot: a blob); its first
/// bytes say which it is.
fn mixed(p: usize, i: usize) -> Vec<u8> {
    let size = match i % 1000 {
        999 => 65_536,
        n if n % 100 == 50 => 4096,
        _ => 16 + (i * 7919 + p * 31) % 1000,
    };
    let mut m = vec![(i % 251) as u8; size];
    m[..8].copy_from_slice(&(i as u64).to_le_bytes());
    m[8] = p as u8;
    m
}

/// Three publishers' messages as recorded: each one's log times, in its
/// order, and all of them sorted.
struct Recorded {
    file: PathBuf,
    logged: Vec<Vec<u64>>,
    sorted: Vec<u64>,
}

const MIX_TAGS: [&str; 3] = ["/bag/mix/0", "/bag/mix/1", "/bag/mix/2"];
const MIX_PER: [usize; 3] = [33_334, 33_333, 33_333];

/// Records `MIX_PER` messages of [`mixed`] from three publishers, each
/// on a tag of its own (so the recorder's receiving threads hand over
/// batches of different tags that overlap in time), flat out or each at
/// `hz`; checks that every message is in the file, in its publisher's
/// order, as the `mcap` crate reads it.
fn record_mixed(l: &Local, name: &str, hz: Option<f64>, extra: &[&str]) -> Recorded {
    let total: usize = MIX_PER.iter().sum();
    let file = l.dir.path().join(name);
    let count = total.to_string();
    let mut args = vec!["record"];
    args.extend(MIX_TAGS);
    args.extend(["--lossless", "--compression", "none", "--count", &count]);
    args.extend(["--out", file.to_str().unwrap()]);
    args.extend(extra);
    let rec = l.spawn(&args, Stdio::null());
    for t in MIX_TAGS {
        l.wait_receiver(t);
    }
    let publishers: Vec<_> = (0..3)
        .map(|p| {
            let client = l.client.clone();
            std::thread::spawn(move || {
                let mut publisher = client.publisher(MIX_TAGS[p]).unwrap();
                publisher.set_send_timeout(Duration::from_secs(60));
                let start = Instant::now();
                for i in 0..MIX_PER[p] {
                    if let Some(hz) = hz {
                        let due = start + Duration::from_secs_f64(i as f64 / hz);
                        std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    }
                    publisher.send(&mixed(p, i)).unwrap();
                }
            })
        })
        .collect();
    for h in publishers {
        h.join().unwrap();
    }
    let out = String::from_utf8(stdout_of(rec)).unwrap();
    assert!(
        out.contains(&format!("recorded {total} messages of 3 tags")),
        "{out}"
    );
    assert!(out.contains("lost 0"), "{out}");
    let Mcap {
        channels, messages, ..
    } = mcap_records(&file);
    assert_eq!(messages.len(), total);
    let mut logged: Vec<Vec<u64>> = vec![Vec::new(); 3];
    for (h, data) in &messages {
        let topic = &channels[&h.channel_id].topic;
        let p = MIX_TAGS.iter().position(|t| t == topic).unwrap();
        let i = logged[p].len();
        assert_eq!(data, &mixed(p, i), "publisher {p}'s message {i}");
        assert_eq!(h.sequence as usize, i + 1);
        logged[p].push(h.log_time);
    }
    for p in 0..3 {
        assert_eq!(logged[p].len(), MIX_PER[p]);
    }
    let in_file: Vec<u64> = logged.iter().flatten().copied().collect();
    let mut sorted = in_file.clone();
    sorted.sort_unstable();
    // (Otherwise the file would not show the need for log-time order.)
    assert_ne!(in_file, sorted, "the tags' batches did not interleave");
    Recorded {
        file,
        logged,
        sorted,
    }
}

/// What the subscribers of a played recording saw, by publisher: when
/// each message arrived, and the time it carried (when the player sent
/// it).
struct Seen {
    arrived: Vec<Vec<Instant>>,
    sent: Vec<Vec<SystemTime>>,
}

/// Plays `r` (with `args`) onto other tags, a lossless subscriber each
/// in this process, and checks that each got its publisher's messages,
/// all of them, in order.
fn play_mixed(
    l: &Local,
    r: &Recorded,
    args: &[&str],
    back: &str,
    sched: Option<tagwire::Sched>,
) -> Seen {
    let total: usize = MIX_PER.iter().sum();
    let back: Vec<String> = (0..3).map(|p| format!("/bag/{back}/{p}")).collect();
    let receivers: Vec<_> = (0..3)
        .map(|p| {
            l.client.create_tag(&back[p], Domain::Global).unwrap();
            let opts = tagwire::SubscribeOptions::default().lossless();
            let mut sub = l.client.subscribe(&back[p], opts).unwrap();
            // (Checked after the last message: while the player plays,
            // the thread only takes and stamps.)
            std::thread::spawn(move || {
                if let Some(s) = sched {
                    tagwire::set_thread_sched(s).unwrap();
                }
                let mut arrived = Vec::with_capacity(MIX_PER[p]);
                let mut got = Vec::with_capacity(MIX_PER[p]);
                let mut buf = Vec::new();
                for _ in 0..MIX_PER[p] {
                    let info = sub
                        .receive_into(Some(Duration::from_secs(30)), &mut buf)
                        .unwrap();
                    arrived.push(Instant::now());
                    got.push((info.timestamp, buf.clone()));
                }
                for (i, (_, payload)) in got.iter().enumerate() {
                    assert_eq!(payload, &mixed(p, i), "played message {i} of {p}");
                }
                (arrived, got.into_iter().map(|(t, _)| t).collect())
            })
        })
        .collect();
    let remaps: Vec<String> = (0..3)
        .map(|p| format!("{}={}", MIX_TAGS[p], back[p]))
        .collect();
    let mut all = vec!["play", r.file.to_str().unwrap()];
    all.extend(args);
    for m in &remaps {
        all.extend(["--remap", m]);
    }
    let play = l.spawn(&all, Stdio::null());
    let (arrived, sent) = receivers.into_iter().map(|h| h.join().unwrap()).unzip();
    let out = String::from_utf8(stdout_of(play)).unwrap();
    assert!(
        out.contains(&format!("played {total} messages on 3 tags")),
        "{out}"
    );
    Seen { arrived, sent }
}

#[test]
fn record_keeps_100_000_mixed_messages_of_three_flat_out_publishers_in_order() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let l = Local::new();
    let r = record_mixed(&l, "flat-out.mcap", None, &[]);
    play_mixed(&l, &r, &["--rate", "0"], "flat-out", None);
}

/// p50, p99 and the largest of how far each message's time (`at`, by
/// publisher and index, in ns) is from its recorded log time, once the
/// median difference is taken off: the relative timing's error.
fn timing_errors(r: &Recorded, at: &[Vec<u64>]) -> [Duration; 3] {
    tagwire_perf::stats::relative_timing_errors(&r.logged, at).expect("every message timed")
}

#[test]
fn play_keeps_the_recorded_timing_of_100_000_mixed_messages() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    // 10 kHz per publisher: a pace this debug build's player keeps up
    // with beside everything else on two cores. The recorder's and the
    // player's threads and the subscribers' at a real-time policy: the
    // default one lets any other thread on the two cores delay a message
    // by a scheduler slice.
    //
    // What this checks is that play keeps the timing at all: a player
    // that ignored it (or drifted by 3 %) would be off by a large part of
    // the 3.6 s recording. How closely it keeps it (the 1 ms at p99 bar)
    // is a performance figure, measured by `tagwire perf play` in a
    // release build beside the machine's floor: a shared CI machine has
    // stalled the whole debug-built pipeline here for 8-9 ms at a time
    // (p50 13 µs, p99 8.6 ms as sent).
    if !rustix::process::geteuid().is_root() {
        println!("skipped: the timing of play needs root for --sched fifo");
        return;
    }
    let l = Local::new();
    let sched = ["--sched", "fifo:10"];
    let r = record_mixed(&l, "paced.mcap", Some(10_000.0), &sched);
    let fifo = "fifo:10".parse().ok();
    let seen = play_mixed(&l, &r, &sched, "paced", fifo);
    let ns = |t: &SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    // The times the subscribers saw on the messages (when the player sent
    // each) ...
    let sent: Vec<Vec<u64>> = seen
        .sent
        .iter()
        .map(|ts| ts.iter().map(ns).collect())
        .collect();
    // ... and when they arrived.
    let t0 = seen.arrived.iter().flatten().min().copied().unwrap();
    let arrived: Vec<Vec<u64>> = seen
        .arrived
        .iter()
        .map(|at| {
            at.iter()
                .map(|a| a.duration_since(t0).as_nanos() as u64)
                .collect()
        })
        .collect();
    let [s50, s99, smax] = timing_errors(&r, &sent);
    let [a50, a99, amax] = timing_errors(&r, &arrived);
    let span = Duration::from_nanos(r.sorted[r.sorted.len() - 1] - r.sorted[0]);
    println!(
        "play of 100000 mixed messages recorded over {span:?}, timing error: as sent \
         p50 {s50:?} p99 {s99:?} max {smax:?}; as arrived p50 {a50:?} p99 {a99:?} max {amax:?}"
    );
    assert!(s50 <= Duration::from_millis(1), "p50 {s50:?} as sent");
    assert!(a50 <= Duration::from_millis(1), "p50 {a50:?} as arrived");
    assert!(s99 <= Duration::from_millis(50), "p99 {s99:?} as sent");
    assert!(a99 <= Duration::from_millis(50), "p99 {a99:?} as arrived");
}
