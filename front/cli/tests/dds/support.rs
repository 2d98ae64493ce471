//! What the DDS interop tests share: child processes that die with the
//! test, a daemon with a DDS gateway, `ddsperf`, and a venv with Cyclone
//! DDS's Python binding.

#![allow(dead_code)]

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions};

pub(crate) struct Kill(pub(crate) Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn have_ddsperf() -> bool {
    let ok = Command::new("ddsperf")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        println!("skipped: ddsperf not found (Debian package cyclonedds-tools)");
    }
    ok
}

/// `ddsperf -i domain args…`, its standard output kept line by line.
pub(crate) fn ddsperf(domain: u32, args: &[&str]) -> (Kill, Arc<Mutex<Vec<String>>>) {
    spawn_lines(
        Command::new("ddsperf")
            .arg("-i")
            .arg(domain.to_string())
            .args(args)
            .stderr(Stdio::null()),
    )
}

/// Starts `cmd` with its standard output kept line by line.
pub(crate) fn spawn_lines(cmd: &mut Command) -> (Kill, Arc<Mutex<Vec<String>>>) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(l);
        }
    });
    (Kill(child), lines)
}

/// A daemon with a DDS gateway in `domain` mapping `map`, and a client of
/// it. (`ddsperf` counts only samples of participants whose USER_DATA says
/// they are ddsperf peers.)
pub(crate) fn daemon(domain: u32, map: &str) -> (tempfile::TempDir, Kill, Client) {
    let dir = tempfile::tempdir().unwrap();
    let socket: PathBuf = dir.path().join("tagwired.sock");
    let map_file = dir.path().join("dds.map");
    std::fs::write(&map_file, map).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tagwire"))
        .arg("daemon")
        .arg("--socket")
        .arg(&socket)
        .arg("--dds-domain")
        .arg(domain.to_string())
        .arg("--dds-map")
        .arg(&map_file)
        .arg("--dds-user-data")
        .arg(format!("DDSPerf:0:{}:tagwire", std::process::id()))
        .env("TAGWIRE_LOG", "info,tagwire_gateway=debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("daemon.log")).unwrap())
        .spawn()
        .unwrap();
    let child = Kill(child);
    let opts = ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    };
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(c) = Client::with_options(opts.clone()) {
            // The gateway has mapped its tags once each has its subscriber
            // (it creates a tag, then publishes and subscribes to it: a
            // message sent before the subscription would reach no one).
            if c.tags()
                .is_ok_and(|t| !t.is_empty() && t.iter().all(|s| !s.receivers.is_empty()))
            {
                return (dir, child, c);
            }
        }
        assert!(
            Instant::now() < until,
            "the daemon and its gateway did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A venv with Cyclone DDS's Python binding (`cyclonedds` from PyPI, whose
/// wheel carries the C library), made on first use under `target/`.
pub(crate) fn dds_python() -> Result<PathBuf, String> {
    static ONCE: Mutex<()> = Mutex::new(());
    let _one = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dds-venv");
    let python = dir.join("bin/python");
    let marker = dir.join(".tagwire-cyclonedds");
    if marker.is_file() {
        return Ok(python);
    }
    let out = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 -m venv failed (apt-get install python3-venv): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let out = Command::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(format!("cyclonedds=={CYCLONEDDS_PY}"))
        .output()
        .map_err(|e| format!("pip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "pip could not install cyclonedds {CYCLONEDDS_PY} (no PyPI here?): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::write(&marker, CYCLONEDDS_PY).map_err(|e| e.to_string())?;
    Ok(python)
}

/// [`dds_python`], or `None` with the reason printed.
pub(crate) fn python_or_skip() -> Option<PathBuf> {
    dds_python().map_err(|why| println!("skipped: {why}")).ok()
}

/// The Cyclone DDS Python binding the tests use (Cyclone DDS 11).
pub(crate) const CYCLONEDDS_PY: &str = "11.0.1";

/// An `Item` sample's text (`items.py`; CDR: id, then the string's
/// length, bytes, NUL).
pub(crate) fn text(payload: &[u8]) -> String {
    let len = u32::from_le_bytes(payload[8..12].try_into().unwrap()) as usize;
    String::from_utf8_lossy(&payload[12..12 + len - 1]).into_owned()
}

/// An `Item` sample in CDR (little-endian): `text`'s inverse.
pub(crate) fn item(id: i32, text: &str) -> Vec<u8> {
    let mut p = vec![0x00, 0x01, 0x00, 0x00];
    p.extend_from_slice(&id.to_le_bytes());
    p.extend_from_slice(&(text.len() as u32 + 1).to_le_bytes());
    p.extend_from_slice(text.as_bytes());
    p.push(0);
    while p.len() % 4 != 0 {
        p.push(0);
    }
    p
}

/// A daemon without a DDS gateway in a new directory, and a client of it
/// (a gateway may be started later: [`gateway`]).
pub(crate) fn plain_daemon() -> (tempfile::TempDir, Kill, Client) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let d = Kill(
        Command::new(env!("CARGO_BIN_EXE_tagwire"))
            .arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let opts = ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    };
    let until = Instant::now() + Duration::from_secs(10);
    let c = loop {
        if let Ok(c) = Client::with_options(opts.clone()) {
            break c;
        }
        assert!(Instant::now() < until, "no daemon");
        std::thread::sleep(Duration::from_millis(50));
    };
    (dir, d, c)
}

/// `tagwire dds-gateway` in `domain` with `map`, a client of the
/// [`plain_daemon`] in `dir`.
pub(crate) fn gateway(dir: &std::path::Path, domain: u32, map: &str) -> Kill {
    let file = dir.join("dds.map");
    std::fs::write(&file, map).unwrap();
    Kill(
        Command::new(env!("CARGO_BIN_EXE_tagwire"))
            .arg("dds-gateway")
            .arg("--domain")
            .arg(domain.to_string())
            .arg("--map")
            .arg(&file)
            .arg("--socket")
            .arg(dir.join("tagwired.sock"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}
