//! The Python binding's pytest suite, in a venv under `target/bindings`:
//! pip brings maturin, pytest and NumPy, maturin builds the extension into
//! the venv, and pytest runs front/python/tests against this workspace's
//! `tagwire` daemon binary and the C++ runner (the cross-language test).
//! Then the wheel as a user gets it: `maturin build`, installed with pip
//! into a fresh venv without an index, imported away from this checkout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tagwire_bindings_tests::{build_root, cmake_build, root, run, skipped, text, Skip};

/// The tools' venv and front/python/target are shared: one test at a time.
static PYTHON: Mutex<()> = Mutex::new(());

/// The venv's python, made (and its tools installed) on first use.
fn venv() -> Result<PathBuf, Skip> {
    let dir = build_root().join("venv");
    let python = dir.join("bin/python");
    let marker = dir.join(".tagwire-tools");
    if !marker.is_file() {
        let out = run(Command::new("python3").arg("-m").arg("venv").arg(&dir))?;
        if !out.status.success() {
            return Err(Skip(format!(
                "python3 -m venv failed (apt-get install python3-venv): {}",
                text(&out)
            )));
        }
        let out = run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "maturin>=1.5,<2",
            "pytest",
            "numpy",
        ]))?;
        if !out.status.success() {
            return Err(Skip(format!(
                "pip could not install maturin, pytest and numpy (no PyPI here?): {}",
                text(&out)
            )));
        }
        std::fs::write(&marker, "maturin pytest numpy\n").map_err(|e| Skip(e.to_string()))?;
    }
    Ok(python)
}

fn cargo_build(args: &[&str]) {
    let out = run(Command::new(env!("CARGO"))
        .arg("build")
        .args(args)
        .current_dir(root()))
    .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(out.status.success(), "cargo build failed:\n{}", text(&out));
}

/// The cargo target directory.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

#[test]
fn the_python_suite_passes_under_pytest() {
    let _one = PYTHON.lock().unwrap_or_else(|e| e.into_inner());
    let python = match venv() {
        Ok(p) => p,
        Err(s) => return skipped("python", &s),
    };
    let venv_dir = python
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    // The extension, built against this checkout, into the venv.
    let maturin = venv_dir.join("bin/maturin");
    let out = run(Command::new(&maturin)
        .args(["develop", "-q", "--manifest-path"])
        .arg(root().join("front/python/Cargo.toml"))
        .env("VIRTUAL_ENV", &venv_dir)
        .env_remove("CONDA_PREFIX"))
    .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(
        out.status.success(),
        "maturin develop failed:\n{}",
        text(&out)
    );
    // The daemon the tests start, the hot-upgrade example's Rust programs
    // (its Python controller replaces them), and the C++ runner of the
    // cross-language test.
    cargo_build(&["-p", "tagwire-cli", "-p", "tagwire-example-hot-upgrade"]);
    let target = target_dir();
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"])
        .arg(root().join("front/python/tests"))
        .env("TAGWIRE_BIN", target.join("debug/tagwire"))
        .env("TAGWIRE_EXAMPLES", target.join("debug"))
        .current_dir(root());
    match cmake_build("cmake-ffi", false) {
        Ok(dir) => {
            pytest.env("TAGWIRE_CPP_RUNNER", dir.join("cpp/tagwire-lang-cpp"));
        }
        Err(s) => skipped("python: the C++ half of the cross-language test", &s),
    }
    let out = run(&mut pytest).unwrap_or_else(|s| panic!("{}", s.0));
    let t = text(&out);
    assert!(out.status.success(), "pytest failed:\n{t}");
    let summary = t
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_default()
        .to_string();
    println!("pytest: {summary}");
    let passed: usize = summary
        .split_whitespace()
        .zip(summary.split_whitespace().skip(1))
        .find(|(_, w)| w.starts_with("passed"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0);
    assert!(passed >= 40, "only {passed} Python tests passed:\n{t}");
    for test in ["cross_language", "hot_upgrade"] {
        assert!(
            !t.lines()
                .any(|l| l.starts_with("SKIPPED") && l.contains(test)),
            "the {test} test was skipped:\n{t}"
        );
    }
}

/// Checks, from a directory outside the checkout, that the installed
/// package is the wheel's (not this checkout's sources), has this
/// workspace's version and carries a message through a daemon.
const WHEEL_CHECK: &str = r#"
import os, sys, time, tagwire
assert "site-packages" in tagwire.__file__, tagwire.__file__
print("version", tagwire.__version__)
deadline = time.monotonic() + 10
while True:
    try:
        tw = tagwire.Client(socket=sys.argv[1])
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
with tw:
    tw.create_tag("/wheel/check")
    with tw.subscribe("/wheel/check") as sub, tw.publisher("/wheel/check") as pub:
        pub.send(b"from the wheel")
        m = sub.receive(5.0)
        print("got", bytes(m.payload).decode(), "from pid", m.sender.pid == os.getpid())
"#;

#[test]
fn the_wheel_installs_into_a_fresh_venv_without_an_index_and_works() {
    let _one = PYTHON.lock().unwrap_or_else(|e| e.into_inner());
    let name = "python wheel";
    let python = match venv() {
        Ok(p) => p,
        Err(s) => return skipped(name, &s),
    };
    let tools = python.parent().map(Path::to_path_buf).unwrap_or_default();
    let work = build_root().join("wheel-check");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("{}: {e}", work.display()));
    let wheels = work.join("wheels");
    let out = run(Command::new(tools.join("maturin"))
        .args(["build", "-q", "--manifest-path"])
        .arg(root().join("front/python/Cargo.toml"))
        .arg("--interpreter")
        .arg(&python)
        .arg("--out")
        .arg(&wheels)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX"))
    .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(
        out.status.success(),
        "maturin build failed:\n{}",
        text(&out)
    );
    let wheel: Vec<PathBuf> = std::fs::read_dir(&wheels)
        .unwrap_or_else(|e| panic!("{}: {e}", wheels.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheel.len(), 1, "one wheel expected in {}", wheels.display());
    let file = wheel[0]
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        file.starts_with(&format!("tagwire-{}-", env!("CARGO_PKG_VERSION"))),
        "the wheel's name does not carry the workspace's version: {file}"
    );

    // A fresh venv, from the system's python like a user's; no index, no
    // dependencies: the wheel alone must do.
    let fresh = work.join("venv");
    let out = run(Command::new("python3").arg("-m").arg("venv").arg(&fresh))
        .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(out.status.success(), "python3 -m venv:\n{}", text(&out));
    let fresh_python = fresh.join("bin/python");
    let out = run(Command::new(&fresh_python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(["--no-index", "--no-deps"])
        .arg(&wheel[0]))
    .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(
        out.status.success(),
        "pip install of the wheel failed:\n{}",
        text(&out)
    );

    cargo_build(&["-p", "tagwire-cli"]);
    let socket = work.join("d.sock");
    let mut daemon = Command::new(target_dir().join("debug/tagwire"))
        .arg("daemon")
        .env("TAGWIRE_SOCKET", &socket)
        .env("TAGWIRE_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("tagwire daemon: {e}"));
    let start = Instant::now();
    while !socket.exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(Command::new(&fresh_python)
        .arg("-c")
        .arg(WHEEL_CHECK)
        .arg(&socket)
        .current_dir(&work)
        .env_remove("PYTHONPATH")
        .env_remove("TAGWIRE_SOCKET"));
    let _ = daemon.kill();
    let _ = daemon.wait();
    let out = out.unwrap_or_else(|s| panic!("{}", s.0));
    let t = text(&out);
    assert!(out.status.success(), "the installed wheel failed:\n{t}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("version {}", env!("CARGO_PKG_VERSION"))),
        "{t}"
    );
    assert!(stdout.contains("got from the wheel from pid True"), "{t}");
    println!("python wheel: {file} installs with pip --no-index into a fresh venv and works");
    let _ = std::fs::remove_dir_all(&work);
}
