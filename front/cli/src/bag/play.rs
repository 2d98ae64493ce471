//! `tagwire play`: a recording's messages published again at their
//! recorded spacing.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use tagwire::{Domain, InstanceState};

use super::{decode_keyed, KEYED_ENCODING};
use crate::ConnectArgs;

/// The largest record `play` reads (a message of the largest size tagwire
/// sends, with room for its envelope): a longer one is refused, not
/// allocated.
const MAX_RECORD: usize = (64 << 20) + 4096;

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

/// One message read from the file.
struct Played {
    channel: u16,
    log_time: u64,
    data: Vec<u8>,
}

/// Reads an MCAP file's channels and messages in file order, record by
/// record (the file is not held in memory), refusing records longer than
/// [`MAX_RECORD`].
struct Reader {
    file: File,
    path: PathBuf,
    mcap: mcap::sans_io::linear_reader::LinearReader,
}

impl Reader {
    fn open(path: &Path) -> anyhow::Result<Reader> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let options = mcap::sans_io::linear_reader::LinearReaderOptions::default()
            .with_record_length_limit(MAX_RECORD);
        Ok(Reader {
            file,
            path: path.to_owned(),
            mcap: mcap::sans_io::linear_reader::LinearReader::new_with_options(options),
        })
    }

    /// The next channel or message record (`None`: the file's end).
    fn next(&mut self) -> anyhow::Result<Option<mcap::records::Record<'static>>> {
        use mcap::sans_io::linear_reader::LinearReadEvent;
        let path = &self.path;
        while let Some(event) = self.mcap.next_event() {
            let event = event.map_err(|e| match e {
                mcap::McapError::UnexpectedEof | mcap::McapError::UnexpectedEoc => anyhow!(
                    "{}: the file ends inside a record (a recording that did not \
                     finish?); what came before it was read",
                    path.display()
                ),
                e => anyhow!("{}: not a readable MCAP file: {e}", path.display()),
            })?;
            match event {
                LinearReadEvent::ReadRequest(need) => {
                    let n = self
                        .file
                        .read(self.mcap.insert(need))
                        .with_context(|| format!("reading {}", path.display()))?;
                    self.mcap.notify_read(n);
                }
                LinearReadEvent::Record { data, opcode } => {
                    let r = mcap::parse_record(opcode, data)
                        .map_err(|e| anyhow!("{}: a malformed record: {e}", path.display()))?;
                    match r {
                        r @ (mcap::records::Record::Channel(_)
                        | mcap::records::Record::Message { .. }) => {
                            return Ok(Some(r.into_owned()))
                        }
                        _ => continue,
                    }
                }
            }
        }
        Ok(None)
    }
}

pub(crate) fn play(a: PlayArgs) -> anyhow::Result<()> {
    if !(a.rate >= 0.0 && a.rate.is_finite()) {
        bail!(
            "--rate must be 0 (as fast as possible) or more, got {}",
            a.rate
        );
    }
    let client = a.connect.connect()?;
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
        let mut reader = Reader::open(&a.file)?;
        let mut channels: HashMap<u16, Channel> = HashMap::new();
        // The first message's log time, and when it went out.
        let mut origin: Option<(u64, Instant)> = None;
        while let Some(r) = reader.next()? {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let m = match r {
                mcap::records::Record::Channel(c) => {
                    let wanted = a.topics.is_empty() || a.topics.contains(&c.topic);
                    let tag = wanted.then(|| {
                        remap
                            .get(c.topic.as_str())
                            .map_or_else(|| c.topic.clone(), |t| (*t).to_owned())
                    });
                    let keyed = c.message_encoding == KEYED_ENCODING;
                    channels.insert(c.id, Channel { tag, keyed });
                    continue;
                }
                mcap::records::Record::Message { header, data } => Played {
                    channel: header.channel_id,
                    log_time: header.log_time,
                    data: data.into_owned(),
                },
                _ => continue,
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
            if !publishers.contains_key(tag) {
                client
                    .create_tag(tag, Domain::Global)
                    .with_context(|| format!("making tag {tag:?}"))?;
                let p = client.publisher(tag)?;
                let waited = Instant::now();
                while client.receivers(tag)?.len() < a.wait_receivers {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    if waited.elapsed() > Duration::from_secs(1) {
                        eprintln!("waiting for {} receivers on {tag}", a.wait_receivers);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                publishers.insert(tag.clone(), p);
            }
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
