//! The `tagwired` binary: `tagwire daemon` under its own name, with the
//! same options (one definition), as the client library's autostart and
//! a system service run it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const TAGWIRED: &str = env!("CARGO_BIN_EXE_tagwired");
const TAGWIRE: &str = env!("CARGO_BIN_EXE_tagwire");

/// What `--help` prints from its `Options:` heading on (the usage line
/// and the description name the binary).
fn options_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let at = text.find("Options:").expect("an Options: heading");
    text[at..].to_owned()
}

#[test]
fn tagwired_takes_exactly_the_options_of_tagwire_daemon() {
    let mine = options_of(Command::new(TAGWIRED).arg("--help"));
    let theirs = options_of(Command::new(TAGWIRE).args(["daemon", "--help"]));
    // (A binary of its own also prints its version.)
    let version = "  -V, --version\n          Print version\n";
    assert!(mine.ends_with(version), "{mine}");
    assert_eq!(mine.replace(version, ""), theirs);
    for option in [
        "--node",
        "--nodes",
        "--key",
        "--policy",
        "--sched",
        "--mlock",
        "--dds-domain",
    ] {
        assert!(mine.contains(option), "{option} missing:\n{mine}");
    }
}

#[test]
fn tagwired_refuses_what_it_does_not_know_and_says_so() {
    let out = Command::new(TAGWIRED)
        .args(["--nod", "10.0.0.1"])
        .env("TAGWIRE_SOCKET", "/nonexistent/dir/tagwired.sock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument '--nod'"), "{err}");
    assert!(err.contains("--node"), "a suggestion: {err}");
    let out = Command::new(TAGWIRED)
        .args(["--sched", "local=fast"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo:P"));
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
    let mut child = Command::new(TAGWIRED)
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
}

/// Every setting the example service file names (commented out or not)
/// is an environment variable `tagwired` takes (`[env: NAME=]` in its
/// help), or the log filter: the example cannot drift from the options.
#[test]
fn the_example_service_settings_are_options_tagwired_takes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/service");
    let help = String::from_utf8(
        Command::new(TAGWIRED)
            .arg("--help")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let env = std::fs::read_to_string(dir.join("tagwired.env")).unwrap();
    let names: Vec<&str> = env
        .lines()
        .map(|l| l.trim_start_matches('#'))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| k.starts_with("TAGWIRE_"))
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        assert!(
            name == "TAGWIRE_LOG" || help.contains(&format!("[env: {name}=")),
            "{name} is no option of tagwired:\n{help}"
        );
    }
    let unit = std::fs::read_to_string(dir.join("tagwired.service")).unwrap();
    assert!(unit.contains("EnvironmentFile=-/etc/tagwire/tagwired.env"));
    assert!(unit.contains("ExecStart=/usr/local/bin/tagwired"));
}
