//! The documents' links hold: every relative link in README.md,
//! CHANGELOG.md and docs/ names a file or directory of the repository, and
//! every `#anchor` a heading of the file it points into (headings turned
//! into anchors as GitHub and mdBook do). No document names a path
//! outside the repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The Markdown files checked: README.md, CHANGELOG.md, docs/**.
fn documents(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    walk(&root.join("docs"), &mut out);
    out
}

/// The text outside fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of inline links `[text](target)` in `text`'s prose.
fn links(text: &str) -> Vec<String> {
    let p = prose(text);
    let mut out = Vec::new();
    let mut rest = p.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_owned());
        rest = &rest[end..];
    }
    out
}

/// A heading's anchor: lower case, letters, digits, `-` and `_` kept,
/// spaces turned into `-`, the rest dropped (GitHub's and mdBook's rule).
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one also as
/// `-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(h) = line.strip_prefix('#') else {
            continue;
        };
        if fenced {
            continue;
        }
        let s = slug(&link_text(h.trim_start_matches('#')));
        let mut name = s.clone();
        let mut n = 0;
        while !out.insert(name.clone()) {
            n += 1;
            name = format!("{s}-{n}");
        }
    }
    out
}

/// A heading's text as it shows: a link counts by its text, not its
/// target.
fn link_text(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find(')').map_or("", |end| &rest[i + end + 1..]);
    }
    out.push_str(rest);
    out.replace(['[', '`'], "")
}

/// `path` with `.` and `..` resolved lexically.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_in_the_documents_resolves() {
    let root = workspace();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        let here = doc.strip_prefix(&root).unwrap().to_owned();
        for target in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                here.clone()
            } else {
                normal(&here.parent().unwrap().join(file))
            };
            if path.components().next() == Some(Component::ParentDir)
                || !root.join(&path).exists()
                || !normal(&root.join(&path)).starts_with(&root)
            {
                broken.push(format!("{}: {target}: no such file", here.display()));
                continue;
            }
            if let Some(a) = anchor {
                if path.extension().is_some_and(|x| x == "md") {
                    let there = std::fs::read_to_string(root.join(&path)).unwrap();
                    if !anchors(&there).contains(a) {
                        broken.push(format!(
                            "{}: {target}: no heading with anchor #{a} in {}",
                            here.display(),
                            path.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: the parser broke"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn no_document_names_a_path_outside_the_repository() {
    let root = workspace();
    let mut found = Vec::new();
    for doc in documents(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("../shared") {
                found.push(format!("{}:{}: {line}", doc.display(), i + 1));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn anchors_follow_the_heading_rule() {
    assert_eq!(slug("Two commands"), "two-commands");
    assert_eq!(
        slug("Between hosts: the domain key"),
        "between-hosts-the-domain-key"
    );
    assert_eq!(slug("Recordings (MCAP)"), "recordings-mcap");
    let a = anchors("# A\n## A\n```\n# not a heading\n```\n### `code` here\n");
    assert_eq!(
        a,
        BTreeSet::from(["a".to_owned(), "a-1".to_owned(), "code-here".to_owned()])
    );
    assert_eq!(
        slug(&link_text("The [CLI](cli.md) and `tagwire`")),
        "the-cli-and-tagwire"
    );
    assert_eq!(
        links("see [x](a.md#b) and `[y](not.md)` and [z](c.md \"title\")"),
        vec!["a.md#b".to_owned(), "c.md".to_owned()]
    );
}
