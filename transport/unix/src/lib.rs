//! # tagwire-unix: the local control transport
//!
//! Client ⇄ daemon control traffic (docs/design.md §2, "Control path": the
//! Unix socket carries control only, never data) uses a Unix `SOCK_SEQPACKET` socket: it keeps message boundaries (one control
//! message per packet, no framing code), carries file descriptors (`SCM_RIGHTS`:
//! the daemon hands out memfd segments this way) and tells the daemon who the
//! peer really is (`SO_PEERCRED`: a client cannot lie about its pid).
//!
//! Written on `rustix` rather than std because std has no seqpacket sockets and no
//! stable ancillary-data API. No protocol knowledge lives here: packets are bytes.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::net::{
    self, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

/// A sealed memfd holding `bytes`: what travels beside a control message
/// when it is too large for a packet (large messages, pulled history,
/// handed-over streams). Sealed, so the receiver can trust its length and
/// contents not to change under it ([`is_sealed`] checks a received one);
/// its inode is read-only to everyone (memfd's default is 0777), so no
/// holder of another user reopens it writable even before the seals.
pub fn sealed_memfd(name: &str, bytes: &[u8]) -> io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, Mode, SealFlags};
    use std::io::Write;
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::fchmod(&fd, Mode::RUSR | Mode::RGRP | Mode::ROTH)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    rustix::fs::fcntl_add_seals(
        &f,
        SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL,
    )?;
    Ok(OwnedFd::from(f))
}

/// Whether `fd` is sealed as [`sealed_memfd`] seals: no write, shrink or
/// grow, ever again, through any descriptor or mapping. Only such a file may
/// be shown to readers of another user: an unsealed one stays writable by
/// whoever holds (or can reopen) a writable descriptor of it.
pub fn is_sealed(fd: BorrowedFd<'_>) -> bool {
    use rustix::fs::SealFlags;
    let want = SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
    rustix::fs::fcntl_get_seals(fd).is_ok_and(|s| s.contains(want))
}

/// The whole contents of a memfd (or file) another process sent, refused
/// if longer than `max` bytes. Read with `pread`, not mapped: a file that
/// shrinks while read is an error, not a `SIGBUS`.
pub fn read_memfd(fd: OwnedFd, max: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::from(fd);
    let len = f.metadata()?.len();
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes, more than the {max} accepted"),
        ));
    }
    let mut bytes = vec![0u8; len as usize];
    f.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

/// Environment variable naming the daemon's socket.
pub const SOCKET_ENV: &str = "TAGWIRE_SOCKET";

/// Where the daemon listens: `$TAGWIRE_SOCKET`, else
/// `$XDG_RUNTIME_DIR/tagwire/tagwired.sock`, else `/tmp/tagwire-<uid>/tagwired.sock`.
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os(SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        return PathBuf::from(d).join("tagwire").join("tagwired.sock");
    }
    let uid = rustix::process::getuid().as_raw();
    PathBuf::from(format!("/tmp/tagwire-{uid}")).join("tagwired.sock")
}

/// The directory of the implicit socket path (no `$TAGWIRE_SOCKET`), which must
/// be private to the user; `None` when the user chose the path explicitly.
pub fn implicit_socket_dir() -> Option<PathBuf> {
    if std::env::var_os(SOCKET_ENV).is_some_and(|p| !p.is_empty()) {
        return None;
    }
    default_socket_path().parent().map(Path::to_path_buf)
}

/// A fresh close-on-exec seqpacket socket and the address of `path`.
fn socket_for(path: &Path) -> io::Result<(OwnedFd, SocketAddrUnix)> {
    let fd = net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((fd, SocketAddrUnix::new(path)?))
}

/// Checks that `dir` is a real directory (not a symlink) owned by the current
/// user and closed to everyone else (mode `0700` or stricter): a socket under a
/// directory another user created could lead to a daemon that user runs.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::symlink_metadata(dir)?;
    let me = rustix::process::getuid().as_raw();
    if !md.is_dir() || md.uid() != me || md.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} must be a directory owned by uid {me} with mode 0700 (found uid {} mode {:o}); remove it or set TAGWIRE_SOCKET",
                dir.display(),
                md.uid(),
                md.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// A connected seqpacket socket.
#[derive(Debug)]
pub struct SeqPacket {
    fd: OwnedFd,
}

/// A new descriptor of the file behind `fd` that can only be read (and mapped
/// read-only): the file opened again with `O_RDONLY` through `/proc/self/fd`.
/// What the daemon hands a process that may read a tag's data but not write it.
pub fn reopen_read_only(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::open(
        path.as_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// Credentials of the peer process, from `SO_PEERCRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Peer process id.
    pub pid: u32,
    /// Peer user id.
    pub uid: u32,
    /// Peer (primary) group id.
    pub gid: u32,
}

/// The most descriptors a packet carries (a subscriber's grant: the
/// records, the control segment and its seat).
pub const MAX_FDS: usize = 3;

/// A received packet and the descriptor that came with it, if any.
#[derive(Debug)]
pub struct Packet {
    /// Bytes of the packet.
    pub data: Vec<u8>,
    /// A descriptor passed with it (the first one).
    pub fd: Option<OwnedFd>,
    /// The descriptors passed after the first, at most two (more are
    /// closed).
    pub extra: Vec<OwnedFd>,
    /// True when the packet did not fit the buffer and was cut.
    pub truncated: bool,
}

impl SeqPacket {
    /// Connects to a listening socket at `path`.
    pub fn connect(path: &Path) -> io::Result<Self> {
        let (fd, addr) = socket_for(path)?;
        net::connect(&fd, &addr)?;
        Ok(Self { fd })
    }

    /// A connected pair (for tests).
    pub fn pair() -> io::Result<(Self, Self)> {
        let (a, b) = net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        Ok((Self { fd: a }, Self { fd: b }))
    }

    /// Sends one packet, with an optional descriptor.
    pub fn send(&self, data: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        match fd {
            Some(fd) => self.send_fds(data, &[fd]),
            None => self.send_fds(data, &[]),
        }
    }

    /// Sends one packet with up to three descriptors (received as
    /// [`Packet::fd`] and [`Packet::extra`]).
    pub fn send_fds(&self, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        if fds.len() > MAX_FDS {
            return Err(io::Error::other("at most three descriptors per packet"));
        }
        let iov = [io::IoSlice::new(data)];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("ancillary buffer too small"));
        }
        let n = net::sendmsg(&self.fd, &iov, &mut control, SendFlags::NOSIGNAL)?;
        if n != data.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short seqpacket write",
            ));
        }
        Ok(())
    }

    /// Receives one packet of at most `max` bytes (a longer one is cut and flagged
    /// `truncated`). The buffer is sized to the packet (peeked first), so a large
    /// `max` costs nothing for small packets. `Ok(None)` means the peer closed the
    /// connection.
    pub fn recv(&self, max: usize) -> io::Result<Option<Packet>> {
        let size = loop {
            let mut probe = [0u8; 1];
            let mut iov = [io::IoSliceMut::new(&mut probe)];
            let mut none = RecvAncillaryBuffer::default();
            match net::recvmsg(
                &self.fd,
                &mut iov,
                &mut none,
                RecvFlags::PEEK | RecvFlags::TRUNC,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                // MSG_TRUNC makes recvmsg return the packet's real length.
                other => break other?.bytes,
            }
        };
        let mut buf = vec![0u8; size.clamp(1, max.max(1))];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let res = loop {
            let mut iov = [io::IoSliceMut::new(&mut buf)];
            match net::recvmsg(&self.fd, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        let (mut fd, mut extra) = (None, Vec::new());
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = msg {
                for f in fds {
                    // Keep the first three; dropping the rest closes them.
                    if fd.is_none() {
                        fd = Some(f);
                    } else if extra.len() < MAX_FDS - 1 {
                        extra.push(f);
                    }
                }
            }
        }
        if res.bytes == 0 && fd.is_none() {
            return Ok(None);
        }
        buf.truncate(res.bytes.min(max));
        Ok(Some(Packet {
            data: buf,
            fd,
            extra,
            truncated: res.flags.contains(net::ReturnFlags::TRUNC),
        }))
    }

    /// Sets (or clears) the send timeout (a peer that stops reading cannot block
    /// us forever).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        net::sockopt::set_socket_timeout(&self.fd, net::sockopt::Timeout::Send, t)?;
        Ok(())
    }

    /// Sets (or clears) the receive timeout.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        net::sockopt::set_socket_timeout(&self.fd, net::sockopt::Timeout::Recv, t)?;
        Ok(())
    }

    /// The peer's credentials.
    pub fn peer_cred(&self) -> io::Result<PeerCred> {
        let c = net::sockopt::socket_peercred(&self.fd)?;
        Ok(PeerCred {
            pid: c.pid.as_raw_nonzero().get() as u32,
            uid: c.uid.as_raw(),
            gid: c.gid.as_raw(),
        })
    }

    /// Refuses the connection with `packet` (the reason): drops whatever the
    /// peer sent, stops it from sending more, then sends `packet`. Closing
    /// the socket afterwards then leaves the peer the packet to read, not a
    /// connection reset (which unread data at close would cause). Costs no
    /// wait.
    pub fn refuse(&self, packet: &[u8]) -> io::Result<()> {
        let drain = || {
            let mut scrap = [0u8; 1];
            // Descriptors passed with a dropped packet are closed by the kernel.
            while net::recv(&self.fd, &mut scrap, RecvFlags::DONTWAIT).is_ok_and(|(n, _)| n > 0) {}
        };
        drain();
        net::shutdown(&self.fd, net::Shutdown::Read)?;
        drain();
        self.send(packet, None)?;
        net::shutdown(&self.fd, net::Shutdown::Write)?;
        Ok(())
    }

    /// Shuts both directions down, waking a thread blocked in [`recv`](Self::recv).
    pub fn shutdown(&self) -> io::Result<()> {
        net::shutdown(&self.fd, net::Shutdown::Both)?;
        Ok(())
    }
}

impl AsFd for SeqPacket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A listening seqpacket socket.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    /// Binds and listens at `path` (which must not exist).
    pub fn bind(path: &Path) -> io::Result<Self> {
        let (fd, addr) = socket_for(path)?;
        net::bind(&fd, &addr)?;
        net::listen(&fd, 128)?;
        Ok(Self { fd })
    }

    /// Accepts one connection.
    pub fn accept(&self) -> io::Result<SeqPacket> {
        loop {
            match net::accept_with(&self.fd, SocketFlags::CLOEXEC) {
                Err(rustix::io::Errno::INTR) => continue,
                other => return Ok(SeqPacket { fd: other? }),
            }
        }
    }

    /// Wakes a thread blocked in [`accept`](Self::accept) (it then fails).
    pub fn shutdown(&self) -> io::Result<()> {
        net::shutdown(&self.fd, net::Shutdown::Both)?;
        Ok(())
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    #[test]
    fn a_sealed_memfd_is_read_only_to_everyone_and_known_as_sealed() {
        let fd = sealed_memfd("t", b"bytes").unwrap();
        assert!(is_sealed(fd.as_fd()));
        let st = rustix::fs::fstat(&fd).unwrap();
        assert_eq!(st.st_mode & 0o7777, 0o444);
        assert!(rustix::io::pwrite(&fd, b"x", 0).is_err());
        let plain = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        assert!(!is_sealed(plain.as_fd()));
        let some = rustix::fs::memfd_create(
            "t",
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )
        .unwrap();
        rustix::fs::fcntl_add_seals(&some, rustix::fs::SealFlags::SHRINK).unwrap();
        assert!(!is_sealed(some.as_fd()), "writable still");
    }

    #[test]
    fn packets_keep_their_boundaries_and_carry_a_descriptor() {
        let (a, b) = SeqPacket::pair().unwrap();
        a.send(b"one", None).unwrap();
        let mut file = std::fs::File::from(
            rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap(),
        );
        file.write_all(b"shared").unwrap();
        a.send(b"two", Some(file.as_fd())).unwrap();
        let p1 = b.recv(100).unwrap().unwrap();
        assert_eq!(p1.data, b"one");
        assert!(p1.fd.is_none());
        let p2 = b.recv(100).unwrap().unwrap();
        assert_eq!(p2.data, b"two");
        let mut f2 = std::fs::File::from(p2.fd.unwrap());
        f2.rewind().unwrap();
        let mut s = String::new();
        f2.read_to_string(&mut s).unwrap();
        assert_eq!(s, "shared");
        assert_eq!(a.peer_cred().unwrap().pid, std::process::id());
        drop(a);
        assert!(b.recv(100).unwrap().is_none());
    }

    #[test]
    fn only_a_private_directory_passes_the_socket_dir_check() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("tagwire-unix-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            check_private_dir(&d).is_err(),
            "group/world-readable refused"
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(check_private_dir(&d).is_ok());
        let link = d.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(check_private_dir(&link).is_err(), "symlink refused");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir(&d).unwrap();
    }

    #[test]
    fn large_packets_are_received_whole() {
        let (a, b) = SeqPacket::pair().unwrap();
        net::sockopt::set_socket_send_buffer_size(&a, 1 << 20).unwrap();
        let big: Vec<u8> = (0..150_000u32).map(|i| i as u8).collect();
        a.send(&big, None).unwrap();
        let p = b.recv(1 << 24).unwrap().unwrap();
        assert!(!p.truncated);
        assert_eq!(p.data, big);
    }

    #[test]
    fn oversized_packets_are_flagged_truncated() {
        let (a, b) = SeqPacket::pair().unwrap();
        a.send(&[7u8; 64], None).unwrap();
        let p = b.recv(16).unwrap().unwrap();
        assert!(p.truncated);
        assert_eq!(p.data.len(), 16);
    }
}
