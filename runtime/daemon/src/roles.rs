//! The scheduling of the daemon's roles (docs/design.md §2, §8): which
//! policy each role's threads run at, set by `--sched
//! delivery=fifo:40,update=fifo:20,...`, checked once at start (a role the
//! daemon may not run at is named in a warning and runs at the default,
//! never silently), and raised where a connection asks for more.
//!
//! | role       | threads                                                 | default |
//! |------------|---------------------------------------------------------|---------|
//! | `delivery` | inbound (UDP, multicast, TCP), acknowledgements, held   | `other` |
//! | `forward`  | one forwarder per tag with receivers on other nodes     | 10 nicer than the daemon |
//! | `update`   | the update manager and the peer links                   | `other` |
//! | `local`    | the local manager's accept loop and client workers, pulls | `other` |
//!
//! The paper's order (delivery above update above local) is the one to
//! configure; the defaults keep every role at the time-sharing policy,
//! which needs no privilege.
//!
//! **Raised by connections.** A subscription's [`Sched`] applies to the
//! threads that move its data: on its node, the inbound threads (which
//! serve every tag: they run at the highest any of the node's
//! subscriptions asks, and at least the role's); on a sending node, the
//! tag's forwarder (the highest its remote receivers ask) and the
//! acknowledgement watcher (the highest any remote receiver asks).

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use tagwire_sched::{SchedError, Tid};
use tagwire_wire::Sched;

/// One of the daemon's roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Data from other nodes into the rings, and acknowledgements.
    Delivery,
    /// Data from the rings to other nodes.
    Forward,
    /// The tag table's replication and the peer links.
    Update,
    /// Clients' requests.
    Local,
}

impl Role {
    const ALL: [Role; 4] = [Role::Delivery, Role::Forward, Role::Update, Role::Local];

    fn name(self) -> &'static str {
        match self {
            Role::Delivery => "delivery",
            Role::Forward => "forward",
            Role::Update => "update",
            Role::Local => "local",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The policy asked for each role (`None`: its default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Roles([Option<Sched>; 4]);

impl Roles {
    /// The policy asked for `role`.
    pub fn get(&self, role: Role) -> Option<Sched> {
        self.0[role.index()]
    }

    /// Asks `sched` for `role`.
    pub fn set(&mut self, role: Role, sched: Sched) {
        self.0[role.index()] = Some(sched);
    }
}

impl FromStr for Roles {
    type Err = String;

    /// `ROLE=POLICY[,ROLE=POLICY...]`, ROLE one of delivery, forward,
    /// update, local; POLICY as [`Sched`]'s (`fifo:40`, `rr:10`,
    /// `other:-5`).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut roles = Roles::default();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let (name, policy) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: write ROLE=POLICY, e.g. delivery=fifo:40"))?;
            let role = Role::ALL
                .into_iter()
                .find(|r| r.name() == name)
                .ok_or_else(|| {
                    format!("`{name}`: the roles are delivery, forward, update and local")
                })?;
            roles.set(role, policy.parse()?);
        }
        Ok(roles)
    }
}

impl fmt::Display for Roles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for r in Role::ALL {
            if let Some(s) = self.get(r) {
                write!(f, "{}{r}={s}", if first { "" } else { "," })?;
                first = false;
            }
        }
        Ok(())
    }
}

/// The roles as this daemon may run them: each configured policy tried
/// once at start; one refused is dropped, with a warning.
#[derive(Debug, Default)]
pub(crate) struct Granted {
    roles: Roles,
}

impl Granted {
    /// Tries each configured role's policy on a thread of its own (so the
    /// caller's is untouched) and keeps those the system allows; warns of
    /// each one it does not.
    pub(crate) fn check(asked: Roles) -> Self {
        let mut roles = Roles::default();
        for role in Role::ALL {
            let Some(sched) = asked.get(role) else {
                continue;
            };
            let tried = std::thread::spawn(move || tagwire_sched::apply(sched))
                .join()
                .unwrap_or_else(|_| {
                    Err(SchedError::Os {
                        what: format!("run at {sched}"),
                        source: std::io::Error::other("the probe thread panicked"),
                    })
                });
            match tried {
                Ok(()) => {
                    tracing::info!(%role, %sched, "role scheduled");
                    roles.set(role, sched);
                }
                Err(e) => tracing::warn!(
                    %role,
                    "the {role} role runs at the default policy, not {sched}: {e}"
                ),
            }
        }
        Self { roles }
    }

    /// The policy `role` runs at, if one was granted.
    pub(crate) fn get(&self, role: Role) -> Option<Sched> {
        self.roles.get(role)
    }

    /// Runs the calling thread at `role`'s policy, if one was granted.
    pub(crate) fn enter(&self, role: Role) {
        enter(role, self.get(role));
    }

    /// Starts a thread of `role`, named `name`, that runs `f` at the
    /// role's policy: every daemon thread starts here.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        role: Role,
        name: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<T>> {
        let sched = self.get(role);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                enter(role, sched);
                f()
            })
    }
}

fn enter(role: Role, sched: Option<Sched>) {
    if let Some(sched) = sched {
        if let Err(e) = tagwire_sched::apply(sched) {
            tracing::warn!(%role, "a {role} thread runs at the default policy: {e}");
        }
    }
}

/// Threads that serve many connections (the inbound threads): each runs
/// at the highest of its role's policy and what the connections ask.
#[derive(Debug)]
pub(crate) struct Pool {
    role: Role,
    inner: Mutex<Raised>,
}

#[derive(Debug, Default)]
struct Raised {
    tids: Vec<Tid>,
    /// The policy they run at now (`None`: as they started).
    now: Option<Sched>,
    /// Warned that a connection's policy was refused.
    warned: bool,
}

impl Pool {
    pub(crate) fn new(role: Role) -> Self {
        Self {
            role,
            inner: Mutex::new(Raised::default()),
        }
    }

    /// The calling thread joins until the returned guard drops (before
    /// the thread ends: a thread id is reused once its thread is gone): it
    /// runs at the role's policy, or the raised one.
    pub(crate) fn join(&self, granted: &Granted) -> Joined<'_> {
        granted.enter(self.role);
        let mut r = crate::lock(&self.inner);
        if let Some(s) = r.now {
            let _ = tagwire_sched::apply(s);
        }
        let tid = Tid::current();
        r.tids.push(tid);
        Joined { pool: self, tid }
    }

    /// The threads run at the higher of the role's policy and `asked` (the
    /// highest the connections ask; `None`: nothing beyond the default).
    /// Returns the policy they now run at, if it changed.
    pub(crate) fn raise(&self, granted: &Granted, asked: Option<Sched>) -> Option<Sched> {
        let base = granted.get(self.role);
        // (Never below the default: a connection that asks for a nicer
        // policy does not slow threads that serve every other one.)
        let want = match asked {
            Some(a) => Some(base.unwrap_or_default().max(a)),
            None => base,
        };
        let mut r = crate::lock(&self.inner);
        if r.now == want {
            return None;
        }
        // Back to the role's policy, or the default, when nothing asks.
        let to = want.unwrap_or_default();
        let mut refused = None;
        for tid in &r.tids {
            if let Err(e) = tagwire_sched::apply_to(*tid, to) {
                refused = Some(e);
            }
        }
        match refused {
            Some(e) if !r.warned => {
                r.warned = true;
                tracing::warn!(role = %self.role, "cannot raise the {} threads to {to}: {e}", self.role);
            }
            _ => {}
        }
        r.now = want;
        Some(to)
    }
}

/// A thread's membership of a [`Pool`] (see [`Pool::join`]).
#[derive(Debug)]
pub(crate) struct Joined<'a> {
    pool: &'a Pool,
    tid: Tid,
}

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        crate::lock(&self.pool.inner)
            .tids
            .retain(|t| *t != self.tid);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn roles_parse_and_print_and_refuse_what_they_do_not_know() {
        let r: Roles = "delivery=fifo:40,update=fifo:20,local=other:5"
            .parse()
            .unwrap();
        assert_eq!(r.get(Role::Delivery), Some(Sched::Fifo(40)));
        assert_eq!(r.get(Role::Update), Some(Sched::Fifo(20)));
        assert_eq!(r.get(Role::Local), Some(Sched::Other { nice: 5 }));
        assert_eq!(r.get(Role::Forward), None);
        assert_eq!(
            r.to_string(),
            "delivery=fifo:40,update=fifo:20,local=other:5"
        );
        assert_eq!("".parse::<Roles>(), Ok(Roles::default()));
        for bad in [
            "delivery",
            "sender=fifo:1",
            "delivery=fifo:0",
            "update=fast",
        ] {
            assert!(bad.parse::<Roles>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shared_threads_run_at_the_highest_asked_and_fall_back() {
        // (Lowering a thread's nice value, 3 to 1 below, needs privilege.)
        if rustix::process::geteuid().as_raw() != 0 {
            println!("skipped: needs root");
            return;
        }
        let granted = Granted::check("delivery=other:3".parse().unwrap());
        assert_eq!(granted.get(Role::Delivery), Some(Sched::Other { nice: 3 }));
        let threads = std::sync::Arc::new(Pool::new(Role::Delivery));
        let (tx, rx) = std::sync::mpsc::channel();
        let (t2, g2) = (threads.clone(), std::sync::Arc::new(granted));
        let g3 = g2.clone();
        let worker = std::thread::spawn(move || {
            let _in = t2.join(&g3);
            tx.send(Tid::current()).unwrap();
            std::thread::park();
        });
        let tid = rx.recv().unwrap();
        let at = || tagwire_sched::of_thread(tid).unwrap();
        assert_eq!(at(), Sched::Other { nice: 3 });
        // A connection asks less than the role: the role's stays.
        assert_eq!(
            threads.raise(&g2, Some(Sched::Other { nice: 8 })),
            Some(Sched::Other { nice: 3 })
        );
        assert_eq!(at(), Sched::Other { nice: 3 });
        assert_eq!(
            threads.raise(&g2, Some(Sched::Other { nice: 1 })),
            Some(Sched::Other { nice: 1 })
        );
        assert_eq!(at(), Sched::Other { nice: 1 });
        assert_eq!(threads.raise(&g2, Some(Sched::Other { nice: 1 })), None);
        assert_eq!(threads.raise(&g2, None), Some(Sched::Other { nice: 3 }));
        assert_eq!(at(), Sched::Other { nice: 3 });
        worker.thread().unpark();
        worker.join().unwrap();
        // Gone, it is out of the pool: nothing is applied to its old id.
        assert!(crate::lock(&threads.inner).tids.is_empty());
    }

    #[test]
    fn without_a_role_a_nicer_ask_leaves_shared_threads_at_the_default() {
        let granted = Granted::default();
        let threads = Pool::new(Role::Delivery);
        let _in = threads.join(&granted);
        let me = Tid::current();
        assert_eq!(
            threads.raise(&granted, Some(Sched::Other { nice: 8 })),
            Some(Sched::default())
        );
        assert_eq!(tagwire_sched::of_thread(me).unwrap(), Sched::default());
        if tagwire_sched::may_use(std::process::id(), Sched::Other { nice: -2 }).is_err() {
            println!("skipped the raise above the default: not permitted");
            return;
        }
        assert_eq!(
            threads.raise(&granted, Some(Sched::Other { nice: -2 })),
            Some(Sched::Other { nice: -2 })
        );
        assert_eq!(
            tagwire_sched::of_thread(me).unwrap(),
            Sched::Other { nice: -2 }
        );
        threads.raise(&granted, None);
        assert_eq!(tagwire_sched::of_thread(me).unwrap(), Sched::default());
    }
}
