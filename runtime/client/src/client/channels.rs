//! A tag's channels at run time: who receives it with which QoS, and the
//! admin commands that change a subscription's packet class and thread
//! policy.

use std::fmt;
use std::str::FromStr;

use tagwire_wire::control::{ErrorCode, Request, Response};
use tagwire_wire::{
    ChannelQos, Member, NodeAddr, OnNodes, Pacing, Pid, Priority, QosChange, Sched, TagName,
};

use super::{unexpected, Client};
use crate::Result;

/// A tag's senders and its receivers on every node, with what each asks
/// of the connections it feeds or is fed by ([`Client::channels`]). Every
/// sender on another node feeds every receiver through its node's stream,
/// in the class the receivers on that node ask for (the highest of
/// theirs) or its publishers' (the highest of those), paced as its
/// publishers there ask ([`Pacing::strongest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channels {
    /// Who holds send access, and what each publisher asked (its class,
    /// policy and pacing; reliability and depth mean nothing for a sender).
    pub senders: Vec<(Member, ChannelQos)>,
    /// Who subscribes, and with what QoS.
    pub receivers: Vec<(Member, ChannelQos)>,
}

/// This node's subscriptions of process `pid`, or of every one.
fn here_of(pid: Option<u32>) -> Processes {
    pid.map_or_else(Processes::here, |p| Processes::here().of(p))
}

impl Client {
    /// A tag's senders and receivers, each receiver with its QoS (its
    /// packet class among them), as this node's daemon knows them.
    pub fn channels(&self, name: &str) -> Result<Channels> {
        let name = TagName::new(name)?;
        match self
            .core
            .call(Request::Channels { name: name.clone() }, None)?
        {
            (Response::Channels { senders, receivers }, _) => Ok(Channels { senders, receivers }),
            other => Err(unexpected(other, &name)),
        }
    }

    /// Gives the subscriptions to `name` held on this node (by process
    /// `pid`, or by every process) the packet class `priority`, at run
    /// time: every sending node's streams carry it from their next
    /// datagram, and nothing is lost, duplicated or reordered. Returns the
    /// receivers whose class changed (none if they had it already).
    ///
    /// Root, the tag's owner and users the policy lets destroy the tag may
    /// change any subscription, others those of their own processes
    /// ([`crate::Error::Denied`]); a subscription is changed on its own
    /// node ([`crate::Error::NotSubscribed`] elsewhere).
    pub fn set_channel_qos(
        &self,
        name: &str,
        pid: Option<u32>,
        priority: Priority,
    ) -> Result<Vec<Member>> {
        self.change_channels(name, here_of(pid), Some(priority), None)
    }

    /// Gives the subscriptions to `name` held on this node (by process
    /// `pid`, or by every process) the thread policy `sched` at run time:
    /// the sending nodes' forwarders of the tag and this node's inbound
    /// threads run at it from their next wake-up (a direct-delivery
    /// keeper keeps the policy it subscribed with). Returns the receivers
    /// whose policy changed. Who may: as [`Client::set_channel_qos`]; a
    /// real-time policy or a nice below 0 also needs this process to be
    /// able to run at it ([`crate::Error::NotPermitted`]).
    pub fn set_channel_sched(
        &self,
        name: &str,
        pid: Option<u32>,
        sched: Sched,
    ) -> Result<Vec<Member>> {
        self.change_channels(name, here_of(pid), None, Some(sched))
    }

    /// Gives the subscriptions to `name` that `whose` chooses (on this
    /// node, another, or every one; of one process or all) the packet
    /// class `priority` and the thread policy `sched` (each: `None` keeps
    /// it), at run time, from any node: each node's subscriptions are
    /// restated by that node (this node's daemon asks it), and when this
    /// returns every live node has applied the change. Returns the
    /// receivers whose QoS changed.
    ///
    /// Who may: as [`Client::set_channel_qos`] on this node; another
    /// node's subscriptions only root, the tag's owner and users the
    /// policy lets destroy the tag ([`crate::Error::Denied`]). A node that
    /// is down or does not answer: [`crate::Error::PeersUnresponsive`].
    pub fn change_channels(
        &self,
        name: &str,
        whose: Processes,
        priority: Option<Priority>,
        sched: Option<Sched>,
    ) -> Result<Vec<Member>> {
        self.restate(name, whose, false, (priority, sched))
    }

    /// [`Client::change_channels`] for the send rights of the publishers
    /// `whose` chooses (`PublishOptions` at run time): their nodes send
    /// the tag in at least the class `priority` from their next datagram,
    /// and run its forwarder at least at `sched`. Returns the publishers
    /// whose QoS changed; none chosen: [`crate::Error::NoSendAccess`].
    pub fn change_publishers(
        &self,
        name: &str,
        whose: Processes,
        priority: Option<Priority>,
        sched: Option<Sched>,
    ) -> Result<Vec<Member>> {
        self.restate(name, whose, true, (priority, sched))
    }

    /// [`Client::change_publishers`] for the pacing of the publishers
    /// `whose` chooses ([`crate::PublishOptions::pacing`] at run time):
    /// their nodes pace the tag's reliable streams so from their next
    /// datagram (a controller starts afresh). Returns the publishers
    /// whose pacing changed.
    pub fn change_pacing(
        &self,
        name: &str,
        whose: Processes,
        pacing: Pacing,
    ) -> Result<Vec<Member>> {
        self.restate_with(
            name,
            whose,
            true,
            QosChange {
                pacing: Some(pacing),
                ..QosChange::default()
            },
        )
    }

    fn restate(
        &self,
        name: &str,
        whose: Processes,
        publishers: bool,
        (priority, sched): (Option<Priority>, Option<Sched>),
    ) -> Result<Vec<Member>> {
        let change = QosChange {
            priority,
            sched,
            ..QosChange::default()
        };
        self.restate_with(name, whose, publishers, change)
    }

    fn restate_with(
        &self,
        name: &str,
        whose: Processes,
        publishers: bool,
        change: QosChange,
    ) -> Result<Vec<Member>> {
        let name = TagName::new(name)?;
        let req = Request::SetChannelQos {
            name: name.clone(),
            nodes: whose.nodes,
            change: QosChange {
                publishers,
                pid: whose.pid.map(Pid),
                ..change
            },
        };
        match self.core.call(req, None)? {
            (Response::Members { receivers, .. }, _) => Ok(receivers),
            // Which node and process had none: the daemon's words.
            (Response::Error { code, message }, _)
                if matches!(code, ErrorCode::NotSubscribed | ErrorCode::NoSendAccess) =>
            {
                let tag = format!("{name} ({message})");
                Err(match code {
                    ErrorCode::NotSubscribed => crate::Error::NotSubscribed(tag),
                    _ => crate::Error::NoSendAccess(tag),
                })
            }
            other => Err(unexpected(other, &name)),
        }
    }
}

/// Whose subscriptions (or send rights) to a tag an admin command changes
/// ([`Client::change_channels`], [`Client::change_publishers`]): on which
/// nodes, of which process. Written `PID@NODE`, `@NODE` (every process on
/// the node), `PID` (this node), `here` (every process on this node) or
/// `all` (every process on every node); `NODE` is a node's address as
/// `tagwire nodes` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Processes {
    nodes: OnNodes,
    pid: Option<u32>,
}

impl Processes {
    /// Every process on this node.
    pub fn here() -> Self {
        Self::default()
    }

    /// Every process on every node.
    pub fn everywhere() -> Self {
        Processes {
            nodes: OnNodes::Every,
            pid: None,
        }
    }

    /// Every process on `node`.
    pub fn on(node: NodeAddr) -> Self {
        Processes {
            nodes: OnNodes::Node(node),
            pid: None,
        }
    }

    /// Only process `pid`'s (on the nodes chosen).
    pub fn of(self, pid: u32) -> Self {
        Processes {
            pid: Some(pid),
            ..self
        }
    }
}

impl FromStr for Processes {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let pid = |p: &str| {
            p.parse::<u32>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("{p:?} is not a process id"))
        };
        match s {
            "all" | "*" => return Ok(Self::everywhere()),
            "here" => return Ok(Self::here()),
            _ => {}
        }
        let Some((p, node)) = s.split_once('@') else {
            return Ok(Self::here().of(pid(s)?));
        };
        let node = node.parse().map(NodeAddr).map_err(|_| {
            format!("{node:?} is not a node address (an IP, as `tagwire nodes` shows)")
        })?;
        match p {
            "" | "*" => Ok(Self::on(node)),
            p => Ok(Self::on(node).of(pid(p)?)),
        }
    }
}

impl fmt::Display for Processes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.nodes, self.pid) {
            (OnNodes::This, None) => f.write_str("here"),
            (OnNodes::This, Some(p)) => write!(f, "{p}"),
            (OnNodes::Every, None) => f.write_str("all"),
            (OnNodes::Every, Some(p)) => write!(f, "{p}@*"),
            (OnNodes::Node(n), None) => write!(f, "@{n}"),
            (OnNodes::Node(n), Some(p)) => write!(f, "{p}@{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_parse_and_print_alike() {
        for s in ["here", "all", "42", "@10.0.0.2", "42@10.0.0.2", "7@::1"] {
            let parsed: Processes = s.parse().unwrap();
            assert_eq!(parsed.to_string(), s);
        }
        let node = NodeAddr("10.0.0.2".parse().unwrap());
        assert_eq!("*".parse(), Ok(Processes::everywhere()));
        assert_eq!("*@10.0.0.2".parse(), Ok(Processes::on(node)));
        assert_eq!("5@10.0.0.2".parse(), Ok(Processes::on(node).of(5)));
        for bad in ["", "0", "x@10.0.0.2", "5@node-b", "-1", "5@"] {
            assert!(bad.parse::<Processes>().is_err(), "{bad:?}");
        }
    }
}
