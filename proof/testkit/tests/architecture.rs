//! The workspace's shape (docs/design.md §3): no two modules of a
//! crate import each other. A module's imports are the `crate::name` paths
//! and the names in `use crate::{…}` lists of its file (or directory),
//! outside its tests and comments.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its `#[cfg(test)]` part and line comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
        .collect()
}

/// Top-level module name → the crate's other top-level modules it uses.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        if ["lib", "main", "bin"].contains(&module.as_str()) {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).unwrap());
        let set = uses.entry(module).or_default();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                let list = list.split('}').next().unwrap_or("");
                for name in list.split(',') {
                    set.insert(ident(name.trim()));
                }
            } else {
                set.insert(ident(rest));
            }
        }
    }
    let names: BTreeSet<String> = uses.keys().cloned().collect();
    for (m, set) in uses.iter_mut() {
        set.retain(|d| names.contains(d) && d != m);
    }
    uses
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let mut circles = Vec::new();
    let mut crates = 0;
    for layer in ["core", "transport", "runtime", "front", "proof"] {
        let Ok(dir) = std::fs::read_dir(workspace().join(layer)) else {
            continue;
        };
        for krate in dir {
            let src = krate.unwrap().path().join("src");
            if !src.is_dir() {
                continue;
            }
            crates += 1;
            let uses = imports(&src);
            for (a, deps) in &uses {
                for b in deps {
                    if a < b && uses.get(b).is_some_and(|d| d.contains(a)) {
                        circles.push(format!("{}: {a} <-> {b}", src.display()));
                    }
                }
            }
        }
    }
    assert!(crates > 10, "found only {crates} crates");
    assert!(
        circles.is_empty(),
        "modules importing each other: {circles:#?}"
    );
}
