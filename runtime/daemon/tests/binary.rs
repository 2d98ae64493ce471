//! The `tagwired` binary's command line: only `--sched` and `--mlock`; it
//! refuses others instead of starting a daemon other than the one asked
//! for, and warns where it may not run its roles as asked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tagwired");

#[test]
fn tagwired_refuses_options_it_does_not_take_and_points_at_tagwire_daemon() {
    let out = Command::new(BIN)
        .args(["--node", "10.0.0.1"])
        .env("TAGWIRE_SOCKET", "/nonexistent/dir/tagwired.sock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument \"--node\""), "{err}");
    assert!(err.contains("tagwire daemon"), "{err}");
}

#[test]
fn tagwired_help_says_what_it_runs() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("usage: tagwired"), "{text}");
    assert!(text.contains("single-node"), "{text}");
}

/// `tagwired ARGS` on a socket in `dir`, as `uid`, until the drop; with
/// the policy of its `tagwired-local` thread and what it logged by then.
fn local_thread_of(
    dir: &std::path::Path,
    uid: u32,
    args: &[&str],
) -> (tagwire_wire::Sched, String) {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(BIN)
        .args(args)
        .env("TAGWIRE_SOCKET", dir.join(format!("d{uid}.sock")))
        .env("TAGWIRE_LOG", "info")
        .env_remove("TAGWIRE_SCHED")
        .uid(uid)
        .gid(uid)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    while !log.contains("tagwired listening") {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        log += &line;
    }
    let task = format!("/proc/{}/task", child.id());
    let mut seen = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.is_none() && std::time::Instant::now() < deadline {
        for e in std::fs::read_dir(&task).unwrap().flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == "tagwired-local" {
                let tid = e.file_name().to_str().unwrap().parse().unwrap();
                seen = tagwire_sched::of_thread(tagwire_sched::Tid(tid)).ok();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    (seen.expect("no tagwired-local thread"), log)
}

#[test]
fn tagwired_runs_its_roles_at_sched_and_warns_where_it_may_not() {
    if rustix::process::geteuid().as_raw() != 0 {
        println!("skipped: running tagwired as another user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let (at, log) = local_thread_of(dir.path(), 0, &["--sched", "local=fifo:10", "--mlock"]);
    assert_eq!(at, tagwire_wire::Sched::Fifo(10), "{log}");
    assert!(log.contains("memory locked"), "{log}");
    // `nobody` may not: a warning names the role and why, and it runs at
    // the default.
    let (at, log) = local_thread_of(dir.path(), 65534, &["--sched", "local=fifo:10", "--mlock"]);
    assert_eq!(at, tagwire_wire::Sched::default(), "{log}");
    assert!(
        log.contains("the local role runs at the default policy, not fifo:10"),
        "{log}"
    );
    assert!(log.contains("CAP_SYS_NICE"), "{log}");
    // (Unless this machine lets anyone lock any amount of memory.)
    let memlock = rustix::process::getrlimit(rustix::process::Resource::Memlock);
    if memlock.current.is_some() {
        assert!(
            log.contains("--mlock: the daemon runs with its memory unlocked"),
            "{log}"
        );
    }
    let out = Command::new(BIN)
        .args(["--sched", "local=fast"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo:P"));
}
