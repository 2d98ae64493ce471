//! `tagwire place` on the example topologies: the chosen proxy node, with
//! both solvers and both cost models, as a table and as JSON, and a clear
//! error when no placement exists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_tagwire");

fn example(name: &str) -> String {
    format!(
        "{}/../../examples/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn place(file: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("place")
        .arg(file)
        .args(args)
        .output()
        .unwrap()
}

fn json(file: &str, args: &[&str]) -> serde_json::Value {
    let out = place(file, &[args, &["--json"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn proxies(v: &serde_json::Value) -> Vec<String> {
    v["placement"]["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["proxy"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn star_places_the_proxy_on_the_publisher_node() {
    for solver in ["exhaustive", "milp"] {
        for model in ["unicast", "shared"] {
            let v = json(
                &example("star.toml"),
                &["--solver", solver, "--model", model],
            );
            assert_eq!(proxies(&v), ["n1", "n1"], "{solver} {model}");
            // 4·K·f′ = 4 · 1000 B · 25/s.
            assert_eq!(v["placement"]["bandwidth"].as_f64().unwrap(), 100_000.0);
        }
    }
    let v = json(&example("star.toml"), &["--solver", "exhaustive"]);
    let rows = v["candidates"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[4]["node"], "n5");
    assert_eq!(rows[4]["bandwidth"].as_f64().unwrap(), 250_000.0);
}

#[test]
fn vbns_places_the_proxy_in_denver() {
    for solver in ["exhaustive", "milp"] {
        for model in ["unicast", "shared"] {
            let v = json(
                &example("vbns.toml"),
                &["--solver", solver, "--model", model],
            );
            assert_eq!(proxies(&v), ["denver"], "{solver} {model}");
        }
    }
}

#[test]
fn the_table_shows_the_candidates_and_the_choice() {
    let out = place(&example("star.toml"), &["--solver", "exhaustive"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let chosen: Vec<&str> = text.lines().filter(|l| l.contains("<= chosen")).collect();
    assert_eq!(chosen.len(), 1, "{text}");
    assert!(chosen[0].trim_start().starts_with("n1 "), "{text}");
    assert!(text.contains("misses the bound of s3, s4"), "{text}");
    assert!(text.contains("binding (zero slack):"), "{text}");
    assert!(text.contains("delay bound of s3"), "{text}");
}

#[test]
fn an_impossible_bound_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("star-2T.toml");
    let text = std::fs::read_to_string(example("star.toml"))
        .unwrap()
        .replace("delay_bound = 0.08", "delay_bound = 0.02");
    std::fs::write(&file, text).unwrap();
    let out = place(file.to_str().unwrap(), &["--solver", "exhaustive"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no single proxy node"), "{err}");
    assert!(err.contains("closest is node n5"), "{err}");
    // A proxy per subscription meets it: each subscriber scales for itself.
    let v = json(file.to_str().unwrap(), &["--solver", "milp"]);
    assert_eq!(proxies(&v), ["n3", "n4"]);
}

#[test]
fn a_bad_topology_file_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[node]]\nname = \"a\"\n[[link]]\na = \"a\"\nb = \"b\"\n",
    )
    .unwrap();
    let out = place(file.to_str().unwrap(), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"b\""), "{err}");
    assert!(err.contains("not declared"), "{err}");
}
