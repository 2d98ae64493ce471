//! `tagwire analyze` on the shipped example task set with the shipped
//! measured costs: a table of response times and flow bounds, exit status
//! 2 when a deadline is missed, 1 with a clear message for a bad file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tagwire");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn analyze(taskset: &Path, extra: &[&str]) -> (i32, String, String) {
    let costs = repo().join("bench/results/costs/costs.json");
    let out = Command::new(BIN)
        .arg("analyze")
        .arg(taskset)
        .arg("--costs")
        .arg(costs)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_example_task_set_is_schedulable_and_every_flow_meets_its_deadline() {
    let set = repo().join("examples/tasksets/two-nodes.toml");
    let (code, out, err) = analyze(&set, &[]);
    assert_eq!(code, 0, "{out}{err}");
    for task in [
        "io/sensor",
        "io/actuator",
        "io/logger",
        "brain/controller",
        "brain/planner",
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(task))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(row.ends_with("yes"), "{row}");
    }
    assert!(out.contains("sensor to actuator"), "{out}");
    // JSON: every task's response within its deadline.
    let (code, json, _) = analyze(&set, &["--json", "--figure", "p999"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    for t in v["tasks"].as_array().unwrap() {
        assert!(
            t["response"].as_f64().unwrap() <= t["deadline"].as_f64().unwrap(),
            "{t}"
        );
    }
    // The 99.9th percentile is never above the maximum.
    let (_, max_json, _) = analyze(&set, &["--json"]);
    let m: serde_json::Value = serde_json::from_str(max_json.trim()).unwrap();
    for (a, b) in v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(m["tasks"].as_array().unwrap())
    {
        assert!(a["cost"].as_f64().unwrap() <= b["cost"].as_f64().unwrap());
    }
}

#[test]
fn a_missed_deadline_exits_2_and_a_bad_file_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("examples/tasksets/two-nodes.toml")).unwrap();
    // The flow's deadline below its own tasks' periods.
    let tight = dir.path().join("tight.toml");
    std::fs::write(&tight, text.replace("deadline = 0.04", "deadline = 0.005")).unwrap();
    let (code, out, _) = analyze(&tight, &[]);
    assert_eq!(code, 2, "{out}");
    let row = out
        .lines()
        .find(|l| l.starts_with("sensor to actuator"))
        .unwrap();
    assert!(row.contains("NO"), "{row}");
    // A planner that cannot fit: past its deadline by a stated amount.
    let heavy = dir.path().join("heavy.toml");
    std::fs::write(&heavy, text.replace("wcet = 0.03", "wcet = 0.25")).unwrap();
    let (code, out, _) = analyze(&heavy, &[]);
    assert_eq!(code, 2);
    let row = out
        .lines()
        .find(|l| l.starts_with("brain/planner"))
        .unwrap();
    assert!(row.contains('+') && row.ends_with("NO"), "{row}");
    // Tables that change while it runs: the measured holds block the
    // 10 ms tasks past their deadlines.
    let churn = dir.path().join("churn.toml");
    std::fs::write(
        &churn,
        text.replace("table_changes = 0.0", "table_changes = 1.0"),
    )
    .unwrap();
    let (code, out, _) = analyze(&churn, &[]);
    assert_eq!(code, 2, "{out}");
    let row = out.lines().find(|l| l.starts_with("io/sensor")).unwrap();
    assert!(row.ends_with("NO"), "{row}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[task]]\nname = 'x'\n").unwrap();
    let (code, _, err) = analyze(&bad, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.toml") && err.contains("missing field"),
        "{err}"
    );
}
