//! `tagwire pub TAG`: publish messages at a rate.

use std::time::{Duration, Instant};

use tagwire::{Domain, KeepHistory, RingParams};

use crate::ConnectArgs;

/// Arguments of `tagwire pub`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Tag name, e.g. /robot/laser (created if missing).
    tag: String,
    /// The payload, as its UTF-8 bytes (default: numbered filler of
    /// --size bytes).
    #[arg(conflicts_with_all = ["file", "stdin"])]
    data: Option<String>,
    /// The payload: this file's bytes.
    #[arg(long, conflicts_with = "stdin")]
    file: Option<std::path::PathBuf>,
    /// One message per line of standard input (without its newline),
    /// until it ends, paced by --rate.
    #[arg(long)]
    stdin: bool,
    /// Send every message as an instance of this key (its UTF-8 bytes;
    /// keyed data, `Publisher::send_keyed`).
    #[arg(long)]
    key: Option<String>,
    /// Messages per second (0 = as fast as possible).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Payload size in bytes (of the filler; DATA, --file and --stdin
    /// give their own).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Stop after this many messages (default: run until killed).
    #[arg(long)]
    count: Option<u64>,
    /// Wait until this many receivers are subscribed before sending.
    #[arg(long, default_value_t = 0)]
    wait_receivers: usize,
    /// When this call creates the tag, keep its last N messages on this node
    /// for `tagwire pull` and late joiners (an existing tag is left as is;
    /// `tagwire history` changes it).
    #[arg(long, value_name = "N")]
    history: Option<u32>,
    /// Print a line per message sent.
    #[arg(long, short)]
    verbose: bool,
    /// The packet class this node sends the tag in, at least (`low`,
    /// `normal`, `high`, `critical`, `dscp:N`; the receivers' may be higher).
    #[arg(long, default_value = "normal", value_parser = str::parse::<tagwire::Priority>)]
    class: tagwire::Priority,
    /// The policy of this node's forwarder of the tag, at least, and of
    /// this command's sending thread (`other[:NICE]`, `fifo:P`, `rr:P`).
    #[arg(long, default_value = "other", value_parser = str::parse::<tagwire::Sched>)]
    sched: tagwire::Sched,
    /// How this node paces the tag's reliable streams to other nodes:
    /// `adaptive` (from each stream's send window, NAPA), `fixed:RATE`
    /// (bytes per second; `fixed:50mbit`, `fixed:2.5MB`), `off`, or
    /// `daemon` (as `tagwire daemon --pacing` set it).
    #[arg(long, default_value = "daemon", value_parser = str::parse::<tagwire::Pacing>)]
    pacing: tagwire::Pacing,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    let history = KeepHistory {
        depth: a.history.unwrap_or(0),
        max_bytes: 0,
    };
    client.create_tag_keeping(&a.tag, Domain::Global, RingParams::default(), history)?;
    let opts = tagwire::PublishOptions::default()
        .priority(a.class)
        .sched(a.sched)
        .pacing(a.pacing);
    let mut publ = client.publisher_with(&a.tag, opts)?;
    if !a.sched.is_default() {
        tagwire::set_thread_sched(a.sched)?;
    }
    let start = Instant::now();
    while client.receivers(&a.tag)?.len() < a.wait_receivers {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(30),
            "receivers did not subscribe within 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let me = client.me();
    let mut source = Source::new(&a, &me.to_string())?;
    eprintln!(
        "publishing on {} as {me} ({} at {} Hz)",
        a.tag,
        source.what(),
        a.rate
    );
    let period = (a.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / a.rate));
    let key = a.key.as_deref().map(str::as_bytes);
    let t0 = Instant::now();
    let mut n = 0u64;
    while a.count.is_none_or(|c| n < c) {
        let Some(payload) = source.next(n)? else {
            break;
        };
        let seq = match key {
            Some(k) => publ.send_keyed(k, payload)?,
            None => publ.send(payload)?,
        };
        n += 1;
        if a.verbose {
            println!("sent seq={seq} size={}", payload.len());
        }
        if let Some(p) = period {
            let next = t0 + p * u32::try_from(n).unwrap_or(u32::MAX);
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
        }
    }
    eprintln!("sent {n} messages in {:.2?}", t0.elapsed());
    Ok(())
}

/// Where `tagwire pub`'s payloads come from.
enum Source {
    /// Numbered filler of a fixed size.
    Filler { buf: Vec<u8>, me: String },
    /// The same bytes every time (DATA or --file).
    Fixed(Vec<u8>),
    /// A line of standard input each time.
    Lines {
        input: std::io::StdinLock<'static>,
        line: Vec<u8>,
    },
}

impl Source {
    fn new(a: &Args, me: &str) -> anyhow::Result<Source> {
        Ok(match (&a.data, &a.file, a.stdin) {
            (Some(d), _, _) => Source::Fixed(d.as_bytes().to_vec()),
            (None, Some(f), _) => Source::Fixed(
                std::fs::read(f).map_err(|e| anyhow::anyhow!("--file {}: {e}", f.display()))?,
            ),
            (None, None, true) => Source::Lines {
                input: std::io::stdin().lock(),
                line: Vec::new(),
            },
            (None, None, false) => Source::Filler {
                buf: vec![b'.'; a.size],
                me: me.to_owned(),
            },
        })
    }

    fn what(&self) -> String {
        match self {
            Source::Filler { buf, .. } => format!("{} B of filler", buf.len()),
            Source::Fixed(b) => format!("{} B each", b.len()),
            Source::Lines { .. } => "a line of stdin each".to_owned(),
        }
    }

    /// The payload of message `n` (from 0), `None` once stdin has ended.
    fn next(&mut self, n: u64) -> anyhow::Result<Option<&[u8]>> {
        use std::io::BufRead as _;
        Ok(match self {
            Source::Filler { buf, me } => {
                let text = format!("tagwire #{} from {me}", n + 1);
                let k = text.len().min(buf.len());
                buf[..k].copy_from_slice(&text.as_bytes()[..k]);
                Some(buf)
            }
            Source::Fixed(b) => Some(b),
            Source::Lines { input, line } => {
                line.clear();
                if input.read_until(b'\n', line)? == 0 {
                    return Ok(None);
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Some(line)
            }
        })
    }
}
