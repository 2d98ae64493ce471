//! `tagwire record` and `tagwire play`: tags to an MCAP file and back
//! (what `ros2 bag record` and `ros2 bag play` do, in the format ROS 2,
//! Foxglove and the `mcap` tools read).
//!
//! **Layout of a recording.** One MCAP channel per tag, sender (pid@node)
//! and publisher stream, with no schema: its topic is the tag's name, its
//! metadata `sender` and `stream`. A message's `log_time` is when it
//! arrived here, its `publish_time` the publisher's timestamp, its
//! `sequence` the publisher's sequence number (cut to 32 bits, as MCAP
//! keeps it). Payloads are stored as sent ([`RAW_ENCODING`]); a keyed
//! message goes on a channel of its own whose encoding is
//! [`KEYED_ENCODING`]: its 16-byte key hash, its instance state (one byte)
//! and then the payload. A metadata record `tagwire.record` ends the file:
//! per tag, what was recorded and what the recorder lost (a full queue), so
//! that a recording says itself whether it is whole.
//!
//! **Playing** publishes each message on its channel's topic (tags made if
//! missing, `--remap` renames them) at its recorded spacing of `log_time`,
//! scaled by `--rate` (0: as fast as the publishers take them). Files
//! written by other tools play too: every channel's messages go out as
//! their bytes. The players's sends are its own: subscribers see the
//! player as the sender, not the recorded one (a process cannot send as
//! another).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context as _};
use tagwire::{Domain, Error, InstanceState, Key, MessageInfo, SubscribeOptions};

use crate::ConnectArgs;

/// The message encoding of a channel whose messages are the payloads as
/// sent.
pub(crate) const RAW_ENCODING: &str = "application/octet-stream";
/// The message encoding of a channel of keyed messages: key hash (16
/// bytes), instance state (1 byte: 0 alive, 1 disposed, 2 unregistered, 3
/// both), payload.
pub(crate) const KEYED_ENCODING: &str = "application/x-tagwire-keyed";
/// Bytes in front of a keyed message's payload.
const KEYED_HEAD: usize = 17;
/// The largest record `play` reads (a message of the largest size tagwire
/// sends, with room for its envelope): a longer one is refused, not
/// allocated.
const MAX_RECORD: usize = (64 << 20) + 4096;

/// Arguments of `tagwire record`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecordArgs {
    /// Tags to record (with `--all`, none needed).
    tags: Vec<String>,
    /// Every tag the daemon knows, and those made while recording (looked
    /// for once a second).
    #[arg(long)]
    all: bool,
    /// The MCAP file to write (default: tagwire-SECONDS.mcap, SECONDS
    /// since the Unix epoch).
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Stop after this many messages in all.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(long)]
    seconds: Option<f64>,
    /// Hold publishers back instead of losing messages when the recorder
    /// falls behind (`SubscribeOptions::lossless`).
    #[arg(long)]
    lossless: bool,
    /// Each subscription's queue depth (default: the library's).
    #[arg(long)]
    depth: Option<u32>,
    /// Compression of the file's chunks.
    #[arg(long, value_enum, default_value_t = Compression::Zstd)]
    compression: Compression,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// How `tagwire record` compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Compression {
    /// zstd, as `ros2 bag record --compression-format zstd`.
    Zstd,
    /// lz4: faster, larger.
    Lz4,
    /// None.
    None,
}

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

/// A keyed message's bytes in a recording: key hash, state, payload.
pub(crate) fn encode_keyed(key: &Key, state: InstanceState, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(KEYED_HEAD + payload.len());
    out.extend_from_slice(&key.0);
    out.push(match state {
        InstanceState::Alive => 0,
        InstanceState::Disposed => 1,
        InstanceState::Unregistered => 2,
        InstanceState::DisposedUnregistered => 3,
    });
    out.extend_from_slice(payload);
    out
}

/// What [`encode_keyed`] wrote, or why `bytes` cannot be one.
pub(crate) fn decode_keyed(bytes: &[u8]) -> Result<(Key, InstanceState, &[u8]), String> {
    let (head, payload) = bytes.split_at_checked(KEYED_HEAD).ok_or_else(|| {
        format!(
            "{} bytes, shorter than a keyed message's {KEYED_HEAD}",
            bytes.len()
        )
    })?;
    let mut key = [0u8; 16];
    key.copy_from_slice(&head[..16]);
    let state = match head[16] {
        0 => InstanceState::Alive,
        1 => InstanceState::Disposed,
        2 => InstanceState::Unregistered,
        3 => InstanceState::DisposedUnregistered,
        s => return Err(format!("instance state {s} (0..=3 are known)")),
    };
    Ok((Key(key), state, payload))
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Messages of one tag on their way from its receiving thread to the
/// file, many at a time (one channel hand-off per batch, not per message),
/// and what its subscription lost meanwhile (its queue overflowed).
struct Batch {
    tag: Arc<str>,
    /// The payloads, back to back.
    data: Vec<u8>,
    /// Each message: what the library said of it, where its payload ends
    /// in `data`, and when it arrived (ns since the Unix epoch).
    items: Vec<(MessageInfo, usize, u64)>,
    lost: u64,
}

/// A batch goes to the writer at this many messages or bytes, or as soon
/// as its subscription has nothing more at once.
const BATCH_MESSAGES: usize = 1024;
const BATCH_BYTES: usize = 1 << 20;

/// Per tag: recorded and lost.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    recorded: u64,
    lost: u64,
}

pub(crate) fn record(a: RecordArgs) -> anyhow::Result<()> {
    if a.tags.is_empty() && !a.all {
        bail!("name the tags to record, or --all");
    }
    let client = Arc::new(a.connect.connect()?);
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "tagwire-{}.mcap",
            nanos(SystemTime::now()) / 1_000_000_000
        ))
    });
    let file = File::create(&out).with_context(|| format!("creating {}", out.display()))?;
    let compression = match a.compression {
        Compression::Zstd => Some(mcap::Compression::Zstd),
        Compression::Lz4 => Some(mcap::Compression::Lz4),
        Compression::None => None,
    };
    let writer = mcap::WriteOptions::new()
        .compression(compression)
        .profile("")
        .library(concat!("tagwire ", env!("CARGO_PKG_VERSION")))
        .create(BufWriter::new(file))
        .with_context(|| format!("writing {}", out.display()))?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    // Bounded: a recorder that falls behind fills its subscriptions'
    // queues (lost and counted, or with --lossless the publishers wait),
    // not its memory.
    let (tx, rx) = mpsc::sync_channel::<Batch>(8);
    let mut recording: HashMap<String, std::thread::JoinHandle<anyhow::Result<()>>> =
        HashMap::new();
    let start_one = |name: &str| -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
        client.create_tag(name, Domain::Global)?;
        let mut opts = SubscribeOptions {
            depth: a.depth,
            ..SubscribeOptions::default()
        };
        if a.lossless {
            opts = opts.lossless();
        }
        let sub = client.subscribe(name, opts)?;
        let (tx, stop, tag) = (tx.clone(), Arc::clone(&stop), Arc::<str>::from(name));
        Ok(std::thread::Builder::new()
            .name(format!("record {name}"))
            .spawn(move || receive_loop(sub, &tag, &tx, &stop))?)
    };
    for t in &a.tags {
        let h = start_one(t)?;
        recording.insert(t.clone(), h);
    }
    let started = Instant::now();
    let deadline = a.seconds.map(|s| started + Duration::from_secs_f64(s));
    let mut looked = None::<Instant>;
    let mut file = Recording {
        writer,
        channels: HashMap::new(),
        tally: a
            .tags
            .iter()
            .map(|t| (t.clone(), Tally::default()))
            .collect(),
        total: 0,
        count: a.count,
    };
    while !stop.load(Ordering::Relaxed)
        && file.wants_more()
        && deadline.is_none_or(|d| Instant::now() < d)
    {
        if a.all && looked.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            looked = Some(Instant::now());
            for s in client.tags()? {
                let name = s.name.as_str().to_owned();
                if !recording.contains_key(&name) {
                    recording.insert(name.clone(), start_one(&name)?);
                    file.tally.entry(name).or_default();
                }
            }
        }
        let b = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(b) => b,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if !file.write(b)? {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    drop(tx);
    if file.wants_more() {
        // Stopped by a signal, --seconds or the daemon: what the receiving
        // threads took from their subscriptions is written too (they hand
        // their last batches over and end).
        while let Ok(b) = rx.recv() {
            if !file.write(b)? {
                break;
            }
        }
    }
    drop(rx);
    for (name, h) in recording {
        match h.join() {
            Ok(r) => r.with_context(|| format!("recording {name}"))?,
            Err(_) => bail!("the thread recording {name} panicked"),
        }
    }
    let Recording {
        mut writer,
        tally,
        total,
        ..
    } = file;
    let mut summary = BTreeMap::new();
    for (tag, t) in &tally {
        summary.insert(format!("{tag}:recorded"), t.recorded.to_string());
        summary.insert(format!("{tag}:lost"), t.lost.to_string());
    }
    writer.write_metadata(&mcap::records::Metadata {
        name: "tagwire.record".to_owned(),
        metadata: summary,
    })?;
    writer.finish()?;
    let lost: u64 = tally.values().map(|t| t.lost).sum();
    println!(
        "recorded {total} messages of {} tags in {:.1} s into {}, lost {lost}",
        tally.len(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    for (tag, t) in tally.iter().filter(|(_, t)| t.lost > 0) {
        println!("  {tag}: lost {} (the recorder's queue was full)", t.lost);
    }
    Ok(())
}

/// The file being written and what went into it.
struct Recording<W: std::io::Write + std::io::Seek> {
    writer: mcap::Writer<W>,
    channels: HashMap<ChannelKey, u16>,
    /// Per tag, recorded and lost.
    tally: BTreeMap<String, Tally>,
    /// Messages recorded, and the most to record (`--count`).
    total: u64,
    count: Option<u64>,
}

impl<W: std::io::Write + std::io::Seek> Recording<W> {
    /// Whether fewer than `--count` messages are recorded.
    fn wants_more(&self) -> bool {
        self.count.is_none_or(|c| self.total < c)
    }

    /// Writes batch `b`'s messages and counts them and its losses; false
    /// once `--count` messages are recorded (the rest of the batch,
    /// received past the count, is neither recorded nor lost).
    fn write(&mut self, b: Batch) -> anyhow::Result<bool> {
        let t = self.tally.entry(b.tag.to_string()).or_default();
        t.lost += b.lost;
        let mut from = 0;
        for (info, end, at) in &b.items {
            if self.count.is_some_and(|c| self.total >= c) {
                return Ok(false);
            }
            let payload = &b.data[from..*end];
            write_message(
                &mut self.writer,
                &mut self.channels,
                &b.tag,
                (info, payload, *at),
            )?;
            from = *end;
            t.recorded += 1;
            self.total += 1;
        }
        Ok(self.wants_more())
    }
}

/// A tag's receiving thread: every message (and every loss) to the
/// writer in batches, until `stop` (then its last batch) or the writer
/// is gone.
fn receive_loop(
    mut sub: tagwire::Subscriber,
    tag: &Arc<str>,
    tx: &mpsc::SyncSender<Batch>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let empty = || Batch {
        tag: Arc::clone(tag),
        data: Vec::new(),
        items: Vec::new(),
        lost: 0,
    };
    let mut batch = empty();
    let mut payload = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        // Without waiting while a batch is open: nothing more at once
        // sends it.
        let wait = if batch.items.is_empty() && batch.lost == 0 {
            Some(Duration::from_millis(100))
        } else {
            Some(Duration::ZERO)
        };
        match sub.receive_into(wait, &mut payload) {
            Ok(info) => {
                batch.data.extend_from_slice(&payload);
                batch
                    .items
                    .push((info, batch.data.len(), nanos(SystemTime::now())));
                if batch.items.len() < BATCH_MESSAGES && batch.data.len() < BATCH_BYTES {
                    continue;
                }
            }
            Err(Error::Overflowed { lost }) => {
                batch.lost += lost;
                continue;
            }
            Err(Error::Timeout) if batch.items.is_empty() && batch.lost == 0 => continue,
            Err(Error::Timeout) => {}
            Err(e) => return Err(e.into()),
        }
        if tx.send(std::mem::replace(&mut batch, empty())).is_err() {
            return Ok(());
        }
    }
    if !batch.items.is_empty() || batch.lost > 0 {
        let _ = tx.send(batch);
    }
    Ok(())
}

/// The channel of a tag's message from one sender and stream, keyed or
/// not.
type ChannelKey = (Arc<str>, tagwire::SenderInfo, u16, bool);

/// Writes a message of `tag` on its channel (added at its first message).
fn write_message<W: std::io::Write + std::io::Seek>(
    writer: &mut mcap::Writer<W>,
    channels: &mut HashMap<ChannelKey, u16>,
    tag: &Arc<str>,
    (info, payload, at): (&MessageInfo, &[u8], u64),
) -> anyhow::Result<()> {
    let keyed = info.key.is_some();
    let key = (Arc::clone(tag), info.sender, info.stream, keyed);
    let id = match channels.get(&key) {
        Some(id) => *id,
        None => {
            let metadata = BTreeMap::from([
                ("sender".to_owned(), info.sender.to_string()),
                ("stream".to_owned(), info.stream.to_string()),
            ]);
            let encoding = if keyed { KEYED_ENCODING } else { RAW_ENCODING };
            let id = writer.add_channel(0, tag, encoding, &metadata)?;
            channels.insert(key, id);
            id
        }
    };
    let header = mcap::records::MessageHeader {
        channel_id: id,
        // (MCAP keeps 32 bits of it.)
        sequence: info.seq.0 as u32,
        log_time: at,
        publish_time: nanos(info.timestamp),
    };
    match info.key {
        Some(key) => {
            writer.write_to_known_channel(&header, &encode_keyed(&key, info.state, payload))?
        }
        None => writer.write_to_known_channel(&header, payload)?,
    }
    Ok(())
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
    fn a_keyed_message_comes_back_as_it_went_in() {
        for state in [
            InstanceState::Alive,
            InstanceState::Disposed,
            InstanceState::Unregistered,
            InstanceState::DisposedUnregistered,
        ] {
            let key = Key::of(b"robot-7");
            let bytes = encode_keyed(&key, state, b"pose");
            assert_eq!(decode_keyed(&bytes), Ok((key, state, &b"pose"[..])));
        }
    }

    #[test]
    fn a_short_or_unknown_keyed_envelope_is_refused_with_the_reason() {
        let e = decode_keyed(&[0u8; 16]).unwrap_err();
        assert!(e.contains("16 bytes"), "{e}");
        let mut bytes = encode_keyed(&Key::of(b"k"), InstanceState::Alive, b"");
        bytes[16] = 9;
        let e = decode_keyed(&bytes).unwrap_err();
        assert!(e.contains("state 9"), "{e}");
    }

    #[test]
    fn remaps_need_both_names() {
        assert_eq!(parse_remap("/a=/b"), Ok(("/a".into(), "/b".into())));
        assert!(parse_remap("/a").is_err());
        assert!(parse_remap("=/b").is_err());
    }
}
