//! The TOML topology file: a complete file parses with its defaults, and
//! every kind of mistake comes back as the typed error naming the culprit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire_place::{Topology, TopologyError, DEFAULT_CPU_PER_MSG};

const GOOD: &str = r#"
[defaults]
cpu_capacity = 0.25
bandwidth = 1e6

[[node]]
name = "a"

[[node]]
name = "b"
cpu_capacity = 1

[[node]]
name = "c"

[[link]]
a = "a"
b = "b"

[[link]]
a = "b"
b = "c"
bandwidth = 5000

[[tag]]
name = "/x"
publisher = "a"
rate = 100
size = 1000

[[tag]]
name = "/y"
publisher = "c"
period = 0.5
size = 10
cpu_per_msg = 1e-4

[[subscription]]
tag = "/x"
node = "c"
scale = 4
delay_bound = 0.05

[[subscription]]
name = "ybee"
tag = "/y"
node = "b"
delay_bound = 1
"#;

fn parse_err(text: &str) -> TopologyError {
    Topology::from_toml(text).unwrap_err()
}

#[test]
fn a_complete_file_parses_with_defaults_applied() {
    let t = Topology::from_toml(GOOD).unwrap();
    assert_eq!(t.nodes().len(), 3);
    assert_eq!(t.nodes()[0].cpu_capacity, 0.25);
    assert_eq!(t.nodes()[1].cpu_capacity, 1.0);
    assert_eq!(t.links()[0].bandwidth, 1e6);
    assert_eq!(t.links()[1].bandwidth, 5000.0);
    assert_eq!(t.tags()[0].period, 0.01);
    assert_eq!(t.tags()[0].cpu_per_msg, DEFAULT_CPU_PER_MSG);
    assert_eq!(t.tags()[1].cpu_per_msg, 1e-4);
    let s = &t.subscriptions()[0];
    assert_eq!((s.name.as_str(), s.scale, s.delay_bound), ("/x@c", 4, 0.05));
    assert_eq!(t.subscriptions()[1].scale, 1);
    let (a, c) = (t.node_id("a").unwrap(), t.node_id("c").unwrap());
    assert_eq!(t.hops(a, c), 2);
    assert_eq!(t.path(a, c).len(), 2);
}

#[test]
fn malformed_toml_is_a_parse_error_with_the_line() {
    let e = parse_err("[[node]\nname = \"a\"\n");
    let TopologyError::Parse(msg) = &e else {
        panic!("{e:?}")
    };
    assert!(msg.contains("line 1"), "{msg}");
}

#[test]
fn a_misspelt_field_is_a_parse_error_naming_it() {
    let e = parse_err(&GOOD.replace("period = 0.5", "perod = 0.5"));
    let TopologyError::Parse(msg) = &e else {
        panic!("{e:?}")
    };
    assert!(msg.contains("perod"), "{msg}");
}

#[test]
fn a_wrong_type_is_a_parse_error() {
    let e = parse_err(&GOOD.replace("size = 10\n", "size = \"ten\"\n"));
    assert!(matches!(e, TopologyError::Parse(_)), "{e:?}");
}

#[test]
fn an_unknown_node_is_named_with_where_it_was_used() {
    let e = parse_err(&GOOD.replace("publisher = \"c\"", "publisher = \"zz\""));
    assert_eq!(
        e,
        TopologyError::UnknownNode {
            place: "tag \"/y\" publisher".into(),
            node: "zz".into()
        }
    );
    assert!(e.to_string().contains("not declared"), "{e}");
    let e = parse_err(&GOOD.replace("a = \"b\"\nb = \"c\"", "a = \"b\"\nb = \"d\""));
    assert!(
        matches!(&e, TopologyError::UnknownNode { place, node } if place == "link 1 (b)" && node == "d"),
        "{e:?}"
    );
}

#[test]
fn an_unknown_tag_is_named() {
    let e = parse_err(&GOOD.replace("tag = \"/y\"", "tag = \"/nope\""));
    assert_eq!(
        e,
        TopologyError::UnknownTag {
            subscription: "ybee".into(),
            tag: "/nope".into()
        }
    );
}

#[test]
fn a_disconnected_topology_lists_the_unreachable_nodes() {
    let cut = GOOD.replace("[[link]]\na = \"b\"\nb = \"c\"\nbandwidth = 5000\n", "");
    let e = parse_err(&cut);
    assert_eq!(
        e,
        TopologyError::Disconnected {
            from: "a".into(),
            unreachable: vec!["c".into()]
        }
    );
}

#[test]
fn scale_zero_is_rejected() {
    let e = parse_err(&GOOD.replace("scale = 4", "scale = 0"));
    assert_eq!(
        e,
        TopologyError::BadScale {
            subscription: "/x@c".into(),
            scale: 0
        }
    );
    let e = parse_err(&GOOD.replace("scale = 4", "scale = -2"));
    assert!(
        matches!(e, TopologyError::BadScale { scale: -2, .. }),
        "{e:?}"
    );
}

#[test]
fn duplicate_names_are_rejected() {
    let e = parse_err(&GOOD.replace("name = \"c\"", "name = \"a\""));
    assert_eq!(
        e,
        TopologyError::Duplicate {
            kind: "node",
            name: "a".into()
        }
    );
    let e = parse_err(&GOOD.replace("name = \"/y\"", "name = \"/x\""));
    assert!(
        matches!(e, TopologyError::Duplicate { kind: "tag", .. }),
        "{e:?}"
    );
    let e = parse_err(&format!("{GOOD}\n[[link]]\na = \"b\"\nb = \"a\"\n"));
    assert!(
        matches!(
            e,
            TopologyError::DuplicateLink {
                first: 0,
                second: 2,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn non_positive_periods_sizes_and_bandwidths_are_rejected() {
    for (from, to, what) in [
        ("period = 0.5", "period = 0", "tag \"/y\" period"),
        ("period = 0.5", "period = -1", "tag \"/y\" period"),
        ("rate = 100", "rate = 0", "tag \"/x\" rate"),
        ("size = 1000", "size = 0", "tag \"/x\" size"),
        (
            "bandwidth = 5000",
            "bandwidth = 0",
            "link 1 (b-c) bandwidth",
        ),
        (
            "delay_bound = 0.05",
            "delay_bound = -0.05",
            "subscription \"/x@c\" delay_bound",
        ),
        (
            "cpu_capacity = 1",
            "cpu_capacity = -1",
            "node \"b\" cpu_capacity",
        ),
    ] {
        let e = parse_err(&GOOD.replace(from, to));
        assert!(
            matches!(&e, TopologyError::OutOfRange { what: w, .. } if w == what),
            "{to}: {e:?}"
        );
    }
}

#[test]
fn a_tag_needs_exactly_one_of_period_and_rate() {
    let e = parse_err(&GOOD.replace("rate = 100", "rate = 100\nperiod = 0.01"));
    assert_eq!(e, TopologyError::PeriodOrRate { tag: "/x".into() });
    let e = parse_err(&GOOD.replace("rate = 100\n", ""));
    assert_eq!(e, TopologyError::PeriodOrRate { tag: "/x".into() });
}

#[test]
fn a_link_to_itself_and_an_empty_file_are_rejected() {
    let e = parse_err(&GOOD.replace("a = \"a\"\nb = \"b\"", "a = \"a\"\nb = \"a\""));
    assert!(
        matches!(e, TopologyError::SelfLink { index: 0, .. }),
        "{e:?}"
    );
    assert_eq!(parse_err(""), TopologyError::NoNodes);
}
