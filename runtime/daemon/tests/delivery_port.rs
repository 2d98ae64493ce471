#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The delivery port's two sockets (`tagwire_net::udp_socket_with_sender`)
//! never join another daemon's: in a namespace whose ephemeral range is two
//! ports, two daemons asking for any port get one each and a third is
//! refused. (The kernel's pick for a socket of an `SO_REUSEPORT` group
//! does not pass over a port another group of the same user holds: without
//! a probe bind outside any group first, the third would join one of the
//! two groups and silently receive nothing.)

use std::net::SocketAddr;

use tagwire_testkit::{skip_reason, Lan};

#[test]
fn a_daemon_asking_for_any_port_never_lands_in_another_daemons_group() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let lan = Lan::new(1).unwrap();
    let host = lan.host(0);
    let ip = host.addr();
    let outcome = host
        .spawn(move || {
            // (This thread's namespace's setting: /proc/sys/net follows it.)
            if let Err(e) = std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "40000 40001")
            {
                return Err(format!("cannot narrow the ephemeral range: {e}"));
            }
            let any = SocketAddr::new(ip.into(), 0);
            let (a, _a) = tagwire_net::udp_socket_with_sender(any).unwrap();
            let (b, _b) = tagwire_net::udp_socket_with_sender(any).unwrap();
            let ports = [
                a.local_addr().unwrap().port(),
                b.local_addr().unwrap().port(),
            ];
            Ok((ports, tagwire_net::udp_socket_with_sender(any).map(|_| ())))
        })
        .unwrap()
        .join()
        .unwrap();
    let (ports, third) = match outcome {
        Ok(o) => o,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    assert_ne!(ports[0], ports[1], "one port each");
    assert!(
        ports.iter().all(|p| (40000..=40001).contains(p)),
        "{ports:?}"
    );
    let e = third.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
}

/// A daemon whose delivery port another program holds is refused after
/// `tagwire_net::BIND_PATIENCE`, and the error says which socket at which
/// address (two `.ci/run` failures said only "Address already in use").
#[test]
fn a_daemon_refused_its_port_says_which_socket_and_address() {
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = held.local_addr().unwrap();
    let dir = std::env::temp_dir().join(format!("tagwire-port-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut net = tagwire_daemon::NetConfig::new(at.ip());
    (net.control_port, net.delivery_port, net.multicast_port) = (0, at.port(), 0);
    net.discovery = None;
    let started = std::time::Instant::now();
    let e = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
        socket: dir.join("d.sock"),
        net: Some(net),
        ..tagwire_daemon::Config::default()
    })
    .unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(started.elapsed() >= tagwire_net::BIND_PATIENCE);
    let said = e.to_string();
    assert!(
        said.contains(&format!("the delivery port (UDP) {at}")) && said.contains("in use"),
        "{said}"
    );
    drop(held);
}
