//! A tag's channels at run time: who receives it with which QoS, and the
//! admin commands that change a subscription's packet class and thread
//! policy.

use tagwire_wire::control::{Request, Response};
use tagwire_wire::{ChannelQos, Member, Pid, Priority, Sched, TagName};

use super::{unexpected, Client};
use crate::Result;

/// A tag's senders, and its receivers on every node with what each asks of
/// the connections that feed it ([`Client::channels`]). Every sender on
/// another node feeds every receiver through its node's stream, in the
/// class the receivers on that node ask for (the highest of theirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channels {
    /// Who holds send access.
    pub senders: Vec<Member>,
    /// Who subscribes, and with what QoS.
    pub receivers: Vec<(Member, ChannelQos)>,
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
        self.change_channels(name, pid, Some(priority), None)
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
        self.change_channels(name, pid, None, Some(sched))
    }

    fn change_channels(
        &self,
        name: &str,
        pid: Option<u32>,
        priority: Option<Priority>,
        sched: Option<Sched>,
    ) -> Result<Vec<Member>> {
        let name = TagName::new(name)?;
        let req = Request::SetChannelQos {
            name: name.clone(),
            pid: pid.map(Pid),
            priority,
            sched,
        };
        match self.core.call(req, None)? {
            (Response::Members { receivers, .. }, _) => Ok(receivers),
            other => Err(unexpected(other, &name)),
        }
    }
}
