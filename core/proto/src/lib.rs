//! # tagwire-proto: the tag table and membership
//!
//! The global tag table of the distribution-tag model (docs/design.md §1 rows 1-3) as a
//! pure data structure: which tags exist, and who holds send access to and
//! subscriptions on each. Two views of it live here:
//!
//! * [`TagTable`], the authoritative copy. Only a daemon owns one (protection: a
//!   client can at worst corrupt its own replica). Every change bumps the table
//!   version and returns the [`Update`] the daemon broadcasts.
//! * [`Replica`], a client's local copy, fed those updates by the client's update
//!   thread. Applying an update is idempotent, so a snapshot that overlaps a
//!   stream of updates converges to the same table.
//!
//! Beside them, [`Membership`]: which peer daemons are up, over which link
//! (hello/sync, incarnations, leases), and which replicated change still
//! waits for whose acknowledgement, as a sans-IO state machine the daemon
//! drives with its sockets and clock.
//!
//! And [`History`]: a tag's pull buffer (push-pull model), its last
//! messages bounded by count and bytes, queried by count, sequence or time.
//!
//! No I/O, no clocks: the caller passes the time a member joined, and the
//! membership core the current time with every input.

mod history;
pub mod membership;
mod replica;
pub mod replication;
mod table;

pub use history::History;
pub use membership::Membership;
pub use replica::{Replica, ReplicaEntry};
pub use table::{Change, ClientId, Entry, Holder, Right, TableError, TagTable, MAX_AHEAD};
pub use tagwire_wire::control::{TableEvent, Update};
pub use tagwire_wire::peer::{MemberKey, Role, TableOp, Version};
