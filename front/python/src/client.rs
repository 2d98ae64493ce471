//! `Client`: the connection to the node's daemon, and everything asked of
//! it. Every call that talks to the daemon releases the GIL while it waits.

use std::path::PathBuf;
use std::sync::RwLock;

use pyo3::prelude::*;

use crate::errors::{self, bad_arg, IntoPy};
use crate::message::{Member, Message, NodeInfo, Sender, TagInfo};
use crate::options::{self, history_query, Subscribe};
use crate::publisher::PyPublisher;
use crate::subscriber::PySubscriber;

/// A connection to the node's tagwire daemon (`tagwire daemon`).
///
/// `socket`: the daemon's socket path (None: `$TAGWIRE_SOCKET`, else the
/// per-user default); `timeout`: seconds a request may wait for the daemon
/// (default 1); `autostart`: start a background daemon if none answers;
/// `name`: a label for the daemon's logs (default: the program's name).
/// Raises `tagwire.DaemonUnreachable` when no daemon answers.
///
/// When the daemon restarts, the client reconnects by itself and
/// re-registers its tags, publishers and subscribers (calls meanwhile raise
/// `DaemonUnreachable`). Publishers and subscribers made by a client keep
/// the connection alive: `close()` releases this handle only.
#[pyclass(module = "tagwire._tagwire", name = "Client", frozen)]
pub(crate) struct PyClient {
    inner: RwLock<Option<tagwire::Client>>,
    socket: String,
}

impl PyClient {
    fn client(&self, py: Python<'_>) -> PyResult<tagwire::Client> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| errors::closed(py, "client"))
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (socket=None, timeout=1.0, autostart=false, name=None))]
    fn new(
        py: Python<'_>,
        socket: Option<PathBuf>,
        timeout: f64,
        autostart: bool,
        name: Option<String>,
    ) -> PyResult<Self> {
        let mut opts = tagwire::ClientOptions::default();
        if let Some(s) = socket {
            opts.socket = s;
        }
        opts.timeout = options::seconds("timeout", timeout)?;
        if opts.timeout.is_zero() {
            return Err(bad_arg("timeout must be more than 0 seconds"));
        }
        opts.autostart = autostart;
        opts.name = match name {
            Some(n) => n,
            None => py
                .import("sys")
                .and_then(|s| s.getattr("argv"))
                .and_then(|a| a.get_item(0))
                .and_then(|a| a.extract::<String>())
                .ok()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "python".to_owned()),
        };
        let socket = opts.socket.to_string_lossy().into_owned();
        let c = py
            .detach(move || tagwire::Client::with_options(opts))
            .py_err(py)?;
        Ok(Self {
            inner: RwLock::new(Some(c)),
            socket,
        })
    }

    /// The daemon's socket path.
    #[getter]
    fn socket(&self) -> &str {
        &self.socket
    }

    /// This process as senders see it: a `Sender` (pid and node).
    #[getter]
    fn me(&self, py: Python<'_>) -> PyResult<Sender> {
        Ok(self.client(py)?.me().into())
    }

    /// Creates a tag; creating an existing tag is fine (returns False; the
    /// existing tag is left as it is). `domain`: `"global"` (every node) or
    /// `"local"` (this node only). `slots` (the deepest queue a subscriber
    /// may ask for) and `slot_payload` (the largest message on the fast
    /// path, bytes): None for the daemon's defaults (256 and 64 KiB).
    /// `history_depth`/`history_max_bytes`: keep the tag's last messages
    /// from the start, for `pull` and `subscribe(history=...)` (0: none;
    /// max bytes 0: the daemon's default). Returns True when this call
    /// created the tag.
    #[pyo3(signature = (name, domain="global", slots=None, slot_payload=None, history_depth=0, history_max_bytes=0))]
    fn create_tag(
        &self,
        py: Python<'_>,
        name: &str,
        domain: &str,
        slots: Option<u32>,
        slot_payload: Option<u32>,
        history_depth: u32,
        history_max_bytes: u64,
    ) -> PyResult<bool> {
        let domain = options::domain(domain)?;
        let ring = tagwire::RingParams {
            slots: slots.unwrap_or(0),
            slot_payload: slot_payload.unwrap_or(0),
        };
        let history = tagwire::KeepHistory {
            depth: history_depth,
            max_bytes: history_max_bytes,
        };
        let c = self.client(py)?;
        py.detach(|| c.create_tag_keeping(name, domain, ring, history))
            .py_err(py)
    }

    /// Destroys a tag: every publisher and subscriber on it, in every
    /// process, gets `tagwire.TagDestroyed` from then on.
    fn destroy_tag(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let c = self.client(py)?;
        py.detach(|| c.destroy_tag(name)).py_err(py)
    }

    /// Gets send access to a tag: a `Publisher`.
    ///
    /// - `priority`: the packet class of everything this node sends the
    ///   tag in, at least (`"low"`, `"normal"`, the default: the
    ///   receivers' class alone, `"high"`, `"critical"`, `"dscp:N"`).
    /// - `sched`: the policy of this node's forwarder of the tag, at least
    ///   (`"other"`, `"other:N"`, `"fifo:P"`, `"rr:P"`); a real-time one
    ///   needs the privilege (`tagwire.NotPermitted`).
    /// - `pacing`: how this node paces the tag's reliable streams to other
    ///   nodes: `"daemon"` (the default: as the daemon is set), `"off"`,
    ///   `"adaptive"` (from each stream's send-window occupancy: the
    ///   path's rate without filling a bottleneck's queue) or
    ///   `"fixed:RATE"` (bytes per second: `"fixed:2.5MB"`,
    ///   `"fixed:50mbit"`).
    #[pyo3(signature = (name, priority="normal", sched="other", pacing="daemon"))]
    fn publisher(
        &self,
        py: Python<'_>,
        name: &str,
        priority: &str,
        sched: &str,
        pacing: &str,
    ) -> PyResult<PyPublisher> {
        let class: tagwire::Priority = priority
            .parse()
            .map_err(|e: String| bad_arg(format!("priority: {e}")))?;
        let policy: tagwire::Sched = sched
            .parse()
            .map_err(|e: String| bad_arg(format!("sched: {e}")))?;
        let pace: tagwire::Pacing = pacing
            .parse()
            .map_err(|e: String| bad_arg(format!("pacing: {e}")))?;
        let opts = tagwire::PublishOptions::default()
            .priority(class)
            .sched(policy)
            .pacing(pace);
        let c = self.client(py)?;
        let p = py.detach(|| c.publisher_with(name, opts)).py_err(py)?;
        Ok(PyPublisher::new(p))
    }

    /// Subscribes to a tag: a `Subscriber`, which receives the messages sent
    /// after this call (and first `history`, if given).
    ///
    /// - `depth`: unread messages kept before the oldest is dropped
    ///   (`Overflowed`); at most the tag's slot count (else
    ///   `DepthTooLarge`). None (the default): 64, or the tag's slots if
    ///   fewer.
    /// - `reliability`: `"reliable"` or `"best_effort"` (from other nodes:
    ///   newest data, never retransmitted, never holding publishers back).
    /// - `carrier`: `"udp"`, `"tcp"` or `"multicast"` (multicast is
    ///   best-effort) for messages from other nodes.
    /// - `every`: receive only samples whose sequence number is a multiple
    ///   of `every` (0 or 1: all).
    /// - `proxy`: where that filter runs: `"subscriber"`, `"publisher"`,
    ///   `"auto"` (the daemons choose; `delay_bound` in seconds) or a node
    ///   address such as `"10.0.0.7"`.
    /// - `lossless`: never lose a message; hold the publishers back instead
    ///   (at most 7 per tag and node: `NoLosslessRoom`).
    /// - `busy_poll`: seconds to spin before sleeping in a receive.
    /// - `exclusive`: of each instance (`Publisher.send_keyed`), only the
    ///   strongest live publisher's messages (`Publisher.set_strength`).
    /// - `deadline`: seconds; a receive raises `tagwire.DeadlineMissed`
    ///   (`.key`, `.writer`) once per period an instance goes without a
    ///   message (with `exclusive`, its owner then loses it).
    /// - `min_separation`: seconds; at most one message per instance per
    ///   interval, the newest.
    /// - `priority`: the packet class of the datagrams that bring the
    ///   messages from other nodes: `"low"`, `"normal"`, `"high"`,
    ///   `"critical"` or `"dscp:N"` (N in 0..=63).
    /// - `sched`: the scheduling of the threads that bring the messages
    ///   from other nodes: `"other"`, `"other:NICE"`, `"fifo:P"` or
    ///   `"rr:P"` (P in 1..=99; a real-time policy needs CAP_SYS_NICE or
    ///   `ulimit -r`, else `tagwire.NotPermitted`).
    /// - `history`: `tagwire.Last(n)`, `tagwire.Since(seq)` or
    ///   `tagwire.Between(from_ns, to_ns)`: receive those messages from the
    ///   tag's history first, then live ones, with no gap or duplicate.
    #[pyo3(signature = (name, depth=None, reliability="reliable", carrier="udp", every=1, proxy="subscriber", delay_bound=None, lossless=false, busy_poll=None, history=None, exclusive=false, deadline=None, min_separation=None, priority="normal", sched="other"))]
    // Each is a Python keyword argument (the Rust builder's calls).
    #[allow(clippy::too_many_arguments)]
    fn subscribe(
        &self,
        py: Python<'_>,
        name: &str,
        depth: Option<u32>,
        reliability: &str,
        carrier: &str,
        every: u32,
        proxy: &str,
        delay_bound: Option<f64>,
        lossless: bool,
        busy_poll: Option<f64>,
        history: Option<&Bound<'_, PyAny>>,
        exclusive: bool,
        deadline: Option<f64>,
        min_separation: Option<f64>,
        priority: &str,
        sched: &str,
    ) -> PyResult<PySubscriber> {
        let opts = Subscribe {
            depth,
            reliability,
            carrier,
            every,
            proxy,
            delay_bound,
            lossless,
            busy_poll,
            exclusive,
            deadline,
            min_separation,
            priority,
            sched,
        }
        .build()?;
        let query = history.map(history_query).transpose()?;
        let c = self.client(py)?;
        let s = py
            .detach(|| match query {
                None => c.subscribe(name, opts),
                Some(q) => c.subscribe_with_history(name, opts, q),
            })
            .py_err(py)?;
        Ok(PySubscriber::new(s))
    }

    /// The processes holding send access to a tag: a list of `Member`.
    fn senders(&self, py: Python<'_>, name: &str) -> PyResult<Vec<Member>> {
        let c = self.client(py)?;
        let v = py.detach(|| c.senders(name)).py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// The processes subscribed to a tag: a list of `Member`.
    fn receivers(&self, py: Python<'_>, name: &str) -> PyResult<Vec<Member>> {
        let c = self.client(py)?;
        let v = py.detach(|| c.receivers(name)).py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// Every tag with its senders and receivers: a list of `TagInfo`.
    fn tags(&self, py: Python<'_>) -> PyResult<Vec<TagInfo>> {
        let c = self.client(py)?;
        let v = py.detach(|| c.tags()).py_err(py)?;
        Ok(v.into_iter().map(TagInfo::from).collect())
    }

    /// The nodes the daemon knows, this one first: a list of `NodeInfo`.
    fn nodes(&self, py: Python<'_>) -> PyResult<Vec<NodeInfo>> {
        let c = self.client(py)?;
        let v = py.detach(|| c.nodes()).py_err(py)?;
        Ok(v.into_iter().map(NodeInfo::from).collect())
    }

    /// Makes this node's daemon keep the last `depth` messages of a tag
    /// (at most `max_bytes` of payload; 0: the daemon's default of 16 MiB)
    /// from now on, for `pull`; `depth` 0 stops keeping them.
    #[pyo3(signature = (name, depth, max_bytes=0))]
    fn set_history(&self, py: Python<'_>, name: &str, depth: u32, max_bytes: u64) -> PyResult<()> {
        let c = self.client(py)?;
        py.detach(|| c.set_history(name, depth, max_bytes))
            .py_err(py)
    }

    /// Gives this node's subscriptions to a tag (those of process `pid`;
    /// None: every process) the packet class `priority` (`"low"`,
    /// `"normal"`, `"high"`, `"critical"` or `"dscp:N"`) at run time: every
    /// sending node's streams carry it from their next datagram, losing
    /// nothing. Returns the receivers whose class changed (a list of
    /// `Member`; empty when they had it already). `tagwire.Denied` unless
    /// this process's user may change them; `tagwire.NotSubscribed` when
    /// no such subscription is held on this node.
    #[pyo3(signature = (name, priority, pid=None))]
    fn set_channel_qos(
        &self,
        py: Python<'_>,
        name: &str,
        priority: &str,
        pid: Option<u32>,
    ) -> PyResult<Vec<Member>> {
        let class: tagwire::Priority = priority
            .parse()
            .map_err(|e: String| bad_arg(format!("priority: {e}")))?;
        let c = self.client(py)?;
        let v = py
            .detach(|| c.set_channel_qos(name, pid, class))
            .py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// Gives this node's subscriptions to a tag (those of process `pid`;
    /// None: every process) the thread policy `sched` (`"other"`,
    /// `"other:N"`, `"fifo:P"`, `"rr:P"`) at run time: the sending nodes'
    /// forwarders and this node's inbound threads run at it. Returns the
    /// receivers whose policy changed. `tagwire.NotPermitted` for a
    /// real-time policy this process may not run at itself; otherwise as
    /// `set_channel_qos`.
    #[pyo3(signature = (name, sched, pid=None))]
    fn set_channel_sched(
        &self,
        py: Python<'_>,
        name: &str,
        sched: &str,
        pid: Option<u32>,
    ) -> PyResult<Vec<Member>> {
        let policy: tagwire::Sched = sched
            .parse()
            .map_err(|e: String| bad_arg(format!("sched: {e}")))?;
        let c = self.client(py)?;
        let v = py
            .detach(|| c.set_channel_sched(name, pid, policy))
            .py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// Gives the subscriptions to a tag that `subscribers` chooses
    /// (`"PID@NODE"`, `"@NODE"`: every process there, `"PID"` or `"here"`:
    /// this node, `"all"`: every node's) the class `priority` and the
    /// thread policy `sched` (each None to keep it; spelled as in
    /// `set_channel_qos` and `set_channel_sched`) at run time, on any node:
    /// the node holding each restates it. Returns the receivers whose QoS
    /// changed. Another node's subscriptions only root, the tag's owner or
    /// a user allowed to destroy the tag may change (`tagwire.Denied`); a
    /// node that is down or silent: `tagwire.PeersUnresponsive`.
    #[pyo3(signature = (name, subscribers="all", priority=None, sched=None))]
    fn change_channels(
        &self,
        py: Python<'_>,
        name: &str,
        subscribers: &str,
        priority: Option<&str>,
        sched: Option<&str>,
    ) -> PyResult<Vec<Member>> {
        let (whose, class, policy) = change(("subscribers", subscribers), priority, sched)?;
        let c = self.client(py)?;
        let v = py
            .detach(|| c.change_channels(name, whose, class, policy))
            .py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// `change_channels` for the send rights of the publishers that
    /// `publishers` chooses (spelled the same): their nodes send the tag
    /// in at least the class `priority` and run its forwarder at least at
    /// `sched` (each None to keep it). Returns the publishers whose QoS
    /// changed; none chosen: `tagwire.NoSendAccess`.
    #[pyo3(signature = (name, publishers="all", priority=None, sched=None))]
    fn change_publishers(
        &self,
        py: Python<'_>,
        name: &str,
        publishers: &str,
        priority: Option<&str>,
        sched: Option<&str>,
    ) -> PyResult<Vec<Member>> {
        let (whose, class, policy) = change(("publishers", publishers), priority, sched)?;
        let c = self.client(py)?;
        let v = py
            .detach(|| c.change_publishers(name, whose, class, policy))
            .py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// Paces the tag's reliable streams of the publishers that
    /// `publishers` chooses (as in `change_publishers`) as `pacing` says
    /// (spelled as in `publisher`), at run time, from any node. Returns
    /// the publishers whose pacing changed (none if they had it already).
    #[pyo3(signature = (name, pacing, publishers="all"))]
    fn change_pacing(
        &self,
        py: Python<'_>,
        name: &str,
        pacing: &str,
        publishers: &str,
    ) -> PyResult<Vec<Member>> {
        let whose: tagwire::Processes = publishers
            .parse()
            .map_err(|e: String| bad_arg(format!("publishers: {e}")))?;
        let pace: tagwire::Pacing = pacing
            .parse()
            .map_err(|e: String| bad_arg(format!("pacing: {e}")))?;
        let c = self.client(py)?;
        let v = py
            .detach(|| c.change_pacing(name, whose, pace))
            .py_err(py)?;
        Ok(v.into_iter().map(Member::from).collect())
    }

    /// Messages from a tag's history (see `set_history`), oldest first, with
    /// their senders: a list of `Message`. `query`: `tagwire.Last(n)`,
    /// `tagwire.Since(seq)` or `tagwire.Between(from_ns, to_ns)`.
    fn pull(&self, py: Python<'_>, name: &str, query: &Bound<'_, PyAny>) -> PyResult<Vec<Message>> {
        let q = history_query(query)?;
        let c = self.client(py)?;
        let v = py.detach(|| c.pull(name, q)).py_err(py)?;
        Ok(v.iter().map(|m| Message::from_rust(py, m)).collect())
    }

    /// Checks that the daemon answers (raises `DaemonUnreachable` or
    /// `DaemonTimeout` otherwise).
    fn ping(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.client(py)?;
        py.detach(|| c.ping()).py_err(py)
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Releases this handle. Idempotent. Publishers and subscribers made by
    /// it keep working until they are closed; the connection closes with
    /// the last of them.
    fn close(&self) {
        let c = self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
        drop(c);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("<tagwire.Client socket={:?} ({state})>", self.socket)
    }
}

/// A run-time change's arguments: whose (`what` names the argument in an
/// error), the class and the policy (each `None`: kept).
fn change(
    (what, whose): (&str, &str),
    priority: Option<&str>,
    sched: Option<&str>,
) -> PyResult<(
    tagwire::Processes,
    Option<tagwire::Priority>,
    Option<tagwire::Sched>,
)> {
    let whose: tagwire::Processes = whose
        .parse()
        .map_err(|e: String| bad_arg(format!("{what}: {e}")))?;
    let class = priority
        .map(str::parse::<tagwire::Priority>)
        .transpose()
        .map_err(|e| bad_arg(format!("priority: {e}")))?;
    let policy = sched
        .map(str::parse::<tagwire::Sched>)
        .transpose()
        .map_err(|e| bad_arg(format!("sched: {e}")))?;
    Ok((whose, class, policy))
}
