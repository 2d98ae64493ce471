//! Several real processes (the `tagwire` binary) against a real daemon process:
//! processes sharing a tag, processes killed with SIGKILL, the daemon killed and
//! restarted, and garbage on the daemon's socket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, Domain, Error, SubscribeOptions};

const BIN: &str = env!("CARGO_BIN_EXE_tagwire");
const T: Option<Duration> = Some(Duration::from_secs(10));

/// Kills its process on drop, so a failing test leaves nothing running.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    fn kill9(&mut self) {
        let _ = self.0.kill(); // std sends SIGKILL
        let _ = self.0.wait();
    }
}

struct Node {
    dir: tempfile::TempDir,
    daemon: Option<Proc>,
}

impl Node {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut n = Node { dir, daemon: None };
        n.start_daemon();
        n
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("tagwired.sock")
    }

    fn start_daemon(&mut self) {
        let child = Command::new(BIN)
            .args(["daemon", "--socket"])
            .arg(self.socket())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.daemon = Some(Proc(child));
        wait_until("daemon up", || Client::with_options(self.opts()).is_ok());
    }

    fn opts(&self) -> ClientOptions {
        ClientOptions {
            socket: self.socket(),
            autostart: false,
            ..ClientOptions::default()
        }
    }

    fn client(&self) -> Client {
        Client::with_options(self.opts()).unwrap()
    }

    fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("TAGWIRE_SOCKET", self.socket())
            .stderr(Stdio::null());
        c
    }
}

/// Runs a command to completion and fails the test with its stderr if it failed.
fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "watchdog: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The next response on a raw control connection (tag-table updates, which the
/// daemon broadcasts to every connection, are skipped).
/// The ring a grant's descriptors map (records, control and, for a
/// subscriber, its seat).
fn map(mut p: tagwire_unix::Packet) -> tagwire_shm::Ring {
    let records = tagwire_shm::Segment::open(p.fd.expect("the ring's records")).unwrap();
    let mut extra = std::mem::take(&mut p.extra).into_iter();
    let ctl =
        tagwire_shm::Segment::open(extra.next().expect("the ring's control segment")).unwrap();
    let ring = tagwire_shm::Ring::open(records, ctl).unwrap();
    match extra.next() {
        Some(seat) => ring.with_seat(tagwire_shm::Seat::from_fd(seat).unwrap()),
        None => ring,
    }
}

/// A raw control connection to the daemon at `socket`, as a hostile (or
/// old) client would open it.
fn raw_connect(socket: &Path) -> tagwire_unix::SeqPacket {
    let raw = tagwire_unix::SeqPacket::connect(socket).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw
}

/// Sends `body` on a raw connection; the answer, decoded, and its packet
/// (with the descriptors that came with it).
fn ask(
    raw: &tagwire_unix::SeqPacket,
    body: tagwire_wire::control::Request,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> (tagwire_wire::control::Message, tagwire_unix::Packet) {
    use tagwire_wire::control::Message;
    raw.send(&Message::Request { id: 1, body }.encode(), fd)
        .unwrap();
    let p = next_response(raw);
    (Message::decode(&p.data).unwrap(), p)
}

/// The grant in an answer (anything else fails the test).
fn opened(m: tagwire_wire::control::Message) -> tagwire_wire::control::TagOpened {
    use tagwire_wire::control::{Message, Response};
    match m {
        Message::Response {
            body: Response::TagOpened(o),
            ..
        } => o,
        other => panic!("expected TagOpened, got {other:?}"),
    }
}

/// A subscription to `name` as a raw client asks for it.
fn subscription(name: &str, lossless: bool) -> tagwire_wire::control::Request {
    tagwire_wire::control::Request::Subscribe {
        name: tagwire::TagName::new(name).unwrap(),
        depth: 8,
        qos: tagwire::ChannelQos::default(),
        lossless,
    }
}

fn next_response(raw: &tagwire_unix::SeqPacket) -> tagwire_unix::Packet {
    use tagwire_wire::control::Message;
    loop {
        let p = raw.recv(1 << 20).unwrap().expect("daemon answers");
        if let Ok(Message::Update(_)) = Message::decode(&p.data) {
            continue;
        }
        return p;
    }
}

fn parse_line(l: &str) -> Option<(u64, String)> {
    let seq = l
        .split_whitespace()
        .find_map(|w| w.strip_prefix("seq="))?
        .parse()
        .ok()?;
    let from = l
        .split_whitespace()
        .find_map(|w| w.strip_prefix("from="))?
        .to_string();
    Some((seq, from))
}

#[test]
fn several_publisher_and_subscriber_processes_share_one_tag() {
    let n = Node::new();
    let c = n.client();
    c.create_tag("/multi", Domain::Global).unwrap();
    let subs: Vec<Proc> = (0..3)
        .map(|_| {
            Proc(
                n.cli(&["sub", "/multi", "--count", "20"])
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    wait_until("3 subscribers", || {
        c.receivers("/multi").is_ok_and(|r| r.len() == 3)
    });
    let pubs: Vec<Proc> = (0..2)
        .map(|_| {
            Proc(
                n.cli(&["pub", "/multi", "--count", "10", "--rate", "500"])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let pub_pids: Vec<u32> = pubs.iter().map(|p| p.0.id()).collect();
    for mut s in subs {
        let out = BufReader::new(s.0.stdout.take().unwrap());
        let mut per_sender: std::collections::HashMap<String, Vec<u64>> = Default::default();
        let mut summary = String::new();
        for line in out.lines() {
            let line = line.unwrap();
            if line.starts_with("received ") {
                summary = line;
                continue;
            }
            let (seq, from) = parse_line(&line).expect("sub line has seq= and from=");
            per_sender.entry(from).or_default().push(seq);
        }
        assert_eq!(summary, "received 20 messages, lost 0");
        assert_eq!(per_sender.len(), 2, "both publishers seen: {per_sender:?}");
        for (from, seqs) in per_sender {
            let pid: u32 = from.split('@').next().unwrap().parse().unwrap();
            assert!(
                pub_pids.contains(&pid),
                "sender pid {pid} is a publisher process"
            );
            assert!(from.ends_with("@127.0.0.1"), "node address present: {from}");
            assert_eq!(seqs, (1..=10).collect::<Vec<_>>(), "in order, none lost");
        }
    }
}

#[test]
fn tagwire_sub_lossless_holds_a_flat_out_publisher_back_and_loses_nothing() {
    let n = Node::new();
    let c = n.client();
    let ring = tagwire::RingParams {
        slots: 8,
        slot_payload: 0,
    };
    c.create_tag_with("/keepall", Domain::Global, ring).unwrap();
    let mut lossless = Proc(
        n.cli(&[
            "sub",
            "/keepall",
            "--count",
            "3000",
            "--lossless",
            // (It ends at its count; the idle timeout only ends a failed run.)
            "--idle-timeout",
            "30",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // The control: a plain subscriber whose output nobody reads while the
    // publisher runs, so it stalls on a full pipe and is lapped.
    let mut plain = Proc(
        n.cli(&["sub", "/keepall", "--idle-timeout", "2"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = lossless.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map(Result::unwrap)
            .collect::<Vec<_>>()
    });
    wait_until("2 subscribers", || {
        c.receivers("/keepall").is_ok_and(|r| r.len() == 2)
    });
    run_ok(&mut n.cli(&["pub", "/keepall", "--count", "3000", "--rate", "0"]));
    let lines = reader.join().unwrap();
    assert_eq!(
        lines.last().map(String::as_str),
        Some("received 3000 messages, lost 0")
    );
    let seqs: Vec<u64> = lines
        .iter()
        .filter_map(|l| parse_line(l))
        .map(|(s, _)| s)
        .collect();
    assert_eq!(seqs, (1..=3000).collect::<Vec<_>>(), "all, in order");
    let mut text = String::new();
    plain
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let summary = text.lines().last().unwrap_or_default().to_string();
    assert!(
        summary.starts_with("received ") && !summary.ends_with("lost 0"),
        "the plain subscriber should have lost some: {summary}"
    );
}

#[test]
fn a_subscriber_killed_with_sigkill_neither_blocks_nor_crashes_the_publisher() {
    let n = Node::new();
    let c = n.client();
    c.create_tag("/k", Domain::Global).unwrap();
    let mut victim = Proc(
        n.cli(&["sub", "/k", "--depth", "4"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut alive = c
        .subscribe("/k", SubscribeOptions::default().depth(256))
        .unwrap();
    wait_until("both subscribed", || {
        c.receivers("/k").is_ok_and(|r| r.len() == 2)
    });
    let mut p = c.publisher("/k").unwrap();
    p.send(b"before").unwrap();
    victim.kill9();
    // Its rights are released by the daemon when the kernel closes its socket.
    wait_until("dead subscriber released", || {
        c.receivers("/k").is_ok_and(|r| r.len() == 1)
    });
    for i in 0..10_000u32 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    // The live subscriber (depth 256) lost the oldest, was told how many, and
    // then gets the newest 256 in order.
    assert_eq!(
        alive.receive(T),
        Err(Error::Overflowed { lost: 10_001 - 256 })
    );
    for i in 10_000 - 256..10_000u32 {
        assert_eq!(alive.receive(T).unwrap().payload, i.to_le_bytes());
    }
}

#[test]
fn a_publisher_killed_mid_stream_leaves_no_stale_state() {
    let n = Node::new();
    let c = n.client();
    c.create_tag("/p", Domain::Global).unwrap();
    let mut s = c
        .subscribe("/p", SubscribeOptions::default().depth(256))
        .unwrap();
    let mut victim = Proc(n.cli(&["pub", "/p", "--rate", "2000"]).spawn().unwrap());
    let victim_pid = victim.0.id();
    let first = loop {
        match s.receive(T) {
            Ok(m) => break m,
            Err(Error::Overflowed { .. }) => continue,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(first.sender.pid.0, victim_pid);
    victim.kill9();
    wait_until("dead publisher released", || {
        c.senders("/p").is_ok_and(|v| v.is_empty())
    });
    // Drain what it sent, then silence: a timeout, not an error.
    loop {
        match s.receive(Some(Duration::from_millis(300))) {
            Ok(m) => assert_eq!(m.sender.pid.0, victim_pid),
            Err(Error::Timeout) => break,
            Err(Error::Overflowed { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    let mut p2 = c.publisher("/p").unwrap();
    p2.send(b"fresh").unwrap();
    let m = s.receive(T).unwrap();
    assert_eq!(
        (m.payload.as_slice(), m.seq.0, m.sender.pid.0),
        (&b"fresh"[..], 1, std::process::id())
    );
}

#[test]
fn a_daemon_killed_and_restarted_gives_a_clear_error_then_clients_reregister() {
    let mut n = Node::new();
    let c = n.client();
    c.create_tag("/d", Domain::Global).unwrap();
    let mut p = c.publisher("/d").unwrap();
    let mut s = c.subscribe("/d", SubscribeOptions::default()).unwrap();
    n.daemon.as_mut().unwrap().kill9();
    wait_until("error while down", || {
        matches!(c.ping(), Err(Error::DaemonUnreachable { .. }))
    });
    let text = c.ping().unwrap_err().to_string();
    assert!(text.contains("tagwire daemon"), "{text}");
    // Steady-state sends keep working on the old segment meanwhile (no daemon needed).
    p.send(b"while down").unwrap();
    assert_eq!(s.receive(T).unwrap().payload, b"while down");
    n.start_daemon(); // removes the stale socket file the killed daemon left
    wait_until("re-registered", || {
        c.senders("/d").is_ok_and(|v| v.len() == 1) && c.receivers("/d").is_ok_and(|v| v.len() == 1)
    });
    p.send(b"after restart").unwrap();
    assert_eq!(s.receive(T).unwrap().payload, b"after restart");
}

#[test]
fn malformed_bytes_on_the_daemon_socket_are_rejected_without_harm() {
    use tagwire_wire::control::{Message, Response};
    let n = Node::new();
    let raw = tagwire_unix::SeqPacket::connect(&n.socket()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let valid = Message::Request {
        id: 7,
        body: tagwire_wire::control::Request::ListTags,
    }
    .encode();
    let mut garbage: Vec<Vec<u8>> = vec![
        vec![0xff; 3],
        vec![0x54, 0x57, 1, 200, 0, 0, 0, 0],
        valid[..5].to_vec(),
    ];
    let mut x = 12345u32;
    for len in [1usize, 8, 13, 64, 4000] {
        garbage.push(
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect(),
        );
    }
    for g in &garbage {
        raw.send(g, None).unwrap();
        let p = next_response(&raw);
        match Message::decode(&p.data).unwrap() {
            Message::Response {
                body: Response::Error { code, .. },
                ..
            } => {
                assert_eq!(code, tagwire_wire::control::ErrorCode::BadRequest)
            }
            other => panic!("expected an error answer, got {other:?}"),
        }
    }
    // The same connection still works, and so does everybody else.
    raw.send(&valid, None).unwrap();
    let p = next_response(&raw);
    assert!(matches!(
        Message::decode(&p.data).unwrap(),
        Message::Response {
            id: 7,
            body: Response::Tags { .. }
        }
    ));
    n.client().ping().unwrap();
}

#[test]
fn autostart_starts_a_daemon_when_none_answers() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("auto.sock");
    let out = run_ok(
        Command::new(BIN)
            .args(["tags"])
            .env("TAGWIRE_SOCKET", &socket)
            .env("TAGWIRE_AUTOSTART", "1")
            .env("TAGWIRE_DAEMON", BIN),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("TAG"));
    // Stop the daemon it started.
    let pid = daemon_pid(&socket);
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

fn daemon_pid(socket: &Path) -> u32 {
    let raw = tagwire_unix::SeqPacket::connect(socket).unwrap();
    let cred = raw.peer_cred().unwrap();
    cred.pid
}

#[test]
fn without_a_daemon_the_cli_says_how_to_start_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["tags"])
        .env("TAGWIRE_SOCKET", dir.path().join("none.sock"))
        .env_remove("TAGWIRE_AUTOSTART")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tagwire daemon") && err.contains("TAGWIRE_AUTOSTART"),
        "{err}"
    );
}

#[test]
fn a_daemon_given_a_bad_topology_refuses_to_start_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join("net.toml");
    std::fs::write(&topo, "[[node]]\nname = \"arm\"\naddress = \"not-an-ip\"\n").unwrap();
    let mut d = Proc(
        Command::new(BIN)
            .arg("daemon")
            .arg("--topology")
            .arg(&topo)
            .env("TAGWIRE_SOCKET", dir.path().join("d.sock"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut status = None;
    wait_until(
        "the daemon exits despite being given a bad topology",
        || {
            status = d.0.try_wait().unwrap();
            status.is_some()
        },
    );
    assert!(!status.unwrap().success());
    let mut err = String::new();
    d.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(
        err.contains("net.toml") && err.contains("\"arm\"") && err.contains("not an IP address"),
        "{err}"
    );
    assert!(!dir.path().join("d.sock").exists(), "no socket left behind");
}

#[test]
fn sigterm_stops_the_daemon_cleanly_and_removes_its_socket() {
    let mut n = Node::new();
    let socket = n.socket();
    let mut d = n.daemon.take().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(d.0.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = d.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "watchdog: daemon ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "clean exit: {status}");
    assert!(!socket.exists(), "socket file removed");
}

#[test]
fn a_lossless_subscription_holds_writers_back_from_the_moment_it_is_granted() {
    let n = Node::new();
    let c = n.client();
    let ring = tagwire::RingParams {
        slots: 8,
        slot_payload: 0,
    };
    c.create_tag_with("/held", Domain::Global, ring).unwrap();
    let mut publ = c.publisher("/held").unwrap();
    publ.set_send_timeout(Duration::from_millis(200));
    // A lossless subscription asked for on a raw connection: the client side
    // does nothing with it yet.
    let subscribe = |raw: &tagwire_unix::SeqPacket| {
        let (m, p) = ask(raw, subscription("/held", true), None);
        (opened(m), p)
    };
    let raw = raw_connect(&n.socket());
    let (granted, fd) = subscribe(&raw);
    let held = granted
        .gate
        .expect("the daemon holds a gate for a lossless subscriber");
    // Already held back: a ring's worth fits, then the publisher waits.
    for _ in 0..8 {
        publ.send(b"x").unwrap();
    }
    assert!(matches!(publ.send(b"x"), Err(Error::WindowFull { .. })));
    // The subscriber moves the gate on through its seat: the control
    // segment is read-only to it.
    let ring = map(fd);
    assert!(ring.control().is_read_only());
    assert_eq!(
        ring.adopt_gate(usize::from(held.index), held.pid).err(),
        Some(tagwire_shm::RingError::ReadOnly)
    );
    let gate = ring
        .seat_gate(usize::from(held.index))
        .expect("the held gate reads our seat");
    gate.advance(granted.start + 8);
    publ.send(b"y").unwrap();
    // A client that goes away: the daemon frees its gate.
    let raw2 = raw_connect(&n.socket());
    let (opened2, _fd2) = subscribe(&raw2);
    assert!(opened2.gate.is_some());
    drop(gate);
    drop(raw);
    // (Seven fit before the first gate; the eighth once the daemon has
    // seen the first client go, however long this machine takes.)
    for _ in 0..8 {
        wait_until("room for the next message", || publ.send(b"z").is_ok());
    }
    assert!(
        matches!(publ.send(b"z"), Err(Error::WindowFull { .. })),
        "the second subscription's gate holds"
    );
    drop(raw2);
    wait_until("the abandoned gate freed", || publ.send(b"w").is_ok());
}

#[test]
fn the_daemon_refuses_rights_a_client_does_not_hold() {
    use std::os::fd::AsFd;
    use tagwire_wire::control::{ErrorCode, Message, Request, Response};
    let n = Node::new();
    let c = n.client();
    c.create_tag("/guarded", Domain::Global).unwrap();
    let tag = c.tags().unwrap()[0].tag;
    let raw = tagwire_unix::SeqPacket::connect(&n.socket()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |req: Request, fd: Option<std::os::fd::BorrowedFd<'_>>| {
        raw.send(&Message::Request { id: 1, body: req }.encode(), fd)
            .unwrap();
        match Message::decode(&next_response(&raw).data).unwrap() {
            Message::Response {
                body: Response::Error { code, .. },
                ..
            } => code,
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    let memfd = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&memfd, 16).unwrap();
    // A large message on a tag we hold no send access to.
    assert_eq!(
        ask(
            Request::PutBlob {
                tag,
                len: 16,
                done: 0
            },
            Some(memfd.as_fd())
        ),
        ErrorCode::NoSendAccess
    );
    assert_eq!(
        ask(Request::ReleaseSendAccess { tag }, None),
        ErrorCode::NoSendAccess
    );
    assert_eq!(
        ask(Request::Unsubscribe { tag, seat: 0 }, None),
        ErrorCode::NotSubscribed
    );
    assert_eq!(
        ask(Request::GetBlob { tag, blob_id: 1 }, None),
        ErrorCode::NotSubscribed
    );
}

#[test]
fn a_subscriber_killed_while_asleep_does_not_leave_publishers_paying_wakeups() {
    use tagwire_wire::control::{Message, Request};
    let n = Node::new();
    let c = n.client();
    c.create_tag("/sleepy", Domain::Global).unwrap();
    // Map the tag's ring ourselves to watch its sleeper count.
    let raw = raw_connect(&n.socket());
    let name = tagwire_wire::TagName::new("/sleepy").unwrap();
    let (m, p) = ask(
        &raw,
        Request::GetSendAccess {
            name,
            qos: Default::default(),
        },
        None,
    );
    opened(m);
    let ring = map(p);
    // A subscriber process blocks in receive (asleep on the futex), then dies.
    let mut victim = Proc(
        n.cli(&["sub", "/sleepy"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Its seat comes to us, a writer of the tag: we see it asleep there.
    let seat = loop {
        let mut p = raw.recv(1 << 20).unwrap().expect("daemon sends");
        if let Ok(Message::Request {
            body: Request::Seat { .. },
            ..
        }) = Message::decode(&p.data)
        {
            let fd = p.fd.take().expect("the seat's descriptor");
            break tagwire_shm::Seat::from_fd(fd).unwrap();
        }
    };
    assert!(ring.add_seat(std::sync::Arc::new(seat)));
    wait_until("victim asleep", || ring.waiter_count() == 1);
    victim.kill9();
    wait_until("daemon released it and reset the count", || {
        c.receivers("/sleepy").is_ok_and(|r| r.is_empty()) && ring.waiter_count() == 0
    });
}

#[test]
fn the_readme_demo_runs_and_every_subscriber_gets_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(
        Command::new(BIN)
            .args(["demo", "--seconds", "1", "--rate", "500"])
            .env("TAGWIRE_SOCKET", dir.path().join("demo.sock")),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let done: Vec<&str> = text.lines().filter(|l| l.contains("received ")).collect();
    assert_eq!(done.len(), 3, "three subscriber summaries in {text}");
    for l in done {
        assert!(l.ends_with("received 500 messages, lost 0"), "{l}");
    }
    assert!(
        text.contains("latency p50="),
        "live latencies printed: {text}"
    );
}

#[test]
fn a_client_that_stops_reading_is_disconnected_and_others_carry_on() {
    let n = Node::new();
    let c = n.client();
    // A raw connection that never reads the updates the daemon pushes.
    let stuck = tagwire_unix::SeqPacket::connect(&n.socket()).unwrap();
    for i in 0..12_000 {
        let tag = format!("/churn/{i}");
        c.create_tag(&tag, Domain::Local).unwrap();
        c.destroy_tag(&tag).unwrap();
    }
    c.ping().unwrap();
    // 24 000 updates overflow its socket buffer plus its bounded outbox: the
    // daemon hung up on it after what those held.
    stuck
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut n_updates = 0u32;
    loop {
        match stuck.recv(1 << 16) {
            Ok(Some(_)) => n_updates += 1,
            Ok(None) => break,
            Err(e) => panic!(
                "expected the daemon to close the connection, got {e} after {n_updates} packets"
            ),
        }
    }
    assert!(
        n_updates < 24_000,
        "not every update was queued for it ({n_updates})"
    );
}

#[test]
fn the_history_admin_command_and_pull_work_from_the_cli() {
    let n = Node::new();
    let c = n.client();
    c.create_tag("/cli/hist", Domain::Global).unwrap();
    run_ok(&mut n.cli(&["history", "/cli/hist", "--depth", "5"]));
    run_ok(&mut n.cli(&["pub", "/cli/hist", "--count", "8", "--size", "16"]));
    let out = run_ok(&mut n.cli(&["pull", "/cli/hist", "--last", "3"]));
    let text = String::from_utf8_lossy(&out.stdout);
    let seqs: Vec<u64> = text
        .lines()
        .filter(|l| l.contains('@'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(seqs, vec![6, 7, 8], "{text}");
    assert!(text.contains("3 messages"), "{text}");
    let out = run_ok(&mut n.cli(&["pull", "/cli/hist", "--since", "1"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("5 messages"));
    // Without a history: a clear error naming the admin command.
    c.create_tag("/cli/none", Domain::Global).unwrap();
    let out = n
        .cli(&["pull", "/cli/none", "--last", "1"])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tagwire history"));
    // `pub --history N` creates the tag keeping its last N messages.
    run_ok(&mut n.cli(&["pub", "/cli/born", "--history", "4", "--count", "9"]));
    let out = run_ok(&mut n.cli(&["pull", "/cli/born", "--since", "0"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 messages"), "{text}");
}

#[test]
fn tagwire_stats_prints_every_subscribers_counters_as_tables_and_json() {
    let n = Node::new();
    let c = n.client();
    c.create_tag("/cli/stats", Domain::Global).unwrap();
    let mut sub = c
        .subscribe("/cli/stats", SubscribeOptions::default().lossless())
        .unwrap();
    run_ok(&mut n.cli(&["pub", "/cli/stats", "--count", "5", "--size", "16"]));
    for _ in 0..5 {
        sub.receive(Some(Duration::from_secs(5))).unwrap();
    }
    let out = run_ok(&mut n.cli(&["stats"]));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("/cli/stats") && l.contains("lossless"))
        .unwrap_or_else(|| panic!("no subscriber line in:\n{text}"));
    assert!(line.split_whitespace().any(|w| w == "5"), "{line}");
    assert!(
        text.contains("RECEIVED") && text.contains("FORWARD_LOST"),
        "{text}"
    );
    let out = run_ok(&mut n.cli(&["stats", "--json", "--tag", "/cli/stats"]));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sub_row = rows
        .iter()
        .find(|r| r["kind"] == "subscriber")
        .expect("a subscriber row");
    assert_eq!(sub_row["tag"], "/cli/stats");
    assert_eq!(sub_row["counters"]["received"], 5);
    assert_eq!(sub_row["counters"]["missing"], 0);
    let tag_row = rows.iter().find(|r| r["kind"] == "tag").expect("a tag row");
    assert_eq!(tag_row["counters"]["records"], 5);
}

/// A daemon limited to `n` descriptors (util-linux's prlimit, which
/// `.ci/run`'s Debian has), running, and the options of a client of it;
/// `None` (printed) without prlimit.
fn daemon_with_descriptors(n: u32) -> Option<(tempfile::TempDir, Proc, ClientOptions)> {
    if Command::new("prlimit").arg("--version").output().is_err() {
        println!("skipped: prlimit (util-linux) not found");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let daemon = Proc(
        Command::new("prlimit")
            .arg(format!("--nofile={n}:{n}"))
            .arg(BIN)
            .args(["daemon", "--socket"])
            .arg(&socket)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let opts = ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    };
    wait_until("daemon up", || Client::with_options(opts.clone()).is_ok());
    Some((dir, daemon, opts))
}

#[test]
fn large_messages_nobody_reads_do_not_take_the_daemons_descriptors() {
    // A daemon under a low descriptor limit (200), and a publisher of 400
    // large messages (each in a memfd the daemon keeps while its record
    // is in the ring: 256 slots) that nobody reads. Found by `tagwire perf
    // soak`: the daemon kept one descriptor per message until its table
    // was full, then refused the next message's memfd ("PutBlob needs the
    // message's memfd attached") and every new client (`accept` failed).
    // Now the oldest kept messages make room, and it keeps serving.
    let Some((_dir, _daemon, opts)) = daemon_with_descriptors(200) else {
        return;
    };
    let c = Client::with_options(opts.clone()).unwrap();
    c.create_tag("/big", Domain::Local).unwrap();
    let mut publ = c.publisher("/big").unwrap();
    let big = vec![7u8; 100_000];
    for i in 0..400 {
        if let Err(e) = publ.send(&big) {
            panic!("large message {i}: {e}");
        }
    }
    // A new client, a new tag, and the large tag's newest messages.
    let other = Client::with_options(opts).unwrap();
    other.create_tag("/small", Domain::Local).unwrap();
    let mut sub = other
        .subscribe("/big", SubscribeOptions::default())
        .unwrap();
    publ.send(&big).unwrap();
    assert_eq!(sub.receive(T).unwrap().payload.len(), big.len());
}

#[test]
fn a_daemon_short_of_descriptors_refuses_new_tags_and_keeps_serving() {
    // A daemon under a low descriptor limit (set with util-linux's prlimit,
    // which `.ci/run`'s Debian has): tags past its budget are refused with a
    // quota error, before their ring is made, and the tags it has keep
    // working for old and new clients.
    let Some((_dir, _daemon, opts)) = daemon_with_descriptors(160) else {
        return;
    };
    let c = Client::with_options(opts.clone()).unwrap();
    c.create_tag("/keep", Domain::Local).unwrap();
    let mut sub = c.subscribe("/keep", SubscribeOptions::default()).unwrap();
    let mut publ = c.publisher("/keep").unwrap();
    let mut made = 0;
    let err = loop {
        match c.create_tag(&format!("/many/{made}"), Domain::Local) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        assert!(made < 1000, "never refused");
    };
    assert!(
        matches!(&err, Error::Quota { what, limit } if what.contains("descriptors") && *limit == 160),
        "{err:?}"
    );
    assert!(made > 10, "only {made} tags before the refusal");
    // What exists still works, for this client and a new one.
    publ.send(b"still here").unwrap();
    assert_eq!(sub.receive(T).unwrap().payload, b"still here");
    let other = Client::with_options(opts).unwrap();
    let mut sub2 = other
        .subscribe("/keep", SubscribeOptions::default())
        .unwrap();
    publ.send(b"and here").unwrap();
    assert_eq!(sub2.receive(T).unwrap().payload, b"and here");
    println!("{made} tags, then: {err}");
}

#[test]
fn a_subscriber_gets_the_records_read_only_and_cannot_put_a_message_into_the_tag() {
    let n = Node::new();
    let c = n.client();
    c.create_tag("/guarded", Domain::Global).unwrap();
    let mut sub = c
        .subscribe("/guarded", SubscribeOptions::default())
        .unwrap();
    let mut publisher = c.publisher("/guarded").unwrap();
    // A subscription asked for on a raw connection, as a hostile client would.
    let raw = raw_connect(&n.socket());
    let (m, p) = ask(&raw, subscription("/guarded", false), None);
    opened(m);
    let records = p.fd.as_ref().expect("the ring's records");
    // The kernel refuses to map the records writable…
    let len = rustix::fs::fstat(records).unwrap().st_size as usize;
    // SAFETY: a fresh mapping attempt, expected to fail.
    let rw = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            records,
            0,
        )
    };
    assert_eq!(rw.err(), Some(rustix::io::Errno::ACCESS));
    // …or to write through the descriptor.
    assert!(rustix::io::write(records, b"forged").is_err());
    // Mapped as the library maps it: reading works, writing is refused.
    let ring = map(p);
    assert!(ring.is_read_only());
    assert_eq!(
        ring.publish(&[b"forged"]),
        Err(tagwire_shm::RingError::ReadOnly)
    );
    let mut cur = ring.cursor(8);
    publisher.send(b"real").unwrap();
    let m = sub.receive(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(m.payload, b"real");
    let mut out = Vec::new();
    assert_eq!(
        ring.read(&mut cur, &mut out),
        tagwire_shm::ReadOutcome::Record
    );
    assert!(out.ends_with(b"real"), "{out:?}");
    assert!(
        sub.receive(Some(Duration::from_millis(100))).is_err(),
        "something else reached the tag"
    );
}

#[test]
fn a_large_message_is_refused_unless_sealed_and_a_subscribers_copy_stays_unwritable() {
    use std::os::fd::AsFd;
    use tagwire_wire::control::{ErrorCode, Message, Request, Response};
    let n = Node::new();
    let c = n.client();
    c.create_tag("/big", Domain::Global).unwrap();
    let name = tagwire::TagName::new("/big").unwrap();
    let connect = || raw_connect(&n.socket());
    let publisher = connect();
    let (m, _) = ask(
        &publisher,
        Request::GetSendAccess {
            name: name.clone(),
            qos: Default::default(),
        },
        None,
    );
    let tag = opened(m).tag;
    let put = |fd: std::os::fd::BorrowedFd<'_>| {
        ask(
            &publisher,
            Request::PutBlob {
                tag,
                len: 64,
                done: 0,
            },
            Some(fd),
        )
        .0
    };
    // A memfd its publisher did not seal: whoever holds a writable
    // descriptor of it could change the message under its readers.
    let unsealed = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::io::write(&unsealed, &[7u8; 64]).unwrap();
    match put(unsealed.as_fd()) {
        Message::Response {
            body: Response::Error { code, message },
            ..
        } => assert!(
            code == ErrorCode::BadRequest && message.contains("sealed"),
            "{code:?}: {message}"
        ),
        m => panic!("an unsealed large message was taken: {m:?}"),
    }
    // Sealed as the library seals it: stored and shown to subscribers.
    let sealed = tagwire_unix::sealed_memfd("x", &[7u8; 64]).unwrap();
    let m = put(sealed.as_fd());
    let Message::Response {
        body: Response::BlobStored { blob_id },
        ..
    } = m
    else {
        panic!("{m:?}")
    };
    let subscriber = connect();
    let (m, _) = ask(
        &subscriber,
        Request::Subscribe {
            name,
            depth: 8,
            qos: tagwire::ChannelQos::default(),
            lossless: false,
        },
        None,
    );
    opened(m);
    let (m, p) = ask(&subscriber, Request::GetBlob { tag, blob_id }, None);
    assert!(
        matches!(
            m,
            Message::Response {
                body: Response::BlobFound { len: 64 },
                ..
            }
        ),
        "{m:?}"
    );
    let fd = p.fd.expect("the message's descriptor");
    assert!(rustix::io::pwrite(&fd, &[0u8; 16], 0).is_err(), "writable");
    // Reopened writable (root may open it; the seal still refuses writes).
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    if let Ok(rw) = rustix::fs::open(
        path.as_str(),
        rustix::fs::OFlags::RDWR,
        rustix::fs::Mode::empty(),
    ) {
        assert!(
            rustix::io::pwrite(&rw, &[0u8; 16], 0).is_err(),
            "reopened writable"
        );
    }
    let mut back = [0u8; 64];
    rustix::io::pread(&fd, &mut back, 0).unwrap();
    assert_eq!(back, [7u8; 64]);
}

#[test]
fn a_client_that_stops_writing_still_gets_the_answers_to_what_it_sent() {
    use tagwire_wire::control::{Message, Request, Response};
    let n = Node::new();
    let _c = n.client();
    let raw = tagwire_unix::SeqPacket::connect(&n.socket()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for id in 1..=3 {
        raw.send(
            &Message::Request {
                id,
                body: Request::Ping,
            }
            .encode(),
            None,
        )
        .unwrap();
    }
    rustix::net::shutdown(&raw, rustix::net::Shutdown::Write).unwrap();
    for id in 1..=3 {
        let p = next_response(&raw);
        assert!(
            matches!(
                Message::decode(&p.data).unwrap(),
                Message::Response {
                    id: got,
                    body: Response::Pong,
                } if got == id
            ),
            "answer {id}"
        );
    }
}

#[test]
fn a_hostile_subscriber_cannot_write_the_control_segment_and_its_seat_harms_only_itself() {
    use std::os::fd::AsFd;
    let n = Node::new();
    let c = n.client();
    let ring = tagwire::RingParams {
        slots: 8,
        slot_payload: 0,
    };
    c.create_tag_with("/ctl", Domain::Global, ring).unwrap();
    let mut sub = c.subscribe("/ctl", SubscribeOptions::default()).unwrap();
    let mut publ = c.publisher("/ctl").unwrap();
    publ.set_send_timeout(Duration::from_millis(200));
    // A subscription asked for on a raw connection, as a hostile client would.
    let raw = raw_connect(&n.socket());
    let (m, p) = ask(&raw, subscription("/ctl", false), None);
    opened(m);
    assert_eq!(p.extra.len(), 2, "the control segment and a seat");
    let hostile = map(p);
    // The control segment (doorbell, sleeper count, gates, send ticket)
    // cannot be mapped writable, nor written through its descriptor.
    let ctl = hostile.control();
    assert!(ctl.is_read_only());
    // SAFETY: a fresh mapping attempt, expected to fail.
    let rw = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            ctl.len(),
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            ctl.as_fd(),
            0,
        )
    };
    assert_eq!(rw.err(), Some(rustix::io::Errno::ACCESS));
    assert!(rustix::io::pwrite(ctl.as_fd(), &[0u8; 8], 128).is_err());
    // Its seat is writable, and it writes lies there: a sleeper count stuck
    // high and a gate position at the ring's start (seat layout: sleepers
    // at byte 68, gate position at 128).
    let seat = hostile.own_seat().expect("a seat of its own");
    // SAFETY: the seat is our own writable mapping of at least 256 bytes;
    // the offsets are 4- and 8-aligned.
    unsafe {
        let base = seat.segment().as_ptr();
        (*base.add(68).cast::<std::sync::atomic::AtomicU32>())
            .store(u32::MAX, std::sync::atomic::Ordering::SeqCst);
        (*base.add(128).cast::<std::sync::atomic::AtomicU64>())
            .store(1, std::sync::atomic::Ordering::SeqCst);
    }
    // No gate was linked to its seat (it is not lossless): the publisher is
    // not held back, whatever it writes.
    for i in 0..40u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    let _ = sub.purge();
    // An honest subscriber asleep in receive is still woken at once (a
    // wake-up taken away would leave it to its 200 ms periodic look, every
    // time: the median says which; one slow wake-up is this machine).
    let mut took = Vec::new();
    for _ in 0..5 {
        let t = std::thread::spawn(move || {
            let m = sub.receive(Some(Duration::from_secs(5))).unwrap();
            (Instant::now(), m.payload, sub)
        });
        std::thread::sleep(Duration::from_millis(300));
        let sent = Instant::now();
        publ.send(b"wake").unwrap();
        let (got, payload, back) = t.join().unwrap();
        sub = back;
        assert_eq!(payload, b"wake");
        took.push(got.duration_since(sent));
    }
    took.sort();
    assert!(took[2] < Duration::from_millis(100), "woken after {took:?}");
}
