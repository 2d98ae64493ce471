//! Twenty hot upgrades in a row under a consumer that knows nothing of
//! them: on one host (one daemon), and with each new build on the other
//! of two hosts (network namespaces: root; without it that test prints
//! `skipped: <reason>` and passes). The consumer must see every cycle
//! once, in order, and no gap between commands over 1.5 periods.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// Serialises the tests of this file.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const PERIOD_MS: u64 = 10;
const UPGRADES: u32 = 20;
/// The sensor and the consumer run at a real-time policy where permitted
/// (as root: CI), as a plant's would; the controller builds here at the
/// default policy, as a build an operator just started might (the Python
/// test runs its builds at this policy too: both mixes must hold). The
/// mix found a priority inversion: the consumer's policy raises the
/// forwarder that carries the commands across hosts, which then kept the
/// plain controller off its CPU while closing the send ticket, and a
/// command arrived two periods late two or three times in 5 s
/// (`tagwire_shm`'s `ticket_inversion` test).
const SCHED: &str = "fifo:30";

/// Where each process runs: a daemon socket, and how to start a program
/// there (plain, or inside a namespace).
struct Place {
    socket: PathBuf,
    netns: Option<String>,
}

impl Place {
    fn command(&self, exe: &str) -> Command {
        let mut c = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, exe]);
                c
            }
            None => Command::new(exe),
        };
        c.env("TAGWIRE_SOCKET", &self.socket);
        c
    }
}

/// Starts a controller build and waits for the line saying it publishes.
fn controller(place: &Place, build: u32, first: bool) -> Child {
    let mut c = place.command(env!("CARGO_BIN_EXE_plant-controller"));
    c.args([
        "--build",
        &build.to_string(),
        "--period-ms",
        &PERIOD_MS.to_string(),
    ]);
    if first {
        c.arg("--first");
    }
    c.stdout(Stdio::piped()).spawn().unwrap()
}

/// The controller's first line (`RUNNING build=B cycle=C`), within 10 s.
fn running(child: &mut Child) -> String {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(out).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = tx.send(first);
        for _ in lines {}
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the controller says it runs")
}

fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

/// The sensor and the first build at `places[0]`, the consumer at
/// `consumer`; then `UPGRADES` builds, build `b` at
/// `places[(b - 1) % len]`, each started while the previous one runs.
/// No gap over 1.5 periods anywhere, the hand-overs' reported apart.
fn upgrade_in_a_row(places: &[Place], consumer: &Place) {
    // One at a time: their timing bars assume the machine's two cores are
    // not shared with another run of this file.
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut sensor = places[0]
        .command(env!("CARGO_BIN_EXE_plant-sensor"))
        .args(["--sched", SCHED])
        .spawn()
        .unwrap();
    let last = UPGRADES + 1;
    let mut cons = consumer
        .command(env!("CARGO_BIN_EXE_plant-consumer"))
        .args(["--until-build", &last.to_string(), "--after", "50"])
        .args(["--sched", SCHED])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cons_out = BufReader::new(cons.stdout.take().unwrap()).lines();
    assert_eq!(cons_out.next().unwrap().unwrap(), "READY");
    let mut old = controller(&places[0], 1, true);
    let line = running(&mut old);
    assert_eq!(field(&line, "cycle"), 1, "{line}");
    let mut starts = Vec::new();
    for build in 2..=last {
        // Let the running build run a while first.
        std::thread::sleep(Duration::from_millis(150));
        let at = &places[(build as usize - 1) % places.len()];
        let mut new = controller(at, build, false);
        let line = running(&mut new);
        starts.push(field(&line, "cycle"));
        // The old build hands over and ends by itself.
        let status = old.wait().unwrap();
        assert!(status.success(), "build {} failed", build - 1);
        old = new;
    }
    let result = cons_out
        .map_while(Result::ok)
        .find(|l| l.starts_with("RESULT "))
        .expect("the consumer's result");
    assert!(cons.wait().unwrap().success());
    let _ = old.kill();
    let _ = old.wait();
    let _ = sensor.kill();
    let _ = sensor.wait();
    println!("{result}");
    println!("first cycles of builds 2..={last}: {starts:?}");
    assert_eq!(field(&result, "lost"), 0, "{result}");
    assert_eq!(field(&result, "duplicated"), 0, "{result}");
    assert_eq!(field(&result, "reordered"), 0, "{result}");
    assert_eq!(field(&result, "reported_lost"), 0, "{result}");
    assert_eq!(
        field(&result, "commands"),
        field(&result, "last_cycle"),
        "{result}"
    );
    let builds: Vec<u64> = (1..=u64::from(last)).collect();
    let order = result.split("builds=").nth(1).unwrap();
    assert_eq!(
        order
            .split(',')
            .map(|b| b.parse().unwrap())
            .collect::<Vec<u64>>(),
        builds,
        "every build ran, in turn"
    );
    // Where one build gives way to the next, and anywhere else.
    let switch = field(&result, "max_switch_gap_us");
    assert!(
        switch <= PERIOD_MS * 1500,
        "a hand-over gap of {switch} us: {result}"
    );
    let gap = field(&result, "max_gap_us");
    assert!(gap <= PERIOD_MS * 1500, "a gap of {gap} us: {result}");
}

#[test]
fn twenty_upgrades_on_one_host_lose_and_repeat_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let _daemon = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
        socket: socket.clone(),
        ..tagwire_daemon::Config::default()
    })
    .unwrap();
    let here = || Place {
        socket: socket.clone(),
        netns: None,
    };
    upgrade_in_a_row(&[here()], &here());
}

#[test]
fn twenty_upgrades_each_onto_the_other_host_lose_and_repeat_nothing() {
    if let Some(reason) = tagwire_testkit::skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let site = tagwire_perf::remote::Site::new(3).unwrap();
    let at = |i: usize| Place {
        socket: site.socket(i),
        netns: Some(site.host(i).netns().to_owned()),
    };
    // Builds alternate between hosts 0 and 1; the consumer is on host 2.
    upgrade_in_a_row(&[at(0), at(1)], &at(2));
}
