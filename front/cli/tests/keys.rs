//! Domain keys without the network: `tagwire keygen`, key files others
//! can read, and tag keys only for clients with send access (issue 17
//! item 1). These need no root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use tagwire::Domain;
use tagwire_daemon::Daemon;
use tagwire_wire::control::{ErrorCode, Request, Response};
use tagwire_wire::TagName;

mod common;
use common::*;

#[test]
fn a_tag_key_is_given_only_to_a_client_with_send_access() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", 0x55);
    let mut net = tagwire_daemon::NetConfig::new("127.0.0.1".parse().unwrap());
    // Ports of our own on loopback (no other test uses these), below the
    // kernel's default ephemeral range (32768-60999), where a connection
    // of any other process could hold one (a CI run failed so: AddrInUse).
    let base = 20_000 + (std::process::id() % 12_000) as u16;
    (net.control_port, net.delivery_port, net.multicast_port) = (base, base + 1, base + 2);
    net.discovery = None;
    net.key = Some(tagwire_daemon::read_key_file(&key).unwrap());
    let socket = dir.path().join("d.sock");
    let _d = Daemon::start(tagwire_daemon::Config {
        socket: socket.clone(),
        net: Some(net),
        ..tagwire_daemon::Config::default()
    })
    .unwrap();
    let c = connect(&socket);
    c.create_tag("/mine", Domain::Global).unwrap();
    c.create_tag("/other", Domain::Global).unwrap();
    let raw = tagwire_unix::SeqPacket::connect(&socket).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let name = |n: &str| TagName::new(n).unwrap();
    // No send access yet: refused.
    assert!(matches!(
        ask(
            &raw,
            1,
            Request::TagKey {
                name: name("/mine")
            }
        ),
        Response::Error {
            code: ErrorCode::NoSendAccess,
            ..
        }
    ));
    ask(
        &raw,
        2,
        Request::GetSendAccess {
            name: name("/mine"),
            qos: Default::default(),
        },
    );
    let Response::TagKey { key: k1, .. } = ask(
        &raw,
        3,
        Request::TagKey {
            name: name("/mine"),
        },
    ) else {
        panic!("no tag key with send access");
    };
    // Still none for a tag it may not publish on.
    assert!(matches!(
        ask(
            &raw,
            4,
            Request::TagKey {
                name: name("/other")
            }
        ),
        Response::Error { .. }
    ));
    // Another tag's key would differ.
    ask(
        &raw,
        5,
        Request::GetSendAccess {
            name: name("/other"),
            qos: Default::default(),
        },
    );
    let Response::TagKey { key: k2, .. } = ask(
        &raw,
        6,
        Request::TagKey {
            name: name("/other"),
        },
    ) else {
        panic!("no tag key with send access");
    };
    assert_ne!(k1, k2);
}

#[test]
fn key_files_others_can_read_are_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = key_file(dir.path(), "k", 1);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = tagwire_daemon::read_key_file(&path).unwrap_err();
    assert!(matches!(e, tagwire_daemon::KeyFileError::Exposed { .. }));
    assert!(e.to_string().contains("chmod 600"), "{e}");
    // The daemon refuses to start with it, saying why.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwire"))
        .args(["daemon", "--node", "127.0.0.1", "--no-discovery", "--key"])
        .arg(&path)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));
}

#[test]
fn keygen_writes_a_private_key_file_that_the_daemon_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("new.key");
    let bin = env!("CARGO_BIN_EXE_tagwire");
    let run = |extra: &[&str]| {
        std::process::Command::new(bin)
            .args(["keygen", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(run(&[]).status.success());
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let first = tagwire_daemon::read_key_file(&out).unwrap();
    // No silent overwrite; --force makes a new key.
    let again = run(&[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert!(run(&["--force"]).status.success());
    assert_ne!(tagwire_daemon::read_key_file(&out).unwrap(), first);
}
