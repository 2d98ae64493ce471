//! The UDP floors: ping-pong and throughput on loopback or across a link,
//! and the dispatcher-thread relay and fan-out (one datagram to a thread
//! that hands it on through shared memory), the floors of tagwire's
//! delivery manager.

use super::*;

/// A dispatcher thread's loop (the delivery manager's hand-over, bare):
/// `total` datagrams of `len` bytes received on `sock`, each copied into
/// `to` and announced to up to `sleepers` threads with one `FUTEX_WAKE`.
/// Stops early when `stop`'s flag is raised by a failing peer thread.
pub(super) fn dispatch(
    sock: &UdpSocket,
    to: &Fan,
    stop: &Fan,
    len: usize,
    total: u32,
    sleepers: u32,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; len + 1];
    for _ in 0..total {
        if stop.stop.load(Ordering::Relaxed) {
            bail!("peer stopped");
        }
        let n = sock.recv(&mut buf).context("dispatcher recv")?;
        let Some(head) = buf.get(..4).filter(|_| n == len) else {
            bail!("unexpected {n}-byte datagram");
        };
        let seq = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        for w in to.ping.iter() {
            w.store(u64::from(seq), Ordering::Relaxed);
        }
        publish(&to.seq.0, seq, Wait::Futex, sleepers);
    }
    Ok(())
}

/// The remote fan-out floor (`"raw-udp"` in `tagwire perf remote-fanout`):
/// the same hand-over as a node's delivery manager, without the
/// middleware. A ping thread sends a `size`-byte datagram on `a` (at least
/// 4 bytes: the round's sequence number leads it); on the other host a
/// dispatcher thread receives it on `b`, copies it into memory shared with
/// `receivers` threads and wakes them all with one `FUTEX_WAKE`; every
/// receiver (`all_ack`) or only the last started answers with a datagram of
/// the same size on `b`, and the ping thread waits for every answer it
/// expects (each must carry the round's number). Placement: ping on the
/// first CPU of `opts`, receivers on the second, the dispatcher left to the
/// scheduler, as tagwire's daemons are. Only the receiving host has a hop:
/// the ping leaves and the answers arrive at the pinging thread's own
/// socket, where tagwire passes through its daemon's forwarder and delivery
/// manager; the floor is that of the receiving side's hand-off.
pub fn udp_fanout_rtt(
    a: UdpSocket,
    b: UdpSocket,
    size: usize,
    receivers: usize,
    all_ack: bool,
    (iters, warmup): (usize, usize),
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    if receivers == 0 {
        bail!("at least one receiver");
    }
    if size > MAX_UDP_PAYLOAD {
        bail!("UDP payload {size} exceeds {MAX_UDP_PAYLOAD} bytes");
    }
    let len = size.max(4);
    let total = u32::try_from(warmup + iters).context("too many round trips")?;
    a.set_read_timeout(Some(STALL_TIMEOUT))?;
    b.set_read_timeout(Some(STALL_TIMEOUT))?;
    let fan = Fan::new(len);
    let (ping_cpu, pong_cpu) = opts.cpus.unzip();
    let mut handles = Vec::with_capacity(receivers + 1);
    for i in 0..receivers {
        let acking = all_ack || i + 1 == receivers;
        let sock = fan.fail(b.try_clone().context("cloning the UDP socket"))?;
        let f = Arc::clone(&fan);
        let h = spawn_pinned(&format!("udp-fan-{i}"), pong_cpu, move || {
            let mut out = vec![0u8; len];
            let mut answer = |seq: u32| {
                out[..4].copy_from_slice(&seq.to_le_bytes());
                sock.send(&out).context("answer send")?;
                Ok(())
            };
            let answer = acking.then_some(&mut answer as &mut dyn FnMut(u32) -> _);
            f.fail(fan_receiver(&f, total, answer, Wait::Futex))
        });
        handles.push(fan.fail(h)?);
    }
    // The dispatcher: one datagram in, one copy, one wake for everyone.
    let f = Arc::clone(&fan);
    let dispatcher = spawn_pinned("udp-fan-dispatch", None, move || {
        f.fail(dispatch(&b, &f, &f, len, total, i32::MAX as u32))
    });
    handles.push(fan.fail(dispatcher)?);
    let f = Arc::clone(&fan);
    let sender = spawn_pinned("udp-fan-ping", ping_cpu, move || {
        let expect = if all_ack { receivers } else { 1 };
        let mut laps = Laps::new(iters, warmup);
        let mut local = vec![0u8; len];
        let mut back = vec![0u8; len + 1];
        let r = (|| {
            for seq in 1..=total {
                local[..4].copy_from_slice(&seq.to_le_bytes());
                a.send(&local).context("ping send")?;
                for _ in 0..expect {
                    let n = a.recv(&mut back).context("ping recv")?;
                    if n != len || back[..4] != seq.to_le_bytes() {
                        bail!("unexpected answer in round trip {seq}: {n} bytes");
                    }
                }
                laps.lap();
            }
            Ok(())
        })();
        f.fail(r).map(|()| laps.samples)
    });
    fan.collect(sender, handles)
}

/// The remote round trip's floor through a delivery manager on **both**
/// hosts (`"raw-relay"` in `tagwire perf remote-rtt`): the hand-over DESIGN
/// §2 prescribes, one datagram stream between per-host dispatchers that wake
/// the local receiver, without the middleware. A ping thread sends a
/// `size`-byte datagram on `a` (at least 4 bytes: the round's sequence number
/// leads it); on the other host a dispatcher thread receives it on `b`,
/// copies it into memory shared with a pong thread and wakes it with one
/// `FUTEX_WAKE`; the pong thread answers with a datagram of the same size on
/// `b`, which a dispatcher on the first host receives on `a` and hands to the
/// ping thread the same way. Two wake-ups per direction (dispatcher, then
/// receiver) where [`udp_pingpong`] has one. Placement: ping and pong threads
/// on the CPUs of `opts`, the dispatchers left to the scheduler, as tagwire's
/// daemons are.
pub fn udp_relay_pingpong(
    a: UdpSocket,
    b: UdpSocket,
    size: usize,
    (iters, warmup): (usize, usize),
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    if size > MAX_UDP_PAYLOAD {
        bail!("UDP payload {size} exceeds {MAX_UDP_PAYLOAD} bytes");
    }
    let len = size.max(4);
    let total = u32::try_from(warmup + iters).context("too many round trips")?;
    a.set_read_timeout(Some(STALL_TIMEOUT))?;
    b.set_read_timeout(Some(STALL_TIMEOUT))?;
    // `here` is the first host's hand-over (to the ping thread), `there`
    // the second's (to the pong thread); `here.stop` stops everyone.
    let (here, there) = (Fan::new(len), Fan::new(len));
    let (ping_cpu, pong_cpu) = opts.cpus.unzip();
    let mut handles = Vec::with_capacity(3);
    for (name, sock, to) in [("udp-relay-a", &a, &here), ("udp-relay-b", &b, &there)] {
        let sock = here.fail(sock.try_clone().context("cloning the UDP socket"))?;
        let (to, all) = (Arc::clone(to), Arc::clone(&here));
        let h = spawn_pinned(name, None, move || {
            all.fail(dispatch(&sock, &to, &all, len, total, 1))
        });
        handles.push(here.fail(h)?);
    }
    let (t, all) = (Arc::clone(&there), Arc::clone(&here));
    let pong = spawn_pinned("udp-relay-pong", pong_cpu, move || {
        let mut out = vec![0u8; len];
        let r = (|| {
            for next in 1..=total {
                let seq = wait_reach(&t.seq.0, next, &all.stop, Wait::Futex)?;
                if t.ping
                    .iter()
                    .any(|w| w.load(Ordering::Relaxed) != u64::from(seq))
                {
                    bail!("ping {seq} corrupted");
                }
                out[..4].copy_from_slice(&seq.to_le_bytes());
                b.send(&out).context("pong send")?;
            }
            Ok(())
        })();
        all.fail(r)
    });
    handles.push(here.fail(pong)?);
    let h = Arc::clone(&here);
    let ping = spawn_pinned("udp-relay-ping", ping_cpu, move || {
        let mut laps = Laps::new(iters, warmup);
        let mut local = vec![0u8; len];
        let r = (|| {
            for seq in 1..=total {
                local[..4].copy_from_slice(&seq.to_le_bytes());
                a.send(&local).context("ping send")?;
                let got = wait_reach(&h.seq.0, seq, &h.stop, Wait::Futex)?;
                if got != seq
                    || h.ping
                        .iter()
                        .any(|w| w.load(Ordering::Relaxed) != u64::from(seq))
                {
                    bail!("unexpected answer in round trip {seq}");
                }
                laps.lap();
            }
            Ok(())
        })();
        h.fail(r).map(|()| laps.samples)
    });
    here.collect(ping, handles)
}

pub(super) fn loopback_pair() -> anyhow::Result<(UdpSocket, UdpSocket)> {
    let a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("binding UDP socket on 127.0.0.1")?;
    let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("binding UDP socket on 127.0.0.1")?;
    a.connect(b.local_addr()?)
        .context("connecting UDP socket")?;
    b.connect(a.local_addr()?)
        .context("connecting UDP socket")?;
    Ok((a, b))
}

/// `"raw-udp"`: ping-pong of one `size`-byte datagram between two connected
/// UDP sockets on 127.0.0.1 with blocking `recv`, two threads, no pinning.
pub fn raw_udp_rtt(size: usize, iters: usize, warmup: usize) -> anyhow::Result<Vec<Duration>> {
    raw_udp_rtt_with(size, iters, warmup, &RawOpts::default())
}

/// [`raw_udp_rtt`] with thread placement.
pub fn raw_udp_rtt_with(
    size: usize,
    iters: usize,
    warmup: usize,
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    let (a, b) = loopback_pair()?;
    udp_pingpong(a, b, size, iters, warmup, opts)
}

/// The `raw-udp` ping-pong over two sockets connected to each other (on
/// loopback, or in two network namespaces for the multi-host benchmarks):
/// `a` pings, `b` echoes.
pub fn udp_pingpong(
    a: UdpSocket,
    b: UdpSocket,
    size: usize,
    iters: usize,
    warmup: usize,
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    if size > MAX_UDP_PAYLOAD {
        bail!("UDP payload {size} exceeds {MAX_UDP_PAYLOAD} bytes");
    }
    a.set_read_timeout(Some(STALL_TIMEOUT))?;
    b.set_read_timeout(Some(STALL_TIMEOUT))?;
    let total = warmup + iters;
    let (ping_cpu, pong_cpu) = opts.cpus.unzip();
    let pong = spawn_pinned("udp-pong", pong_cpu, move || {
        let mut buf = vec![0u8; size.max(1)];
        for _ in 0..total {
            let n = b.recv(&mut buf).context("pong recv")?;
            b.send(&buf[..n]).context("pong send")?;
        }
        Ok(())
    })?;
    let ping = spawn_pinned("udp-ping", ping_cpu, move || {
        let mut laps = Laps::new(iters, warmup);
        let mut local = vec![0u8; size];
        let mut back = vec![0u8; size + 1];
        for i in 0..total {
            let marker = i as u8;
            if let Some(first) = local.first_mut() {
                *first = marker;
            }
            a.send(&local).context("ping send")?;
            let n = a.recv(&mut back).context("ping recv")?;
            laps.lap();
            if n != size || (size > 0 && back[0] != marker) {
                bail!("unexpected reply in round trip {i}: {n} bytes");
            }
        }
        Ok(laps.samples)
    });
    // If ping fails, pong runs into its read timeout and ends on its own.
    let samples = join(ping?)?;
    join(pong)?;
    Ok(samples)
}

/// Raw UDP throughput on 127.0.0.1: a sender thread sends `size`-byte
/// datagrams (one per message) as fast as it can for a 0.2 s warm-up plus
/// `duration`; returns the messages per second *received* during
/// `duration` (datagrams the kernel dropped for lack of buffer don't count).
pub fn raw_udp_throughput(size: usize, duration: Duration) -> anyhow::Result<f64> {
    let (tx, rx) = loopback_pair()?;
    udp_throughput(tx, rx, size, duration)
}

/// [`raw_udp_throughput`] over two connected sockets (`tx` sends, `rx`
/// counts), e.g. in two network namespaces.
pub fn udp_throughput(
    tx: UdpSocket,
    rx: UdpSocket,
    size: usize,
    duration: Duration,
) -> anyhow::Result<f64> {
    udp_throughput_as(tx, rx, size, duration, None)
}

/// The kernel's floor for bulk UDP across a link (`raw-udp-gso`): the
/// bytes of `size`-byte messages as MTU-sized datagrams (`segment`
/// bytes), up to 64 KiB of them per send (UDP segmentation offload) and
/// received coalesced (UDP GRO). Messages per second = bytes / `size`.
pub fn udp_gso_throughput(
    tx: UdpSocket,
    rx: UdpSocket,
    size: usize,
    segment: usize,
    duration: Duration,
) -> anyhow::Result<f64> {
    if !tagwire_net::gso::gso_supported(&tx) {
        bail!("the kernel has no UDP_SEGMENT");
    }
    tagwire_net::gso::enable_gro(&rx).context("UDP_GRO")?;
    udp_throughput_as(tx, rx, size, duration, Some(segment))
}

fn udp_throughput_as(
    tx: UdpSocket,
    rx: UdpSocket,
    size: usize,
    duration: Duration,
    segment: Option<usize>,
) -> anyhow::Result<f64> {
    if size > MAX_UDP_PAYLOAD {
        bail!("UDP payload {size} exceeds {MAX_UDP_PAYLOAD} bytes");
    }
    // Best effort; the default buffer works, just with more drops.
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&rx, 4 << 20);
    rx.set_read_timeout(Some(Duration::from_millis(100)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));

    let receiver = {
        let (stop, received) = (Arc::clone(&stop), Arc::clone(&received));
        spawn_pinned("udp-rx", None, move || {
            let mut buf = vec![0u8; tagwire_net::gso::RECV_BUFFER.max(size + 1)];
            while !stop.load(Ordering::Relaxed) {
                match tagwire_net::gso::recv_coalesced(&rx, &mut buf) {
                    // Bytes when segmented, datagrams otherwise.
                    Ok(m) => {
                        received.fetch_add(
                            if segment.is_some() { m.len as u64 } else { 1 },
                            Ordering::Relaxed,
                        );
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(e).context("receiver recv"),
                }
            }
            Ok(())
        })?
    };
    let sender = {
        let stop = Arc::clone(&stop);
        spawn_pinned("udp-tx", None, move || {
            // Segmented: as many whole segments as one send takes.
            let len = segment.map_or(size, |g| {
                g * (tagwire_net::gso::MAX_BYTES / g).min(tagwire_net::gso::MAX_SEGMENTS)
            });
            let payload = vec![0x5au8; len];
            let to = tx.peer_addr()?;
            let mut errors = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let sent = match segment {
                    Some(g) => tagwire_net::gso::send_segments(&tx, to, &payload, g),
                    None => tx.send(&payload),
                };
                if sent.is_err() {
                    // ENOBUFS/ECONNREFUSED can occur transiently under load.
                    errors += 1;
                    if errors > 1_000_000 {
                        return Err(anyhow!("sender: persistent send errors"));
                    }
                }
            }
            Ok(())
        })
    };
    let sender = match sender {
        Ok(s) => s,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = join(receiver);
            return Err(e);
        }
    };
    thread::sleep(Duration::from_millis(200));
    let c0 = received.load(Ordering::Relaxed);
    let t0 = Instant::now();
    thread::sleep(duration);
    let c1 = received.load(Ordering::Relaxed);
    let dt = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let s = join(sender);
    let r = join(receiver);
    s?;
    r?;
    if dt <= 0.0 {
        bail!("empty measurement window");
    }
    let per = segment.map_or(1.0, |_| size as f64);
    Ok((c1 - c0) as f64 / per / dt)
}
