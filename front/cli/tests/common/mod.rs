//! What the multi-host tests share: hosts from network namespaces
//! (proof/testkit) with one in-process daemon each, and clients of them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, NodeState};
use tagwire_daemon::{Config, Daemon, NetConfig};
use tagwire_testkit::{Host, Lan};

pub(crate) fn skip() -> bool {
    // `TAGWIRE_TEST_LOG=tagwire_daemon=debug` shows what the in-process
    // daemons and libraries log (to the test's captured output).
    if let Ok(filter) = std::env::var("TAGWIRE_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    match tagwire_testkit::skip_reason() {
        Some(r) => {
            println!("skipped: {r}");
            true
        }
        None => false,
    }
}

/// Polls `f` until it holds; fails the test after 20 s (a watchdog, not a bound
/// on how fast anything must be).
pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) struct Site {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) lan: Lan,
    /// The daemons' lease (short, so failures show quickly).
    pub(crate) lease: Duration,
    /// How long a table change waits for every live peer.
    pub(crate) apply_timeout: Duration,
    /// The topology file every daemon places `Proxy::Auto` proxies in.
    pub(crate) topology: Option<PathBuf>,
}

pub(crate) enum Find {
    List,
    Beacon,
}

impl Site {
    pub(crate) fn new(hosts: usize) -> Self {
        let lan = Lan::new(hosts).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let list: String = lan
            .hosts()
            .iter()
            .map(|h| format!("{} {}\n", h.name(), h.addr()))
            .collect();
        std::fs::write(dir.path().join("nodes"), list).unwrap();
        Site {
            dir,
            lan,
            lease: Duration::from_millis(1000),
            apply_timeout: Duration::from_millis(2000),
            topology: None,
        }
    }

    /// Gives every daemon started from now on a topology file: `body` (links
    /// and tags) after a `[[node]]` per host, named `h0`, `h1`, … with its
    /// address.
    pub(crate) fn set_topology(&mut self, body: &str) {
        let mut text = String::new();
        for (i, h) in self.lan.hosts().iter().enumerate() {
            text += &format!("[[node]]\nname = \"h{i}\"\naddress = \"{}\"\n", h.addr());
        }
        text += body;
        let path = self.dir.path().join("topology.toml");
        std::fs::write(&path, text).unwrap();
        self.topology = Some(path);
    }

    pub(crate) fn socket(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("h{i}.sock"))
    }

    pub(crate) fn config(&self, i: usize, find: &Find) -> Config {
        let h = self.lan.host(i);
        let mut net = NetConfig::new(h.addr().into());
        net.name = h.name().to_owned();
        net.lease = self.lease;
        net.apply_timeout = self.apply_timeout;
        match find {
            Find::List => {
                net.nodes_file = Some(self.dir.path().join("nodes"));
                net.discovery = None;
            }
            Find::Beacon => {
                if let Some(d) = net.discovery.as_mut() {
                    d.interval = Duration::from_millis(100);
                }
            }
        }
        Config {
            socket: self.socket(i),
            net: Some(net),
            topology: self.topology.clone(),
            ..Config::default()
        }
    }

    pub(crate) fn start(&self, i: usize, find: &Find) -> Daemon {
        start_in(self.lan.host(i), self.config(i, find))
    }

    pub(crate) fn client(&self, i: usize) -> Client {
        connect(&self.socket(i))
    }

    /// Starts a daemon on every host, connects a client to each, and waits
    /// until every daemon has every other one up.
    pub(crate) fn mesh(&self, find: &Find) -> (Vec<Daemon>, Vec<Client>) {
        let n = self.lan.hosts().len();
        let daemons = (0..n).map(|i| self.start(i, find)).collect();
        let clients: Vec<Client> = (0..n).map(|i| self.client(i)).collect();
        for c in &clients {
            wait_until("every daemon up with every peer", || up_peers(c) == n - 1);
        }
        (daemons, clients)
    }
}

pub(crate) fn start_in(host: &Host, cfg: Config) -> Daemon {
    host.spawn(move || Daemon::start(cfg))
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
}

/// Creates global tag `name` with a ring of `slots` slots of `slot_payload`
/// bytes: deep enough for a test whose subscribers read late or whose
/// publisher outruns a bottleneck.
pub(crate) fn deep_tag(c: &Client, name: &str, slots: u32, slot_payload: u32) {
    let ring = tagwire::RingParams {
        slots,
        slot_payload,
    };
    c.create_tag_with(name, tagwire::Domain::Global, ring)
        .unwrap();
}

pub(crate) fn connect(socket: &Path) -> Client {
    Client::with_options(ClientOptions {
        socket: socket.to_owned(),
        timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    })
    .unwrap()
}

pub(crate) fn up_peers(c: &Client) -> usize {
    c.nodes()
        .unwrap()
        .iter()
        .filter(|n| n.source != "self" && n.state == NodeState::Up)
        .count()
}

/// A node's table without its local tag ids: name → (senders, receivers).
pub(crate) type View = BTreeMap<String, (Vec<String>, Vec<String>)>;

pub(crate) fn view(c: &Client) -> View {
    c.tags()
        .unwrap()
        .into_iter()
        .map(|t| {
            let mut s: Vec<_> = t.senders.iter().map(|m| m.who.to_string()).collect();
            let mut r: Vec<_> = t.receivers.iter().map(|m| m.who.to_string()).collect();
            s.sort();
            r.sort();
            (t.name.to_string(), (s, r))
        })
        .collect()
}

/// Receives `n` messages or fails; returns them as (seq, sender, payload).
pub(crate) fn drain(sub: &mut tagwire::Subscriber, n: usize) -> Vec<(u64, String, Vec<u8>)> {
    let mut out = Vec::new();
    while out.len() < n {
        match sub.receive(Some(Duration::from_secs(10))) {
            Ok(m) => out.push((m.seq.0, m.sender.to_string(), m.payload.to_vec())),
            Err(e) => panic!("after {} of {n} messages: {e}", out.len()),
        }
    }
    out
}

/// The UDP payloads host `h` receives matching `filter` while `f` runs,
/// captured by tshark in `h`'s namespace; `None` (with a printed reason)
/// without tshark, after running `f` all the same.
pub(crate) fn captured(h: &Host, filter: &str, f: impl FnOnce()) -> Option<Vec<Vec<u8>>> {
    let rows = captured_fields(h, filter, &["data.data"], f)?;
    Some(
        rows.into_iter()
            .map(|r| hex(r[0].trim()))
            .filter(|p| !p.is_empty())
            .collect(),
    )
}

/// Bytes from tshark's hex (`0a1b…`).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// What [`captured`] captures, as tshark's `fields` (one row per packet,
/// one string per field, `-e` order).
pub(crate) fn captured_fields(
    h: &Host,
    filter: &str,
    fields: &[&str],
    f: impl FnOnce(),
) -> Option<Vec<Vec<String>>> {
    if std::process::Command::new("tshark")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped (the capture): tshark not found (Debian package tshark)");
        f();
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cap.pcapng");
    let mut cap = h
        .command("tshark")
        .args(["-i", "eth0", "-f", filter, "-w"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // tshark says "Capturing on 'eth0'" once the capture runs.
    let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("Capturing on") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(n > 0, "tshark stopped before capturing");
    }
    // The line can come a little before packets are captured.
    std::thread::sleep(Duration::from_secs(1));
    f();
    std::thread::sleep(Duration::from_millis(300));
    let pid = rustix::process::Pid::from_child(&cap);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    cap.wait().unwrap();
    let mut cmd = std::process::Command::new("tshark");
    cmd.arg("-r")
        .arg(&file)
        .args(["-T", "fields", "-E", "separator=|"]);
    for field in fields {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('|').map(str::to_owned).collect())
            .collect(),
    )
}

/// The node list of hosts `hosts` (a file in the site's directory).
pub(crate) fn node_list(site: &Site, hosts: &[usize]) -> PathBuf {
    let path = site.dir.path().join(format!("nodes-{hosts:?}"));
    let text: String = hosts
        .iter()
        .map(|&i| format!("h{i} {}\n", site.lan.host(i).addr()))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// Writes a key file (mode 0600) with `byte` repeated.
pub(crate) fn key_file(dir: &Path, name: &str, byte: u8) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        tagwire_daemon::DomainKey::from_bytes([byte; 32]).to_text(),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path
}

/// Sends `body` on a raw control connection and returns the answer.
pub(crate) fn ask(
    raw: &tagwire_unix::SeqPacket,
    id: u32,
    body: tagwire_wire::control::Request,
) -> tagwire_wire::control::Response {
    raw.send(
        &tagwire_wire::control::Message::Request { id, body }.encode(),
        None,
    )
    .unwrap();
    loop {
        let p = raw.recv(1 << 20).unwrap().expect("daemon answers");
        if let Ok(tagwire_wire::control::Message::Response { id: got, body }) =
            tagwire_wire::control::Message::decode(&p.data)
        {
            assert_eq!(got, id);
            return body;
        }
    }
}

/// A node's counter `name` in its rows of `kind` whose `who` contains
/// `who` (`""`: every one), summed.
pub(crate) fn counter(c: &Client, kind: tagwire::StatsKind, who: &str, name: &str) -> u64 {
    c.stats()
        .unwrap()
        .iter()
        .filter(|r| r.kind == kind && r.who.contains(who))
        .filter_map(|r| r.get(name))
        .sum()
}

/// Sends `datagrams` from `src` to `to`'s delivery port (run it in the
/// namespace of the host that has `src`).
pub(crate) fn send_from(src: std::net::Ipv4Addr, to: std::net::Ipv4Addr, datagrams: &[Vec<u8>]) {
    let s = std::net::UdpSocket::bind((src, 0)).unwrap();
    for d in datagrams {
        s.send_to(d, (to, tagwire_daemon::peers::DEFAULT_DELIVERY_PORT))
            .unwrap();
    }
}

/// Runs `tagwire ARGS --socket SOCKET`: whether it succeeded, and what it
/// printed (stdout, then stderr).
pub(crate) fn cli(socket: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwire"))
        .args(args)
        .arg("--socket")
        .arg(socket)
        .env("TAGWIRE_LOG", "error")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
