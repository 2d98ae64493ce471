#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The netns LAN behaves like separate hosts on a switch: unicast and multicast pass
//! between hosts, nothing leaks to the root namespace, links can be cut, and nothing
//! is left behind.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tagwire_testkit::{skip_reason, Host, Lan};

/// Every wait for something that should happen gives up after this long.
const WATCHDOG: Duration = Duration::from_secs(5);

#[test]
fn a_datagram_crosses_the_lan_but_not_the_root_namespace() {
    if skipped() {
        return;
    }
    let lan = Lan::new(2).unwrap();
    let (h0, h1) = (lan.host(0), lan.host(1));
    // A root-namespace socket on the very port the datagram goes to.
    let root = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    let port = root.local_addr().unwrap().port();
    let to = SocketAddr::from((h1.addr(), port));

    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = h1
        .spawn(move || {
            let socket = UdpSocket::bind(to).unwrap();
            ready_tx.send(()).unwrap();
            recv_within(&socket, WATCHDOG)
        })
        .unwrap();
    ready_rx.recv_timeout(WATCHDOG).unwrap();
    let from = h0.addr();
    h0.spawn(move || {
        let socket = UdpSocket::bind((from, 0)).unwrap();
        socket.send_to(b"hello h1", to).unwrap();
    })
    .unwrap()
    .join()
    .unwrap();

    assert_eq!(receiver.join().unwrap().as_deref(), Some(&b"hello h1"[..]));
    assert_eq!(recv_within(&root, Duration::from_millis(100)), None);
    let root_addrs = run_ok(Command::new("ip").args(["-o", "-4", "addr", "show"]));
    for host in lan.hosts() {
        assert!(
            !root_addrs.contains(&format!("inet {}/", host.addr())),
            "{root_addrs}"
        );
    }
}

#[test]
fn a_multicast_datagram_from_host_0_reaches_hosts_1_and_2() {
    if skipped() {
        return;
    }
    let lan = Lan::new(3).unwrap();
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 1, 2, 3), 47_001);
    let receivers: Vec<UdpSocket> = [lan.host(1), lan.host(2)]
        .into_iter()
        .map(|host| {
            let addr = host.addr();
            in_host(host, move || {
                let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, group.port()))?;
                socket.join_multicast_v4(group.ip(), &addr)?;
                Ok(socket)
            })
        })
        .collect();
    let from = lan.host(0).addr();
    let sender = in_host(lan.host(0), move || UdpSocket::bind((from, 0)));

    for receiver in &receivers {
        let got = send_until_received(&sender, group.into(), receiver, "beacon");
        assert!(got.starts_with("beacon"), "{got}");
    }
}

#[test]
fn a_link_down_host_receives_nothing_until_link_up() {
    if skipped() {
        return;
    }
    let lan = Lan::new(2).unwrap();
    let (h0, h1) = (lan.host(0), lan.host(1));
    let (from, at) = (h0.addr(), h1.addr());
    let sender = in_host(h0, move || UdpSocket::bind((from, 0)));
    let receiver = in_host(h1, move || UdpSocket::bind((at, 0)));
    let to = receiver.local_addr().unwrap();
    send_until_received(&sender, to, &receiver, "before");

    h1.link_down().unwrap();
    sender.send_to(b"down", to).unwrap();
    let deadline = Instant::now() + Duration::from_millis(300);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let got = recv_within(&receiver, left);
        assert_ne!(
            got.as_deref(),
            Some(&b"down"[..]),
            "received through a downed link"
        );
        if got.is_none() {
            break;
        }
    }

    h1.link_up().unwrap();
    send_until_received(&sender, to, &receiver, "after");
    let routes = run_ok(h1.command("ip").args(["route", "show", "224.0.0.0/4"]));
    assert!(
        routes.contains("dev eth0"),
        "multicast route not restored: {routes}"
    );
}

#[test]
fn shaping_installs_and_removes_a_token_bucket() {
    if skipped() {
        return;
    }
    let lan = Lan::new(1).unwrap();
    let host = lan.host(0);
    let qdisc = || run_ok(host.command("tc").args(["qdisc", "show", "dev", "eth0"]));
    host.shape(1_000_000, 10_000, 50_000).unwrap();
    assert!(qdisc().contains("tbf"), "{}", qdisc());
    host.unshape().unwrap();
    host.unshape().unwrap();
    assert!(!qdisc().contains("tbf"), "{}", qdisc());
}

/// A routed LAN (`Lan::route`): hosts keep their addresses and reach each
/// other through the router, which serves a shaped port's band 0 first by
/// each packet's TOS byte. Host 1 floods host 2 through a 10 Mbit/s port
/// (`shape_htb_inbound`) while host 0 sends probes of TOS 0xb0 (DSCP 44)
/// and of TOS 0: the first pass the queue, the second wait in it.
#[test]
fn a_router_port_serves_band_0_first_when_two_hosts_send_to_a_third() {
    if skipped() {
        return;
    }
    let lan = Lan::new(3).unwrap();
    lan.route().unwrap();
    let (h0, h1, h2) = (lan.host(0), lan.host(1), lan.host(2));
    h2.shape_htb_inbound(10_000_000).unwrap();
    let to = SocketAddr::from((h2.addr(), 47_010));
    let sink = in_host(h2, move || UdpSocket::bind(to));
    let start = Instant::now();
    // Each probe carries its kind and send time (µs since `start`).
    let (flood, from1) = (Duration::from_millis(3000), h1.addr());
    let flooder = h1
        .spawn(move || {
            let s = UdpSocket::bind((from1, 0)).unwrap();
            let bulk = [0u8; 1400];
            // About 1.15x the port's rate: its queue grows by ~130
            // packets (~150 ms) a second.
            while start.elapsed() < flood {
                for _ in 0..10 {
                    let _ = s.send_to(&bulk, to);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
        .unwrap();
    let from0 = h0.addr();
    let prober = h0
        .spawn(move || {
            let classed = |tos: u8| {
                let s = UdpSocket::bind((from0, 0)).unwrap();
                rustix::net::sockopt::set_ip_tos(&s, tos).unwrap();
                s
            };
            let (critical, normal) = (classed(0xb0), classed(0));
            std::thread::sleep(Duration::from_millis(1500));
            for _ in 0..20 {
                for (kind, s) in [(1u8, &critical), (2u8, &normal)] {
                    let mut m = [kind; 16];
                    m[8..].copy_from_slice(&(start.elapsed().as_micros() as u64).to_le_bytes());
                    s.send_to(&m, to).unwrap();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .unwrap();
    // (A normal probe that finds the queue full is dropped: the probes
    // that arrived are the figure; the flood ends, the queue drains.)
    let mut waits: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    while waits[0].len() < 20 || waits[1].len() < 20 {
        let Some(m) = recv_within(&sink, Duration::from_secs(2)) else {
            break;
        };
        if m.len() == 16 && (m[0] == 1 || m[0] == 2) {
            let sent = u64::from_le_bytes(m[8..].try_into().unwrap());
            waits[usize::from(m[0] - 1)].push(start.elapsed().as_micros() as u64 - sent);
        }
    }
    prober.join().unwrap();
    flooder.join().unwrap();
    for w in &mut waits {
        w.sort();
    }
    assert_eq!(waits[0].len(), 20, "critical probes lost");
    assert!(
        waits[1].len() >= 10,
        "{} normal probes of 20 arrived",
        waits[1].len()
    );
    let (critical, normal) = (waits[0][10], waits[1][waits[1].len() / 2]);
    let worst = waits[0][19];
    println!(
        "through a full 10 Mbit/s router port: critical p50 {critical} us (max {worst}), \
         normal p50 {normal} us"
    );
    // A full pfifo_fast band of 1400 B packets at 10 Mbit/s is ~1.1 ms a
    // packet; hundreds wait ahead of a normal probe.
    assert!(
        normal >= 50_000,
        "the flood did not fill the port's queue: {normal} us"
    );
    // Every critical probe, the slowest too, passes the queue.
    assert!(
        worst * 10 <= normal,
        "critical max {worst} us, normal p50 {normal} us"
    );
    // Forwarded, not bridged: the router answers for the subnet's .254.
    let routes = run_ok(Command::new("ip").args(["-n", lan.switch_netns(), "-4", "route"]));
    assert!(routes.contains(&format!("{} dev", h2.addr())), "{routes}");
}

#[test]
fn a_command_runs_inside_the_host() {
    if skipped() {
        return;
    }
    let lan = Lan::new(1).unwrap();
    let host = lan.host(0);
    let out = run_ok(
        host.command("ip")
            .args(["-o", "-4", "addr", "show", "dev", "eth0"]),
    );
    assert!(out.contains(&format!("inet {}/24", host.addr())), "{out}");
}

#[test]
fn dropping_the_lan_deletes_its_namespaces() {
    if skipped() {
        return;
    }
    let lan = Lan::new(2).unwrap();
    let mut names: Vec<String> = lan.hosts().iter().map(|h| h.netns().to_owned()).collect();
    names.push(lan.switch_netns().to_owned());
    let listed = |name: &str| {
        run_ok(Command::new("ip").args(["netns", "list"]))
            .lines()
            .any(|line| line.split_whitespace().next() == Some(name))
    };
    assert!(names.iter().all(|name| listed(name)));
    drop(lan);
    for name in &names {
        assert!(!listed(name), "{name} is still there");
    }
}

/// Prints why the test cannot run here, if it cannot.
fn skipped() -> bool {
    let Some(reason) = skip_reason() else {
        return false;
    };
    println!("skipped: {reason}");
    true
}

/// Runs `make` on a thread inside `host` and returns what it made; sockets keep the
/// namespace they were created in.
fn in_host<T: Send + 'static>(
    host: &Host,
    make: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> T {
    host.spawn(make).unwrap().join().unwrap().unwrap()
}

/// One datagram, or `None` if none arrives within `wait`.
fn recv_within(socket: &UdpSocket, wait: Duration) -> Option<Vec<u8>> {
    socket.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0; 2048];
    match socket.recv_from(&mut buf) {
        Ok((n, _)) => Some(buf[..n].to_vec()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("recv: {e}"),
    }
}

/// Sends `tag-N` every 50 ms until `receiver` gets a datagram starting with `tag`
/// (older datagrams are skipped); returns it. Panics after [`WATCHDOG`].
fn send_until_received(
    sender: &UdpSocket,
    to: SocketAddr,
    receiver: &UdpSocket,
    tag: &str,
) -> String {
    let deadline = Instant::now() + WATCHDOG;
    for n in 0.. {
        assert!(
            Instant::now() < deadline,
            "no {tag} datagram within {WATCHDOG:?}"
        );
        sender.send_to(format!("{tag}-{n}").as_bytes(), to).unwrap();
        while let Some(got) = recv_within(receiver, Duration::from_millis(50)) {
            let got = String::from_utf8(got).unwrap();
            if got.starts_with(tag) {
                return got;
            }
        }
    }
    unreachable!("the loop above only ends by returning or panicking")
}

/// Runs a command that must succeed and returns its stdout.
fn run_ok(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}
