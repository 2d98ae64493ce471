//! # tagwire-net: IP sockets for daemon-to-daemon traffic
//!
//! DESIGN.md §3, layer 2. The daemons talk over three kinds of IP socket, all
//! opened here so that socket options live in one place:
//!
//! * a UDP **multicast** socket for the discovery beacon ([`beacon_socket`]):
//!   address reuse so several listeners can share the group's port, loopback on
//!   so daemons in one network namespace hear each other, and the group joined on
//!   the interface that owns the node's address;
//! * UDP **unicast** sockets for the delivery manager ([`udp_socket`]) with large
//!   kernel buffers, since a burst of fragments must not overflow them;
//! * TCP streams for the update manager's links ([`tcp_listener`], and
//!   `std::net::TcpStream::connect_timeout` for the other end) with `TCP_NODELAY`
//!   so a table change is not held back by Nagle's algorithm.
//!
//! There is no protocol logic here: the codecs are in `tagwire-wire`, the state
//! machines in `tagwire-proto` and `tagwire-reliable`.

pub mod gso;

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Kernel buffer size asked for on delivery sockets (the kernel may cap it at
/// `net.core.rmem_max` / `wmem_max` unless we are privileged).
pub const DELIVERY_BUFFER: usize = 8 << 20;

/// A UDP socket bound to `addr` with large send and receive buffers.
pub fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    bound_udp(addr, DELIVERY_BUFFER)
}

/// A UDP socket for sending only, bound to `ip` (an ephemeral port): the
/// socket a daemon hands its clients so that their publishers send the first
/// copy of their own messages from their own thread (the send ticket), with
/// the node's address as source. Nothing is sent to it: its receive buffer is
/// the smallest the kernel allows.
pub fn send_socket(ip: std::net::IpAddr) -> io::Result<UdpSocket> {
    bound_udp(SocketAddr::new(ip, 0), 0)
}

fn bound_udp(addr: SocketAddr, recv_buffer: usize) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: a smaller buffer works, it only drops sooner under bursts.
    let _ = s.set_recv_buffer_size(recv_buffer);
    let _ = s.set_send_buffer_size(DELIVERY_BUFFER);
    s.bind(&SockAddr::from(addr))?;
    Ok(s.into())
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

/// A TCP listener on `addr` that can be rebound at once after a restart.
pub fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(64)?;
    Ok(s.into())
}

/// A TCP connection to `to` from this host's address `from` (any port), so
/// that the other end sees the node's own address as the source even on a
/// host with several (peers check it, DESIGN.md §7).
pub fn tcp_connect_from(
    from: std::net::IpAddr,
    to: SocketAddr,
    timeout: std::time::Duration,
) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    if from.is_ipv4() == to.is_ipv4() && !from.is_unspecified() {
        s.bind(&SockAddr::from(SocketAddr::new(from, 0)))?;
    }
    s.connect_timeout(&SockAddr::from(to), timeout)?;
    Ok(s.into())
}

/// Options every peer link gets: no Nagle delay, keep-alive as a backstop to
/// the daemons' own heartbeats.
pub fn tune_link(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    socket2::SockRef::from(stream).set_keepalive(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_socket_gets_buffers_and_an_address() {
        let s = udp_socket("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(s.local_addr().unwrap().port(), 0);
    }

    #[test]
    fn a_tcp_listener_accepts_a_tuned_link() {
        let l = tcp_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        tune_link(&c).unwrap();
        assert!(c.nodelay().unwrap());
    }
}
