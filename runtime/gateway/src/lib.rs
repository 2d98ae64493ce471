//! # tagwire-gateway: tags as DDS topics
//!
//! Issue 20 item 2: a node's daemon can stand in a DDS domain for its tags
//! (`tagwire daemon --dds-domain N --dds-map FILE`). The gateway is one DDS
//! domain participant (`tagwire_rtps::participant`, RTPS on UDP) and one
//! tagwire client of its node's daemon. For each mapped tag
//! ([`map`]) it announces a DDS writer and a DDS reader of the topic:
//!
//! ```text
//!  tagwire publishers ─▶ tag ─▶ gateway's subscriber ─▶ DDS writer ─▶ DDS readers
//!  DDS writers ─▶ gateway's DDS reader ─▶ gateway's publisher ─▶ tag ─▶ tagwire subscribers
//! ```
//!
//! Samples cross once per node, as serialized CDR bytes: a tagwire message's
//! payload is the sample's serialized data, encapsulation header first.
//! What came from DDS (a message with an origin) is not sent back to DDS,
//! and the participant never reads its own writers.
//!
//! Ports are the RTPS specification's for domain N: SPDP multicast on
//! 239.255.0.1:7400+250N, and the participant's unicast port
//! 7410+250N+2·id with the first free id. Participants on the same host
//! are also found without multicast (announcements to the first ten ids'
//! unicast ports on 127.0.0.1).
//!
//! A sample keeps its writer's source timestamp both ways, and its
//! instance: a keyed mapping says where the key is (`key=`), DDS disposes
//! and unregisters become tag messages in that state and back
//! ([`cross`]). A message from DDS names its DDS writer ([`tagwire::Origin`]);
//! messages with an origin are never sent back to DDS (another gateway's
//! neither).
//!
//! Not yet: XTypes type information (types are matched by name).

pub mod cross;
pub mod key;
pub mod map;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use key::KeySpec;
pub use map::{parse, MapError, Mapping};
use tagwire::{Client, ClientOptions, Domain, Publisher, SubscribeOptions};
use tagwire_rtps::participant::{Event, Participant, ParticipantConfig};
use tagwire_rtps::qos::{Durability, History, Qos, Reliability};
use tagwire_rtps::{EntityId, Guid, GuidPrefix, Locator, Transmit};

/// The SPDP multicast group.
pub const SPDP_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 0, 1);

/// Participant ids tried for the unicast port.
const MAX_PARTICIPANT_ID: u16 = 120;

/// Longest the RTPS thread sleeps (to notice a stop).
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// What the gateway does.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The DDS domain id (0-232).
    pub domain: u32,
    /// The address other participants reach this one at (an address of
    /// this host).
    pub address: Ipv4Addr,
    /// The tags it maps.
    pub mappings: Vec<Mapping>,
    /// The participant's USER_DATA.
    pub user_data: Vec<u8>,
    /// How it reaches its node's daemon.
    pub client: ClientOptions,
    /// Its tag subscriptions spin this long before sleeping
    /// ([`SubscribeOptions::busy_poll`]): a message to DDS then waits for
    /// no thread to wake, at the price of a core kept busy. `None`: sleep.
    pub busy_poll: Option<Duration>,
}

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Its ports would not fit.
    #[error("DDS domain {0} is out of range (0-232)")]
    Domain(u32),
    /// Every participant port of the domain is taken.
    #[error("no free RTPS participant port in domain {domain} (7410+250*domain+2*id, id < 120)")]
    NoPort {
        /// The domain.
        domain: u32,
    },
    /// More mappings than a participant holds endpoints.
    #[error("too many mappings: a participant holds {max} endpoints, two per mapping")]
    TooMany {
        /// Endpoints a participant holds.
        max: usize,
    },
    /// The daemon refused something.
    #[error("tagwire: {0}")]
    Tagwire(#[from] tagwire::Error),
    /// A socket failed.
    #[error("DDS socket: {0}")]
    Io(#[from] std::io::Error),
}

/// Samples that crossed (see [`Gateway::counters`]).
#[derive(Debug, Default)]
struct Counters {
    to_dds: AtomicU64,
    from_dds: AtomicU64,
    refused: AtomicU64,
}

/// What crossed the gateway so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Crossed {
    /// Tag messages written to DDS.
    pub to_dds: u64,
    /// DDS samples published into tags.
    pub from_dds: u64,
    /// DDS samples a tag did not take (its publisher failed, e.g. its
    /// window stayed full past the send timeout): lost, and logged.
    pub refused: u64,
}

#[derive(Debug)]
struct Shared {
    part: Mutex<Participant>,
    sock: UdpSocket,
    stop: AtomicBool,
    counters: Counters,
}

impl Shared {
    fn part(&self) -> MutexGuard<'_, Participant> {
        self.part.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends what the participant has to send (under its lock).
    fn flush(&self, p: &mut Participant) {
        while let Some(t) = p.poll_transmit() {
            self.send(&t);
        }
    }

    fn send(&self, Transmit { to, bytes }: &Transmit) {
        if let Some(a) = to.to_udp_v4() {
            let _ = self.sock.send_to(bytes, a);
        }
    }
}

/// A running gateway; [`Gateway::stop`] (or dropping it) ends it.
#[derive(Debug)]
pub struct Gateway {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    port: u16,
}

fn qos(writer: bool, m: &Mapping) -> Qos {
    let mut q = Qos::default_for(writer);
    q.reliability.0 = if m.reliable {
        Reliability::Reliable
    } else {
        Reliability::BestEffort
    };
    q.partitions.clone_from(&m.partitions);
    q.exclusive = m.exclusive;
    if writer {
        q.strength = m.strength;
    }
    if let Some(ms) = m.deadline_ms {
        q.deadline = tagwire_rtps::qos::Duration::from_millis(ms);
    }
    if let (true, Some(n)) = (writer, m.transient_local) {
        q.durability = Durability::TransientLocal;
        q.history = History::KeepLast(i32::try_from(n).unwrap_or(i32::MAX));
    }
    q
}

impl Gateway {
    /// Joins the domain and maps the tags (creating those that do not exist
    /// yet, as global tags).
    pub fn start(cfg: GatewayConfig) -> Result<Self, GatewayError> {
        let base = u16::try_from(cfg.domain)
            .ok()
            .filter(|d| *d <= 232)
            .map(|d| 7400 + 250 * d)
            .ok_or(GatewayError::Domain(cfg.domain))?;
        let client = Client::with_options(cfg.client.clone())?;
        let (sock, id) = (0..MAX_PARTICIPANT_ID)
            .find_map(|id| {
                let a = SocketAddr::from((Ipv4Addr::UNSPECIFIED, base + 10 + 2 * id));
                UdpSocket::bind(a).ok().map(|s| (s, id))
            })
            .ok_or(GatewayError::NoPort { domain: cfg.domain })?;
        let port = base + 10 + 2 * id;
        let mcast = match tagwire_net::beacon_socket(SPDP_GROUP, base, cfg.address) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "no SPDP multicast: only participants on this host are found");
                None
            }
        };
        let now = Instant::now();
        let pid = std::process::id().to_be_bytes();
        let t = port_seed().to_be_bytes();
        let prefix = GuidPrefix([
            0x01, 0x99, pid[0], pid[1], pid[2], pid[3], t[0], t[1], t[2], t[3], 0, id as u8,
        ]);
        let group = Locator::udp_v4(SPDP_GROUP, base);
        let mut peers = vec![group];
        peers.extend(
            (0..10)
                .filter(|i| *i != id)
                .map(|i| Locator::udp_v4(Ipv4Addr::LOCALHOST, base + 10 + 2 * i)),
        );
        let mut part = Participant::new(
            ParticipantConfig {
                prefix,
                domain: cfg.domain,
                unicast: vec![Locator::udp_v4(cfg.address, port)],
                multicast: mcast.as_ref().map(|_| vec![group]).unwrap_or_default(),
                peers,
                lease: Duration::from_secs(10),
                announce_every: Duration::from_secs(1),
                user_data: cfg.user_data.clone(),
            },
            now,
        );
        let mut writers = Vec::new();
        let mut publishers = HashMap::new();
        for m in &cfg.mappings {
            client.create_tag(&m.tag, Domain::Global)?;
            let (t, y, k) = (&m.topic, &m.type_name, m.keyed);
            let w = part.add_writer(now, t, y, k, qos(true, m));
            let r = part.add_reader(now, t, y, k, qos(false, m));
            let (Some(w), Some(r)) = (w, r) else {
                return Err(GatewayError::TooMany {
                    max: tagwire_rtps::participant::MAX_ENDPOINTS,
                });
            };
            publishers.insert(r, (client.publisher(&m.tag)?, m.key.clone()));
            let mut opts = if m.reliable {
                SubscribeOptions::default()
            } else {
                SubscribeOptions::default().best_effort()
            };
            if let Some(spin) = cfg.busy_poll {
                opts = opts.busy_poll(spin);
            }
            // A transient-local topic starts from the tag's history (what a
            // late-joining DDS reader gets), then goes on live.
            let sub = match m.transient_local {
                Some(n) => client
                    .subscribe_with_history(&m.tag, opts, tagwire::HistoryQuery::Last(n))
                    .or_else(|e| {
                        tracing::info!(tag = %m.tag, error = %e, "no history to start from");
                        client.subscribe(&m.tag, opts)
                    })?,
                None => client.subscribe(&m.tag, opts)?,
            };
            writers.push((w, sub, m.tag.clone(), m.key.clone()));
        }
        sock.set_nonblocking(true)?;
        if let Some(m) = &mcast {
            m.set_nonblocking(true)?;
        }
        let shared = Arc::new(Shared {
            part: Mutex::new(part),
            sock,
            stop: AtomicBool::new(false),
            counters: Counters::default(),
        });
        tracing::info!(
            domain = cfg.domain,
            port,
            tags = cfg.mappings.len(),
            "DDS gateway up"
        );
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("tagwire-dds".into())
                .spawn(move || rtps_loop(&s, mcast.as_ref(), publishers))?,
        );
        for (w, mut sub, tag, spec) in writers {
            let s = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("tagwire-dds-out".into())
                    .spawn(move || {
                        while !s.stop.load(Ordering::Acquire) {
                            let Ok(m) = sub.receive(Some(MAX_SLEEP)) else {
                                continue;
                            };
                            // Samples from DDS (our own publisher's, or
                            // another gateway's): not back.
                            if m.origin.is_some() {
                                continue;
                            }
                            let Some(change) = cross::to_dds(m, spec.as_ref()) else {
                                s.counters.refused.fetch_add(1, Ordering::Relaxed);
                                tracing::warn!(%tag, "a dispose without a key: not sent to DDS");
                                continue;
                            };
                            let mut out = Vec::new();
                            {
                                let mut p = s.part();
                                if p.write_change(Instant::now(), w, change).is_some() {
                                    s.counters.to_dds.fetch_add(1, Ordering::Relaxed);
                                }
                                while let Some(t) = p.poll_transmit() {
                                    out.push(t);
                                }
                            }
                            // Sent outside the lock: the DDS side's thread
                            // does not wait for these system calls.
                            for t in &out {
                                s.send(t);
                            }
                        }
                        tracing::debug!(%tag, "DDS gateway: stopped forwarding the tag");
                    })?,
            );
        }
        Ok(Self {
            shared,
            threads,
            port,
        })
    }

    /// The participant's unicast port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// What crossed so far.
    pub fn counters(&self) -> Crossed {
        let c = &self.shared.counters;
        Crossed {
            to_dds: c.to_dds.load(Ordering::Relaxed),
            from_dds: c.from_dds.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
        }
    }

    /// Leaves the domain (other participants drop this one at once) and
    /// stops.
    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if self.shared.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        {
            let mut p = self.shared.part();
            p.leave();
            self.shared.flush(&mut p);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.end();
    }
}

/// A little entropy for the GUID prefix (two gateways of one process).
fn port_seed() -> u32 {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    t ^ (n as u32).rotate_left(16)
}

/// Where DDS writer `writer` is reached (its own unicast locator, else its
/// participant's) and its strength if its ownership is exclusive.
fn about(p: &Participant, writer: Guid) -> (Option<SocketAddr>, Option<i32>) {
    let ep = p.remote_endpoint(writer);
    let strength = ep.filter(|e| e.qos.exclusive).map(|e| e.qos.strength);
    let addr = ep
        .and_then(|e| e.unicast.iter().find_map(Locator::to_udp_v4))
        .or_else(|| {
            p.participants()
                .find(|d| d.prefix == writer.prefix)
                .and_then(|d| d.default_unicast.iter().find_map(Locator::to_udp_v4))
        })
        .map(SocketAddr::V4);
    (addr, strength)
}

/// The RTPS side: datagrams in, timers, samples from DDS into the tags.
fn rtps_loop(
    s: &Shared,
    mcast: Option<&UdpSocket>,
    mut publishers: HashMap<EntityId, (Publisher, Option<KeySpec>)>,
) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut buf = vec![0u8; 65536];
    while !s.stop.load(Ordering::Acquire) {
        let wait = {
            let p = s.part();
            let now = Instant::now();
            p.poll_timeout()
                .map_or(MAX_SLEEP, |t| t.saturating_duration_since(now))
                .min(MAX_SLEEP)
        };
        // Which sockets have something: only those are read (a read that
        // finds nothing is a system call on the way of every sample).
        let ready = {
            let mut fds = vec![PollFd::new(&s.sock, PollFlags::IN)];
            if let Some(m) = mcast {
                fds.push(PollFd::new(m, PollFlags::IN));
            }
            let ts = Timespec {
                tv_sec: 0,
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            match poll(&mut fds, Some(&ts)) {
                Ok(_) => fds.iter().map(|f| !f.revents().is_empty()).collect(),
                // Interrupted or failed: try every socket.
                Err(_) => vec![true; fds.len()],
            }
        };
        let (mut samples, mut out) = (Vec::new(), Vec::new());
        {
            let mut p = s.part();
            // The last writer looked up (its address, its strength if
            // exclusive), for this round.
            let mut last = None;
            let socks = std::iter::once(&s.sock).chain(mcast);
            for (sock, _) in socks.zip(&ready).filter(|(_, r)| **r) {
                while let Ok((n, from)) = sock.recv_from(&mut buf) {
                    tracing::trace!(%from, n, "RTPS datagram");
                    p.handle_datagram(Instant::now(), &buf[..n]);
                }
            }
            p.handle_timeout(Instant::now());
            while let Some(e) = p.poll_event() {
                match e {
                    Event::Sample {
                        reader,
                        writer,
                        change,
                        ..
                    } => {
                        // A datagram's samples mostly come from one
                        // writer: looked up once for the run of them.
                        let (addr, strength) = match last {
                            Some((g, addr, strength)) if g == writer => (addr, strength),
                            _ => {
                                let (addr, strength) = about(&p, writer);
                                last = Some((writer, addr, strength));
                                (addr, strength)
                            }
                        };
                        samples.push((reader, writer, addr, strength, change));
                    }
                    Event::Matched { local, remote } => {
                        last = None;
                        tracing::info!(?local, ?remote, "DDS endpoint matched");
                    }
                    Event::Mismatched { local, remote, why } => {
                        tracing::warn!(?local, ?remote, %why, "DDS endpoint not matched");
                    }
                    Event::Joined(p) => tracing::info!(?p, "DDS participant joined"),
                    Event::Left(p) => tracing::info!(?p, "DDS participant left"),
                }
            }
            // Acknowledgements and the like go out after the samples are
            // in the tags: a subscriber waiting for a sample does not wait
            // for these system calls too.
            while let Some(t) = p.poll_transmit() {
                out.push(t);
            }
        }
        // Into the tags, outside the participant's lock (a send may wait).
        // Each tag's samples in one batch: its subscribers are woken once,
        // not once per sample.
        let mut samples = samples.into_iter().peekable();
        while let Some(first) = samples.next() {
            let reader = first.0;
            let Some((p, spec)) = publishers.get_mut(&reader) else {
                continue;
            };
            let mut run = vec![first];
            while let Some(next) = samples.next_if(|x| x.0 == reader) {
                run.push(next);
            }
            p.batch(|p| {
                for (_, writer, addr, strength, change) in run {
                    let (payload, mut ext, ts) = cross::to_tag(change, writer, addr, spec.as_ref());
                    // An exclusive DDS writer's strength, for exclusive
                    // tagwire subscribers.
                    ext.strength = strength;
                    match p.send_with(&payload, &ext, ts) {
                        Ok(_) => {
                            s.counters.from_dds.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            s.counters.refused.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(error = %e, "a DDS sample not published: lost");
                        }
                    }
                }
            });
        }
        for t in &out {
            s.send(t);
        }
    }
}
