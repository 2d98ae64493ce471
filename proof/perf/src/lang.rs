//! The language bindings measured beside Rust: `tagwire perf rtt --lang
//! rust,cpp,python,java` runs the same sender-based round trip with both
//! ends written in C++ (over the C ABI), in Python (over pyo3) or in Java
//! (the Foreign Function & Memory API over the C ABI), on the same daemon
//! and CPUs as the Rust one, interleaved with it; `tagwire perf table2`
//! runs the ORTE paper's Table 2 (a flat-out publisher and a lossless
//! subscriber) between the C, Java and Rust runners.
//!
//! Each language has a *runner* program with one command line:
//!
//! ```text
//! RUNNER pong --socket S --data D --ack A
//!     echo every message on D back on A until a message "\xffSTOP"
//! RUNNER ping --socket S --data D --ack A --size N --rounds R --warmup W
//!     R timed round trips after W untimed ones; one JSON line on stdout:
//!     {"lang": "...", "size": N, "samples_ns": [...]}
//! RUNNER sub-ints --socket S --data D --count N [--warmup W]
//!     a lossless subscriber waiting for N 4-byte little-endian integers
//!     0..N-1 (at the start of each message: the Rust and Python runners
//!     take longer messages); one JSON line (CLOCK_MONOTONIC nanoseconds):
//!     {"lang": "...", "first_ns": .., "last_ns": .., "received": N, "lost": 0}
//! RUNNER pub-ints --socket S --data D --count N [--warmup W] [--size B]
//!     once the tag has a receiver (a lossless subscriber holds writers
//!     back from the moment it is listed), sends 0..N-1 as
//!     4-byte little-endian integers flat out (a long send timeout), each
//!     padded with zeros to B bytes (Rust runner; default 4); one JSON line:
//!     {"lang": "...", "start_ns": .., "end_ns": ..}
//!     With --warmup W, sub-ints and pub-ints first send W integers to
//!     themselves through a private tag D/warmup-PID, untimed, before they
//!     subscribe to D or look for its receiver (the Java runner's JIT then
//!     runs compiled code in the timed part; the others do the same).
//! ```
//!
//! The C++ runner is `tagwire-lang-cpp` (front/ffi/cpp/examples, built by
//! the CMake project); the Python one is `front/python/bench/tagwire_bench.py`
//! run by an interpreter that can `import tagwire`; the Java one is
//! `dev.tagwire.bench.LangRunner` in the jar Maven builds under
//! front/java/target, run by a JDK 22+ (`$TAGWIRE_JAVA`, default the
//! Temurin 25 JDK in /usr/lib/jvm).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::workload::Env;

/// A language and how to start its runner.
#[derive(Debug, Clone)]
pub struct Runner {
    /// "rust", "cpp", "python" or "java".
    pub lang: String,
    /// The program and its leading arguments.
    pub command: Vec<OsString>,
}

/// The runner for `lang`, from `$TAGWIRE_CPP_RUNNER` / `$TAGWIRE_PYTHON` /
/// `$TAGWIRE_JAVA` or the places the builds put them (relative to the workspace `root`);
/// `Err` says why it cannot run, for the table's skipped row.
pub fn find(lang: &str, root: &Path) -> Result<Runner, String> {
    match lang {
        "rust" => std::env::current_exe()
            .map(|exe| Runner {
                lang: "rust".into(),
                command: vec![exe.into(), "lang-runner".into()],
            })
            .map_err(|e| format!("no Rust runner: {e}")),
        "cpp" => {
            let candidates: Vec<PathBuf> = std::env::var_os("TAGWIRE_CPP_RUNNER")
                .map(PathBuf::from)
                .into_iter()
                // The release build (the tests' builds use cargo's dev profile).
                .chain([root.join("target/cmake-ffi/cpp/tagwire-lang-cpp")])
                .collect();
            candidates
                .iter()
                .find(|p| p.is_file())
                .map(|p| Runner {
                    lang: "cpp".into(),
                    command: vec![p.clone().into()],
                })
                .ok_or_else(|| {
                    "no C++ runner: build it with `cmake -S front/ffi -B target/cmake-ffi -DCMAKE_BUILD_TYPE=Release && \
                     cmake --build target/cmake-ffi` (or set TAGWIRE_CPP_RUNNER)"
                        .to_string()
                })
        }
        "python" => {
            let python = std::env::var_os("TAGWIRE_PYTHON").unwrap_or_else(|| "python3".into());
            let script = root.join("front/python/bench/tagwire_bench.py");
            if !script.is_file() {
                return Err(format!("no Python runner at {}", script.display()));
            }
            let ok = Command::new(&python)
                .args(["-c", "import tagwire"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(format!(
                    "{} cannot import tagwire: `pip install ./front/python` (or set TAGWIRE_PYTHON)",
                    Path::new(&python).display()
                ));
            }
            Ok(Runner {
                lang: "python".into(),
                command: vec![python, script.into()],
            })
        }
        "java" => java_runner(root),
        other => Err(format!(
            "no runner for language {other} (rust, cpp, python, java)"
        )),
    }
}

/// The JDK that runs the Java runner when `$TAGWIRE_JAVA` is not set.
pub const DEFAULT_JAVA: &str = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java";

/// The Java runner: a JDK 22+ and the jar Maven built under front/java/target.
fn java_runner(root: &Path) -> Result<Runner, String> {
    let java =
        std::env::var_os("TAGWIRE_JAVA").map_or_else(|| PathBuf::from(DEFAULT_JAVA), PathBuf::from);
    let out = Command::new(&java)
        .arg("-version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "no Java runner: {} cannot run ({e}); install a JDK 22+ or set TAGWIRE_JAVA",
                java.display()
            )
        })?;
    let version = String::from_utf8_lossy(&out.stderr).into_owned();
    match java_major(&version) {
        Some(v) if v >= 22 => {}
        found => {
            return Err(format!(
                "no Java runner: {} is Java {}, the binding needs 22+ (set TAGWIRE_JAVA)",
                java.display(),
                found.map_or_else(|| "?".to_string(), |v| v.to_string())
            ))
        }
    }
    let jar = java_jar(&root.join("front/java/target")).ok_or_else(|| {
        "no Java runner jar: build it with `cd front/java && JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 \
         mvn -q package -DskipTests`"
            .to_string()
    })?;
    let mut command: Vec<OsString> = vec![java.into(), "--enable-native-access=ALL-UNNAMED".into()];
    // The library next to the release CLI, unless the environment names one.
    let lib = root.join("target/release/libtagwire_c.so");
    if std::env::var_os("TAGWIRE_LIBRARY").is_none() && lib.is_file() {
        let mut d = OsString::from("-Dtagwire.library=");
        d.push(&lib);
        command.push(d);
    }
    command.extend([
        "-cp".into(),
        jar.into(),
        "dev.tagwire.bench.LangRunner".into(),
    ]);
    Ok(Runner {
        lang: "java".into(),
        command,
    })
}

/// The major version in `java -version`'s output (`openjdk version "25.0.1"`,
/// `"1.8.0_402"` is 8).
fn java_major(version: &str) -> Option<u32> {
    let quoted = version.split('"').nth(1)?;
    let mut parts = quoted.split(['.', '-', '+', '_']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        return parts.next()?.parse().ok();
    }
    Some(first)
}

/// The binding's jar in Maven's target directory (not its sources or tests).
fn java_jar(target: &Path) -> Option<PathBuf> {
    let mut jars: Vec<PathBuf> = std::fs::read_dir(target)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("tagwire-")
                    && n.ends_with(".jar")
                    && !n.ends_with("-sources.jar")
                    && !n.ends_with("-javadoc.jar")
                    && !n.ends_with("-tests.jar")
            })
        })
        .collect();
    jars.sort();
    jars.pop()
}

/// What [`runner_main`] is asked to do.
#[derive(Debug, Clone)]
pub struct RunnerArgs {
    /// "ping", "pong", "sub-ints" or "pub-ints".
    pub role: String,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The tag pings go out on.
    pub data: String,
    /// The tag answers come back on (ping and pong).
    pub ack: String,
    /// Ping size, bytes.
    pub size: usize,
    /// Timed round trips.
    pub rounds: usize,
    /// Untimed round trips first.
    pub warmup: usize,
    /// Integers sent or awaited (sub-ints and pub-ints).
    pub count: u64,
}

/// The Rust runner (`tagwire lang-runner`): the same protocol as the C++,
/// Python and Java ones, so they all run in the same two-process shape.
pub fn runner_main(a: &RunnerArgs) -> anyhow::Result<()> {
    use tagwire::{Client, ClientOptions, Domain, Error, SubscribeOptions};
    let c = Client::with_options(ClientOptions {
        socket: a.socket.clone(),
        timeout: Duration::from_secs(5),
        autostart: false,
        name: "tagwire-lang-rust".into(),
    })?;
    c.create_tag(&a.data, Domain::Global)?;
    if a.role == "ping" || a.role == "pong" {
        c.create_tag(&a.ack, Domain::Global)?;
    }
    match a.role.as_str() {
        "pong" => {
            let mut sub = c.subscribe(&a.data, SubscribeOptions::default())?;
            let mut publ = c.publisher(&a.ack)?;
            let mut buf = Vec::with_capacity(1 << 20);
            loop {
                match sub.receive_into(Some(Duration::from_secs(60)), &mut buf) {
                    Ok(_) if buf == STOP => return Ok(()),
                    Ok(_) => {
                        publ.send(&buf)?;
                    }
                    Err(Error::Overflowed { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        "ping" => {
            let mut sub = c.subscribe(&a.ack, SubscribeOptions::default().depth(256))?;
            let mut publ = c.publisher(&a.data)?;
            let t0 = std::time::Instant::now();
            while c.senders(&a.ack)?.is_empty() {
                anyhow::ensure!(t0.elapsed() < Duration::from_secs(20), "no pong came up");
                std::thread::sleep(Duration::from_millis(5));
            }
            let payload = vec![0x5au8; a.size];
            let mut buf = Vec::with_capacity(a.size + 64);
            let mut samples = Vec::with_capacity(a.rounds);
            for i in 0..a.warmup + a.rounds {
                let t = std::time::Instant::now();
                publ.send(&payload)?;
                sub.receive_into(Some(Duration::from_secs(10)), &mut buf)?;
                if i >= a.warmup {
                    samples.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
                }
            }
            publ.send(STOP)?;
            let line = serde_json::json!({"lang": "rust", "size": a.size, "samples_ns": samples});
            println!("{line}");
            Ok(())
        }
        "sub-ints" => {
            warm_up(&c, &a.data, a.warmup as u64)?;
            let mut sub = c.subscribe(&a.data, SubscribeOptions::default().lossless())?;
            let mut buf = Vec::with_capacity(64);
            let (mut first, mut last) = (0u64, 0u64);
            for n in 0..a.count {
                receive_int(&mut sub, &mut buf, n)?;
                let t = monotonic_ns();
                if n == 0 {
                    first = t;
                }
                last = t;
            }
            let line = serde_json::json!({"lang": "rust", "first_ns": first, "last_ns": last,
                "received": a.count, "lost": sub.lost()});
            println!("{line}");
            Ok(())
        }
        "pub-ints" => {
            warm_up(&c, &a.data, a.warmup as u64)?;
            let mut publ = c.publisher(&a.data)?;
            publ.set_send_timeout(Duration::from_secs(60));
            let t0 = std::time::Instant::now();
            while c.receivers(&a.data)?.is_empty() {
                anyhow::ensure!(
                    t0.elapsed() < Duration::from_secs(30),
                    "no receiver came up"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            // The integer, then zeros up to --size (4 and up).
            let mut msg = vec![0u8; a.size.max(4)];
            let start = monotonic_ns();
            for n in 0..a.count {
                msg[..4].copy_from_slice(&(n as u32).to_le_bytes());
                publ.send(&msg)?;
            }
            let end = monotonic_ns();
            let line = serde_json::json!({"lang": "rust", "start_ns": start, "end_ns": end});
            println!("{line}");
            Ok(())
        }
        r => bail!("unknown runner role {r} (ping, pong, sub-ints or pub-ints)"),
    }
}

/// Receives the 4-byte little-endian integer `n` (at the start of a
/// message of `--size` bytes).
fn receive_int(sub: &mut tagwire::Subscriber, buf: &mut Vec<u8>, n: u64) -> anyhow::Result<()> {
    sub.receive_into(Some(Duration::from_secs(60)), buf)?;
    let v = buf
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes);
    anyhow::ensure!(
        v == Some(n as u32),
        "expected integer {n}, got {v:?} ({} bytes)",
        buf.len()
    );
    Ok(())
}

/// Sends `n` integers to itself through a private tag, untimed.
fn warm_up(c: &tagwire::Client, data: &str, n: u64) -> anyhow::Result<()> {
    use tagwire::{Domain, SubscribeOptions};
    if n == 0 {
        return Ok(());
    }
    let tag = format!("{data}/warmup-{}", std::process::id());
    c.create_tag(&tag, Domain::Local)?;
    let result = (|| -> anyhow::Result<()> {
        let mut sub = c.subscribe(&tag, SubscribeOptions::default().lossless())?;
        let mut publ = c.publisher(&tag)?;
        let mut buf = Vec::with_capacity(64);
        for i in 0..n {
            publ.send(&(i as u32).to_le_bytes())?;
            receive_int(&mut sub, &mut buf, i)?;
        }
        Ok(())
    })();
    let _ = c.destroy_tag(&tag);
    result
}

/// CLOCK_MONOTONIC in nanoseconds: the clock the C++ (steady_clock) and Java
/// (System.nanoTime) runners read, so times compare across processes.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

const STOP: &[u8] = b"\xffSTOP";

impl Runner {
    /// The runner in `role` on `env`'s daemon, pinned to `cpu` if given;
    /// the caller adds the role's arguments.
    pub(crate) fn command(&self, role: &str, env: &Env, cpu: Option<usize>) -> Command {
        let mut c = Command::new(&self.command[0]);
        c.args(&self.command[1..])
            .arg(role)
            .arg("--socket")
            .arg(&env.socket);
        if let Some(cpu) = cpu {
            // SAFETY: only sched_setaffinity (a system call) runs between
            // fork and exec.
            unsafe {
                c.pre_exec(move || {
                    crate::raw::pin_current_thread(cpu).map_err(std::io::Error::other)
                });
            }
        }
        c
    }
}

/// Kills a runner left behind by an error.
struct Reaped(Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One repetition: the runner's ping and pong processes on the sender's
/// and the receiver's CPU, `iters` timed round trips of `size` bytes.
pub fn rtt(
    env: &Env,
    r: &Runner,
    size: usize,
    iters: usize,
    warmup: usize,
) -> anyhow::Result<Vec<Duration>> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = format!("/perf/{}/lang-{}{n}", std::process::id(), r.lang);
    let (data, ack) = (format!("{base}/data"), format!("{base}/ack"));
    // The tags as Rust's round trip makes them (the runners' own create is
    // then a no-op), gone afterwards.
    let c = tagwire::Client::with_options(tagwire::ClientOptions {
        socket: env.socket.clone(),
        timeout: Duration::from_secs(5),
        autostart: false,
        name: "tagwire-perf".into(),
    })?;
    c.create_tag(&data, env.domain())?;
    c.create_tag(&ack, env.domain())?;
    let result = rtt_on(env, r, &data, &ack, size, iters, warmup);
    let _ = c.destroy_tag(&data);
    let _ = c.destroy_tag(&ack);
    result
}

fn rtt_on(
    env: &Env,
    r: &Runner,
    data: &str,
    ack: &str,
    size: usize,
    iters: usize,
    warmup: usize,
) -> anyhow::Result<Vec<Duration>> {
    let common = |role: &str, cpu: Option<usize>| {
        let mut c = r.command(role, env, cpu);
        c.args(["--data", data, "--ack", ack]);
        c
    };
    let pong = common("pong", env.cpus.map(|c| c.1))
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting the {} pong runner", r.lang))?;
    let mut pong = Reaped(Some(pong));
    let out = common("ping", env.cpus.map(|c| c.0))
        .args(["--size", &size.to_string()])
        .args(["--rounds", &iters.to_string()])
        .args(["--warmup", &warmup.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running the {} ping runner", r.lang))?;
    if !out.status.success() {
        bail!("the {} ping runner failed ({})", r.lang, out.status);
    }
    // The ping sent STOP: the pong ends by itself.
    if let Some(mut c) = pong.0.take() {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while c.try_wait()?.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        pong.0 = Some(c);
    }
    parse_samples(&String::from_utf8_lossy(&out.stdout), &r.lang)
}

/// The last JSON line a runner printed.
pub(crate) fn json_line(stdout: &str, lang: &str) -> anyhow::Result<serde_json::Value> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("the {lang} runner printed no JSON line"))?;
    serde_json::from_str(line).with_context(|| format!("the {lang} runner's JSON: {line}"))
}

/// The `samples_ns` of the runner's JSON line.
fn parse_samples(stdout: &str, lang: &str) -> anyhow::Result<Vec<Duration>> {
    let v = json_line(stdout, lang)?;
    let samples = v
        .get("samples_ns")
        .and_then(|s| s.as_array())
        .with_context(|| format!("no samples_ns in the {lang} runner's JSON"))?;
    samples
        .iter()
        .map(|x| {
            x.as_u64()
                .map(Duration::from_nanos)
                .with_context(|| format!("a sample of the {lang} runner is not a count of ns: {x}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runners_json_line_gives_its_samples() {
        let out = "starting\n{\"lang\":\"cpp\",\"size\":256,\"samples_ns\":[1000,2500]}\n";
        let d = parse_samples(out, "cpp").unwrap();
        assert_eq!(
            d,
            vec![Duration::from_nanos(1000), Duration::from_nanos(2500)]
        );
        assert!(parse_samples("nothing", "cpp").is_err());
        assert!(parse_samples("{\"samples_ns\":[-1]}", "cpp").is_err());
    }

    #[test]
    fn an_unknown_language_says_which_are_known() {
        let e = find("cobol", Path::new(".")).unwrap_err();
        assert!(e.contains("rust, cpp, python, java"), "{e}");
    }

    #[test]
    fn java_versions_are_read_from_java_dash_version() {
        assert_eq!(
            java_major("openjdk version \"25.0.1\" 2025-10-21 LTS"),
            Some(25)
        );
        assert_eq!(
            java_major("openjdk version \"17.0.15\" 2025-04-15"),
            Some(17)
        );
        assert_eq!(java_major("java version \"1.8.0_402\""), Some(8));
        assert_eq!(java_major("openjdk version \"22-ea\""), Some(22));
        assert_eq!(java_major("nothing"), None);
    }

    #[test]
    fn the_java_jar_is_the_binding_not_its_sources() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(java_jar(d.path()), None);
        for n in [
            "tagwire-0.2.0-sources.jar",
            "tagwire-0.2.0.jar",
            "other.jar",
        ] {
            std::fs::write(d.path().join(n), b"").unwrap();
        }
        assert_eq!(java_jar(d.path()), Some(d.path().join("tagwire-0.2.0.jar")));
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
