//! The C and C++ suites (GoogleTest, a C11 program, the installed CMake and
//! pkg-config package) through ctest, plain and under AddressSanitizer.

use tagwire_bindings_tests::{cmake_build, run, skipped, text};

/// One build at a time: the machine has two cores.
static ONE_BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ctest(name: &str, asan: bool) {
    let _one = ONE_BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let dir = match cmake_build(name, asan) {
        Ok(d) => d,
        Err(s) => return skipped(name, &s),
    };
    let out = run(std::process::Command::new("ctest")
        .arg("--test-dir")
        .arg(&dir)
        .args(["--output-on-failure", "-j2"]))
    .unwrap_or_else(|s| panic!("{}", s.0));
    let t = text(&out);
    assert!(out.status.success(), "ctest failed:\n{t}");
    assert!(
        t.contains("100% tests passed"),
        "ctest ran no tests, or not all passed:\n{t}"
    );
    let ran = t.lines().filter(|l| l.contains(" Passed ")).count();
    assert!(ran >= 20, "only {ran} C/C++ tests ran:\n{t}");
    println!(
        "{}",
        t.lines()
            .rev()
            .find(|l| l.contains("tests passed"))
            .unwrap_or_default()
    );
}

#[test]
fn the_c_and_cpp_suites_pass_under_ctest() {
    ctest("cmake-ffi", false);
}

#[test]
fn the_c_and_cpp_suites_pass_under_address_sanitizer() {
    ctest("cmake-ffi-asan", true);
}
