//! `tagwired`: the tagwire daemon. Same as `tagwire daemon`.

fn main() {
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
