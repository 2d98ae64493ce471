//! How a datagram travels: from a node's `poll_transmit` over its link to
//! the receiving node's `handle_datagram`.

use super::engine::{Event, Sim};
use super::link::{Drop, Fate, Link};
use super::node::{Addr, Destination, Outgoing, SimNode};
use super::rng::checksum;
use super::trace::{DropReason, TraceEvent};

impl<N: SimNode + 'static> Sim<N> {
    /// Offers what node `from` emitted to the link to each destination.
    pub(super) fn transmit(&mut self, from: usize, out: Outgoing) {
        self.nodes[from].stats.transmitted += 1;
        let src = self.nodes[from].addr;
        match out.destination {
            Destination::Unicast(to) => self.offer(src, to, out.class, out.bytes),
            Destination::Group(group) => {
                let members: Vec<Addr> = self
                    .groups
                    .get(&group)
                    .map(|m| m.iter().copied().filter(|&a| a != src).collect())
                    .unwrap_or_default();
                for to in members {
                    self.offer(src, to, out.class, out.bytes.clone());
                }
            }
        }
    }

    fn offer(&mut self, from: Addr, to: Addr, class: u8, bytes: Vec<u8>) {
        let len = bytes.len();
        let (Some(&src), Some(&dst)) = (self.index.get(&from), self.index.get(&to)) else {
            self.stats.unroutable += 1;
            let why = DropReason::Unroutable;
            self.trace
                .push(self.now, TraceEvent::Dropped { from, to, why });
            return;
        };
        self.trace.push(
            self.now,
            TraceEvent::Sent {
                from,
                to,
                len,
                class,
            },
        );
        let default = self.config.default_link;
        let link = self
            .links
            .entry((from, to))
            .or_insert_with(|| Link::new(default));
        let shared = link.bottleneck.and_then(|i| self.bottlenecks.get_mut(i));
        let lost_before = link.stats.dropped_loss;
        let fate = link.offer(self.now, len, class, shared, &mut self.rng);
        let lost = link.stats.dropped_loss - lost_before;
        for _ in 0..lost {
            let why = DropReason::Loss;
            self.trace
                .push(self.now, TraceEvent::Dropped { from, to, why });
        }
        match fate {
            Fate::Dropped(d) => {
                let why = match d {
                    Drop::Partition => DropReason::Partition,
                    Drop::Queue => DropReason::Queue,
                };
                self.trace
                    .push(self.now, TraceEvent::Dropped { from, to, why });
            }
            Fate::Arrives(times) => {
                let mut bytes = Some(bytes);
                let last = times.len().saturating_sub(1);
                for (i, at) in times.into_iter().enumerate() {
                    // The last copy takes the buffer; earlier ones clone it.
                    let copy = if i == last {
                        bytes.take().unwrap_or_default()
                    } else {
                        bytes.clone().unwrap_or_default()
                    };
                    self.push(
                        at,
                        Event::Arrive {
                            from: src,
                            to: dst,
                            bytes: copy,
                        },
                    );
                }
            }
        }
    }

    /// Hands a datagram that reached the end of its link to its node,
    /// unless the link went down or the node crashed meanwhile.
    pub(super) fn arrive(&mut self, src: usize, dst: usize, bytes: &[u8]) {
        let (from, to) = (self.nodes[src].addr, self.nodes[dst].addr);
        let up = self.nodes[dst].state.is_some();
        let default = self.config.default_link;
        let link = self
            .links
            .entry((from, to))
            .or_insert_with(|| Link::new(default));
        link.stats.in_flight = link.stats.in_flight.saturating_sub(1);
        let why = if !link.up {
            link.stats.dropped_partition += 1;
            DropReason::Partition
        } else if !up {
            link.stats.dropped_node_down += 1;
            DropReason::NodeDown
        } else {
            link.stats.delivered += 1;
            let digest = checksum(bytes);
            self.trace
                .push(self.now, TraceEvent::Delivered { from, to, digest });
            let now = self.now();
            let slot = &mut self.nodes[dst];
            slot.stats.received += 1;
            if let Some(state) = slot.state.as_mut() {
                state.handle_datagram(now, from, bytes);
            }
            self.flush(dst);
            return;
        };
        self.trace
            .push(self.now, TraceEvent::Dropped { from, to, why });
    }
}
