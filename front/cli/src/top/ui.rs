//! `tagwire top` on a terminal: the frames of [`super::frame`] drawn with
//! ratatui, the node's peers beside them, sorted and filtered from the
//! keyboard. Keys: `s` next sort column, `r` reverse, `/` filter by tag
//! (typing, Enter keeps it, Esc clears it), `q` or Esc quits.

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use ratatui::Frame;

use super::{frame, Reading, StreamLine, TagLine};

/// The column the tags are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sort {
    /// Messages per second through the node and from the network.
    Rate,
    /// Losses per second.
    Lost,
    /// Receivers.
    Receivers,
    /// The tag's name.
    Name,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Rate => Sort::Lost,
            Sort::Lost => Sort::Receivers,
            Sort::Receivers => Sort::Name,
            Sort::Name => Sort::Rate,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sort::Rate => "rate",
            Sort::Lost => "lost/s",
            Sort::Receivers => "receivers",
            Sort::Name => "name",
        }
    }
}

/// What the keyboard chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) sort: Sort,
    pub(crate) reverse: bool,
    pub(crate) filter: String,
    /// Typing into the filter.
    pub(crate) editing: bool,
}

impl Default for View {
    fn default() -> Self {
        View {
            sort: Sort::Rate,
            reverse: false,
            filter: String::new(),
            editing: false,
        }
    }
}

impl View {
    /// Applies a key; false when it quits.
    pub(crate) fn key(&mut self, code: KeyCode) -> bool {
        if self.editing {
            match code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            return true;
        }
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('r') => self.reverse = !self.reverse,
            KeyCode::Char('/') => self.editing = true,
            _ => {}
        }
        true
    }

    /// The tags shown: those whose name holds the filter, in the chosen
    /// order (the busiest, the lossiest, the most read first; names A-Z).
    pub(crate) fn tags<'a>(&self, tags: &'a [TagLine]) -> Vec<&'a TagLine> {
        let mut v: Vec<&TagLine> = tags
            .iter()
            .filter(|t| t.tag.contains(self.filter.as_str()))
            .collect();
        v.sort_by(|a, b| {
            let by = match self.sort {
                Sort::Rate => (b.msgs_per_s + b.from_network_per_s)
                    .total_cmp(&(a.msgs_per_s + a.from_network_per_s)),
                Sort::Lost => b.lost_per_s.total_cmp(&a.lost_per_s),
                Sort::Receivers => b.receivers.cmp(&a.receivers),
                Sort::Name => a.tag.cmp(&b.tag),
            };
            by.then_with(|| a.tag.cmp(&b.tag))
        });
        if self.reverse {
            v.reverse();
        }
        v
    }
}

/// Runs the view until `q`, refreshing every `interval`.
pub(crate) fn run(client: &tagwire::Client, interval: Duration) -> anyhow::Result<()> {
    let me = client.me().node.to_string();
    let mut before = Reading::of(&client.stats()?);
    let mut at = Instant::now();
    let mut shown: (Vec<TagLine>, Vec<StreamLine>) = (Vec::new(), Vec::new());
    let mut nodes = client.nodes()?;
    let mut view = View::default();
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        loop {
            terminal.draw(|f| draw(f, &me, &shown, &nodes, &view))?;
            let due = at + interval;
            let wait = due.saturating_duration_since(Instant::now());
            if event::poll(wait)? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Press && !view.key(k.code) {
                        return Ok(());
                    }
                }
                continue;
            }
            let now = Reading::of(&client.stats()?);
            shown = frame(&before, &now, at.elapsed().as_secs_f64());
            before = now;
            at = Instant::now();
            nodes = client.nodes()?;
        }
    })();
    ratatui::restore();
    result
}

fn draw(
    f: &mut Frame<'_>,
    me: &str,
    (tags, streams): &(Vec<TagLine>, Vec<StreamLine>),
    nodes: &[tagwire::NodeSummary],
    view: &View,
) {
    let shown = view.tags(tags);
    let [head, tag_area, stream_area, node_area] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(5),
        Constraint::Length((streams.len().min(8) + 3) as u16),
        Constraint::Length((nodes.len().min(8) + 3) as u16),
    ])
    .areas(f.area());
    let filter = if view.editing {
        format!("/{}_", view.filter)
    } else if view.filter.is_empty() {
        "none".to_owned()
    } else {
        format!("/{}/", view.filter)
    };
    f.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "tagwire top  node {me}  {} of {} tags  sort: {}{}  filter: {filter}",
                shown.len(),
                tags.len(),
                view.sort.label(),
                if view.reverse { " (reversed)" } else { "" },
            )),
            Line::from("s: sort  r: reverse  /: filter  q: quit"),
        ]),
        head,
    );
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let rows = shown.iter().map(|t| {
        Row::new(vec![
            t.tag.clone(),
            t.senders.to_string(),
            t.receivers.to_string(),
            format!("{:.1}", t.msgs_per_s),
            format!("{:.1}", t.from_network_per_s),
            format!("{:.1}", t.lost_per_s),
            t.lost_total.to_string(),
            t.held_now.to_string(),
        ])
    });
    let widths = [
        Constraint::Min(24),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(6),
    ];
    f.render_widget(
        Table::new(rows, widths)
            .header(
                Row::new([
                    "TAG", "SEND", "RECV", "MSG/S", "NET/S", "LOST/S", "LOST", "HELD",
                ])
                .style(bold),
            )
            .block(Block::bordered().title(" tags ")),
        tag_area,
    );
    let rows = streams.iter().map(|s| {
        Row::new(vec![
            s.tag.clone(),
            s.to.clone(),
            format!("{:.1}", s.datagrams_per_s),
            format!("{:.1}", s.resent_per_s),
            s.unacked.to_string(),
        ])
    });
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Min(24),
                Constraint::Length(22),
                Constraint::Length(11),
                Constraint::Length(11),
                Constraint::Length(8),
            ],
        )
        .header(Row::new(["STREAM", "TO", "DGRAM/S", "RESENT/S", "UNACKED"]).style(bold))
        .block(Block::bordered().title(" streams to other nodes ")),
        stream_area,
    );
    let rows = nodes.iter().map(|n| {
        Row::new(vec![
            n.node.to_string(),
            n.name.clone(),
            match n.state {
                tagwire::NodeState::Up => "up",
                tagwire::NodeState::Connecting => "connecting",
                tagwire::NodeState::Dead => "dead",
            }
            .to_owned(),
            match n.last_heard_ms {
                u64::MAX => "never".to_owned(),
                ms => format!("{ms} ms ago"),
            },
        ])
    });
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(22),
                Constraint::Min(16),
                Constraint::Length(11),
                Constraint::Length(14),
            ],
        )
        .header(Row::new(["NODE", "NAME", "STATE", "LAST HEARD"]).style(bold))
        .block(Block::bordered().title(" nodes ")),
        node_area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(tag: &str, rate: f64, lost: f64, receivers: u64) -> TagLine {
        TagLine {
            tag: tag.to_owned(),
            senders: 1,
            receivers,
            msgs_per_s: rate,
            from_network_per_s: 0.0,
            lost_per_s: lost,
            lost_total: 0,
            held_now: 0,
        }
    }

    #[test]
    fn keys_sort_reverse_filter_and_quit() {
        let tags = [
            line("/robot/pose", 1000.0, 0.0, 1),
            line("/robot/scan", 10.0, 5.0, 3),
            line("/cam", 30.0, 1.0, 2),
        ];
        let mut v = View::default();
        let names =
            |v: &View| -> Vec<String> { v.tags(&tags).iter().map(|t| t.tag.clone()).collect() };
        assert_eq!(names(&v), ["/robot/pose", "/cam", "/robot/scan"]);
        assert!(v.key(KeyCode::Char('s')));
        assert_eq!(
            names(&v),
            ["/robot/scan", "/cam", "/robot/pose"],
            "by losses"
        );
        v.key(KeyCode::Char('s'));
        assert_eq!(
            names(&v),
            ["/robot/scan", "/cam", "/robot/pose"],
            "by receivers"
        );
        v.key(KeyCode::Char('s'));
        assert_eq!(names(&v), ["/cam", "/robot/pose", "/robot/scan"], "by name");
        v.key(KeyCode::Char('r'));
        assert_eq!(names(&v), ["/robot/scan", "/robot/pose", "/cam"]);
        v.key(KeyCode::Char('/'));
        for c in "robot".chars() {
            v.key(KeyCode::Char(c));
        }
        assert!(v.key(KeyCode::Char('q')), "q is typed into the filter");
        v.key(KeyCode::Backspace);
        v.key(KeyCode::Enter);
        assert_eq!(v.filter, "robot");
        assert_eq!(names(&v), ["/robot/scan", "/robot/pose"]);
        v.key(KeyCode::Char('/'));
        v.key(KeyCode::Esc);
        assert_eq!(names(&v).len(), 3, "Esc clears the filter");
        assert!(!v.key(KeyCode::Char('q')));
    }
}
