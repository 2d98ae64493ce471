//! A run-time change of subscriptions' packet class and thread policy, as
//! both protocols carry it: a client asks its daemon
//! (`control::Request::SetChannelQos`), and a daemon asks the node that
//! holds the subscriptions (`peer::PeerMessage::SetQos`), which alone may
//! restate them.

use crate::codec::{DecodeError, Reader, Writer};
use crate::{NodeAddr, Pacing, Pid, Priority, Sched};

/// What to change, and whose: the subscriptions (or, `publishers`, the
/// send rights) of process `pid` (`None`: of every process) get `priority`
/// and `sched` (each: `None` keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QosChange {
    /// The publishers' send rights instead of the subscriptions.
    pub publishers: bool,
    /// The subscriber's (or publisher's) process (`None`: all of them).
    pub pid: Option<Pid>,
    /// The class asked for (`None`: unchanged).
    pub priority: Option<Priority>,
    /// The thread policy asked for (`None`: unchanged).
    pub sched: Option<Sched>,
    /// The publishers' pacing asked for (`None`: unchanged; a
    /// subscription's is not read).
    pub pacing: Option<Pacing>,
}

impl QosChange {
    pub(crate) fn encode(&self, w: &mut Writer) {
        // (Pid 0 is no process: it stands for every one.) Then which of
        // the two follow: bit 0 the class, bit 1 the policy; bit 2 says
        // the rights are the publishers', bit 3 that the pacing follows.
        w.u32(self.pid.map_or(0, |p| p.0))
            .u8(u8::from(self.priority.is_some())
                | u8::from(self.sched.is_some()) << 1
                | u8::from(self.publishers) << 2
                | u8::from(self.pacing.is_some()) << 3);
        if let Some(p) = self.priority {
            w.u8(p.to_u8());
        }
        if let Some(s) = self.sched {
            let [policy, value] = s.to_bytes();
            w.u8(policy).u8(value);
        }
        if let Some(p) = self.pacing {
            p.encode(w);
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let pid = Some(r.u32()?).filter(|&p| p != 0).map(Pid);
        let which = r.u8()?;
        if which & !15 != 0 {
            return Err(DecodeError::Unknown {
                what: "channel change (bit 0: class, bit 1: policy, bit 2: publishers, \
                       bit 3: pacing)",
                value: u32::from(which),
            });
        }
        let priority = match which & 1 {
            0 => None,
            _ => Some(Priority::from_u8(r.u8()?)?),
        };
        let sched = match which & 2 {
            0 => None,
            _ => Some(Sched::from_bytes([r.u8()?, r.u8()?])?),
        };
        let pacing = match which & 8 {
            0 => None,
            _ => Some(Pacing::decode(r)?),
        };
        Ok(QosChange {
            publishers: which & 4 != 0,
            pid,
            priority,
            sched,
            pacing,
        })
    }
}

/// Which nodes' subscriptions a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnNodes {
    /// Those the asked daemon holds.
    #[default]
    This,
    /// Those node `0` holds (this node's daemon forwards the change).
    Node(NodeAddr),
    /// Every node's that holds a subscription to the tag.
    Every,
}

impl OnNodes {
    pub(crate) fn encode(&self, w: &mut Writer) {
        match self {
            OnNodes::This => {
                w.u8(0);
            }
            OnNodes::Node(n) => {
                w.u8(1).bytes(&n.to_bytes());
            }
            OnNodes::Every => {
                w.u8(2);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match r.u8()? {
            0 => OnNodes::This,
            1 => OnNodes::Node(NodeAddr::from_bytes(r.array()?)),
            2 => OnNodes::Every,
            v => {
                return Err(DecodeError::Unknown {
                    what: "nodes of a channel change",
                    value: u32::from(v),
                })
            }
        })
    }
}
