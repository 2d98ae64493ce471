//! `tagwire record`: a receiving thread per tag hands batches to the
//! thread that writes the file (see the module above for its layout).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context as _};
use tagwire::{Domain, Error, MessageInfo, SubscribeOptions};

use super::{encode_keyed, nanos, KEYED_ENCODING, RAW_ENCODING};
use crate::ConnectArgs;

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
    /// The scheduling of the threads that take the messages (and stamp
    /// their log times) and of those that bring them from other nodes:
    /// `other`, `other:NICE`, `fifo:P` or `rr:P` (needs CAP_SYS_NICE or
    /// `ulimit -r` for a real-time one).
    #[arg(long, default_value = "other", value_parser = str::parse::<tagwire::Sched>)]
    sched: tagwire::Sched,
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

    if !a.sched.is_default() {
        // Refused now, with the reason, rather than in each receiving
        // thread (the writing thread keeps the default policy).
        let sched = a.sched;
        std::thread::spawn(move || tagwire::set_thread_sched(sched))
            .join()
            .map_err(|_| anyhow::anyhow!("the thread trying --sched panicked"))??;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    // Bounded: a recorder that falls behind fills its subscriptions'
    // queues (lost and counted, or with --lossless the publishers wait),
    // not its memory.
    let (tx, rx) = mpsc::sync_channel::<Batch>(QUEUE);
    let tx = Handoff {
        tx,
        queued: Arc::default(),
    };
    let queued = Arc::clone(&tx.queued);
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
        let sub = client.subscribe(name, opts.sched(a.sched))?;
        let sched = a.sched;
        let (tx, stop, tag) = (tx.clone(), Arc::clone(&stop), Arc::<str>::from(name));
        Ok(std::thread::Builder::new()
            .name(format!("record {name}"))
            .spawn(move || {
                if !sched.is_default() {
                    tagwire::set_thread_sched(sched)?;
                }
                receive_loop(sub, &tag, &tx, &stop)
            })?)
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
            Ok(b) => {
                queued.fetch_sub(b.data.len(), Ordering::Relaxed);
                b
            }
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
            queued.fetch_sub(b.data.len(), Ordering::Relaxed);
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
/// writer in batches, until `stop`; then what its subscription already
/// holds (for at most [`DRAIN`]: a publisher may never pause) and its
/// last batch; or until the writer is gone. A batch goes when it is full
/// or when the subscription has nothing more at once; while the writer's
/// queue is full the thread waits, and the subscription's queue fills
/// (with `--lossless` the publishers wait too).
fn receive_loop(
    mut sub: tagwire::Subscriber,
    tag: &Arc<str>,
    tx: &Handoff,
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
    let mut draining: Option<Instant> = None;
    loop {
        if draining.is_none() && stop.load(Ordering::Relaxed) {
            draining = Some(Instant::now() + DRAIN);
        }
        let open = !batch.items.is_empty() || batch.lost > 0;
        // Without waiting while a batch is open (nothing more at once
        // sends it) or while draining (nothing more: the end).
        let wait = if open || draining.is_some() {
            Duration::ZERO
        } else {
            Duration::from_millis(100)
        };
        let full = match sub.receive_into(Some(wait), &mut payload) {
            Ok(info) => {
                batch.data.extend_from_slice(&payload);
                batch
                    .items
                    .push((info, batch.data.len(), nanos(SystemTime::now())));
                batch.items.len() >= BATCH_MESSAGES || batch.data.len() >= BATCH_BYTES
            }
            Err(Error::Overflowed { lost }) => {
                batch.lost += lost;
                false
            }
            Err(Error::Timeout) if draining.is_some() => break,
            Err(Error::Timeout) => open,
            Err(e) => return Err(e.into()),
        };
        if draining.is_some_and(|until| Instant::now() >= until) {
            break;
        }
        if full
            && tx
                .send(std::mem::replace(&mut batch, empty()), stop)
                .is_err()
        {
            return Ok(());
        }
    }
    if !batch.items.is_empty() || batch.lost > 0 {
        let _ = tx.send(batch, stop);
    }
    Ok(())
}

/// Batches waiting for the writer, at most (a slow tag's hold a message
/// or two: a few would stop its receiving thread, which stamps the log
/// times, whenever the writer spends a moment finishing a chunk; the
/// messages would then be taken late, in a burst, their log times
/// squeezed together, and played back so) ...
const QUEUE: usize = 64;
/// ... and at most this many payload bytes (a batch of large messages
/// holds far more than [`BATCH_BYTES`]), or one batch alone.
const QUEUE_BYTES: usize = 64 << 20;

/// The receiving threads' side of the queue to the writer.
#[derive(Clone)]
struct Handoff {
    tx: mpsc::SyncSender<Batch>,
    /// Payload bytes sent and not yet taken by the writer.
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl Handoff {
    /// Sends `b` once the queue has room for it (by count and, unless
    /// stopping, by bytes); `Err`: the writer is gone.
    fn send(&self, b: Batch, stop: &AtomicBool) -> Result<(), ()> {
        let n = b.data.len();
        // Rare (large messages only): polled, nothing on the common path.
        while !stop.load(Ordering::Relaxed) {
            let q = self.queued.load(Ordering::Relaxed);
            if q == 0 || q + n <= QUEUE_BYTES {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.queued.fetch_add(n, Ordering::Relaxed);
        self.tx.send(b).map_err(|_| ())
    }
}

/// The longest a stopped recorder keeps taking what its subscriptions
/// hold.
const DRAIN: Duration = Duration::from_millis(500);

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
