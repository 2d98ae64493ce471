//! `tagwire`: the command-line front end (see the library for the
//! subcommands).

fn main() {
    tagwire_cli::tagwire_main();
}
