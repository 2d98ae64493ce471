//! `tagwired`: the tagwire daemon, as the client library's autostart runs
//! it: one node, on `$TAGWIRE_SOCKET` (or the per-user default), settings
//! from their defaults but for the roles' scheduling. `tagwire daemon` is
//! the same daemon with every option (node lists, keys, policies, the DDS
//! gateway).

use tagwire_daemon::roles::Roles;

/// What `tagwired --help` prints, and what it says to a user who passed
/// options it does not take.
const USAGE: &str = "\
usage: tagwired [--sched ROLE=POLICY,...] [--mlock]

Runs a single-node tagwire daemon on $TAGWIRE_SOCKET (or the per-user
default socket), with default settings; TAGWIRE_LOG sets the log filter.

  --sched ROLE=POLICY,...  the scheduling of the daemon's roles (delivery,
                           forward, update, local), each other[:NICE],
                           fifo:P or rr:P, e.g. delivery=fifo:40,update=fifo:20
                           (also $TAGWIRE_SCHED)
  --mlock                  lock the daemon's memory (mlockall)

For other nodes, a domain key, a policy file or the DDS gateway, run
`tagwire daemon` with them (see `tagwire daemon --help`).";

fn fail(why: &str) -> ! {
    eprintln!("tagwired: {why}\n\n{USAGE}");
    std::process::exit(2);
}

fn main() {
    let mut config = tagwire_daemon::Config::default();
    let mut sched = std::env::var("TAGWIRE_SCHED").ok();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return;
            }
            Some("--mlock") => config.mlock = true,
            Some("--sched") => match args.next().map(|v| v.into_string()) {
                Some(Ok(v)) => sched = Some(v),
                _ => fail("--sched needs ROLE=POLICY,..."),
            },
            // Ignoring it would start a daemon the user did not ask for (a
            // single node where `--node` asked for many).
            _ => fail(&format!("unexpected argument {:?}", arg.to_string_lossy())),
        }
    }
    if let Some(s) = sched {
        match s.parse::<Roles>() {
            Ok(r) => config.sched = r,
            Err(e) => fail(&format!("--sched: {e}")),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TAGWIRE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = tagwire_daemon::run_until_signal(config) {
        eprintln!("tagwired: {e}");
        std::process::exit(1);
    }
}
