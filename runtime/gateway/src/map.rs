//! The mapping file: which tag is which DDS topic.
//!
//! ```text
//! # tag            topic            type                           options
//! /ros/chatter     rt/chatter       std_msgs::msg::dds_::String_
//! /perf/data       DDSPerfRDataKS   KeyedSeq                       best-effort keyed
//! ```
//!
//! One mapping per line (`#` starts a comment). Options: `reliable`
//! (the default) or `best-effort`; `keyed` for a topic whose type has
//! a key (DDS matches a keyed topic's endpoints only with endpoints that
//! say so); `transient-local=N`: the DDS writer offers TRANSIENT_LOCAL
//! durability and keeps the last N samples for late-joining readers,
//! starting from the tag's history; `key=TYPE@OFFSET[,…]` (implies
//! `keyed`): where the key fields are in a sample, so that each sample's
//! instance reaches tagwire subscribers and disposes cross both ways
//! (see [`crate::key`]); `partition=NAME[,NAME…]`: the DDS partitions of
//! both endpoints (a name may hold the wildcards `*` and `?`);
//! `exclusive`: EXCLUSIVE ownership on both endpoints (DDS matches only
//! like with like), each DDS writer's strength carried to tagwire
//! subscribers, and `strength=N` the gateway's writer's; `deadline=MS`:
//! the period the gateway's writer offers and its reader requests. Tags
//! and topics are each mapped once.

use std::collections::HashSet;

use crate::key::KeySpec;

/// The most samples a transient-local mapping keeps.
pub const MAX_KEPT: u32 = 4096;

/// One tag as one DDS topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The tagwire tag.
    pub tag: String,
    /// The DDS topic name.
    pub topic: String,
    /// The DDS type name (matched as a string).
    pub type_name: String,
    /// Reliable (else best effort) on the DDS side.
    pub reliable: bool,
    /// The type has a key.
    pub keyed: bool,
    /// TRANSIENT_LOCAL with this many samples kept (else volatile).
    pub transient_local: Option<u32>,
    /// Where the key is in a sample.
    pub key: Option<KeySpec>,
    /// DDS partitions (empty: the default partition).
    pub partitions: Vec<String>,
    /// EXCLUSIVE ownership.
    pub exclusive: bool,
    /// The gateway's DDS writer's ownership strength.
    pub strength: i32,
    /// The deadline period offered and requested, in milliseconds.
    pub deadline_ms: Option<u64>,
}

/// Why a mapping file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// A line is not `TAG TOPIC TYPE [options]`.
    #[error(
        "line {line}: {why} (expected `TAG TOPIC TYPE [reliable|best-effort] [keyed] \
         [transient-local=N] [key=TYPE@OFFSET,…] [partition=NAME,…]`)"
    )]
    Line {
        /// Its number, from 1.
        line: usize,
        /// What is wrong.
        why: String,
    },
}

/// Reads a mapping file's text.
pub fn parse(text: &str) -> Result<Vec<Mapping>, MapError> {
    let mut out = Vec::new();
    let (mut tags, mut topics) = (HashSet::new(), HashSet::new());
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| MapError::Line {
            line: i + 1,
            why: why.to_owned(),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let [tag, topic, type_name, options @ ..] = &words[..] else {
            return Err(bad("three words, then options"));
        };
        let (mut reliable, mut keyed, mut transient_local) = (true, false, None);
        let (mut key, mut partitions) = (None, Vec::new());
        let (mut exclusive, mut strength, mut deadline_ms) = (false, 0, None);
        for o in options {
            match *o {
                "reliable" => reliable = true,
                "best-effort" => reliable = false,
                "keyed" => keyed = true,
                "exclusive" => exclusive = true,
                other if other.starts_with("key=") => {
                    key = Some(KeySpec::parse(&other[4..]).map_err(|e| bad(&e))?);
                    keyed = true;
                }
                other if other.starts_with("strength=") => {
                    strength = other[9..]
                        .parse()
                        .map_err(|_| bad("strength=N takes a 32-bit integer"))?;
                }
                other if other.starts_with("deadline=") => {
                    let ms: u64 = other[9..]
                        .parse()
                        .ok()
                        .filter(|ms| (1..=86_400_000).contains(ms))
                        .ok_or_else(|| bad("deadline=MS takes 1 to 86400000 milliseconds"))?;
                    deadline_ms = Some(ms);
                }
                other if other.starts_with("partition=") => {
                    partitions = other[10..].split(',').map(str::to_owned).collect();
                }
                other => match other.strip_prefix("transient-local=") {
                    Some(n) => match n.parse::<u32>() {
                        Ok(n) if (1..=MAX_KEPT).contains(&n) => transient_local = Some(n),
                        _ => return Err(bad(&format!("transient-local=N takes 1 to {MAX_KEPT}"))),
                    },
                    None => return Err(bad(&format!("unknown option `{other}`"))),
                },
            }
        }
        let (tag, topic, type_name) = (*tag, *topic, *type_name);
        if !tag.starts_with('/') {
            return Err(bad("a tag starts with `/`"));
        }
        if !tags.insert(tag) {
            return Err(bad(&format!("tag {tag} is mapped twice")));
        }
        if !topics.insert(topic) {
            return Err(bad(&format!("topic {topic} is mapped twice")));
        }
        out.push(Mapping {
            tag: tag.to_owned(),
            topic: topic.to_owned(),
            type_name: type_name.to_owned(),
            reliable,
            keyed,
            transient_local,
            key,
            partitions,
            exclusive,
            strength,
            deadline_ms,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_read_and_mistakes_named_with_their_line() {
        let text = "# comment\n\n/ros/chatter rt/chatter std_msgs::msg::dds_::String_\n\
                    /perf DDSPerfRDataKS KeyedSeq best-effort # trailing\n";
        let m = parse(text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].topic, "rt/chatter");
        assert!(m[0].reliable);
        assert!(!m[1].reliable);
        assert!(!m[0].keyed);
        assert!(parse("/k t y keyed").unwrap()[0].keyed);
        let k = &parse("/k t y key=u32@4 partition=a,b*").unwrap()[0];
        assert!(k.keyed && k.key.is_some());
        assert_eq!(k.partitions, ["a", "b*"]);
        let o = &parse("/o t y exclusive strength=-4 deadline=250").unwrap()[0];
        assert!(o.exclusive);
        assert_eq!((o.strength, o.deadline_ms), (-4, Some(250)));
        assert!(parse("/o t y deadline=0").is_err());
        assert!(parse("/o t y strength=x").is_err());
        assert!(matches!(
            parse("/k t y key=u32"),
            Err(MapError::Line { .. })
        ));
        assert_eq!(
            parse("/k t y transient-local=7").unwrap()[0].transient_local,
            Some(7)
        );
        assert!(parse("/k t y transient-local=0").is_err());
        assert!(parse("/k t y transient-local=x").is_err());
        assert!(matches!(parse("/a b"), Err(MapError::Line { line: 1, .. })));
        assert!(matches!(parse("a b c"), Err(MapError::Line { .. })));
        assert!(matches!(parse("/a b c maybe"), Err(MapError::Line { .. })));
        assert!(matches!(
            parse("/a b c\n/a d e"),
            Err(MapError::Line { line: 2, .. })
        ));
        assert!(matches!(
            parse("/a b c\n/d b e"),
            Err(MapError::Line { line: 2, .. })
        ));
    }
}
