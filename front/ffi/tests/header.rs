//! The checked-in C header is what cbindgen makes of the code today: a
//! change to the ABI that forgets the header fails here.
//! `TAGWIRE_BLESS=1 cargo test -p tagwire-ffi --test header` rewrites it.

use std::path::Path;

#[test]
fn the_checked_in_header_matches_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen runs")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("utf-8");
    let path = dir.join("include/tagwire.h");
    if std::env::var_os("TAGWIRE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} differs from what the code generates: run \
         `TAGWIRE_BLESS=1 cargo test -p tagwire-ffi --test header` and commit it",
        path.display()
    );
    for f in [
        "tw_client_connect_with",
        "tw_subscriber_receive",
        "tw_last_error",
        "TW_ERR_TIMEOUT",
    ] {
        assert!(generated.contains(f), "{f} missing from the header");
    }
}
