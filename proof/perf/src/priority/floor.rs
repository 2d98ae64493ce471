//! The floors of `tagwire perf priority`: the same request and reply as
//! the measured channel between plain sockets with the critical class's
//! TOS, in the same namespaces beside the same load. What this machine
//! allows a prioritised channel: tagwire's critical row is read against it.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tagwire::{Priority, Sched};

use super::{joined, round_trips, Spec};
use crate::remote::Site;

/// The critical class's TOS byte, which both floors carry.
const TOS: u8 = Priority::Critical.tos();

/// Round trips and the load's Mbit/s, as the probers return them.
type Probed = anyhow::Result<(Vec<f64>, f64)>;

/// Runs a floor: `echo` on a thread in the far host's namespace (given
/// that host's address, where to say its own, and when to stop), then
/// `probe` on a thread in the prober's host's namespace (given the echo's
/// address), both at `sched`; returns what the prober measured.
fn run(
    site: &Site,
    spec: &Spec,
    sched: Sched,
    load_bytes: &Arc<AtomicU64>,
    echo: impl FnOnce(Ipv4Addr, Sender<SocketAddr>, Arc<AtomicBool>) -> anyhow::Result<()>
        + Send
        + 'static,
    probe: impl FnOnce(SocketAddr, &Spec, &AtomicU64) -> Probed + Send + 'static,
) -> Probed {
    let done = Arc::new(AtomicBool::new(false));
    let (a, b, _) = spec.figure.ends();
    let far = site.host(b).addr();
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let stop = done.clone();
    let echo = site.host(b).spawn(move || -> anyhow::Result<()> {
        tagwire::set_thread_sched(sched)?;
        echo(far, port_tx, stop)
    })?;
    let to = port_rx
        .recv_timeout(Duration::from_secs(5))
        .context("the floor's echo did not start")?;
    let (spec, load_bytes) = (spec.clone(), load_bytes.clone());
    let prober = site.host(a).spawn(move || -> Probed {
        tagwire::set_thread_sched(sched)?;
        probe(to, &spec, &load_bytes)
    })?;
    let probed = joined(prober.join(), "floor prober");
    done.store(true, Ordering::Relaxed);
    joined(echo.join(), "floor echo")?;
    probed
}

/// The UDP floor: each request from a UDP socket with the critical TOS
/// to an echo's, paced as the tagwire probe.
pub(super) fn udp(site: &Site, spec: &Spec, sched: Sched, load_bytes: &Arc<AtomicU64>) -> Probed {
    let classed = |addr: Ipv4Addr| -> std::io::Result<UdpSocket> {
        let s = UdpSocket::bind(SocketAddr::from((addr, 0)))?;
        rustix::net::sockopt::set_ip_tos(&s, TOS)?;
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        Ok(s)
    };
    let near = site.host(spec.figure.ends().0).addr();
    let echo = move |far: Ipv4Addr, ready: Sender<SocketAddr>, stop: Arc<AtomicBool>| {
        let s = classed(far)?;
        ready.send(s.local_addr()?)?;
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                s.send_to(&buf[..n], from)?;
            }
        }
        Ok(())
    };
    let probe = move |to: SocketAddr, spec: &Spec, load_bytes: &AtomicU64| -> Probed {
        let s = classed(near)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = [0u8; 2048];
        let mut round_trip = |payload: &[u8]| -> anyhow::Result<()> {
            s.send_to(payload, to)?;
            match s.recv_from(&mut buf) {
                Ok(_) => Ok(()),
                Err(e) => bail!("no reply within 5 s: {e}"),
            }
        };
        round_trips(spec, &mut round_trip, load_bytes)
    };
    run(site, spec, sched, load_bytes, echo, probe)
}

/// The TCP floor: as [`udp`], over one TCP connection (no Nagle delay)
/// whose two ends carry the critical TOS.
pub(super) fn tcp(site: &Site, spec: &Spec, sched: Sched, load_bytes: &Arc<AtomicU64>) -> Probed {
    let classed = |c: &TcpStream| -> std::io::Result<()> {
        c.set_nodelay(true)?;
        rustix::net::sockopt::set_ip_tos(c, TOS)?;
        Ok(())
    };
    let size = spec.probe_size;
    let echo = move |far: Ipv4Addr, ready: Sender<SocketAddr>, stop: Arc<AtomicBool>| {
        let l = TcpListener::bind(SocketAddr::from((far, 0)))?;
        ready.send(l.local_addr()?)?;
        // (Not blocking: a prober that never connects must not hold the
        // echo forever.)
        l.set_nonblocking(true)?;
        let mut c = loop {
            match l.accept() {
                Ok((c, _)) => break c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e.into()),
            }
        };
        c.set_nonblocking(false)?;
        classed(&c)?;
        c.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut buf = vec![0u8; size];
        let mut have = 0;
        while !stop.load(Ordering::Relaxed) {
            match c.read(&mut buf[have..]) {
                Ok(0) => break,
                Ok(n) => have += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e.into()),
            }
            if have == size {
                c.write_all(&buf)?;
                have = 0;
            }
        }
        Ok(())
    };
    let probe = move |to: SocketAddr, spec: &Spec, load_bytes: &AtomicU64| -> Probed {
        // (From the prober's host's one address: its namespace has no other.)
        let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
        classed(&c)?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = vec![0u8; spec.probe_size];
        let mut round_trip = |payload: &[u8]| -> anyhow::Result<()> {
            c.write_all(payload)?;
            c.read_exact(&mut buf)
                .map_err(|e| anyhow::anyhow!("no reply within 5 s: {e}"))
        };
        round_trips(spec, &mut round_trip, load_bytes)
    };
    run(site, spec, sched, load_bytes, echo, probe)
}
