//! A clock master: answers slaves' time requests when it is the answering
//! master (handshake variant), or always, at a strength of its rank
//! (ownership variant). Prints `ROLE active` / `ROLE backup` when its role
//! changes and a `STATUS` line every second.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use tagwire::{Client, Domain, Publisher, SubscribeOptions};
use tagwire_example_clock_sync::{
    reply_tag, Action, Config, Master, MasterClock, MasterMsg, Reply, Request, MASTERS_TAG,
    REQUEST_TAG,
};

#[derive(Parser)]
#[command(about = "A clock master of the fail-over example")]
struct Args {
    /// This master's id (unique among masters).
    #[arg(long)]
    id: u32,
    /// Its rank: the live master of lowest rank answers (handshake) or
    /// is strongest (ownership).
    #[arg(long)]
    rank: u32,
    /// `handshake` or `ownership`.
    #[arg(long, default_value = "handshake")]
    variant: Variant,
    /// Heartbeat period, ms.
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Variant {
    Handshake,
    Ownership,
}

enum Event {
    Request(Request, i64),
    Masters(MasterMsg, i64),
}

/// The kernel's real-time clock, ns.
fn realtime() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The strength of a rank's replies: lower ranks are stronger.
fn strength(rank: u32) -> i32 {
    1_000_000 - rank.min(999_999) as i32
}

/// Makes slave `slave`'s reply publisher when its first request arrives,
/// whatever this master's role: taking over must not wait for the
/// daemons (a new right is a table change every node acknowledges, slow
/// while a node is unreachable: the very moment of a fail-over).
fn replier(
    tw: &Client,
    repliers: &mut HashMap<u32, Publisher>,
    slave: u32,
    a: &Args,
) -> anyhow::Result<()> {
    if let std::collections::hash_map::Entry::Vacant(e) = repliers.entry(slave) {
        let tag = reply_tag(slave);
        tw.create_tag(&tag, Domain::Global)?;
        let mut p = tw.publisher(&tag)?;
        // One slave's node cut off fills its reply stream's window; a
        // master that waited there (1 s by default) would stop answering
        // every other slave and stop its heartbeats, and the master that
        // took over would then wait on the same slave. The reply is
        // dropped instead (counted: `full=`), and the slave asks again.
        p.set_send_timeout(Duration::ZERO);
        if a.variant == Variant::Ownership {
            p.set_strength(Some(strength(a.rank)));
        }
        e.insert(p);
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let heartbeat = Duration::from_millis(a.heartbeat_ms.max(1));
    let tw = Client::connect()?;
    for tag in [REQUEST_TAG, MASTERS_TAG] {
        tw.create_tag(tag, Domain::Global)?;
    }
    // Best effort, both: a reliable subscriber holds its publishers back
    // while its node is unreachable (until the daemons declare it down),
    // and a master cut off from the others must not stall the slaves'
    // requests or the other masters' heartbeats. A lost request is asked
    // again by its slave; a lost heartbeat is one of several.
    let mut requests = tw.subscribe(REQUEST_TAG, SubscribeOptions::default().best_effort())?;
    let mut masters = tw.subscribe(MASTERS_TAG, SubscribeOptions::default().best_effort())?;
    let lost = std::sync::Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let lost2 = lost.clone();
    let lost3 = lost.clone();
    let mut say = tw.publisher(MASTERS_TAG)?;
    let mut repliers: HashMap<u32, Publisher> = HashMap::new();
    // This master's clock: the kernel's, corrected by its estimate of the
    // answering master's (while it does not answer itself).
    let mut clock = MasterClock::default();

    // Two receiving threads feed one loop; each stamps arrival on the
    // uncorrected clock (the loop corrects it).
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    std::thread::spawn(move || loop {
        match requests.receive(None) {
            Ok(m) => {
                if let Some(r) = Request::decode(&m.payload) {
                    if tx.send(Event::Request(r, realtime())).is_err() {
                        return;
                    }
                }
            }
            // Reported, not fatal: the subscription stays valid.
            Err(tagwire::Error::Overflowed { lost: n }) => {
                lost2[0].fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("clock-master: requests: {e}");
                return;
            }
        }
    });
    std::thread::spawn(move || loop {
        match masters.receive(None) {
            Ok(m) => {
                if let Some(msg) = MasterMsg::decode(&m.payload) {
                    if tx2.send(Event::Masters(msg, realtime())).is_err() {
                        return;
                    }
                }
            }
            Err(tagwire::Error::Overflowed { lost: n }) => {
                lost3[1].fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("clock-master: masters: {e}");
                return;
            }
        }
    });

    let start = Instant::now();
    let mut m = Master::new(a.id, a.rank, Config::with_heartbeat(heartbeat), start);
    let mut next_status = start + Duration::from_secs(1);
    let mut next_sync = start;
    let mut out = std::io::stdout();
    // Replies dropped because their slave's stream was full.
    let mut full = 0u64;
    writeln!(out, "ROLE backup")?;
    out.flush()?;
    loop {
        let now = Instant::now();
        let wake = m.poll_timeout(now).min(next_status).min(next_sync);
        let event = rx.recv_timeout(wake.saturating_duration_since(now));
        let now = Instant::now();
        let mut actions = Vec::new();
        match event {
            Ok(Event::Request(req, at)) => {
                replier(&tw, &mut repliers, req.slave, &a)?;
                // Arrival on the kernel's clock: put on this master's at
                // sending, with t3, so that one exchange never mixes two
                // corrections (a backup's pending requests are answered
                // after its clock became the reference).
                let t2 = at;
                match a.variant {
                    // The handshake decides who answers.
                    Variant::Handshake => {
                        if let Some(r) = m.on_request(req, t2) {
                            actions.push(Action::Reply(r));
                        }
                    }
                    // Every master whose clock is trusted answers; the
                    // slaves' ownership picks.
                    Variant::Ownership if clock.trusted(at) => actions.push(Action::Reply(Reply {
                        slave: req.slave,
                        seq: req.seq,
                        t1: req.t1,
                        t2,
                        t3: t2,
                        master: a.id,
                    })),
                    Variant::Ownership => {}
                }
            }
            Ok(Event::Masters(msg, at)) => match msg {
                MasterMsg::Heartbeat { .. } => actions.extend(m.on_heartbeat(&msg, now)),
                MasterMsg::SyncRequest { from, t1 } if m.is_active() && from != a.id => {
                    let reply = MasterMsg::SyncReply {
                        to: from,
                        t1,
                        t2: clock.read(at),
                        t3: clock.read(realtime()),
                    };
                    say.send(&reply.encode())?;
                }
                MasterMsg::SyncReply { to, t1, t2, t3 } if to == a.id => {
                    clock.on_sync_reply(t1, t2, t3, at);
                }
                _ => {}
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the daemon connection ended")
            }
        }
        actions.extend(m.tick(now, realtime()));
        for action in actions {
            match action {
                Action::Say(msg) => {
                    say.send(&msg.encode())?;
                }
                Action::Reply(r) => {
                    let r = Reply {
                        t2: clock.read(r.t2),
                        t3: clock.read(realtime()),
                        ..r
                    };
                    if let Some(p) = repliers.get_mut(&r.slave) {
                        match p.send(&r.encode()) {
                            Ok(_) => {}
                            Err(tagwire::Error::WindowFull { .. }) => full += 1,
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                Action::Role(active) => {
                    writeln!(out, "ROLE {}", if active { "active" } else { "backup" })?;
                    out.flush()?;
                    if active {
                        clock.become_reference();
                    }
                }
            }
        }
        if !m.is_active() {
            if let Some(id) = m.active_master(now) {
                clock.follow(id);
            }
        }
        if now >= next_sync {
            next_sync = now + heartbeat;
            if !m.is_active() && m.active_master(now).is_some() {
                let ask = MasterMsg::SyncRequest {
                    from: a.id,
                    t1: realtime(),
                };
                say.send(&ask.encode())?;
            }
        }
        if now >= next_status {
            next_status = now + Duration::from_secs(1);
            let (offset, bound) = clock.estimate(realtime()).unwrap_or((0, 0));
            writeln!(
                out,
                "STATUS id={} active={} answering={} pending={} dropped={} full={full} offset_ns={offset} bound_ns={bound} \
                 lost_requests={} lost_masters={}",
                a.id,
                m.is_active(),
                m.active_master(now).map_or_else(|| "none".to_owned(), |i| i.to_string()),
                m.pending(),
                m.dropped,
                lost[0].load(Ordering::Relaxed),
                lost[1].load(Ordering::Relaxed),
            )?;
            out.flush()?;
        }
    }
}
