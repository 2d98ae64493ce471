//! The Java binding's JUnit suite (front/java) through Maven: it builds
//! libtagwire_c and the CLI with cargo's dev profile, points the suite at
//! them (`TAGWIRE_LIBRARY`, `TAGWIRE_BIN`) and runs `mvn -q -B test` with a
//! JDK 22+ (`$TAGWIRE_JAVA_HOME`, `$JAVA_HOME`, else the Temurin 25 JDK in
//! /usr/lib/jvm). Without Maven or such a JDK it prints `skipped:` and why.
//! Then the jar as a user gets it (`mvn package`), copied away from this
//! checkout, finding `libtagwire_c` each way its README gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use tagwire_bindings_tests::{root, run, skipped, text, Skip};

/// Both tests build in front/java/target: one at a time.
static MAVEN: Mutex<()> = Mutex::new(());

/// Where the machine's JDK 25 is.
const TEMURIN: &str = "/usr/lib/jvm/temurin-25-jdk-amd64";

/// At least this many JUnit tests must run (the suite has more).
const MIN_TESTS: u64 = 30;

/// The major version of the JDK at `home` (from `java -version`).
fn jdk_major(home: &Path) -> Option<u32> {
    let out = Command::new(home.join("bin/java"))
        .arg("-version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let quoted = text.split('"').nth(1)?;
    let mut parts = quoted.split(['.', '-', '+', '_']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        return parts.next()?.parse().ok();
    }
    Some(first)
}

/// A JDK 22+ home and its major version.
fn jdk() -> Result<(PathBuf, u32), Skip> {
    let candidates: Vec<PathBuf> = ["TAGWIRE_JAVA_HOME", "JAVA_HOME"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain([PathBuf::from(TEMURIN)])
        .collect();
    let mut seen = Vec::new();
    for home in &candidates {
        match jdk_major(home) {
            Some(v) if v >= 22 => return Ok((home.clone(), v)),
            Some(v) => seen.push(format!("{} is Java {v}", home.display())),
            None => seen.push(format!("no java in {}", home.display())),
        }
    }
    Err(Skip(format!(
        "no JDK 22+ for the Java binding ({}); install one (e.g. Temurin 25) or set TAGWIRE_JAVA_HOME",
        seen.join(", ")
    )))
}

/// Totals of the surefire XML reports: (tests, failures, errors, skipped).
fn surefire_totals(dir: &Path) -> (u64, u64, u64, u64) {
    let mut t = (0, 0, 0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return t;
    };
    for e in entries.flatten() {
        let p = e.path();
        let is_report = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("TEST-") && n.ends_with(".xml"));
        if !is_report {
            continue;
        }
        let Ok(xml) = std::fs::read_to_string(&p) else {
            continue;
        };
        // The first element is <testsuite ... tests="N" errors="N" skipped="N" failures="N">.
        let Some(suite) = xml
            .find("<testsuite")
            .and_then(|i| xml[i..].find('>').map(|j| &xml[i..i + j]))
        else {
            continue;
        };
        let attr = |name: &str| -> u64 {
            let key = format!(" {name}=\"");
            suite
                .find(&key)
                .and_then(|i| suite[i + key.len()..].split('"').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        t.0 += attr("tests");
        t.1 += attr("failures");
        t.2 += attr("errors");
        t.3 += attr("skipped");
    }
    t
}

/// A JDK 22+ and Maven, with libtagwire_c and the CLI built (dev
/// profile): the JDK's home, its major version, and cargo's target/debug.
fn ready(name: &str) -> Option<(PathBuf, u32, PathBuf)> {
    let (home, major) = match jdk() {
        Ok(j) => j,
        Err(s) => {
            skipped(name, &s);
            return None;
        }
    };
    if let Err(s) = run(Command::new("mvn").arg("-v")) {
        skipped(name, &Skip(format!("{} (apt-get install maven)", s.0)));
        return None;
    }
    // libtagwire_c and the CLI the suite runs (its daemon, the Rust side of
    // the cross-language tests).
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = run(Command::new(cargo).current_dir(root()).args([
        "build",
        "-p",
        "tagwire-ffi",
        "-p",
        "tagwire-cli",
    ]))
    .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(out.status.success(), "cargo build failed:\n{}", text(&out));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("debug");
    Some((home, major, target))
}

/// `mvn -q -B GOALS` in front/java with the JDK at `home`.
fn maven(home: &Path, major: u32, goals: &[&str]) -> Command {
    let mut mvn = Command::new("mvn");
    mvn.current_dir(root().join("front/java"))
        .args(["-q", "-B"])
        .args(goals)
        .env("JAVA_HOME", home);
    if major >= 23 {
        // Maven's own Guava uses sun.misc.Unsafe: no warnings about it.
        mvn.env("MAVEN_OPTS", "--sun-misc-unsafe-memory-access=allow");
    }
    mvn
}

#[test]
fn the_java_suite_passes_under_maven() {
    let _one = MAVEN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((home, major, target)) = ready("java") else {
        return;
    };
    let project = root().join("front/java");
    let reports = project.join("target/surefire-reports");
    let _ = std::fs::remove_dir_all(&reports);
    let mut mvn = maven(&home, major, &["test"]);
    mvn.env("TAGWIRE_LIBRARY", target.join("libtagwire_c.so"))
        .env("TAGWIRE_BIN", target.join("tagwire"))
        .env_remove("TAGWIRE_SOCKET");
    let out = run(&mut mvn).unwrap_or_else(|s| panic!("{}", s.0));
    let t = text(&out);
    let (tests, failures, errors, skipped_tests) = surefire_totals(&reports);
    assert!(out.status.success(), "mvn test failed:\n{t}");
    assert_eq!((failures, errors), (0, 0), "Java tests failed:\n{t}");
    assert!(
        tests >= MIN_TESTS,
        "only {tests} Java tests ran (at least {MIN_TESTS} expected):\n{t}"
    );
    assert_eq!(
        skipped_tests, 0,
        "Java tests were skipped though the library and CLI were built:\n{t}"
    );
    println!(
        "java: {tests} JUnit tests passed under Maven with {} (Java {major})",
        home.display()
    );
}

/// A program of one source file on the jar's class path: the version
/// the library reports (loading the library is the first thing it does).
const PROBE: &str = "public class Probe { public static void main(String[] a) { \
System.out.println(\"version \" + dev.tagwire.Client.version()); } }";

#[test]
fn the_jar_finds_its_library_each_way_its_readme_gives() {
    let _one = MAVEN.lock().unwrap_or_else(|e| e.into_inner());
    let name = "java jar";
    let Some((home, major, target)) = ready(name) else {
        return;
    };
    let out = run(&mut maven(&home, major, &["package", "-DskipTests"]))
        .unwrap_or_else(|s| panic!("{}", s.0));
    assert!(out.status.success(), "mvn package failed:\n{}", text(&out));
    let version = env!("CARGO_PKG_VERSION");
    let jar = root().join(format!("front/java/target/tagwire-{version}.jar"));
    assert!(jar.is_file(), "no {} after mvn package", jar.display());

    // Away from the checkout (no workspace above it to fall back on): the
    // jar in one directory, the library in another.
    let work = std::env::temp_dir().join(format!("tagwire-jar-{}", std::process::id()));
    let (app, lib) = (work.join("app"), work.join("lib"));
    for d in [&app, &lib] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::copy(&jar, app.join("tagwire.jar")).unwrap();
    std::fs::copy(target.join("libtagwire_c.so"), lib.join("libtagwire_c.so")).unwrap();
    std::fs::write(app.join("Probe.java"), PROBE).unwrap();
    let so = lib.join("libtagwire_c.so");
    let probe = |cwd: &Path, props: &[String], env: Option<&Path>| -> Output {
        let mut java = Command::new(home.join("bin/java"));
        java.current_dir(cwd)
            .arg("--enable-native-access=ALL-UNNAMED")
            .args(props)
            .arg("-cp")
            .arg(app.join("tagwire.jar"))
            .arg(app.join("Probe.java"))
            .env_remove("TAGWIRE_LIBRARY")
            .env_remove("LD_LIBRARY_PATH");
        if let Some(p) = env {
            java.env("TAGWIRE_LIBRARY", p);
        }
        run(&mut java).unwrap_or_else(|s| panic!("{}", s.0))
    };
    let works = |how: &str, out: Output| {
        let t = text(&out);
        assert!(
            out.status.success(),
            "{how}: the jar did not load the library:\n{t}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("version {version}")),
            "{how}:\n{t}"
        );
    };
    let property = format!("-Dtagwire.library={}", so.display());
    works("-Dtagwire.library", probe(&work, &[property], None));
    works("TAGWIRE_LIBRARY", probe(&work, &[], Some(&so)));
    let path = format!("-Djava.library.path={}", lib.display());
    works("java.library.path", probe(&work, &[path], None));
    // Nothing given and no workspace: a clear error that says how.
    let out = probe(&work, &[], None);
    let t = text(&out);
    assert!(!out.status.success(), "loaded a library from nowhere:\n{t}");
    assert!(
        t.contains("libtagwire_c.so not found") && t.contains("-Dtagwire.library="),
        "the failure does not say how to point at the library:\n{t}"
    );
    let missing = format!("-Dtagwire.library={}", work.join("nope.so").display());
    let t = text(&probe(&work, &[missing], None));
    assert!(t.contains("which does not exist"), "{t}");
    // From inside the workspace, with its library built there.
    if std::env::var_os("CARGO_TARGET_DIR").is_none() {
        works("the workspace's target/", probe(&root(), &[], None));
    }
    let _ = std::fs::remove_dir_all(&work);
    println!("java jar: tagwire-{version}.jar loads libtagwire_c by property, variable, java.library.path and workspace");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surefire_reports_are_added_up() {
        let d = std::env::temp_dir().join(format!("tagwire-surefire-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("TEST-a.xml"),
            r#"<?xml version="1.0"?><testsuite name="a" time="1" tests="5" errors="1" skipped="0" failures="2"><testcase/></testsuite>"#,
        )
        .unwrap();
        std::fs::write(
            d.join("TEST-b.xml"),
            r#"<testsuite xmlns:x="y" tests="3" errors="0" skipped="1" failures="0"></testsuite>"#,
        )
        .unwrap();
        std::fs::write(d.join("other.txt"), "tests=\"100\"").unwrap();
        assert_eq!(surefire_totals(&d), (8, 2, 1, 1));
        assert_eq!(surefire_totals(&d.join("missing")), (0, 0, 0, 0));
        let _ = std::fs::remove_dir_all(&d);
    }
}
