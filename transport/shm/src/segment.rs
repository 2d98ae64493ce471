//! memfd-backed shared memory segments.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{self, MemfdFlags, SealFlags};
use rustix::mm::{self, MapFlags, ProtFlags};
use thiserror::Error;

/// Why a segment could not be created or mapped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShmError {
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Sys {
        /// Which operation.
        op: &'static str,
        /// The error.
        errno: rustix::io::Errno,
    },
    /// The segment's header does not describe a valid ring (or is not a ring).
    #[error("shared memory segment is not a valid tagwire ring: {0}")]
    BadHeader(&'static str),
    /// The requested shape is too large or degenerate.
    #[error("invalid ring shape: {0}")]
    BadShape(&'static str),
}

pub(crate) fn sys(op: &'static str) -> impl FnOnce(rustix::io::Errno) -> ShmError {
    move |errno| ShmError::Sys { op, errno }
}

/// A shared mapping of a memfd. Unmapped on drop.
#[derive(Debug)]
pub struct Segment {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
    /// Mapped without `PROT_WRITE`.
    read_only: bool,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through
// atomics or through the ring's seqlock protocol, never through references.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

/// The mode of every segment's inode: readable by its creator only. The
/// permission check of an `open` through `/proc/PID/fd` uses it, so a
/// descriptor passed read-only to a process of another user cannot be
/// reopened writable. The creator's own user (and root) can still change
/// it: a client running as the daemon's user is trusted as that user is.
pub(crate) const OWNER_READ_ONLY: fs::Mode = fs::Mode::RUSR;

/// The longest memfd name Linux takes: NAME_MAX (255) less the "memfd:"
/// prefix it adds; a longer one fails with EINVAL.
const MEMFD_NAME_MAX: usize = 249;

/// `name` cut to [`MEMFD_NAME_MAX`] bytes, at a UTF-8 character boundary.
fn memfd_name(name: &str) -> &str {
    if name.len() <= MEMFD_NAME_MAX {
        return name;
    }
    let mut end = MEMFD_NAME_MAX;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

impl Segment {
    /// Creates a sealed (fixed-size) memfd of `len` bytes and maps it. The
    /// name only labels the memfd (in `/proc/PID/fd`); one longer than the
    /// kernel takes is shortened.
    pub fn create(name: &str, len: usize) -> Result<Self, ShmError> {
        if len == 0 {
            return Err(ShmError::BadShape("zero-length segment"));
        }
        let fd = fs::memfd_create(
            memfd_name(name),
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(sys("memfd_create"))?;
        // memfd makes its inode 0777. A process of another user that gets a
        // read-only descriptor could otherwise open `/proc/self/fd/N` again
        // with O_RDWR and write the records it may only read: owner-read
        // only leaves the daemon able to hand out read-only descriptors
        // (`read_only_fd`) and nobody else able to open the inode at all.
        fs::fchmod(&fd, OWNER_READ_ONLY).map_err(sys("fchmod"))?;
        fs::ftruncate(&fd, len as u64).map_err(sys("ftruncate"))?;
        fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(sys("F_ADD_SEALS"))?;
        Self::map(fd, len)
    }

    /// Maps a segment received from elsewhere. The size comes from the file; a
    /// segment that can still shrink is refused (a peer could make us fault).
    /// A descriptor opened read-only (see [`Segment::read_only_fd`]) is mapped
    /// read-only: this process cannot write the segment at all.
    pub fn open(fd: OwnedFd) -> Result<Self, ShmError> {
        let st = fs::fstat(&fd).map_err(sys("fstat"))?;
        let len = usize::try_from(st.st_size).map_err(|_| ShmError::BadHeader("negative size"))?;
        if len == 0 {
            return Err(ShmError::BadHeader("empty segment"));
        }
        let seals = fs::fcntl_get_seals(&fd).map_err(sys("F_GET_SEALS"))?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(ShmError::BadHeader(
                "segment is not sealed against shrinking",
            ));
        }
        Self::map(fd, len)
    }

    fn map(fd: OwnedFd, len: usize) -> Result<Self, ShmError> {
        let mode = fs::fcntl_getfl(&fd).map_err(sys("F_GETFL"))? & fs::OFlags::ACCMODE;
        let read_only = mode == fs::OFlags::RDONLY;
        let prot = if read_only {
            ProtFlags::READ
        } else {
            ProtFlags::READ | ProtFlags::WRITE
        };
        // SAFETY: a fresh shared mapping of a file we hold; no existing memory is
        // affected. The file cannot shrink (sealed), so the whole range stays valid.
        let p = unsafe { mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, &fd, 0) }
            .map_err(sys("mmap"))?;
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(ShmError::BadHeader("mmap returned null"))?;
        Ok(Self {
            fd,
            ptr,
            len,
            read_only,
        })
    }

    /// A new descriptor of this segment that can only be mapped read-only
    /// (the memfd opened again with `O_RDONLY` through `/proc/self/fd`): what
    /// the daemon gives a process that may read a tag but not write it.
    pub fn read_only_fd(&self) -> Result<OwnedFd, ShmError> {
        use std::os::fd::AsRawFd;
        let path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        fs::open(
            path.as_str(),
            fs::OFlags::RDONLY | fs::OFlags::CLOEXEC,
            fs::Mode::empty(),
        )
        .map_err(sys("open /proc/self/fd read-only"))
    }

    /// Whether this process mapped the segment read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Base address of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: segments are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl AsFd for Segment {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range and nothing borrows it past `self`.
        let _ = unsafe { mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_longer_than_memfd_takes_is_cut_at_a_character_boundary() {
        let long = format!("tagwire:/{}", "é".repeat(200));
        let cut = memfd_name(&long);
        assert!(cut.len() <= MEMFD_NAME_MAX && cut.len() >= MEMFD_NAME_MAX - 1);
        assert!(long.starts_with(cut));
        assert_eq!(memfd_name("tagwire:/short"), "tagwire:/short");
        // The kernel takes it.
        let seg = Segment::create(&long, 4096);
        assert!(seg.is_ok(), "{:?}", seg.err());
    }
}
