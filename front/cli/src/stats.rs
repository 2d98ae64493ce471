//! `tagwire stats`: what this node counts, without debug logs.

use std::collections::BTreeMap;

use tagwire::{StatsKind, StatsRow};

use crate::ConnectArgs;

/// Arguments of `tagwire stats`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Only rows of this tag (and the node's and peers' totals).
    #[arg(long)]
    tag: Option<String>,
    /// One JSON object per row instead of tables.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    let rows: Vec<StatsRow> = client
        .stats()?
        .into_iter()
        .filter(|r| {
            a.tag
                .as_ref()
                .is_none_or(|t| r.tag.is_empty() || r.tag == *t)
        })
        .collect();
    if a.json {
        for r in &rows {
            let counters: serde_json::Map<String, serde_json::Value> = r
                .counters
                .iter()
                .map(|(n, v)| (n.clone(), (*v).into()))
                .collect();
            let line = serde_json::json!({
                "kind": r.kind.label(),
                "tag": r.tag,
                "who": r.who,
                "counters": counters,
            });
            println!("{line}");
        }
        return Ok(());
    }
    print!("{}", render(&rows));
    Ok(())
}

/// One table per kind of row, a column per counter.
fn render(rows: &[StatsRow]) -> String {
    let mut by_kind: BTreeMap<StatsKind, Vec<&StatsRow>> = BTreeMap::new();
    for r in rows {
        by_kind.entry(r.kind).or_default().push(r);
    }
    let mut out = String::new();
    for (kind, rows) in by_kind {
        let mut names: Vec<&str> = Vec::new();
        for r in &rows {
            for (n, _) in &r.counters {
                if !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
        }
        let mut table: Vec<Vec<String>> = vec![std::iter::once("TAG".to_owned())
            .chain(std::iter::once(kind.label().to_uppercase()))
            .chain(names.iter().map(|n| n.to_uppercase()))
            .collect()];
        for r in &rows {
            table.push(
                std::iter::once(if r.tag.is_empty() {
                    "-".into()
                } else {
                    r.tag.clone()
                })
                .chain(std::iter::once(if r.who.is_empty() {
                    "-".into()
                } else {
                    r.who.clone()
                }))
                .chain(
                    names
                        .iter()
                        .map(|n| r.get(n).map_or("-".into(), |v| v.to_string())),
                )
                .collect(),
            );
        }
        let widths: Vec<usize> = (0..table[0].len())
            .map(|c| table.iter().map(|row| row[c].len()).max().unwrap_or(0))
            .collect();
        for row in &table {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            out += cells.join("  ").trim_end();
            out += "\n";
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_a_table_with_a_column_per_counter() {
        let rows = vec![
            StatsRow::new(StatsKind::Subscriber, "/a", "pid 1 x (lossless)")
                .with("received", 10)
                .with("missing", 2),
            StatsRow::new(StatsKind::Node, "", "h0").with("forward_lost", 0),
            StatsRow::new(StatsKind::Subscriber, "/b", "pid 2 y (reliable)").with("received", 3),
        ];
        let text = render(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("TAG") && lines[0].contains("FORWARD_LOST"),
            "{text}"
        );
        assert!(lines[1].contains("h0"), "{text}");
        let subs = lines.iter().position(|l| l.contains("SUBSCRIBER")).unwrap();
        assert!(lines[subs].ends_with("RECEIVED  MISSING"), "{text}");
        assert!(
            lines[subs + 1].starts_with("/a") && lines[subs + 1].ends_with("10        2"),
            "{text}"
        );
        assert!(lines[subs + 2].ends_with("3         -"), "{text}");
    }
}
