//! A peer program run beside tagwire (`ddsperf`, `tagwire-peers`): started
//! on a given CPU and in a given network namespace, its output collected,
//! and stopped (SIGTERM, then SIGKILL) when done or dropped.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// A running child whose stdout and stderr are collected; killed on drop.
pub(crate) struct Proc {
    child: Child,
    what: String,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

impl Proc {
    /// Starts `program` with `args` and `env`, pinned to `cpu` (all its
    /// threads), inside network namespace `netns` (`ip netns exec`).
    pub(crate) fn spawn(
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        cpu: Option<usize>,
        netns: Option<&str>,
    ) -> anyhow::Result<Proc> {
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cpu) = cpu {
            if cpu >= rustix::thread::CpuSet::MAX_CPU {
                bail!("cpu {cpu} out of range");
            }
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            use std::os::unix::process::CommandExt as _;
            // SAFETY: the hook only makes the sched_setaffinity system call
            // on a value prepared before fork; it neither allocates nor
            // takes locks, so it is safe to run between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
                });
            }
        }
        let what = format!("{} {}", program.display(), args.join(" "));
        let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
        let out = child.stdout.take().map(collect);
        let err = child.stderr.take().map(collect);
        Ok(Proc {
            child,
            what,
            out,
            err,
        })
    }

    /// The command line, for messages.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    /// Waits for exit up to `limit`; `None` if still running.
    pub(crate) fn wait_timeout(&mut self, limit: Duration) -> anyhow::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self
                .child
                .try_wait()
                .with_context(|| format!("waiting for {}", self.what))?
            {
                return Ok(Some(st));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM (lets the program flush and leave cleanly), then SIGKILL
    /// after 2 s.
    fn terminate(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = rustix::process::Pid::from_child(&self.child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            if let Ok(Some(_)) = self.wait_timeout(Duration::from_secs(2)) {
                return;
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// Terminates the child if needed and returns everything it printed,
    /// stdout then stderr.
    pub(crate) fn finish(&mut self) -> String {
        let (out, err) = self.finish_split();
        out + &err
    }

    /// [`Proc::finish`], stdout and stderr apart.
    pub(crate) fn finish_split(&mut self) -> (String, String) {
        self.terminate();
        let take =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        (take(self.out.take()), take(self.err.take()))
    }

    /// Waits up to `limit` for a successful exit; returns stdout, or an
    /// error with everything printed.
    pub(crate) fn output(mut self, limit: Duration) -> anyhow::Result<String> {
        let status = self.wait_timeout(limit)?;
        let (out, err) = self.finish_split();
        match status {
            Some(st) if st.success() => Ok(out),
            Some(st) => bail!("{} failed ({st}); output:\n{out}{err}", self.what),
            None => bail!("{} did not finish in time; output:\n{out}{err}", self.what),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
