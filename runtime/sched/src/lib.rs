//! The operating system's side of a connection's thread scheduling
//! ([`tagwire_wire::Sched`]): run a thread at a policy, read a thread's
//! policy, lock a process's memory, and say whether another process (a
//! client of the daemon) could run at a policy itself.
//!
//! Linux only, per thread: `sched_setscheduler` and `setpriority` take a
//! thread id, so a thread can be moved by another (the daemon re-ranks a
//! forwarder when its receivers change) and a process's threads can run at
//! different policies.
//!
//! A refusal is [`SchedError::NotPermitted`] with what would grant it
//! (`CAP_SYS_NICE`, or the resource limit that allows the policy); callers
//! decide whether that is an error (a subscription that asked for it) or a
//! warning (a daemon role configured above what the daemon may use).

use std::fmt;
use std::io;

use tagwire_wire::Sched;

/// A thread's id (`gettid`), as the scheduling calls take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tid(pub i32);

impl Tid {
    /// The calling thread.
    pub fn current() -> Self {
        Tid(rustix::thread::gettid().as_raw_nonzero().get())
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a thread could not be given a policy, or memory not locked.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    /// The process lacks the privilege (the hint says which one grants it).
    #[error("not permitted to {what}: {hint}")]
    NotPermitted {
        /// What was asked (`run at fifo:30`, `lock memory`).
        what: String,
        /// What would grant it.
        hint: String,
    },
    /// The system refused for another reason.
    #[error("cannot {what}: {source}")]
    Os {
        /// What was asked.
        what: String,
        /// The system's error.
        source: io::Error,
    },
}

/// What grants `sched` to a process that lacks it.
pub fn hint(sched: Sched) -> String {
    match sched {
        Sched::Fifo(p) | Sched::RoundRobin(p) => format!(
            "a real-time policy needs CAP_SYS_NICE (run as root, or `setcap cap_sys_nice+ep` \
             on the program) or a real-time priority limit of at least {p} (`ulimit -r {p}`, \
             `rtprio` in limits.conf)"
        ),
        Sched::Other { nice } => format!(
            "a nice value below 0 needs CAP_SYS_NICE (run as root, or `setcap cap_sys_nice+ep` \
             on the program) or a nice limit of at least {} (`ulimit -e`, `nice` in limits.conf)",
            20 - i32::from(nice)
        ),
    }
}

fn refused(sched: Sched, e: io::Error) -> SchedError {
    let what = format!("run at {sched}");
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => SchedError::NotPermitted {
            what,
            hint: hint(sched),
        },
        _ => SchedError::Os { what, source: e },
    }
}

/// Runs the calling thread at `sched`.
pub fn apply(sched: Sched) -> Result<(), SchedError> {
    apply_to(Tid::current(), sched)
}

/// Runs thread `tid` (of this process, or another the caller may change)
/// at `sched`. From a real-time policy back to `Other`, the thread leaves
/// the real-time policy first, then takes the nice value.
pub fn apply_to(tid: Tid, sched: Sched) -> Result<(), SchedError> {
    let (policy, priority) = match sched {
        Sched::Other { .. } => (libc::SCHED_OTHER, 0),
        Sched::Fifo(p) => (libc::SCHED_FIFO, i32::from(p)),
        Sched::RoundRobin(p) => (libc::SCHED_RR, i32::from(p)),
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid, initialised `sched_param` that outlives
    // the call; the call reads it and writes nothing of ours.
    let rc = unsafe { libc::sched_setscheduler(tid.0, policy, &param) };
    if rc != 0 {
        return Err(refused(sched, io::Error::last_os_error()));
    }
    if let Sched::Other { nice } = sched {
        let pid = rustix::process::Pid::from_raw(tid.0);
        rustix::process::setpriority_process(pid, i32::from(nice))
            .map_err(|e| refused(sched, e.into()))?;
    }
    Ok(())
}

/// The policy thread `tid` runs at (`SCHED_BATCH` and `SCHED_IDLE` read as
/// `Other` at their nice value).
pub fn of_thread(tid: Tid) -> io::Result<Sched> {
    // SAFETY: a plain system call on an integer.
    let policy = unsafe { libc::sched_getscheduler(tid.0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` the call writes.
    if unsafe { libc::sched_getparam(tid.0, &mut param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let p = u8::try_from(param.sched_priority).unwrap_or(0);
    Ok(match policy & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_FIFO => Sched::Fifo(p),
        libc::SCHED_RR => Sched::RoundRobin(p),
        _ => {
            let pid = rustix::process::Pid::from_raw(tid.0);
            let nice = rustix::process::getpriority_process(pid)?;
            Sched::Other {
                nice: i8::try_from(nice.clamp(-20, 19)).unwrap_or(0),
            }
        }
    })
}

/// Locks this process's memory, now and as it grows (`mlockall`), so that
/// no page fault stalls a real-time thread.
pub fn lock_memory() -> Result<(), SchedError> {
    use rustix::mm::{mlockall, MlockAllFlags};
    mlockall(MlockAllFlags::CURRENT | MlockAllFlags::FUTURE).map_err(|e| {
        let what = "lock memory".to_owned();
        match e {
            rustix::io::Errno::PERM | rustix::io::Errno::NOMEM | rustix::io::Errno::AGAIN => {
                SchedError::NotPermitted {
                    what,
                    hint: "needs CAP_IPC_LOCK (run as root) or a locked-memory limit \
                           as large as the process (`ulimit -l`, `memlock` in limits.conf)"
                        .to_owned(),
                }
            }
            e => SchedError::Os {
                what,
                source: e.into(),
            },
        }
    })
}

/// Whether process `pid` could run a thread at `sched` itself: the
/// policy needs no privilege, or the process holds `CAP_SYS_NICE`, or its
/// resource limit allows it. `Err` says what would grant it. (The daemon
/// asks this of a client, identified by its socket's credentials, before
/// running its own threads at a policy the client asked for.)
pub fn may_use(pid: u32, sched: Sched) -> Result<(), String> {
    if !sched.needs_privilege() {
        return Ok(());
    }
    let read = |file: &str| std::fs::read_to_string(format!("/proc/{pid}/{file}"));
    let no = || {
        Err(format!(
            "process {pid} may not run at {sched}: {}",
            hint(sched)
        ))
    };
    let Ok(status) = read("status") else {
        return no();
    };
    if has_cap_sys_nice(&status) {
        return Ok(());
    }
    let Ok(limits) = read("limits") else {
        return no();
    };
    let allowed = match sched {
        Sched::Fifo(p) | Sched::RoundRobin(p) => {
            soft_limit(&limits, "Max realtime priority").is_some_and(|l| l >= u64::from(p))
        }
        Sched::Other { nice } => soft_limit(&limits, "Max nice priority")
            .is_some_and(|l| l >= u64::from((20 - i16::from(nice)) as u16)),
    };
    if allowed {
        Ok(())
    } else {
        no()
    }
}

/// `CAP_SYS_NICE`'s bit in a capability set.
const CAP_SYS_NICE: u32 = 23;

/// Whether a `/proc/PID/status` text shows `CAP_SYS_NICE` in the
/// effective set (`CapEff:` in hexadecimal). Anything malformed: no.
fn has_cap_sys_nice(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}

/// The soft limit on line `name` of a `/proc/PID/limits` text
/// (`unlimited` is `u64::MAX`). Anything malformed: `None`.
fn soft_limit(limits: &str, name: &str) -> Option<u64> {
    let rest = limits.lines().find_map(|l| l.strip_prefix(name))?;
    match rest.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const LIMITS: &str = "\
Limit                     Soft Limit           Hard Limit           Units
Max nice priority         0                    0
Max realtime priority     40                   unlimited
";

    #[test]
    fn the_proc_files_are_read_for_the_capability_and_the_limits() {
        assert!(has_cap_sys_nice("Name:\tx\nCapEff:\t000001ffffffffff\n"));
        assert!(has_cap_sys_nice("CapEff:\t0000000000800000\n"));
        assert!(!has_cap_sys_nice("CapEff:\t0000000000000000\n"));
        assert!(!has_cap_sys_nice("CapEff:\tzz\n"));
        assert!(!has_cap_sys_nice(""));
        assert_eq!(soft_limit(LIMITS, "Max realtime priority"), Some(40));
        assert_eq!(soft_limit(LIMITS, "Max nice priority"), Some(0));
        assert_eq!(
            soft_limit(
                "Max realtime priority unlimited 0\n",
                "Max realtime priority"
            ),
            Some(u64::MAX)
        );
        assert_eq!(soft_limit("garbage", "Max realtime priority"), None);
    }

    #[test]
    fn a_policy_without_privilege_is_always_allowed() {
        assert_eq!(
            may_use(std::process::id(), Sched::Other { nice: 7 }),
            Ok(())
        );
        // No such process: refused, saying what would grant it.
        let e = may_use(u32::MAX, Sched::Fifo(10)).unwrap_err();
        assert!(e.contains("CAP_SYS_NICE"), "{e}");
    }

    #[test]
    fn a_thread_runs_at_the_policy_it_is_given_and_reads_it_back() {
        let seen = std::thread::spawn(|| {
            apply(Sched::Other { nice: 5 }).unwrap();
            let nice = of_thread(Tid::current()).unwrap();
            let rt = apply(Sched::Fifo(3)).map(|()| of_thread(Tid::current()).unwrap());
            let back = rt.as_ref().ok().map(|_| {
                apply(Sched::Other { nice: 6 }).unwrap();
                of_thread(Tid::current()).unwrap()
            });
            (nice, rt, back)
        })
        .join()
        .unwrap();
        assert_eq!(seen.0, Sched::Other { nice: 5 });
        match seen.1 {
            Ok(s) => {
                assert_eq!(s, Sched::Fifo(3));
                assert_eq!(seen.2, Some(Sched::Other { nice: 6 }));
            }
            Err(SchedError::NotPermitted { hint, .. }) => {
                assert!(may_use(std::process::id(), Sched::Fifo(3)).is_err());
                println!("skipped the real-time half: {hint}");
            }
            Err(e) => panic!("{e}"),
        }
    }
}
