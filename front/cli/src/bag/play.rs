//! `tagwire play`: a recording's messages published again at their
//! recorded spacing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use tagwire::{Domain, InstanceState};

use super::read::{Ahead, Item, Played, Reader};
use super::{decode_keyed, KEYED_ENCODING};
use crate::ConnectArgs;

/// Arguments of `tagwire play`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlayArgs {
    /// The MCAP file.
    file: PathBuf,
    /// Speed: 1 plays at the recorded spacing, 2 twice as fast, 0 as fast
    /// as the publishers take the messages.
    #[arg(long, default_value_t = 1.0)]
    rate: f64,
    /// Play the file again and again (until interrupted).
    #[arg(long = "loop")]
    repeat: bool,
    /// Play only these topics (repeatable; default: all).
    #[arg(long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
    /// Publish topic FROM on tag TO (repeatable).
    #[arg(long, value_name = "FROM=TO", value_parser = parse_remap)]
    remap: Vec<(String, String)>,
    /// Wait for this many receivers on every played tag before the first
    /// message.
    #[arg(long, default_value_t = 0)]
    wait_receivers: usize,
    /// The scheduling of the playing thread and of this node's forwarders
    /// of the played tags: `other`, `other:NICE`, `fifo:P` or `rr:P` (a
    /// real-time policy keeps the recorded timing under load; it needs
    /// CAP_SYS_NICE or `ulimit -r`).
    #[arg(long, default_value = "other", value_parser = str::parse::<tagwire::Sched>)]
    sched: tagwire::Sched,
    #[command(flatten)]
    connect: ConnectArgs,
}

fn parse_remap(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((from, to)) if !from.is_empty() && !to.is_empty() => {
            Ok((from.to_owned(), to.to_owned()))
        }
        _ => Err(format!("expected FROM=TO, got {s:?}")),
    }
}

/// A channel of the file being played.
struct Channel {
    /// The tag it plays on (`None`: not played).
    tag: Option<String>,
    keyed: bool,
}

pub(crate) fn play(a: PlayArgs) -> anyhow::Result<()> {
    if !(a.rate >= 0.0 && a.rate.is_finite()) {
        bail!(
            "--rate must be 0 (as fast as possible) or more, got {}",
            a.rate
        );
    }
    let client = a.connect.connect()?;
    if !a.sched.is_default() {
        tagwire::set_thread_sched(a.sched)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let remap: HashMap<&str, &str> = a
        .remap
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    let mut publishers: HashMap<String, tagwire::Publisher> = HashMap::new();
    let mut played = 0u64;
    let started = Instant::now();
    loop {
        let reader = Reader::open(&a.file)?;
        if played == 0 && !reader.in_log_time_order() {
            eprintln!(
                "{}: no usable index: playing in file order",
                a.file.display()
            );
        }
        let mut reader = Ahead::start(reader)?;
        let mut channels: HashMap<u16, Channel> = HashMap::new();
        // The first message's log time, and when it went out.
        let mut origin: Option<(u64, Instant)> = None;
        while let Some(item) = reader.next()? {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let m: Played = match item {
                Item::Channel {
                    id,
                    topic,
                    encoding,
                } => {
                    let wanted = a.topics.is_empty() || a.topics.contains(&topic);
                    let tag = wanted.then(|| {
                        remap
                            .get(topic.as_str())
                            .map_or_else(|| topic.clone(), |t| (*t).to_owned())
                    });
                    // Its tag and publisher now, not at its first message
                    // (whose time they would delay).
                    if let Some(tag) = tag.as_ref().filter(|t| !publishers.contains_key(*t)) {
                        client
                            .create_tag(tag, Domain::Global)
                            .with_context(|| format!("making tag {tag:?}"))?;
                        let opts = tagwire::PublishOptions::default().sched(a.sched);
                        let p = client.publisher_with(tag, opts)?;
                        let waited = Instant::now();
                        let mut said = false;
                        while client.receivers(tag)?.len() < a.wait_receivers {
                            if stop.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            if !said && waited.elapsed() > Duration::from_secs(1) {
                                eprintln!("waiting for {} receivers on {tag}", a.wait_receivers);
                                said = true;
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        publishers.insert(tag.clone(), p);
                    }
                    let keyed = encoding == KEYED_ENCODING;
                    channels.insert(id, Channel { tag, keyed });
                    continue;
                }
                Item::Message(m) => m,
            };
            let Some(channel) = channels.get(&m.channel) else {
                bail!(
                    "{}: a message on channel {} before that channel's record",
                    a.file.display(),
                    m.channel
                );
            };
            let Some(tag) = &channel.tag else {
                continue;
            };
            let (first, at) = *origin.get_or_insert((m.log_time, Instant::now()));
            if a.rate > 0.0 {
                let due = at
                    + Duration::from_secs_f64(
                        m.log_time.saturating_sub(first) as f64 / 1e9 / a.rate,
                    );
                sleep_until(due, &stop);
            }
            let Some(p) = publishers.get_mut(tag) else {
                continue;
            };
            if channel.keyed {
                let (key, state, payload) = decode_keyed(&m.data).map_err(|why| {
                    anyhow!("{}: a keyed message on {tag}: {why}", a.file.display())
                })?;
                match state {
                    InstanceState::Alive => p.send_keyed(&key.0, payload)?,
                    InstanceState::Disposed | InstanceState::DisposedUnregistered => {
                        p.dispose(&key.0)?
                    }
                    InstanceState::Unregistered => p.unregister(&key.0)?,
                };
            } else {
                p.send(&m.data)?;
            }
            played += 1;
        }
        if !a.repeat || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    println!(
        "played {played} messages on {} tags in {:.1} s",
        publishers.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Sleeps until `due`, waking at least every 100 ms to see `stop`.
fn sleep_until(due: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= due || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaps_need_both_names() {
        assert_eq!(parse_remap("/a=/b"), Ok(("/a".into(), "/b".into())));
        assert!(parse_remap("/a").is_err());
        assert!(parse_remap("=/b").is_err());
    }
}
