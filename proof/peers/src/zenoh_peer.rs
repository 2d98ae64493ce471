//! Zenoh (its Rust crate, TCP, peer mode, no scouting): a flat-out
//! publisher and a counting subscriber, a round trip, and the helpers the
//! other Zenoh modes share (opening a session, waiting for a match,
//! reading an end marker).

use super::*;
use zenoh::qos::CongestionControl;
use zenoh::Wait as _;

const THR: &str = "tagwire/perf/thr";
const END: &str = "tagwire/perf/end";
const PING: &str = "tagwire/perf/ping";
const PONG: &str = "tagwire/perf/pong";

pub(crate) fn open(listen: Option<&str>, connect: Option<&str>) -> anyhow::Result<zenoh::Session> {
    let mut c = zenoh::Config::default();
    let set = |c: &mut zenoh::Config, k: &str, v: &str| {
        c.insert_json5(k, v)
            .map_err(|e| anyhow::anyhow!("zenoh config {k}={v}: {e}"))
    };
    set(&mut c, "mode", "\"peer\"")?;
    set(&mut c, "scouting/multicast/enabled", "false")?;
    if let Some(l) = listen {
        set(&mut c, "listen/endpoints", &format!("[\"{l}\"]"))?;
    }
    if let Some(e) = connect {
        set(&mut c, "connect/endpoints", &format!("[\"{e}\"]"))?;
    }
    zenoh::open(c)
        .wait()
        .map_err(|e| anyhow::anyhow!("opening a zenoh session: {e}"))
}

pub(crate) fn sub(listen: &str, seconds: f64, warm: f64) -> anyhow::Result<()> {
    let s = open(Some(listen), None)?;
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let _sub = s
        .declare_subscriber(THR)
        .callback(move |_| {
            c.fetch_add(1, Ordering::Relaxed);
        })
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let end = s
        .declare_subscriber(END)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while count.load(Ordering::Relaxed) == 0 {
        if Instant::now() > deadline {
            bail!("no sample from the publisher in 30 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_secs_f64(warm));
    let (t0, c0) = (Instant::now(), count.load(Ordering::Relaxed));
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (t1, c1) = (Instant::now(), count.load(Ordering::Relaxed));
    let sent = sent_count(&end, Duration::from_secs(30))?;
    // Samples sent before the end marker are in before it (one TCP
    // link, one priority); wait briefly for the callback to count them.
    let stop = Instant::now() + Duration::from_secs(2);
    while count.load(Ordering::Relaxed) < sent && Instant::now() < stop {
        std::thread::sleep(Duration::from_millis(1));
    }
    let received = count.load(Ordering::Relaxed);
    println!(
        "{{\"msgs_per_s\":{:.1},\"received\":{received},\"sent\":{sent},\"lost\":{}}}",
        (c1 - c0) as f64 / (t1 - t0).as_secs_f64(),
        sent.saturating_sub(received)
    );
    Ok(())
}

/// Waits (up to 20 s) until the subscriber's session is connected and
/// matches `p`.
pub(crate) fn matched_subscriber(p: &zenoh::pubsub::Publisher<'_>) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p
        .matching_status()
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .matching()
    {
        if Instant::now() > deadline {
            bail!("no subscriber matched in 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The count a publisher puts on its end marker, waiting up to `wait`.
pub(crate) fn sent_count(
    end: &zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
    wait: Duration,
) -> anyhow::Result<u64> {
    let sent = end
        .recv_timeout(wait)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .context("the publisher never said how many it sent")?;
    let bytes = sent.payload().to_bytes();
    Ok(u64::from_le_bytes(
        bytes
            .as_ref()
            .try_into()
            .context("the publisher's count is not 8 bytes")?,
    ))
}

pub(crate) fn publish(connect: &str, size: usize, seconds: f64) -> anyhow::Result<()> {
    let s = open(None, Some(connect))?;
    let p = s
        .declare_publisher(THR)
        .congestion_control(CongestionControl::Block)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let payload = zenoh::bytes::ZBytes::from(vec![0x5au8; size]);
    matched_subscriber(&p)?;
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let mut sent: u64 = 0;
    while Instant::now() < stop {
        for _ in 0..64 {
            p.put(payload.clone())
                .wait()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        sent += 64;
    }
    end_with_count(&s, END, sent)
}

/// Puts `sent` on the end marker `key` and lets the session flush
/// before it closes (the subscriber's `sent_count` reads it).
pub(crate) fn end_with_count(s: &zenoh::Session, key: &str, sent: u64) -> anyhow::Result<()> {
    s.put(key, sent.to_le_bytes().to_vec())
        .congestion_control(CongestionControl::Block)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

type Ends = (
    zenoh::Session,
    zenoh::pubsub::Publisher<'static>,
    zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
);

/// A round trip's side: an express publisher on `out`, a subscriber
/// on `inp`.
fn ends(
    listen: Option<&str>,
    connect: Option<&str>,
    out: &'static str,
    inp: &str,
) -> anyhow::Result<Ends> {
    let s = open(listen, connect)?;
    let p = s
        .declare_publisher(out)
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let sub = s
        .declare_subscriber(inp)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((s, p, sub))
}

pub(crate) fn pong(listen: &str) -> anyhow::Result<()> {
    let (_s, p, sub) = ends(Some(listen), None, PONG, PING)?;
    while let Ok(sample) = sub.recv() {
        p.put(sample.payload().clone())
            .wait()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}

/// Pings until the pong answers (both sides matched), then drops the
/// late answers to the retries.
pub(crate) fn matched(
    p: &zenoh::pubsub::Publisher<'_>,
    sub: &zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
    payload: &zenoh::bytes::ZBytes,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        p.put(payload.clone())
            .wait()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Ok(Some(_)) = sub.recv_timeout(Duration::from_millis(100)) {
            break;
        }
        if Instant::now() > deadline {
            bail!("no pong in 20 s");
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    while let Ok(Some(_)) = sub.try_recv() {}
    Ok(())
}

pub(crate) fn ping(connect: &str, size: usize, iters: usize, warmup: usize) -> anyhow::Result<()> {
    let (_s, p, sub) = ends(None, Some(connect), PING, PONG)?;
    let payload = zenoh::bytes::ZBytes::from(vec![0x5au8; size]);
    matched(&p, &sub, &payload)?;
    let mut us = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let t = Instant::now();
        p.put(payload.clone())
            .wait()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        sub.recv_timeout(Duration::from_secs(5))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .context("a pong did not come in 5 s")?;
        if i >= warmup {
            us.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    print_rtt(us)
}
