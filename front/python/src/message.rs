//! What receives and listings return: `Message`, `MessageInfo`, `Sender`,
//! `Batch`, `Member`, `TagInfo`, `NodeInfo`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// Nanoseconds since the Unix epoch (0 for a time before it).
pub(crate) fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Seconds since the epoch, as Python's `time.time()`.
fn ns_to_secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Who sent a message: the process id and the node address its daemon
/// stamps (`"127.0.0.1"` on a single node). Equal senders compare equal
/// and hash alike, so they can key a dict.
#[pyclass(module = "tagwire._tagwire", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Sender {
    /// The sending process's id.
    #[pyo3(get)]
    pid: u32,
    addr: tagwire::NodeAddr,
}

impl From<tagwire::SenderInfo> for Sender {
    fn from(s: tagwire::SenderInfo) -> Self {
        Self {
            pid: s.pid.0,
            addr: s.node,
        }
    }
}

#[pymethods]
impl Sender {
    /// The node's address as a string, e.g. `"10.0.0.1"`.
    #[getter]
    fn node(&self) -> String {
        self.addr.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Sender(pid={}, node='{}')", self.pid, self.addr)
    }

    fn __str__(&self) -> String {
        format!("{}@{}", self.pid, self.addr)
    }
}

/// A received message: `payload` (bytes), `seq` (the publisher's sequence
/// number, from 1), `sender` (`Sender`: pid and node) and `timestamp`
/// (float seconds since the epoch, the publisher's clock; `timestamp_ns`
/// as an int).
#[pyclass(module = "tagwire._tagwire", frozen)]
pub(crate) struct Message {
    payload: Py<PyBytes>,
    /// The publisher's sequence number (per publisher, from 1).
    #[pyo3(get)]
    seq: u64,
    sender: tagwire::SenderInfo,
    /// When it was sent: nanoseconds since the Unix epoch (publisher's clock).
    #[pyo3(get)]
    timestamp_ns: u64,
    inst: Instance,
}

impl Message {
    /// A message whose payload is `payload`.
    pub(crate) fn new(py: Python<'_>, payload: &[u8], info: &Info) -> Self {
        Self {
            payload: PyBytes::new(py, payload).unbind(),
            seq: info.seq,
            sender: info.sender,
            timestamp_ns: info.timestamp_ns,
            inst: info.inst,
        }
    }

    /// From a Rust message.
    pub(crate) fn from_rust(py: Python<'_>, m: &tagwire::Message) -> Self {
        Self::new(py, &m.payload, &Info::of_message(m))
    }

    /// The parts to hold it again in Rust (a cancelled async receive).
    pub(crate) fn parts(&self, py: Python<'_>) -> (Vec<u8>, Info) {
        (
            self.payload.bind(py).as_bytes().to_vec(),
            Info {
                seq: self.seq,
                sender: self.sender,
                timestamp_ns: self.timestamp_ns,
                inst: self.inst,
            },
        )
    }
}

#[pymethods]
impl Message {
    /// The bytes sent.
    #[getter]
    fn payload(&self, py: Python<'_>) -> Py<PyBytes> {
        self.payload.clone_ref(py)
    }

    /// Who sent it.
    #[getter]
    fn sender(&self) -> Sender {
        self.sender.into()
    }

    /// When it was sent: float seconds since the Unix epoch (publisher's clock).
    #[getter]
    fn timestamp(&self) -> f64 {
        ns_to_secs(self.timestamp_ns)
    }

    /// The instance's key as 16 bytes (a key of at most 16 bytes, zero
    /// padded; a longer one's MD5), or None for a message sent without one.
    #[getter]
    fn key(&self, py: Python<'_>) -> Option<Py<PyBytes>> {
        self.inst.key(py)
    }

    /// The instance's state: `"alive"` (data), `"disposed"`,
    /// `"unregistered"` or `"disposed_unregistered"` (empty payload).
    #[getter]
    fn state(&self) -> &'static str {
        self.inst.state()
    }

    /// The publisher's ownership strength, or None if it set none.
    #[getter]
    fn strength(&self) -> Option<i32> {
        self.inst.strength
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Message(seq={}, sender={}@{}, {} bytes, timestamp_ns={})",
            self.seq,
            self.sender.pid,
            self.sender.node,
            self.payload.bind(py).as_bytes().len(),
            self.timestamp_ns
        )
    }
}

/// The instance a message is about: its key, state and the publisher's
/// strength (see `Publisher.send_keyed`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Instance {
    key: Option<tagwire::Key>,
    state: tagwire::InstanceState,
    strength: Option<i32>,
}

impl Instance {
    fn key(&self, py: Python<'_>) -> Option<Py<PyBytes>> {
        self.key.map(|k| PyBytes::new(py, &k.0).unbind())
    }

    fn state(&self) -> &'static str {
        match self.state {
            tagwire::InstanceState::Alive => "alive",
            tagwire::InstanceState::Disposed => "disposed",
            tagwire::InstanceState::Unregistered => "unregistered",
            tagwire::InstanceState::DisposedUnregistered => "disposed_unregistered",
        }
    }
}

/// The plain-data description of a message (no payload).
#[derive(Clone, Copy)]
pub(crate) struct Info {
    pub(crate) seq: u64,
    pub(crate) sender: tagwire::SenderInfo,
    pub(crate) timestamp_ns: u64,
    pub(crate) inst: Instance,
}

impl Info {
    /// From what `Subscriber::receive_into` returns.
    pub(crate) fn of(i: &tagwire::MessageInfo) -> Self {
        Self {
            seq: i.seq.0,
            sender: i.sender,
            timestamp_ns: unix_ns(i.timestamp),
            inst: Instance {
                key: i.key,
                state: i.state,
                strength: i.strength,
            },
        }
    }

    /// From a Rust message.
    pub(crate) fn of_message(m: &tagwire::Message) -> Self {
        Self {
            seq: m.seq.0,
            sender: m.sender,
            timestamp_ns: unix_ns(m.timestamp),
            inst: Instance {
                key: m.key,
                state: m.state,
                strength: m.strength,
            },
        }
    }
}

/// What `Subscriber.receive_into` returns: the payload's `length` (the bytes
/// written at the start of the buffer), `seq`, `sender`, `timestamp` and
/// `timestamp_ns`.
#[pyclass(module = "tagwire._tagwire", frozen)]
pub(crate) struct MessageInfo {
    /// Bytes of payload written at the start of the buffer.
    #[pyo3(get)]
    length: usize,
    /// The publisher's sequence number.
    #[pyo3(get)]
    seq: u64,
    sender: tagwire::SenderInfo,
    /// When it was sent: nanoseconds since the Unix epoch.
    #[pyo3(get)]
    timestamp_ns: u64,
    inst: Instance,
}

impl MessageInfo {
    pub(crate) fn new(length: usize, i: &Info) -> Self {
        Self {
            length,
            seq: i.seq,
            sender: i.sender,
            timestamp_ns: i.timestamp_ns,
            inst: i.inst,
        }
    }
}

#[pymethods]
impl MessageInfo {
    /// Who sent it.
    #[getter]
    fn sender(&self) -> Sender {
        self.sender.into()
    }

    /// When it was sent: float seconds since the Unix epoch.
    #[getter]
    fn timestamp(&self) -> f64 {
        ns_to_secs(self.timestamp_ns)
    }

    /// The instance's key as 16 bytes (a key of at most 16 bytes, zero
    /// padded; a longer one's MD5), or None for a message sent without one.
    #[getter]
    fn key(&self, py: Python<'_>) -> Option<Py<PyBytes>> {
        self.inst.key(py)
    }

    /// The instance's state: `"alive"` (data), `"disposed"`,
    /// `"unregistered"` or `"disposed_unregistered"` (empty payload).
    #[getter]
    fn state(&self) -> &'static str {
        self.inst.state()
    }

    /// The publisher's ownership strength, or None if it set none.
    #[getter]
    fn strength(&self) -> Option<i32> {
        self.inst.strength
    }

    fn __repr__(&self) -> String {
        format!(
            "MessageInfo(length={}, seq={}, sender={}@{}, timestamp_ns={})",
            self.length, self.seq, self.sender.pid, self.sender.node, self.timestamp_ns
        )
    }
}

/// One message of a batch: where its payload is in the batch's buffer.
#[derive(Clone, Copy)]
pub(crate) struct Item {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) info: Info,
}

/// Messages taken by one `Subscriber.receive_batch` call, oldest first: their
/// payloads back to back in one buffer and, per message, where its payload
/// is, its seq, sender and timestamp. `len(batch)`, `batch[i]` and
/// `for m in batch` give `Message` objects; `payloads()`, `seqs()`,
/// `timestamps_ns()`, `data()` and `offsets()` give plain lists and bytes
/// without building them (the fast way through many messages).
#[pyclass(module = "tagwire._tagwire", frozen, sequence)]
pub(crate) struct Batch {
    data: Vec<u8>,
    items: Vec<Item>,
}

impl Batch {
    pub(crate) fn new(data: Vec<u8>, items: Vec<Item>) -> Self {
        Self { data, items }
    }

    fn payload(&self, it: &Item) -> &[u8] {
        self.data.get(it.start..it.start + it.len).unwrap_or(&[])
    }

    fn message(&self, py: Python<'_>, i: usize) -> Option<Message> {
        self.items
            .get(i)
            .map(|it| Message::new(py, self.payload(it), &it.info))
    }
}

#[pymethods]
impl Batch {
    fn __len__(&self) -> usize {
        self.items.len()
    }

    fn __getitem__(&self, py: Python<'_>, index: isize) -> PyResult<Message> {
        let n = self.items.len() as isize;
        let i = if index < 0 { index + n } else { index };
        usize::try_from(i)
            .ok()
            .and_then(|i| self.message(py, i))
            .ok_or_else(|| PyIndexError::new_err(format!("batch index {index} out of range")))
    }

    fn __iter__(slf: Py<Self>) -> BatchIter {
        BatchIter {
            batch: slf,
            next: AtomicUsize::new(0),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Batch({} messages, {} bytes)",
            self.items.len(),
            self.data.len()
        )
    }

    /// Total payload bytes in the batch.
    #[getter]
    fn nbytes(&self) -> usize {
        self.data.len()
    }

    /// Every payload as a `bytes`, oldest first.
    fn payloads<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.items
                .iter()
                .map(|it| PyBytes::new(py, self.payload(it))),
        )
    }

    /// Every sequence number, oldest first.
    fn seqs(&self) -> Vec<u64> {
        self.items.iter().map(|it| it.info.seq).collect()
    }

    /// Every timestamp (ns since the epoch), oldest first.
    fn timestamps_ns(&self) -> Vec<u64> {
        self.items.iter().map(|it| it.info.timestamp_ns).collect()
    }

    /// Every sender, oldest first.
    fn senders(&self) -> Vec<Sender> {
        self.items.iter().map(|it| it.info.sender.into()).collect()
    }

    /// All payloads back to back in one `bytes` (one copy); message `i` is
    /// `data[offsets[i]:offsets[i + 1]]`.
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.data)
    }

    /// Where each payload starts in `data()`, plus the end: `len(batch) + 1`
    /// numbers.
    fn offsets(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.items.iter().map(|it| it.start).collect();
        v.push(self.data.len());
        v
    }
}

/// Iterates over a `Batch`, yielding `Message` objects.
#[pyclass(module = "tagwire._tagwire", frozen)]
pub(crate) struct BatchIter {
    batch: Py<Batch>,
    next: AtomicUsize,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> Option<Message> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.batch.get().message(py, i)
    }
}

/// A process on a tag (from `Client.senders` / `Client.receivers`): `pid`,
/// `node` and since when (`since_unix_ns`, `since` in float seconds).
#[pyclass(module = "tagwire._tagwire", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Member {
    /// Its process id.
    #[pyo3(get)]
    pid: u32,
    addr: tagwire::NodeAddr,
    /// When it joined: nanoseconds since the Unix epoch.
    #[pyo3(get)]
    since_unix_ns: u64,
}

impl From<tagwire::Member> for Member {
    fn from(m: tagwire::Member) -> Self {
        Self {
            pid: m.who.pid.0,
            addr: m.who.node,
            since_unix_ns: m.since_unix_ns,
        }
    }
}

#[pymethods]
impl Member {
    /// Its node's address as a string.
    #[getter]
    fn node(&self) -> String {
        self.addr.to_string()
    }

    /// Its pid and node as a `Sender` (compare with `Message.sender`).
    #[getter]
    fn sender(&self) -> Sender {
        Sender {
            pid: self.pid,
            addr: self.addr,
        }
    }

    /// When it joined: float seconds since the Unix epoch.
    #[getter]
    fn since(&self) -> f64 {
        ns_to_secs(self.since_unix_ns)
    }

    fn __repr__(&self) -> String {
        format!(
            "Member(pid={}, node='{}', since_unix_ns={})",
            self.pid, self.addr, self.since_unix_ns
        )
    }
}

/// One row of `Client.tags()`: the tag's `name`, `id`, `domain`
/// (`"global"`/`"local"`), `senders` and `receivers` (lists of `Member`).
#[pyclass(module = "tagwire._tagwire", frozen)]
pub(crate) struct TagInfo {
    /// The tag's name.
    #[pyo3(get)]
    name: String,
    /// The daemon's id for it.
    #[pyo3(get)]
    id: u32,
    /// `"global"` or `"local"`.
    #[pyo3(get)]
    domain: String,
    senders: Vec<Member>,
    receivers: Vec<Member>,
}

impl From<tagwire::TagSummary> for TagInfo {
    fn from(t: tagwire::TagSummary) -> Self {
        Self {
            name: t.name.to_string(),
            id: t.tag.0,
            domain: t.domain.to_string(),
            senders: t.senders.into_iter().map(Member::from).collect(),
            receivers: t.receivers.into_iter().map(Member::from).collect(),
        }
    }
}

#[pymethods]
impl TagInfo {
    /// Processes holding send access.
    #[getter]
    fn senders(&self) -> Vec<Member> {
        self.senders.clone()
    }

    /// Processes subscribed.
    #[getter]
    fn receivers(&self) -> Vec<Member> {
        self.receivers.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "TagInfo(name='{}', id={}, domain='{}', {} senders, {} receivers)",
            self.name,
            self.id,
            self.domain,
            self.senders.len(),
            self.receivers.len()
        )
    }
}

/// One row of `Client.nodes()`: `node` (address), `name`, `state`
/// (`"up"`, `"connecting"`, `"dead"`), `last_heard_ms` (None: never) and
/// `source` (how it was found).
#[pyclass(module = "tagwire._tagwire", frozen)]
pub(crate) struct NodeInfo {
    /// The node's address.
    #[pyo3(get)]
    node: String,
    /// Its name.
    #[pyo3(get)]
    name: String,
    /// `"up"`, `"connecting"` or `"dead"`.
    #[pyo3(get)]
    state: &'static str,
    /// Milliseconds since it was last heard from; None: never.
    #[pyo3(get)]
    last_heard_ms: Option<u64>,
    /// How it was found: the node list, a beacon, or it connected to us.
    #[pyo3(get)]
    source: String,
}

impl From<tagwire::NodeSummary> for NodeInfo {
    fn from(n: tagwire::NodeSummary) -> Self {
        Self {
            node: n.node.to_string(),
            name: n.name,
            state: match n.state {
                tagwire::NodeState::Up => "up",
                tagwire::NodeState::Connecting => "connecting",
                tagwire::NodeState::Dead => "dead",
            },
            last_heard_ms: (n.last_heard_ms != u64::MAX).then_some(n.last_heard_ms),
            source: n.source,
        }
    }
}

#[pymethods]
impl NodeInfo {
    fn __repr__(&self) -> String {
        format!(
            "NodeInfo(node='{}', name='{}', state='{}', last_heard_ms={}, source='{}')",
            self.node,
            self.name,
            self.state,
            self.last_heard_ms
                .map_or_else(|| "None".to_owned(), |ms| ms.to_string()),
            self.source
        )
    }
}
