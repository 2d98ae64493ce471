//! # The bindings' test suites, from `cargo test`
//!
//! The C, C++, Python and Java bindings are tested in their own languages:
//! GoogleTest through `ctest` (front/ffi/cpp/tests, also built with
//! AddressSanitizer), pytest (front/python/tests, which also runs a C++, a
//! Python and a Rust program on one tag) and JUnit through Maven
//! (front/java, with a Java and a Rust program on one tag). This crate's
//! integration tests build them and run those suites, so the README's one
//! test command, `cargo test --workspace`, covers every language. Each
//! needs its toolchain (cmake and GoogleTest; python3 with venv and pip,
//! which fetch maturin, pytest and NumPy into `target/bindings/venv`; Maven
//! and a JDK 22+): without it the test prints `skipped:` and why, and
//! `.ci/run` installs what it can.
//!
//! The helpers here are shared by those tests.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Where the bindings' builds go (`target/bindings`, or under
/// `$CARGO_TARGET_DIR`).
pub fn build_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("bindings")
}

/// Why a suite cannot run here (a missing toolchain), printed as `skipped:`.
#[derive(Debug)]
pub struct Skip(pub String);

/// Runs a command, returning its output; a failure to start it is a `Skip`
/// naming the program.
pub fn run(cmd: &mut Command) -> Result<Output, Skip> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    cmd.output()
        .map_err(|e| Skip(format!("{prog} cannot run here: {e}")))
}

/// Output of a command as text, for failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Configures and builds the CMake project of front/ffi into
/// `target/bindings/<name>` (libtagwire_c and the CLI with cargo's dev
/// profile, the C++ tests and examples), with AddressSanitizer when `asan`.
/// Returns the build directory.
pub fn cmake_build(name: &str, asan: bool) -> Result<PathBuf, Skip> {
    let dir = build_root().join(name);
    let mut cfg = Command::new("cmake");
    cfg.arg("-S")
        .arg(root().join("front/ffi"))
        .arg("-B")
        .arg(&dir)
        .arg("-DTAGWIRE_CARGO_PROFILE=dev")
        .arg(format!(
            "-DTAGWIRE_ASAN={}",
            if asan { "ON" } else { "OFF" }
        ))
        .arg(format!(
            "-DCMAKE_BUILD_TYPE={}",
            if asan { "Debug" } else { "Release" }
        ));
    let out = run(&mut cfg)?;
    if !out.status.success() {
        let t = text(&out);
        if t.contains("GTest") {
            return Err(Skip(format!(
                "GoogleTest is not installed (apt-get install libgtest-dev): {}",
                t.lines().find(|l| l.contains("GTest")).unwrap_or_default()
            )));
        }
        panic!("cmake configure failed:\n{t}");
    }
    let out = run(Command::new("cmake").arg("--build").arg(&dir).arg("-j2"))?;
    assert!(
        out.status.success(),
        "cmake build failed:\n{}",
        failure(&out, &dir)
    );
    Ok(dir)
}

/// What a failed build printed, its end first (where the error is: a
/// cargo build's start is pages of `Compiling` lines), and the free space
/// where it built (a full disk fails any step).
pub fn failure(o: &Output, dir: &Path) -> String {
    let tail = |b: &[u8]| {
        let t = String::from_utf8_lossy(b);
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    let df = Command::new("df")
        .arg("-h")
        .arg(dir.parent().unwrap_or(dir))
        .output()
        .map_or_else(|e| format!("df: {e}"), |o| tail(&o.stdout));
    format!(
        "status {}\n--- the last 40 lines of stderr\n{}\n--- the last 40 lines of stdout\n{}\n--- free space\n{df}",
        o.status,
        tail(&o.stderr),
        tail(&o.stdout)
    )
}

/// Prints a skip the way the workspace's other optional tests do.
pub fn skipped(test: &str, s: &Skip) {
    println!("skipped: {test}: {}", s.0);
}
