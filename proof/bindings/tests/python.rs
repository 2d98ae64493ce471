//! The Python binding's pytest suite, in a venv under `target/bindings`:
//! pip brings maturin, pytest and NumPy, maturin builds the extension into
//! the venv, and pytest runs front/python/tests against this workspace's
//! `tagwire` daemon binary and the C++ runner (the cross-language test).

use std::path::Path;
use std::process::Command;

use tagwire_bindings_tests::{build_root, cmake_build, root, run, skipped, text, Skip};

/// The venv's python, made (and its tools installed) on first use.
fn venv() -> Result<std::path::PathBuf, Skip> {
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

#[test]
fn the_python_suite_passes_under_pytest() {
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
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), std::path::PathBuf::from);
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
