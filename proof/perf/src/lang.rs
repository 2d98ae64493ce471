//! The language bindings measured beside Rust: `tagwire perf rtt --lang
//! rust,cpp,python` runs the same sender-based round trip with both ends
//! written in C++ (over the C ABI) or in Python (over pyo3), on the same
//! daemon and CPUs as the Rust one, interleaved with it.
//!
//! Each language has a *runner* program with one command line:
//!
//! ```text
//! RUNNER pong --socket S --data D --ack A
//!     echo every message on D back on A until a message "\xffSTOP"
//! RUNNER ping --socket S --data D --ack A --size N --rounds R --warmup W
//!     R timed round trips after W untimed ones; one JSON line on stdout:
//!     {"lang": "...", "size": N, "samples_ns": [...]}
//! ```
//!
//! The C++ runner is `tagwire-lang-cpp` (front/ffi/cpp/examples, built by
//! the CMake project); the Python one is `front/python/bench/tagwire_bench.py`
//! run by an interpreter that can `import tagwire`.

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
    /// "cpp" or "python".
    pub lang: String,
    /// The program and its leading arguments.
    pub command: Vec<OsString>,
}

/// The runner for `lang`, from `$TAGWIRE_CPP_RUNNER` / `$TAGWIRE_PYTHON`
/// or the places the builds put them (relative to the workspace `root`);
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
        other => Err(format!(
            "no runner for language {other} (rust, cpp, python)"
        )),
    }
}

/// What [`runner_main`] is asked to do.
#[derive(Debug, Clone)]
pub struct RunnerArgs {
    /// "ping" or "pong".
    pub role: String,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The tag pings go out on.
    pub data: String,
    /// The tag answers come back on.
    pub ack: String,
    /// Ping size, bytes.
    pub size: usize,
    /// Timed round trips.
    pub rounds: usize,
    /// Untimed round trips first.
    pub warmup: usize,
}

/// The Rust runner (`tagwire lang-runner`): the same protocol as the C++
/// and Python ones, so the three run in the same two-process shape.
pub fn runner_main(a: &RunnerArgs) -> anyhow::Result<()> {
    use tagwire::{Client, ClientOptions, Domain, Error, SubscribeOptions};
    let c = Client::with_options(ClientOptions {
        socket: a.socket.clone(),
        timeout: Duration::from_secs(5),
        autostart: false,
        name: "tagwire-lang-rust".into(),
    })?;
    c.create_tag(&a.data, Domain::Global)?;
    c.create_tag(&a.ack, Domain::Global)?;
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
        r => bail!("unknown runner role {r} (ping or pong)"),
    }
}

const STOP: &[u8] = b"\xffSTOP";

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
        let mut c = Command::new(&r.command[0]);
        c.args(&r.command[1..])
            .arg(role)
            .arg("--socket")
            .arg(&env.socket)
            .args(["--data", data, "--ack", ack]);
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

/// The `samples_ns` of the runner's JSON line.
fn parse_samples(stdout: &str, lang: &str) -> anyhow::Result<Vec<Duration>> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("the {lang} ping runner printed no JSON line"))?;
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("the {lang} runner's JSON: {line}"))?;
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
        assert!(e.contains("rust, cpp, python"), "{e}");
    }
}
