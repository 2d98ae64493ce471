//! # tagwire-net: IP sockets for daemon-to-daemon traffic
//!
//! docs/design.md §3, layer 2. The daemons talk over three kinds of IP socket, all
//! opened here so that socket options live in one place:
//!
//! * a UDP **multicast** socket for the discovery beacon ([`beacon_socket`]):
//!   address reuse so several listeners can share the group's port, loopback on
//!   so daemons in one network namespace hear each other, and the group joined on
//!   the interface that owns the node's address;
//! * the UDP **unicast** socket of the delivery manager, with large kernel
//!   buffers, since a burst of fragments must not overflow them, and a
//!   send-only sibling on the same port for the forwarders
//!   ([`udp_socket_with_sender`]);
//! * TCP streams for the update manager's links ([`tcp_listener`], and
//!   `std::net::TcpStream::connect_timeout` for the other end) with `TCP_NODELAY`
//!   so a table change is not held back by Nagle's algorithm.
//!
//! There is no protocol logic here: the codecs are in `tagwire-wire`, the state
//! machines in `tagwire-proto` and `tagwire-reliable`.

pub mod gso;

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Kernel buffer size asked for on delivery sockets (the kernel may cap it at
/// `net.core.rmem_max` / `wmem_max` unless we are privileged).
pub const DELIVERY_BUFFER: usize = 8 << 20;

/// A UDP socket for sending only, bound to `ip` (an ephemeral port): the
/// socket a daemon hands its clients so that their publishers send the first
/// copy of their own messages from their own thread (the send ticket), with
/// the node's address as source. Nothing is sent to it: its receive buffer is
/// the smallest the kernel allows.
pub fn send_socket(ip: std::net::IpAddr) -> io::Result<UdpSocket> {
    bound_udp(SocketAddr::new(ip, 0), 0)
}

/// A delivery socket bound to `addr` with large send and receive buffers,
/// and a second socket
/// for sending from the same address and port, which receives nothing:
/// everything sent to the port goes to the first.
///
/// Why two: a thread that sleeps in `recv` on a socket sits on its wait
/// queue, and every datagram sent from that socket, once the kernel lets
/// go of it, walks that queue (the socket's "room to write" wake-up). On a
/// veth link that walk runs on the sending CPU for each segmented send,
/// under a lock the sleeping thread takes too: with the delivery thread
/// asleep on the socket a forwarder sends from, 3.5 % of all CPU at 8 KiB
/// flat out (perf record -a). Nothing sleeps on the second socket.
///
/// How: both are in one `SO_REUSEPORT` group whose classic BPF program
/// picks the group's first socket (the delivery socket: a group's
/// sockets keep their places while it stays open) for every datagram, so
/// replies to what the second sends still reach the first. Where the
/// kernel refuses either option the second is a duplicate of the first's
/// descriptor (correct, at the cost above). Only a process of
/// the same user may join the group, and the program gives it nothing.
pub fn udp_socket_with_sender(addr: SocketAddr) -> io::Result<(UdpSocket, UdpSocket)> {
    let s = delivery_sockets(addr, None)?;
    Ok((s.recv, s.send))
}

/// The sockets of a delivery port ([`delivery_sockets`]).
#[derive(Debug)]
pub struct DeliverySockets {
    /// Receives everything sent to the port but the replies.
    pub recv: UdpSocket,
    /// Sends from the port; receives nothing.
    pub send: UdpSocket,
    /// Receives the datagrams that begin with the replies' prefix, where
    /// the kernel steers them (`None`: they reach `recv`).
    pub replies: Option<UdpSocket>,
}

/// [`udp_socket_with_sender`], and, with a `replies` prefix, a third
/// socket on the port that receives every datagram beginning with those
/// four bytes (the group's program steers them by their first bytes).
///
/// Why: a thread that sleeps on the delivery socket is woken by every
/// datagram, replies included; replies that a busy thread reads from a
/// socket of their own, without waiting on it, wake nobody. The replies
/// socket is never sent from (nothing walks its wait queue but arrivals).
/// Where the kernel refuses a third socket or the program, `replies` is
/// `None` and everything reaches `recv`.
pub fn delivery_sockets(addr: SocketAddr, replies: Option<[u8; 4]>) -> io::Result<DeliverySockets> {
    // The port first, by a socket in no group: one in use is refused, as
    // without the group, and port 0 gets a free one. (The kernel would
    // let a group's socket join another group of this user on its port,
    // a second daemon's included, which would then get nothing: for port
    // 0 it does not count such ports as taken.)
    let port = bound_udp(addr, 0)?.local_addr()?.port();
    let addr = SocketAddr::new(addr.ip(), port);
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = s.set_recv_buffer_size(DELIVERY_BUFFER);
    let _ = s.set_send_buffer_size(DELIVERY_BUFFER);
    let grouped = s.set_reuse_port(true).is_ok();
    // The probe is closed, but a child this process spawns at that moment
    // may still hold it (see `bind_patiently`).
    bind_patiently(&s, addr)?;
    let recv: UdpSocket = s.into();
    let sender = if grouped && steer(&recv, None).is_ok() {
        sibling(recv.local_addr()?, 0)
    } else {
        None
    };
    // The third in the group (its index 2), once the sender is second.
    let replies = match (replies, &sender) {
        (Some(prefix), Some(_)) => sibling(recv.local_addr()?, REPLIES_BUFFER)
            .filter(|_| steer(&recv, Some(prefix)).is_ok()),
        _ => None,
    };
    let send = match sender {
        Some(send) => send,
        None => recv.try_clone()?,
    };
    Ok(DeliverySockets {
        recv,
        send,
        replies,
    })
}

/// Gives every datagram to the delivery socket again (`recv` of
/// [`delivery_sockets`]): for a caller that cannot read the replies socket
/// after all (it must not be closed while steered to: the group would then
/// have no third socket and the kernel would pick one by hash).
pub fn unsteer(recv: &UdpSocket) -> io::Result<()> {
    steer(recv, None)
}

/// The replies socket's receive buffer: replies wait in it while the busy
/// thread that reads them is between reads.
const REPLIES_BUFFER: usize = 1 << 20;

/// Attaches to `sock`'s `SO_REUSEPORT` group a program that gives every
/// datagram to the group's first socket, or, with `replies`, those that
/// begin with its four bytes to the group's third.
fn steer(sock: &UdpSocket, replies: Option<[u8; 4]>) -> io::Result<()> {
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    // The program sees the datagram from its UDP payload on. A load past
    // its end ends the program with 0 (the first socket).
    let mut code = match replies {
        None => vec![op(libc::BPF_RET | libc::BPF_K, 0, 0, 0)],
        Some(prefix) => vec![
            // A = the first four bytes, in network order.
            op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
            op(
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                0,
                1,
                u32::from_be_bytes(prefix),
            ),
            op(libc::BPF_RET | libc::BPF_K, 0, 0, 2),
            op(libc::BPF_RET | libc::BPF_K, 0, 0, 0),
        ],
    };
    let prog = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_mut_ptr(),
    };
    // (`prog` points at `code`, alive for the call; the kernel copies it.)
    set_option(
        sock,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_REUSEPORT_CBPF,
        &prog,
    )
}

/// Sets socket option `name` at `level` to `value`, for the options
/// `socket2` does not have.
pub(crate) fn set_option<T>(
    sock: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is valid for reads of its size, and the descriptor
    // stays open while `sock` is borrowed.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Another member of the group bound at `addr` (see [`delivery_sockets`]:
/// the sender, or the replies socket), or `None` if the kernel refuses it.
fn sibling(addr: SocketAddr, recv_buffer: usize) -> Option<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).ok()?;
    let _ = s.set_recv_buffer_size(recv_buffer);
    let _ = s.set_send_buffer_size(DELIVERY_BUFFER);
    s.set_reuse_port(true).ok()?;
    s.bind(&SockAddr::from(addr)).ok()?;
    Some(s.into())
}

fn bound_udp(addr: SocketAddr, recv_buffer: usize) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: a smaller buffer works, it only drops sooner under bursts.
    let _ = s.set_recv_buffer_size(recv_buffer);
    let _ = s.set_send_buffer_size(DELIVERY_BUFFER);
    bind_patiently(&s, addr)?;
    Ok(s.into())
}

/// How long the delivery and control ports' binds try a port in use again
/// before it counts as taken: a socket this process closed stays bound
/// while a child it forked at that instant holds its descriptor, until
/// the child's `exec`.
pub const BIND_PATIENCE: Duration = Duration::from_millis(1000);

/// Binds `s` to `addr`, trying again for up to [`BIND_PATIENCE`] while the
/// address is in use.
///
/// Why: a socket closed by this process stays bound while any process
/// forked from it still has its descriptor, and every child holds a copy of
/// all of them from its `fork` (or `posix_spawn`) until its `exec` closes
/// them (`CLOEXEC`). A daemon restarted in a process that runs commands
/// (a test harness, a supervisor), or a port probed and bound again (as in
/// [`udp_socket_with_sender`]), can meet its own old socket for that
/// instant: `.ci/run` saw it twice as `AddrInUse` at a daemon's start.
/// A port another program really holds is still refused, a second later.
/// Port 0 (the kernel's choice) is not tried again: there `AddrInUse`
/// means no port of the range is free.
fn bind_patiently(s: &Socket, addr: SocketAddr) -> io::Result<()> {
    let give_up = Instant::now() + BIND_PATIENCE;
    let mut pause = Duration::from_millis(2);
    loop {
        match s.bind(&SockAddr::from(addr)) {
            Err(e)
                if e.kind() == io::ErrorKind::AddrInUse
                    && addr.port() != 0
                    && Instant::now() < give_up =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            done => return done,
        }
    }
}

/// A UDP socket that receives the multicast `group` on `port` via the interface
/// holding `interface` (an address of this host), and sends to the group from
/// that interface with loopback on.
pub fn beacon_socket(group: Ipv4Addr, port: u16, interface: Ipv4Addr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&SockAddr::from(SocketAddrV4::new(
        Ipv4Addr::UNSPECIFIED,
        port,
    )))?;
    s.join_multicast_v4(&group, &interface)?;
    s.set_multicast_if_v4(&interface)?;
    s.set_multicast_loop_v4(true)?;
    s.set_multicast_ttl_v4(1)?;
    Ok(s.into())
}

/// The socket of the multicast data carrier: receives on `port` whatever
/// groups it later joins, and sends to groups from the interface holding
/// `interface`, one hop, without looping back to this host.
pub fn multicast_data_socket(port: u16, interface: Ipv4Addr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    let _ = s.set_recv_buffer_size(DELIVERY_BUFFER);
    let _ = s.set_send_buffer_size(DELIVERY_BUFFER);
    s.bind(&SockAddr::from(SocketAddrV4::new(
        Ipv4Addr::UNSPECIFIED,
        port,
    )))?;
    s.set_multicast_if_v4(&interface)?;
    s.set_multicast_loop_v4(false)?;
    s.set_multicast_ttl_v4(1)?;
    Ok(s.into())
}

/// A TCP listener on `addr` that can be rebound at once after a restart
/// (address reuse, and up to [`BIND_PATIENCE`] for the instant a child of
/// this process may still hold the old one).
pub fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    bind_patiently(&s, addr)?;
    s.listen(64)?;
    Ok(s.into())
}

/// A TCP connection to `to` from this host's address `from` (any port), so
/// that the other end sees the node's own address as the source even on a
/// host with several (peers check it, docs/design.md §7).
pub fn tcp_connect_from(
    from: std::net::IpAddr,
    to: SocketAddr,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    if from.is_ipv4() == to.is_ipv4() && !from.is_unspecified() {
        s.bind(&SockAddr::from(SocketAddr::new(from, 0)))?;
    }
    s.connect_timeout(&SockAddr::from(to), timeout)?;
    Ok(s.into())
}

/// [`tcp_connect_from`], giving up early (`Interrupted`) once `keep` says
/// no: it is asked every [`CONNECT_POLL`] while the connection is under
/// way, so that a caller told to stop is not held by a peer that does not
/// answer for as long as `timeout`.
pub fn tcp_connect_from_while(
    from: std::net::IpAddr,
    to: SocketAddr,
    timeout: Duration,
    keep: impl Fn() -> bool,
) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    if from.is_ipv4() == to.is_ipv4() && !from.is_unspecified() {
        s.bind(&SockAddr::from(SocketAddr::new(from, 0)))?;
    }
    s.set_nonblocking(true)?;
    match s.connect(&SockAddr::from(to)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                if !keep() {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                let wait = left.min(CONNECT_POLL);
                let mut fd = libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(&s),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the socket, which outlives
                // the call.
                let n = unsafe { libc::poll(&mut fd, 1, wait.as_millis() as libc::c_int) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                } else if n > 0 {
                    if let Some(e) = s.take_error()? {
                        return Err(e);
                    }
                    break;
                }
            }
        }
        Err(e) => return Err(e),
    }
    s.set_nonblocking(false)?;
    Ok(s.into())
}

/// How often [`tcp_connect_from_while`] asks whether to go on.
pub const CONNECT_POLL: Duration = Duration::from_millis(100);

/// Options every peer link gets: no Nagle delay, keep-alive as a backstop to
/// the daemons' own heartbeats.
pub fn tune_link(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    socket2::SockRef::from(stream).set_keepalive(true)
}

/// Gives a TCP connection's packets the TOS byte (IPv4) or traffic class
/// (IPv6) `tos`, from its next segment on. The kernel also takes the
/// socket's queueing priority from it (`rt_tos2priority`: the
/// `pfifo_fast` band), as a classed datagram's per-send TOS does.
pub fn set_stream_tos(stream: &TcpStream, tos: u8) -> io::Result<()> {
    if stream.local_addr()?.is_ipv4() {
        socket2::SockRef::from(stream).set_tos(u32::from(tos))
    } else {
        let v = libc::c_int::from(tos);
        set_option(stream, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &v)
    }
}

/// Makes closing `stream` abortive: its unsent data is discarded and the
/// peer gets a reset, instead of the kernel delivering the data after the
/// close, however late. For a data connection given up on, whose unsent
/// frames the receiver already counted missing: delivered after the frames
/// of the next connection, they came out of order (found by `tagwire perf
/// soak`: a partition of two seconds).
pub fn abort_on_close(stream: &TcpStream) -> io::Result<()> {
    socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO))
}

/// The TOS byte (IPv4) or traffic class (IPv6) `stream` sends with.
pub fn stream_tos(stream: &TcpStream) -> io::Result<u8> {
    if stream.local_addr()?.is_ipv4() {
        Ok(socket2::SockRef::from(stream).tos()? as u8)
    } else {
        let mut v: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are valid for writes of the sizes given,
        // and the descriptor stays open while `stream` is borrowed.
        let r = unsafe {
            libc::getsockopt(
                std::os::fd::AsRawFd::as_raw_fd(stream),
                libc::IPPROTO_IPV6,
                libc::IPV6_TCLASS,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            Ok(v as u8)
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_connection_takes_a_class_and_changes_it() {
        for lo in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = TcpListener::bind(lo) else {
                println!("skipped {lo}: no such loopback here");
                continue;
            };
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            assert_eq!(stream_tos(&c).unwrap(), 0);
            set_stream_tos(&c, 0xb0).unwrap();
            assert_eq!(stream_tos(&c).unwrap(), 0xb0, "{lo}");
            set_stream_tos(&c, 0x28).unwrap();
            assert_eq!(stream_tos(&c).unwrap(), 0x28, "{lo}");
        }
    }

    #[test]
    fn a_connect_that_hangs_gives_up_when_told() {
        // A listener that accepts nothing, its queue full: the kernel
        // drops further SYNs, so the next connect hangs.
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        s.bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        s.listen(0).unwrap();
        let to = s.local_addr().unwrap().as_socket().unwrap();
        let from: std::net::IpAddr = Ipv4Addr::LOCALHOST.into();
        let mut queued = Vec::new();
        let mut hung = false;
        for _ in 0..8 {
            match tcp_connect_from(from, to, Duration::from_millis(300)) {
                Ok(c) => queued.push(c),
                Err(_) => {
                    hung = true;
                    break;
                }
            }
        }
        if !hung {
            println!("skipped: this kernel queues every connection");
            return;
        }
        let start = Instant::now();
        let told = start + Duration::from_millis(200);
        let e = tcp_connect_from_while(from, to, Duration::from_secs(5), || Instant::now() < told)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(200) + 2 * CONNECT_POLL,
            "{took:?}"
        );
        // Not told: it waits for its timeout.
        let e = tcp_connect_from_while(from, to, Duration::from_millis(300), || true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        // And connects where it can.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = tcp_connect_from_while(
            from,
            l.local_addr().unwrap(),
            Duration::from_secs(1),
            || true,
        )
        .unwrap();
        assert_eq!(c.peer_addr().unwrap(), l.local_addr().unwrap());
        drop(queued);
    }

    #[test]
    fn a_udp_socket_gets_buffers_and_an_address() {
        let (s, _) = udp_socket_with_sender("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(s.local_addr().unwrap().port(), 0);
    }

    #[test]
    fn replies_are_steered_to_their_own_socket_and_the_rest_to_the_delivery_socket() {
        use std::time::Duration;
        let prefix = *b"TD\x01\x03";
        let s = delivery_sockets("127.0.0.1:0".parse().unwrap(), Some(prefix)).unwrap();
        let Some(replies) = &s.replies else {
            println!("skipping: the kernel refused a third socket or its program");
            return;
        };
        let me = s.recv.local_addr().unwrap();
        assert_eq!(replies.local_addr().unwrap(), me, "one address and port");
        assert_eq!(s.send.local_addr().unwrap(), me);
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        for sock in [&s.recv, replies, &s.send] {
            sock.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
        }
        // A reply, a datagram that only begins like one, a short one and
        // an empty one, in that order.
        let sent: [&[u8]; 4] = [b"TD\x01\x03reply", b"TD\x01\x01data", b"TD", b""];
        for d in sent {
            peer.send_to(d, me).unwrap();
        }
        let mut buf = [0u8; 64];
        let (n, from) = replies.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from),
            (&b"TD\x01\x03reply"[..], peer.local_addr().unwrap())
        );
        for want in &sent[1..] {
            let n = s.recv.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], *want);
        }
        replies.set_nonblocking(true).unwrap();
        assert!(
            replies.recv(&mut buf).is_err(),
            "the replies socket got more"
        );
        s.send.set_nonblocking(true).unwrap();
        assert!(s.send.recv(&mut buf).is_err(), "the sender received");
        // Unsteered: a reply reaches the delivery socket.
        unsteer(&s.recv).unwrap();
        peer.send_to(b"TD\x01\x03again", me).unwrap();
        let n = s.recv.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"TD\x01\x03again");
        assert!(replies.recv(&mut buf).is_err(), "steered after unsteer");
    }

    #[test]
    fn what_is_sent_to_the_sending_sibling_reaches_the_delivery_socket() {
        for host in ["127.0.0.1", "::1"] {
            let ip: std::net::IpAddr = host.parse().unwrap();
            if UdpSocket::bind((ip, 0)).is_err() {
                println!("skipping {host}: no such loopback here");
                continue;
            }
            replies_reach_the_delivery_socket(ip);
        }
    }

    fn replies_reach_the_delivery_socket(ip: std::net::IpAddr) {
        use std::time::Duration;
        let (recv, send) = udp_socket_with_sender(SocketAddr::new(ip, 0)).unwrap();
        let me = recv.local_addr().unwrap();
        assert_eq!(send.local_addr().unwrap(), me, "one address and port");
        let inode = |s: &UdpSocket| {
            use std::os::fd::AsRawFd;
            std::fs::read_link(format!("/proc/self/fd/{}", s.as_raw_fd())).unwrap()
        };
        if inode(&recv) == inode(&send) {
            println!("skipping: the kernel refused SO_REUSEPORT or its program (one socket)");
            return;
        }
        recv.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        send.set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        let mut buf = [0u8; 16];
        // Replies from many ports: a group without the program would hand
        // about half of them to the sibling (the kernel spreads datagrams
        // by their addresses and ports).
        for i in 0..40u8 {
            let peer = UdpSocket::bind((ip, 0)).unwrap();
            peer.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            send.send_to(&[i], peer.local_addr().unwrap()).unwrap();
            let (n, from) = peer.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&[i][..], me), "sent from the port");
            peer.send_to(&[i, i], from).unwrap();
            let (n, _) = recv.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], &[i, i]);
        }
        assert!(
            send.recv_from(&mut buf).is_err(),
            "the sibling gets nothing"
        );
        // A second daemon on the port is refused, as without the group.
        let again = udp_socket_with_sender(me).map(|_| ()).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AddrInUse);
        // (Port 0 never lands in another group: runtime/daemon's
        // tests/delivery_port.rs, in a namespace with two ephemeral ports.)
    }

    /// A port held for a moment (as a forked child holds a closed socket
    /// until its `exec`) is bound once it is let go; one held longer than
    /// the patience is refused.
    #[test]
    fn a_port_held_for_a_moment_is_waited_for_and_one_held_longer_refused() {
        use std::time::Duration;
        let held = tcp_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let at = held.local_addr().unwrap();
        let udp_held = bound_udp(at, 0).unwrap();
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop((held, udp_held));
        });
        let started = Instant::now();
        let tcp = tcp_listener(at).expect("bound once the old listener closed");
        let (udp, _) = udp_socket_with_sender(at).expect("bound once the old socket closed");
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert_eq!(
            (tcp.local_addr().unwrap(), udp.local_addr().unwrap()),
            (at, at)
        );
        letting_go.join().unwrap();
        let started = Instant::now();
        assert_eq!(
            tcp_listener(at).unwrap_err().kind(),
            io::ErrorKind::AddrInUse
        );
        assert!(started.elapsed() >= BIND_PATIENCE);
    }

    #[test]
    fn a_tcp_listener_accepts_a_tuned_link() {
        let l = tcp_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        tune_link(&c).unwrap();
        assert!(c.nodelay().unwrap());
    }
}
