//! `tagwired`: the tagwire node daemon, with the arguments of `tagwire
//! daemon` (one definition: `tagwired --help` is `tagwire daemon --help`).

fn main() {
    tagwire_cli::tagwired_main();
}
