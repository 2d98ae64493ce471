//! Reading a recording for `tagwire play`: its channels first, then its
//! messages in log-time order, through the chunk indexes of the file's
//! summary. The recorder writes each tag's batches as they come from its
//! receiving thread, so the messages of several tags overlap in time
//! from one chunk to the next: in file order a player would send one
//! tag's messages late by up to a batch. A file without an index (a
//! recording cut short, an unchunked file) is read in file order, record
//! by record, and so is one whose overlapping chunks would take more
//! than [`MAX_OVERLAP`] of memory to merge. Records longer than
//! [`MAX_RECORD`] are refused, never allocated; the file is never held in
//! memory whole. [`Ahead`] reads in a thread of its own, a bounded
//! distance ahead of the player, so that loading a chunk (reading it,
//! decompressing it, sorting its index) never delays a message that is
//! due.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use anyhow::{anyhow, Context as _};
use mcap::sans_io::indexed_reader::{
    IndexedReadEvent, IndexedReader, IndexedReaderOptions, ReadOrder,
};
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};

/// The largest record read (a message of the largest size tagwire sends,
/// with room for its envelope): a longer one is refused, not allocated.
pub(super) const MAX_RECORD: usize = (64 << 20) + 4096;

/// Most decompressed bytes of chunks that overlap in time that the
/// log-time merge may hold at once; past it the file plays in file order.
pub(super) const MAX_OVERLAP: u64 = 512 << 20;

/// A channel or a message of the file.
#[derive(Debug)]
pub(super) enum Item {
    Channel {
        id: u16,
        topic: String,
        encoding: String,
    },
    Message(Played),
}

/// One message read from the file.
#[derive(Debug)]
pub(super) struct Played {
    pub(super) channel: u16,
    pub(super) log_time: u64,
    pub(super) data: Vec<u8>,
}

/// An open recording (see the module's essay).
pub(super) struct Reader {
    file: File,
    path: PathBuf,
    mode: Mode,
}

enum Mode {
    /// Channels from the summary not handed out yet, then the messages in
    /// log-time order.
    Indexed {
        channels: VecDeque<Item>,
        reader: Box<IndexedReader>,
        buf: Vec<u8>,
    },
    Linear(Box<LinearReader>),
}

impl Reader {
    /// Opens `path`, with its index where it has a usable one.
    pub(super) fn open(path: &Path) -> anyhow::Result<Reader> {
        let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let size = file
            .metadata()
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        // A summary that cannot be read is no reason to refuse the file:
        // its records are read in order then, with their own errors.
        let summary = summary(&mut file, size).ok().flatten();
        let indexed = summary.filter(|s| {
            !s.chunk_indexes.is_empty() && overlap_bytes(&s.chunk_indexes) <= MAX_OVERLAP
        });
        let mode = match indexed {
            Some(s) => {
                let options = IndexedReaderOptions::new()
                    .with_order(ReadOrder::LogTime)
                    .with_record_length_limit(MAX_RECORD);
                let reader = IndexedReader::new_with_options(&s, options)
                    .map_err(|e| anyhow!("{}: not a readable MCAP file: {e}", path.display()))?;
                let mut channels: Vec<_> = s.channels.values().collect();
                channels.sort_by_key(|c| c.id);
                Mode::Indexed {
                    channels: channels
                        .into_iter()
                        .map(|c| Item::Channel {
                            id: c.id,
                            topic: c.topic.clone(),
                            encoding: c.message_encoding.clone(),
                        })
                        .collect(),
                    reader: Box::new(reader),
                    buf: Vec::new(),
                }
            }
            None => {
                file.seek(SeekFrom::Start(0))
                    .with_context(|| format!("reading {}", path.display()))?;
                let options = LinearReaderOptions::default().with_record_length_limit(MAX_RECORD);
                Mode::Linear(Box::new(LinearReader::new_with_options(options)))
            }
        };
        Ok(Reader {
            file,
            path: path.to_owned(),
            mode,
        })
    }

    /// Whether messages come in log-time order (else in file order).
    pub(super) fn in_log_time_order(&self) -> bool {
        matches!(self.mode, Mode::Indexed { .. })
    }

    /// The next channel or message (`None`: the file's end).
    pub(super) fn next(&mut self) -> anyhow::Result<Option<Item>> {
        let path = &self.path;
        match &mut self.mode {
            Mode::Indexed {
                channels,
                reader,
                buf,
            } => {
                if let Some(c) = channels.pop_front() {
                    return Ok(Some(c));
                }
                while let Some(event) = reader.next_event() {
                    let event = event.map_err(|e| malformed(path, e))?;
                    let (offset, length) = match event {
                        IndexedReadEvent::Message { header, data } => {
                            return Ok(Some(Item::Message(Played {
                                channel: header.channel_id,
                                log_time: header.log_time,
                                data: data.to_vec(),
                            })));
                        }
                        IndexedReadEvent::ReadChunkRequest { offset, length } => (offset, length),
                    };
                    buf.resize(length, 0);
                    self.file
                        .seek(SeekFrom::Start(offset))
                        .and_then(|_| self.file.read_exact(buf))
                        .with_context(|| {
                            format!(
                                "{}: a chunk the index names at byte {offset} cannot be read \
                                 (a damaged file?)",
                                path.display()
                            )
                        })?;
                    reader
                        .insert_chunk_record_data(offset, buf)
                        .map_err(|e| malformed(path, e))?;
                }
                Ok(None)
            }
            Mode::Linear(reader) => {
                while let Some(event) = reader.next_event() {
                    let event = event.map_err(|e| malformed(path, e))?;
                    match event {
                        LinearReadEvent::ReadRequest(need) => {
                            let n = self
                                .file
                                .read(reader.insert(need))
                                .with_context(|| format!("reading {}", path.display()))?;
                            reader.notify_read(n);
                        }
                        LinearReadEvent::Record { data, opcode } => {
                            let r = mcap::parse_record(opcode, data).map_err(|e| {
                                anyhow!("{}: a malformed record: {e}", path.display())
                            })?;
                            match r {
                                mcap::records::Record::Channel(c) => {
                                    return Ok(Some(Item::Channel {
                                        id: c.id,
                                        topic: c.topic,
                                        encoding: c.message_encoding,
                                    }))
                                }
                                mcap::records::Record::Message { header, data } => {
                                    return Ok(Some(Item::Message(Played {
                                        channel: header.channel_id,
                                        log_time: header.log_time,
                                        data: data.into_owned(),
                                    })))
                                }
                                _ => continue,
                            }
                        }
                    }
                }
                Ok(None)
            }
        }
    }
}

/// Items go to the player in batches of at most this many ...
const AHEAD_ITEMS: usize = 512;
/// ... or this many payload bytes (a larger message goes alone) ...
const AHEAD_BYTES: usize = 1 << 20;
/// ... with at most this many batches read ahead.
const AHEAD_BATCHES: usize = 8;

/// A [`Reader`] in a thread of its own, at most [`AHEAD_BATCHES`]
/// batches ahead of whoever takes its items.
pub(super) struct Ahead {
    rx: mpsc::Receiver<anyhow::Result<Vec<Item>>>,
    batch: std::vec::IntoIter<Item>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ahead {
    /// Starts reading `reader` ahead.
    pub(super) fn start(mut reader: Reader) -> anyhow::Result<Ahead> {
        let (tx, rx) = mpsc::sync_channel(AHEAD_BATCHES);
        let thread = std::thread::Builder::new()
            .name("play: read ahead".into())
            .spawn(move || {
                // Not at the player's real-time policy (a thread inherits
                // its parent's): reading is no hurry, the player is.
                let _ = tagwire::set_thread_sched(tagwire::Sched::default());
                read_ahead(&mut reader, &tx);
            })?;
        Ok(Ahead {
            rx,
            batch: Vec::new().into_iter(),
            thread: Some(thread),
        })
    }

    /// The next channel or message (`None`: the file's end).
    pub(super) fn next(&mut self) -> anyhow::Result<Option<Item>> {
        loop {
            if let Some(item) = self.batch.next() {
                return Ok(Some(item));
            }
            match self.rx.recv() {
                Ok(batch) => self.batch = batch?.into_iter(),
                Err(mpsc::RecvError) => return Ok(None),
            }
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // The thread ends at its next send, which now fails.
        let (_, dead) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.rx, dead));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// [`Ahead`]'s thread: `reader`'s items in batches to `tx`, until the
/// file's end (or its first error, after what came before it), or until
/// nobody takes them.
fn read_ahead(reader: &mut Reader, tx: &mpsc::SyncSender<anyhow::Result<Vec<Item>>>) {
    loop {
        let mut batch = Vec::new();
        let mut bytes = 0;
        let end = loop {
            match reader.next() {
                Ok(Some(item)) => {
                    if let Item::Message(m) = &item {
                        bytes += m.data.len();
                    }
                    batch.push(item);
                    if batch.len() >= AHEAD_ITEMS || bytes >= AHEAD_BYTES {
                        break false;
                    }
                }
                Ok(None) => break true,
                Err(e) => {
                    if !batch.is_empty() {
                        let _ = tx.send(Ok(batch));
                    }
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        };
        if !batch.is_empty() && tx.send(Ok(batch)).is_err() || end {
            return;
        }
    }
}

/// The error of a record that cannot be read, saying which file.
fn malformed(path: &Path, e: mcap::McapError) -> anyhow::Error {
    match e {
        mcap::McapError::UnexpectedEof | mcap::McapError::UnexpectedEoc => anyhow!(
            "{}: the file ends inside a record (a recording that did not \
             finish?); what came before it was read",
            path.display()
        ),
        e => anyhow!("{}: not a readable MCAP file: {e}", path.display()),
    }
}

/// The file's summary section, if it has one.
fn summary(file: &mut File, size: u64) -> anyhow::Result<Option<mcap::Summary>> {
    let options = SummaryReaderOptions::default()
        .with_file_size(size)
        .with_record_length_limit(MAX_RECORD);
    let mut reader = SummaryReader::new_with_options(options);
    while let Some(event) = reader.next_event() {
        match event? {
            SummaryReadEvent::ReadRequest(need) => {
                let n = file.read(reader.insert(need))?;
                reader.notify_read(n);
            }
            SummaryReadEvent::SeekRequest(to) => {
                let at = file.seek(to)?;
                reader.notify_seeked(at);
            }
        }
    }
    Ok(reader.finish())
}

/// The most decompressed bytes of chunks whose message times overlap at
/// one instant: what a log-time merge holds at most.
pub(super) fn overlap_bytes(chunks: &[mcap::records::ChunkIndex]) -> u64 {
    // Each chunk opens at its first message's time and closes after its
    // last; at equal times an opening counts before a closing.
    let mut edges: Vec<(u64, bool, u64)> = Vec::with_capacity(2 * chunks.len());
    for c in chunks {
        edges.push((c.message_start_time, false, c.uncompressed_size));
        edges.push((c.message_end_time, true, c.uncompressed_size));
    }
    edges.sort_unstable();
    let (mut now, mut most) = (0u64, 0u64);
    for (_, closes, bytes) in edges {
        if closes {
            now = now.saturating_sub(bytes);
        } else {
            now = now.saturating_add(bytes);
            most = most.max(now);
        }
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes an MCAP file as the recorder does when two tags' batches
    /// overlap in time: tag a's messages at 0, 10, 20, 30, then tag b's
    /// at 5, 15, 25, 35, a chunk or two each (`chunked`: else no chunks,
    /// so no index).
    fn interleaved(path: &Path, chunked: bool) {
        let file = std::io::BufWriter::new(File::create(path).unwrap());
        let mut w = mcap::WriteOptions::new()
            .use_chunks(chunked)
            .chunk_size(Some(64))
            .create(file)
            .unwrap();
        let a = w
            .add_channel(0, "/a", "application/octet-stream", &Default::default())
            .unwrap();
        let b = w
            .add_channel(0, "/b", "application/octet-stream", &Default::default())
            .unwrap();
        for (channel, first) in [(a, 0u64), (b, 5)] {
            for i in 0..4u64 {
                let t = first + 10 * i;
                let header = mcap::records::MessageHeader {
                    channel_id: channel,
                    sequence: i as u32,
                    log_time: t,
                    publish_time: t,
                };
                w.write_to_known_channel(&header, &[0u8; 40]).unwrap();
            }
        }
        w.finish().unwrap();
    }

    /// Every item of `path`: channel topics, then (log time, channel)s.
    fn items(path: &Path) -> (bool, Vec<String>, Vec<u64>) {
        let reader = Reader::open(path).unwrap();
        let ordered = reader.in_log_time_order();
        let mut ahead = Ahead::start(reader).unwrap();
        let (mut topics, mut times) = (Vec::new(), Vec::new());
        while let Some(item) = ahead.next().unwrap() {
            match item {
                Item::Channel { topic, .. } => topics.push(topic),
                Item::Message(m) => times.push(m.log_time),
            }
        }
        (ordered, topics, times)
    }

    #[test]
    fn an_indexed_file_plays_in_log_time_order_and_one_without_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let indexed = dir.path().join("indexed.mcap");
        interleaved(&indexed, true);
        let (ordered, topics, times) = items(&indexed);
        assert!(ordered);
        assert_eq!(topics, ["/a", "/b"]);
        assert_eq!(times, [0, 5, 10, 15, 20, 25, 30, 35]);

        let plain = dir.path().join("plain.mcap");
        interleaved(&plain, false);
        let (ordered, topics, times) = items(&plain);
        assert!(!ordered);
        // (The summary section repeats the channels: read in order, they
        // come twice.)
        assert_eq!(topics[..2], ["/a", "/b"]);
        assert_eq!(times, [0, 10, 20, 30, 5, 15, 25, 35]);

        // Cut short: no summary, file order up to the cut, then the error.
        let bytes = std::fs::read(&indexed).unwrap();
        let cut = dir.path().join("cut.mcap");
        std::fs::write(&cut, &bytes[..bytes.len() / 4]).unwrap();
        let reader = Reader::open(&cut).unwrap();
        assert!(!reader.in_log_time_order());
        let mut ahead = Ahead::start(reader).unwrap();
        let mut messages = 0;
        let err = loop {
            match ahead.next() {
                Ok(Some(Item::Message(_))) => messages += 1,
                Ok(Some(_)) => {}
                Ok(None) => panic!("a cut file read to its end"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(messages < 8, "{messages}");
        assert!(err.contains("cut.mcap"), "{err}");
    }

    fn chunk(start: u64, end: u64, bytes: u64) -> mcap::records::ChunkIndex {
        mcap::records::ChunkIndex {
            message_start_time: start,
            message_end_time: end,
            chunk_start_offset: 0,
            chunk_length: 0,
            message_index_offsets: Default::default(),
            message_index_length: 0,
            compression: String::new(),
            compressed_size: bytes,
            uncompressed_size: bytes,
        }
    }

    #[test]
    fn the_merge_holds_the_chunks_that_overlap_at_one_instant() {
        assert_eq!(overlap_bytes(&[]), 0);
        // In sequence: one at a time.
        assert_eq!(overlap_bytes(&[chunk(0, 9, 5), chunk(10, 19, 7)]), 7);
        // Touching at an instant: both.
        assert_eq!(overlap_bytes(&[chunk(0, 10, 5), chunk(10, 19, 7)]), 12);
        // Batches of tags interleaved: at most two at once here.
        let c = [
            chunk(0, 10, 1),
            chunk(5, 15, 2),
            chunk(12, 20, 4),
            chunk(30, 40, 3),
        ];
        assert_eq!(overlap_bytes(&c), 6);
        // A hostile index of many chunks over one span adds up.
        let many: Vec<_> = (0..1000).map(|_| chunk(0, 1, 1 << 20)).collect();
        assert!(overlap_bytes(&many) > MAX_OVERLAP);
    }
}
