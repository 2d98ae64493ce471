//! Datagrams a stream has put out in each packet class it has had: a
//! run-time class change (`tagwire qos --class`) starts a new tally, and
//! `tagwire qos` shows every class's.

use tagwire_wire::Priority;

impl super::RelStream {
    /// Datagrams put out so far, first sends and resends.
    pub(super) fn datagrams(&self) -> u64 {
        let w = self.writer.stats();
        w.sent + w.retransmitted
    }
}

/// The counts of the classes a stream had before its current one, and
/// its datagram count when the current one began.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClassTally {
    before: Vec<(Priority, u64)>,
    mark: u64,
}

impl ClassTally {
    /// The stream, having put out `count` datagrams so far in class
    /// `from`, carries another class from now on.
    pub(crate) fn change(&mut self, from: Priority, count: u64) {
        let n = count.saturating_sub(self.mark);
        self.mark = count;
        if n == 0 {
            return;
        }
        match self.before.iter_mut().find(|(p, _)| *p == from) {
            Some((_, c)) => *c += n,
            None => self.before.push((from, n)),
        }
    }

    /// Datagrams per class, `count` in all so far and the current class
    /// `now`; classes in the order the stream first used them.
    pub(crate) fn totals(&self, now: Priority, count: u64) -> Vec<(Priority, u64)> {
        let mut v = self.before.clone();
        let n = count.saturating_sub(self.mark);
        match v.iter_mut().find(|(p, _)| *p == now) {
            Some((_, c)) => *c += n,
            None if n > 0 => v.push((now, n)),
            None => {}
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_keeps_what_was_sent_while_the_stream_had_it() {
        let mut t = ClassTally::default();
        assert_eq!(t.totals(Priority::Normal, 0), vec![]);
        assert_eq!(t.totals(Priority::Normal, 5), vec![(Priority::Normal, 5)]);
        t.change(Priority::Normal, 5);
        assert_eq!(
            t.totals(Priority::Critical, 12),
            vec![(Priority::Normal, 5), (Priority::Critical, 7)]
        );
        t.change(Priority::Critical, 12);
        // Back to normal: its count goes on from the earlier tally.
        assert_eq!(
            t.totals(Priority::Normal, 15),
            vec![(Priority::Normal, 8), (Priority::Critical, 7)]
        );
        // A change with nothing sent meanwhile adds no class.
        t.change(Priority::Normal, 15);
        assert_eq!(
            t.totals(Priority::Low, 15),
            vec![(Priority::Normal, 8), (Priority::Critical, 7)]
        );
    }
}
