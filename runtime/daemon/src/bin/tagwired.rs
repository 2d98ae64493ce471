//! `tagwired`: the tagwire daemon, as the client library's autostart runs
//! it: one node, on `$TAGWIRE_SOCKET` (or the per-user default), settings
//! from their defaults. It takes no options; `tagwire daemon` is the same
//! daemon with all of them (node lists, keys, policies, the DDS gateway).

/// What `tagwired --help` prints, and what it says to a user who passed
/// options it does not take.
const USAGE: &str = "\
usage: tagwired

Runs a single-node tagwire daemon on $TAGWIRE_SOCKET (or the per-user
default socket), with default settings; TAGWIRE_LOG sets the log filter.
It takes no options. For other nodes, a domain key, a policy file or the
DDS gateway, run `tagwire daemon` with them (see `tagwire daemon --help`).";

fn main() {
    let mut args = std::env::args_os().skip(1);
    if let Some(first) = args.next() {
        if first == "-h" || first == "--help" {
            println!("{USAGE}");
            return;
        }
        // Ignoring them would start a daemon the user did not ask for (a
        // single node where `--node` asked for many).
        eprintln!(
            "tagwired: unexpected argument {:?}\n\n{USAGE}",
            first.to_string_lossy()
        );
        std::process::exit(2);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TAGWIRE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = tagwire_daemon::run_until_signal(tagwire_daemon::Config::default()) {
        eprintln!("tagwired: {e}");
        std::process::exit(1);
    }
}
