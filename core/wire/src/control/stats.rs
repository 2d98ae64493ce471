//! Counters for `tagwire stats`: what the daemon and its clients count, as
//! rows of named values.
//!
//! A row says what it counts (its [`StatsKind`]: the node, a tag, the stream
//! of a tag to another node, what a tag receives from other nodes, one
//! subscriber, one peer) and holds named counters, like `ethtool -S`: a new
//! counter needs no new message type, and a tool prints what it gets.
//!
//! ```text
//! row:  kind u8 | tag str | who str | count u8 | (name str, value u64) * count
//! ```

use super::*;

/// What a [`StatsRow`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatsKind {
    /// The whole node (its daemon's totals).
    Node,
    /// One tag on this node.
    Tag,
    /// A tag's stream to another node (`who` is the node).
    Outbound,
    /// One subscriber (`who` names its process).
    Subscriber,
    /// Another node's daemon (`who` is the node).
    Peer,
    /// A kind this build does not know.
    Unknown(u8),
}

impl StatsKind {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            StatsKind::Node => 0,
            StatsKind::Tag => 1,
            StatsKind::Outbound => 2,
            StatsKind::Subscriber => 3,
            StatsKind::Peer => 4,
            StatsKind::Unknown(v) => v,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            0 => StatsKind::Node,
            1 => StatsKind::Tag,
            2 => StatsKind::Outbound,
            3 => StatsKind::Subscriber,
            4 => StatsKind::Peer,
            v => StatsKind::Unknown(v),
        }
    }

    /// A name for people (`tagwire stats` headings).
    pub fn label(self) -> &'static str {
        match self {
            StatsKind::Node => "node",
            StatsKind::Tag => "tag",
            StatsKind::Outbound => "to node",
            StatsKind::Subscriber => "subscriber",
            StatsKind::Peer => "peer",
            StatsKind::Unknown(_) => "other",
        }
    }
}

/// One row of counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsRow {
    /// What it counts.
    pub kind: StatsKind,
    /// The tag it belongs to (empty for node and peer rows).
    pub tag: String,
    /// Whose it is: a node, a process (empty for node and tag rows).
    pub who: String,
    /// The counters, by name.
    pub counters: Vec<(String, u64)>,
}

/// Counters a row holds at most (the count is one byte on the wire).
pub const MAX_COUNTERS: usize = 255;

impl StatsRow {
    /// An empty row.
    pub fn new(kind: StatsKind, tag: impl Into<String>, who: impl Into<String>) -> Self {
        Self {
            kind,
            tag: tag.into(),
            who: who.into(),
            counters: Vec::new(),
        }
    }

    /// The row with counter `name` added (ignored past [`MAX_COUNTERS`]).
    pub fn with(mut self, name: &str, value: u64) -> Self {
        if self.counters.len() < MAX_COUNTERS {
            self.counters.push((name.to_owned(), value));
        }
        self
    }

    /// Counter `name`'s value, if the row has it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
    }
}

pub(super) fn encode_rows(rows: &[StatsRow], w: &mut Writer) {
    w.count(rows.len());
    for row in rows {
        w.u8(row.kind.to_u8()).str(&row.tag).str(&row.who);
        let n = row.counters.len().min(MAX_COUNTERS);
        w.u8(n as u8);
        for (name, value) in &row.counters[..n] {
            w.str(name).u64(*value);
        }
    }
}

pub(super) fn decode_rows(r: &mut Reader<'_>) -> Result<Vec<StatsRow>, DecodeError> {
    // kind + two empty strings + count.
    let n = r.count(1 + 2 + 2 + 1)?;
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = StatsKind::from_u8(r.u8()?);
        let tag = r.str()?.to_owned();
        let who = r.str()?.to_owned();
        let count = usize::from(r.u8()?);
        let mut counters = Vec::with_capacity(count);
        for _ in 0..count {
            let name = r.str()?.to_owned();
            counters.push((name, r.u64()?));
        }
        rows.push(StatsRow {
            kind,
            tag,
            who,
            counters,
        });
    }
    Ok(rows)
}
