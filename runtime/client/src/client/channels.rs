//! A tag's channels at run time: who receives it with which QoS, and the
//! admin command that changes a subscription's packet class.

use tagwire_wire::control::{Request, Response};
use tagwire_wire::{ChannelQos, Member, Pid, Priority, TagName};

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
        let name = TagName::new(name)?;
        let req = Request::SetChannelQos {
            name: name.clone(),
            pid: pid.map(Pid),
            priority,
        };
        match self.core.call(req, None)? {
            (Response::Members { receivers, .. }, _) => Ok(receivers),
            other => Err(unexpected(other, &name)),
        }
    }
}
