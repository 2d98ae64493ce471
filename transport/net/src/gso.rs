//! Many datagrams per system call (Linux UDP offloads).
//!
//! * **Segmentation** ([`send_segments`]): one buffer of equal-sized
//!   datagrams (the last may be shorter) goes out in one `sendmsg` with a
//!   `UDP_SEGMENT` control message; the kernel cuts it into datagrams as
//!   late as it can (on a veth link and a bridge, not before the receiving
//!   host's UDP layer). Each datagram is whole on the wire: no IP
//!   fragments, so a loss costs one datagram, not the buffer.
//! * **Coalescing** ([`enable_gro`], [`recv_coalesced`]): a socket with
//!   `UDP_GRO` on may receive several datagrams of one sender as one
//!   buffer; a `UDP_GRO` control message says the datagrams' size
//!   ([`Received::segment`]) and [`segments`] cuts the buffer again.
//!
//! Why by hand: this needs two system calls with one control message
//! each. The crate made for it, `quinn-udp`, takes the socket over
//! (non-blocking, IP fragmentation forbidden), which the daemon's sockets
//! cannot accept (they carry datagrams larger than the MTU for peers that
//! ask for them); `rustix` and `socket2` have neither option.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use socket2::SockAddr;

/// Most datagrams one [`send_segments`] call may carry (the kernel's
/// `UDP_MAX_SEGMENTS` on every kernel that has the option).
pub const MAX_SEGMENTS: usize = 64;

/// Most bytes one [`send_segments`] call may carry (an IPv4 datagram's
/// limit, less its headers, rounded down).
pub const MAX_BYTES: usize = 65_000;

/// A receive buffer this large always holds what the kernel coalesces
/// (at most 64 datagrams of at most an Ethernet MTU each, or one
/// datagram of the largest size).
pub const RECV_BUFFER: usize = 128 << 10;

/// Whether the kernel can segment UDP sends on `sock` (Linux ≥ 4.18).
pub fn gso_supported(sock: &UdpSocket) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes of the sizes given, and
    // the descriptor stays open while `sock` is borrowed.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    r == 0
}

/// Asks the kernel to coalesce datagrams received on `sock` (Linux ≥
/// 5.0); read it with [`recv_coalesced`] from then on.
pub fn enable_gro(sock: &UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    crate::set_option(sock, libc::SOL_UDP, libc::UDP_GRO, &on)
}

/// Control message space for one `c_int` (8-byte aligned).
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Sends `buf` to `dest` as datagrams of `segment` bytes each (the last
/// may be shorter) in one system call. A `buf` no longer than `segment`
/// is a plain datagram. At most [`MAX_SEGMENTS`] datagrams and
/// [`MAX_BYTES`] bytes.
pub fn send_segments(
    sock: &UdpSocket,
    dest: SocketAddr,
    buf: &[u8],
    segment: usize,
) -> io::Result<usize> {
    if buf.len() <= segment {
        return sock.send_to(buf, dest);
    }
    send_parts(sock, dest, &[buf], segment)
}

/// [`send_segments`] for datagrams in buffers of their own: `parts` end
/// to end, read by the kernel where they are (one `iovec` each: no copy
/// into one buffer first), cut every `segment` bytes. Each part but the
/// last must be `segment` bytes long for each datagram to be one part.
pub fn send_parts(
    sock: &UdpSocket,
    dest: SocketAddr,
    parts: &[&[u8]],
    segment: usize,
) -> io::Result<usize> {
    send_parts_classed(sock, dest, parts, segment, 0)
}

/// [`send_parts`] with the datagrams' TOS byte (IPv4) or traffic class
/// (IPv6) set to `tos` for this send alone (a control message beside the
/// segmentation one): one socket carries every packet class, and the
/// kernel's queueing priority follows the TOS byte (`rt_tos2priority`,
/// which picks the `pfifo_fast` band). `tos` 0: the socket's own.
pub fn send_parts_classed(
    sock: &UdpSocket,
    dest: SocketAddr,
    parts: &[&[u8]],
    segment: usize,
    tos: u8,
) -> io::Result<usize> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let single = parts.len() == 1 && total <= segment;
    if single && tos == 0 {
        return sock.send_to(parts[0], dest);
    }
    let too_many = segment == 0 || total.div_ceil(segment) > MAX_SEGMENTS;
    let Ok(seg) = u16::try_from(segment) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "segment too large",
        ));
    };
    if too_many || total > MAX_BYTES || parts.len() > MAX_SEGMENTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many segments or bytes for one send",
        ));
    }
    let mut iov = iovecs(parts);
    let addr = SockAddr::from(dest);
    let mut control = Control([0; 64]);
    // SAFETY: CMSG_SPACE and CMSG_LEN are pure arithmetic on their
    // argument.
    let (seg_space, seg_len, tos_space) = unsafe {
        (
            libc::CMSG_SPACE(size_of::<u16>() as u32) as usize,
            libc::CMSG_LEN(size_of::<u16>() as u32) as usize,
            libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize,
        )
    };
    let space = if single { 0 } else { seg_space } + if tos == 0 { 0 } else { tos_space };
    // SAFETY: an all-zero msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = addr.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = addr.len();
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = parts.len();
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: msg_control points at `space` (≤ 64, two control messages
    // of at most CMSG_SPACE(4) = 24 bytes each) writable, aligned bytes;
    // CMSG_FIRSTHDR and CMSG_NXTHDR return headers inside them with room
    // for their data, or null, which is checked.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        if !single {
            if c.is_null() {
                return Err(io::Error::other("no room for the control message"));
            }
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = seg_len;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        if tos != 0 {
            if c.is_null() {
                return Err(io::Error::other("no room for the control message"));
            }
            put_tos(c, dest, tos);
        }
    }
    // SAFETY: every pointer in `msg` (name, the first `parts.len()`
    // iovecs, each pointing into a live part, control) is valid for the
    // lengths given until the call returns; the kernel only reads.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Sends each of `parts` to `dest` as a datagram of its own, its TOS
/// byte (IPv4) or traffic class (IPv6) `tos` (0: the socket's), in one
/// `sendmmsg`: one system call, but one packet per datagram in the
/// qdisc, where a segmented send ([`send_parts_classed`]) is one packet
/// for all of them. What a queue of bands needs: a shaped `htb` class
/// dequeues a segmented send whole and owes its bytes, so a datagram of a
/// better band that comes after waits for all of them; here it waits for
/// one. Returns how many were sent (the kernel may stop early: the rest
/// are not sent).
pub fn send_each_classed(
    sock: &UdpSocket,
    dest: SocketAddr,
    parts: &[&[u8]],
    tos: u8,
) -> io::Result<usize> {
    if parts.len() > MAX_SEGMENTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many datagrams for one send",
        ));
    }
    let addr = SockAddr::from(dest);
    let mut control = Control([0; 64]);
    // SAFETY: CMSG_SPACE is pure arithmetic on its argument.
    let tos_space = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize };
    if tos != 0 {
        // SAFETY: an all-zero msghdr is a valid empty one; its control
        // points at `tos_space` (≤ 64) writable, aligned bytes, in which
        // CMSG_FIRSTHDR returns a header with room for its data, or null,
        // which is checked.
        unsafe {
            let mut probe: libc::msghdr = std::mem::zeroed();
            probe.msg_control = control.0.as_mut_ptr().cast();
            probe.msg_controllen = tos_space;
            let c = libc::CMSG_FIRSTHDR(&probe);
            if c.is_null() {
                return Err(io::Error::other("no room for the control message"));
            }
            put_tos(c, dest, tos);
        }
    }
    let mut iov = iovecs(parts);
    // SAFETY: an all-zero mmsghdr is a valid empty one.
    let mut msgs: [libc::mmsghdr; MAX_SEGMENTS] = unsafe { std::mem::zeroed() };
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()).take(parts.len()) {
        m.msg_hdr.msg_name = addr.as_ptr() as *mut libc::c_void;
        m.msg_hdr.msg_namelen = addr.len();
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
        if tos != 0 {
            // (Every message reads the same control bytes.)
            m.msg_hdr.msg_control = control.0.as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = tos_space;
        }
    }
    // SAFETY: the first `parts.len()` headers point at the name, their
    // own iovec (into a live part) and the control bytes, all valid until
    // the call returns; the kernel reads them and writes only `msg_len`.
    let n = unsafe {
        libc::sendmmsg(
            sock.as_raw_fd(),
            msgs.as_mut_ptr(),
            parts.len() as libc::c_uint,
            0,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One `iovec` per part (the first `parts.len()` of them), pointing into
/// the parts: valid while they live.
fn iovecs(parts: &[&[u8]]) -> [libc::iovec; MAX_SEGMENTS] {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_SEGMENTS];
    for (v, p) in iov.iter_mut().zip(parts) {
        *v = libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        };
    }
    iov
}

/// Writes at `c` the control message that sets a datagram's TOS byte
/// (IPv4) or traffic class (IPv6) to `tos`.
///
/// # Safety
/// `c` is a control message header inside a control buffer, with room
/// for `CMSG_SPACE(size_of::<c_int>())` bytes from it.
unsafe fn put_tos(c: *mut libc::cmsghdr, dest: SocketAddr, tos: u8) {
    let (level, kind) = if dest.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_TOS)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    };
    // SAFETY: the caller's promise: `c` has room for the header and an
    // int of data; CMSG_LEN is arithmetic.
    unsafe {
        (*c).cmsg_level = level;
        (*c).cmsg_type = kind;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(
            libc::CMSG_DATA(c).cast::<libc::c_int>(),
            libc::c_int::from(tos),
        );
    }
}

/// What one [`recv_coalesced`] call took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes in the buffer.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// The size of each datagram in the buffer (the last may be shorter),
    /// when the kernel coalesced; `None`: one datagram.
    pub segment: Option<usize>,
    /// The buffer was too small: the datagram was cut (drop it).
    pub truncated: bool,
}

/// Receives one datagram, or several coalesced ones (see [`enable_gro`]),
/// into `buf` (make it [`RECV_BUFFER`] bytes). Blocks or times out as the
/// socket is set to.
pub fn recv_coalesced(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<Received> {
    let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = name.as_mut_ptr().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: every pointer in `msg` is valid for writes of the lengths
    // given until the call returns.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut segment = None;
    // SAFETY: the kernel filled `msg_controllen` bytes of `control` with
    // well-formed control messages; CMSG_FIRSTHDR/NXTHDR stay inside them
    // and CMSG_DATA of a UDP_GRO message holds a c_int.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                segment = usize::try_from(v).ok().filter(|s| *s > 0);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    // SAFETY: recvmsg wrote `msg_namelen` bytes of a socket address into
    // `name` (zeroed before, so the rest is initialised too).
    let addr = unsafe { SockAddr::new(name.assume_init(), msg.msg_namelen) };
    let from = addr
        .as_socket()
        .ok_or_else(|| io::Error::other("datagram from a non-IP address"))?;
    let len = n as usize;
    Ok(Received {
        len,
        from,
        segment: segment.filter(|s| *s < len),
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
    })
}

/// The datagrams of a received buffer: `buf` cut every `segment` bytes
/// (`None`: `buf` whole).
pub fn segments(buf: &[u8], segment: Option<usize>) -> impl Iterator<Item = &[u8]> {
    buf.chunks(segment.unwrap_or(buf.len()).max(1))
}

/// [`segments`], mutable (to open sealed datagrams in place).
pub fn segments_mut(buf: &mut [u8], segment: Option<usize>) -> impl Iterator<Item = &mut [u8]> {
    let n = segment.unwrap_or(buf.len()).max(1);
    buf.chunks_mut(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        (a, b)
    }

    /// The TOS byte of the next datagram `b` receives (IP_RECVTOS on).
    fn received_tos(b: &UdpSocket) -> u8 {
        let mut buf = [0u8; 2048];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = Control([0; 64]);
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len();
        let n = unsafe { libc::recvmsg(b.as_raw_fd(), &mut msg, 0) };
        assert!(n > 0, "{}", io::Error::last_os_error());
        let mut tos = None;
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                    tos = Some(*libc::CMSG_DATA(c));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        tos.expect("an IP_TOS control message")
    }

    #[test]
    fn a_classed_send_carries_its_tos_byte_alone_and_segmented() {
        let (a, b) = pair();
        let on: libc::c_int = 1;
        crate::set_option(&b, libc::IPPROTO_IP, libc::IP_RECVTOS, &on).unwrap();
        let to = b.local_addr().unwrap();
        send_parts_classed(&a, to, &[b"one"], 1400, 0x90).unwrap();
        assert_eq!(received_tos(&b), 0x90);
        // The socket's own (0) when no class is asked.
        send_parts_classed(&a, to, &[b"two"], 1400, 0).unwrap();
        assert_eq!(received_tos(&b), 0);
        if gso_supported(&a) {
            let (x, y) = ([1u8; 100], [2u8; 40]);
            send_parts_classed(&a, to, &[&x, &y], 100, 0xb0).unwrap();
            assert_eq!(received_tos(&b), 0xb0);
            assert_eq!(received_tos(&b), 0xb0);
        } else {
            println!("skipped the segmented half: no UDP GSO here");
        }
    }

    /// [`pair`], if this kernel segments (else it says it skips).
    fn gso_pair() -> Option<(UdpSocket, UdpSocket)> {
        let (a, b) = pair();
        if gso_supported(&a) {
            Some((a, b))
        } else {
            println!("skipping: no UDP_SEGMENT on this kernel");
            None
        }
    }

    #[test]
    fn segments_arrive_as_datagrams_without_gro() {
        let Some((a, b)) = gso_pair() else { return };
        let buf: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let n = send_segments(&a, b.local_addr().unwrap(), &buf, 300).unwrap();
        assert_eq!(n, 1000);
        let mut got = Vec::new();
        let mut r = vec![0u8; RECV_BUFFER];
        for _ in 0..4 {
            let m = recv_coalesced(&b, &mut r).unwrap();
            assert_eq!(m.from, a.local_addr().unwrap());
            assert!(m.segment.is_none() && !m.truncated);
            got.push(r[..m.len].to_vec());
        }
        let lens: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(lens, [300, 300, 300, 100]);
        assert_eq!(got.concat(), buf);
    }

    #[test]
    fn coalesced_datagrams_are_cut_again() {
        let (a, b) = pair();
        if !gso_supported(&a) || enable_gro(&b).is_err() {
            println!("skipping: no UDP_SEGMENT / UDP_GRO on this kernel");
            return;
        }
        let buf: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        send_segments(&a, b.local_addr().unwrap(), &buf, 1200).unwrap();
        let mut r = vec![0u8; RECV_BUFFER];
        let mut got = Vec::new();
        while got.iter().map(Vec::len).sum::<usize>() < buf.len() {
            let m = recv_coalesced(&b, &mut r).unwrap();
            for d in segments(&r[..m.len], m.segment) {
                got.push(d.to_vec());
            }
        }
        let lens: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(lens, [1200, 1200, 1200, 1200, 200]);
        assert_eq!(got.concat(), buf);
    }

    #[test]
    fn a_short_buffer_is_one_datagram_and_bounds_are_checked() {
        let (a, b) = pair();
        let to = b.local_addr().unwrap();
        assert_eq!(send_segments(&a, to, b"hello", 1200).unwrap(), 5);
        let mut r = vec![0u8; 64];
        let m = recv_coalesced(&b, &mut r).unwrap();
        assert_eq!((&r[..m.len], m.segment), (&b"hello"[..], None));
        let big = vec![0u8; 65 * 100];
        let e = send_segments(&a, to, &big, 100).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // A cut datagram says so.
        a.send_to(&[1u8; 200], to).unwrap();
        let m = recv_coalesced(&b, &mut r).unwrap();
        assert!(m.truncated && m.len == 64, "{m:?}");
    }

    #[test]
    fn parts_in_buffers_of_their_own_arrive_as_one_datagram_each() {
        let Some((a, b)) = gso_pair() else { return };
        let parts: Vec<Vec<u8>> = (0..5u8)
            .map(|i| vec![i; if i == 4 { 70 } else { 300 }])
            .collect();
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let n = send_parts(&a, b.local_addr().unwrap(), &refs, 300).unwrap();
        assert_eq!(n, 4 * 300 + 70);
        let mut r = vec![0u8; RECV_BUFFER];
        for p in &parts {
            let m = recv_coalesced(&b, &mut r).unwrap();
            assert_eq!(&r[..m.len], &p[..]);
        }
        // One part alone is a plain datagram; bounds are checked.
        send_parts(&a, b.local_addr().unwrap(), &[&[9u8; 10]], 300).unwrap();
        let m = recv_coalesced(&b, &mut r).unwrap();
        assert_eq!(&r[..m.len], &[9u8; 10]);
        let many = vec![&[0u8; 10][..]; MAX_SEGMENTS + 1];
        let e = send_parts(&a, b.local_addr().unwrap(), &many, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn each_part_is_a_datagram_of_its_own_with_its_tos_byte() {
        let (a, b) = pair();
        let on: libc::c_int = 1;
        crate::set_option(&b, libc::IPPROTO_IP, libc::IP_RECVTOS, &on).unwrap();
        let to = b.local_addr().unwrap();
        // Lengths differ: no segment size binds them.
        let parts: Vec<Vec<u8>> = (0..4u8)
            .map(|i| vec![i; 50 + 30 * usize::from(i)])
            .collect();
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        assert_eq!(send_each_classed(&a, to, &refs, 0xb0).unwrap(), 4);
        for p in &parts {
            let mut r = vec![0u8; 512];
            let n = b.peek(&mut r).unwrap();
            assert_eq!(&r[..n], &p[..]);
            assert_eq!(received_tos(&b), 0xb0, "each datagram carries the class");
        }
        // Without a class: the socket's own.
        send_each_classed(&a, to, &refs[..1], 0).unwrap();
        assert_eq!(received_tos(&b), 0);
        let many = vec![&[0u8; 10][..]; MAX_SEGMENTS + 1];
        let e = send_each_classed(&a, to, &many, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn cutting_a_buffer() {
        let b = [1u8, 2, 3, 4, 5];
        let v: Vec<&[u8]> = segments(&b, Some(2)).collect();
        assert_eq!(v, [&[1u8, 2][..], &[3, 4], &[5]]);
        assert_eq!(segments(&b, None).count(), 1);
        assert_eq!(segments(&[], None).count(), 0);
        let mut m = [1u8, 2, 3];
        assert_eq!(segments_mut(&mut m, Some(2)).count(), 2);
    }
}
