//! The `tagwire` and `tagwired` commands: the command-line front end, one
//! module per subcommand, and the daemon binary that takes exactly the
//! arguments of `tagwire daemon` (one definition for both).

mod analyze;
mod bag;
mod daemon;
mod demo;
mod gateway;
mod history;
mod info;
mod keygen;
mod nodes;
mod perf;
mod place;
mod publish;
mod qos;
mod rate;
mod stats;
mod subscribe;
mod tags;
mod top;

use clap::{Parser, Subcommand};

/// tagwire: real-time publish/subscribe over distribution tags.
#[derive(Debug, Parser)]
#[command(
    name = "tagwire",
    version,
    about = "tagwire: real-time publish/subscribe over distribution tags"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the node daemon (the same as `tagwired`, with the same options).
    Daemon(daemon::Args),
    /// Run the DDS gateway as a client of a running daemon (tags as DDS
    /// topics; `daemon --dds-domain` runs it in the daemon's process).
    DdsGateway(gateway::Args),
    /// Write a new random domain key (the same file on every node: `daemon --key FILE`).
    Keygen(keygen::Args),
    /// Publish messages on a tag.
    Pub(publish::Args),
    /// Subscribe to a tag and print what arrives.
    Sub(subscribe::Args),
    /// List tags with their senders and receivers.
    Tags(tags::Args),
    /// List the nodes this node's daemon knows, their state and last-heard time.
    Nodes(nodes::Args),
    /// Counters: per node, tag, stream to another node, peer and subscriber (sent, delivered, lost and why, resent, held back).
    Stats(stats::Args),
    /// Keep (or stop keeping) a tag's last messages on this node, for `pull`.
    History(history::HistoryArgs),
    /// Pull messages from a tag's history: --last N, --since SEQ or a time range.
    Pull(history::PullArgs),
    /// One tag: its domain, senders and receivers with their QoS, and the
    /// rate of records through this node.
    Info(info::Args),
    /// Destroy a tag (its publishers and subscribers on every node end).
    Destroy(tags::DestroyArgs),
    /// A tag's message rate per sender, once a second (like `ros2 topic hz`).
    Hz(rate::Args),
    /// A tag's bytes per second and message sizes per sender, once a second
    /// (like `ros2 topic bw`).
    Bw(rate::Args),
    /// A live view of this node's tags: senders, receivers, messages and
    /// losses per second, streams to other nodes (like `top`).
    Top(top::Args),
    /// Record tags into an MCAP file (like `ros2 bag record`).
    Record(bag::RecordArgs),
    /// Publish an MCAP file's messages on their tags at their recorded
    /// spacing (like `ros2 bag play`).
    Play(bag::PlayArgs),
    /// A tag's channels and their packet classes; `--class` changes this
    /// node's subscriptions' class at run time.
    Qos(qos::Args),
    /// Start a daemon if needed, a publisher and subscribers, and print live latencies.
    Demo(demo::Args),
    /// Benchmarks: rtt, fanout, throughput (with raw baselines and Cyclone DDS).
    Perf(perf::Args),
    /// Choose proxy nodes for a topology file (push-pull scaling): exhaustive or MILP.
    Place(place::Args),
    /// Response-time and end-to-end bounds of a task set from measured call costs.
    Analyze(analyze::Args),
    /// Print a shell completion script: `tagwire completions bash >
    /// /etc/bash_completion.d/tagwire` (also zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write man pages (section 1) for `tagwire`, each subcommand and
    /// `tagwired` into a directory: `tagwire man --out /usr/local/share/man/man1`.
    Man {
        /// The directory (created if missing).
        #[arg(long, default_value = ".")]
        out: std::path::PathBuf,
    },
    /// Internal: the CLI reference in Markdown (docs/cli-reference.md),
    /// from these definitions.
    #[command(hide = true)]
    CliReference,
    /// Internal: a benchmark peer process started by `tagwire perf`.
    #[command(hide = true)]
    PerfWorker(perf::WorkerArgs),
    /// Internal: the Rust end of `tagwire perf rtt --lang` (the runner protocol).
    #[command(hide = true)]
    LangRunner(perf::RunnerArgs),
}

/// `tagwire`'s entry point: parses the command line and runs the
/// subcommand; exits with status 1 (and the error on stderr) if it fails.
pub fn tagwire_main() {
    let cli = Cli::parse();
    // `tagwire perf` runs a daemon in its own process: its INFO lines (tags
    // made and destroyed per measurement) would land among the tables.
    let default_filter = match cli.command {
        Command::Perf(_) => "warn",
        _ => DAEMON_LOG,
    };
    init_logging(default_filter);
    let res = match cli.command {
        Command::Daemon(a) => daemon::run(a),
        Command::DdsGateway(a) => gateway::run(a),
        Command::Keygen(a) => keygen::run(a),
        Command::Nodes(a) => nodes::run(a),
        Command::Info(a) => info::run(a),
        Command::Destroy(a) => tags::destroy(a),
        Command::Hz(a) => rate::run(a, rate::Measure::Rate),
        Command::Bw(a) => rate::run(a, rate::Measure::Bandwidth),
        Command::Stats(a) => stats::run(a),
        Command::Pub(a) => publish::run(a),
        Command::Sub(a) => subscribe::run(a),
        Command::Tags(a) => tags::run(a),
        Command::Demo(a) => demo::run(a),
        Command::History(a) => history::set(a),
        Command::Pull(a) => history::pull(a),
        Command::Qos(a) => qos::run(a),
        Command::Top(a) => top::run(a),
        Command::Record(a) => bag::record(a),
        Command::Play(a) => bag::play(a),
        Command::Perf(a) => perf::run(a),
        Command::Place(a) => place::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "tagwire", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { out } => man_pages(&out),
        Command::CliReference => {
            print!("{}", cli_reference());
            Ok(())
        }
        Command::PerfWorker(a) => perf::worker(a),
        Command::LangRunner(a) => perf::lang_runner(a),
    };
    if let Err(e) = res {
        eprintln!("tagwire: {e:#}");
        std::process::exit(1);
    }
}

/// `tagwired`: the node daemon, with the arguments of `tagwire daemon`.
#[derive(Debug, Parser)]
#[command(
    name = "tagwired",
    version,
    about = "The tagwire node daemon (the same as `tagwire daemon`, with the same options)"
)]
struct Tagwired {
    #[command(flatten)]
    args: daemon::Args,
}

/// `tagwired`'s entry point: `tagwire daemon` under its own name (what
/// the client library's autostart runs, and what a system service runs).
pub fn tagwired_main() {
    let t = Tagwired::parse();
    init_logging(DAEMON_LOG);
    if let Err(e) = daemon::run(t.args) {
        eprintln!("tagwired: {e:#}");
        std::process::exit(1);
    }
}

/// Writes `tagwire.1`, `tagwire-SUBCOMMAND.1` for each subcommand (hidden
/// ones left out) and `tagwired.1` into `dir`.
fn man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    use clap::CommandFactory as _;
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    for cmd in [Cli::command(), Tagwired::command()] {
        clap_mangen::generate_to(cmd, dir)
            .map_err(|e| anyhow::anyhow!("writing man pages into {}: {e}", dir.display()))?;
    }
    println!("man pages written to {}", dir.display());
    Ok(())
}

/// The reference of every command and option of `tagwire` and
/// `tagwired` in Markdown, from their clap definitions: what
/// docs/cli-reference.md holds (a test keeps it current).
fn cli_reference() -> String {
    use clap::CommandFactory as _;
    let options = || clap_markdown::MarkdownOptions::new().show_footer(false);
    format!(
        "<!-- Generated by `tagwire cli-reference > docs/cli-reference.md`; do not edit. -->\n\n{}\n{}",
        clap_markdown::help_markdown_command_custom(
            &Cli::command(),
            &options().title("The tagwire command".to_owned())
        ),
        clap_markdown::help_markdown_command_custom(
            &Tagwired::command(),
            &options()
                .title("The tagwired command".to_owned())
                .show_table_of_contents(false)
        ),
    )
}

/// The daemon's default log filter, under either name.
const DAEMON_LOG: &str = "warn,tagwire_daemon=info";

/// Logs to stderr, filtered by `$TAGWIRE_LOG` or else `default_filter`.
fn init_logging(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TAGWIRE_LOG")
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Client options shared by the subcommands that talk to a daemon.
#[derive(Debug, Clone, clap::Args)]
struct ConnectArgs {
    /// Daemon socket (default: $TAGWIRE_SOCKET or the per-user runtime dir).
    #[arg(long, env = "TAGWIRE_SOCKET")]
    socket: Option<std::path::PathBuf>,
    /// Start a background daemon if none answers.
    #[arg(long)]
    autostart: bool,
}

impl ConnectArgs {
    fn options(&self) -> tagwire::ClientOptions {
        let mut o = tagwire::ClientOptions::default();
        if let Some(s) = &self.socket {
            o.socket = s.clone();
        }
        o.autostart |= self.autostart;
        o
    }

    fn connect(&self) -> anyhow::Result<tagwire::Client> {
        Ok(tagwire::Client::with_options(self.options())?)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cli_reference_in_docs_is_the_one_the_definitions_make() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli-reference.md");
        let kept = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            kept == super::cli_reference(),
            "docs/cli-reference.md is out of date: run \
             `cargo run -p tagwire-cli --bin tagwire -- cli-reference > docs/cli-reference.md`"
        );
    }
}
