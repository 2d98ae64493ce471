//! What following a key roll costs each sealed datagram: `Sealer`, which
//! loads the key it seals with now (an `arc-swap` load) before sealing,
//! against sealing with a fixed `DatagramKey` and a shared counter, as the
//! sealer did before key rolls. Same run, alternating, five rounds of a
//! million datagrams per size; prints the median and the spread.
//!
//! `cargo run --release -p tagwire-auth --example seal_cost`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tagwire_auth::{DomainKey, Sealer};

const N: u32 = 1_000_000;

fn main() {
    let domain = DomainKey::from_bytes([7; 32]);
    let node = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    let sealer = Sealer::new(&domain, node, 1, false);
    let fixed = domain.datagram_key(node, 1);
    let counter = AtomicU64::new(1);
    let mut out = Vec::with_capacity(2048);
    println!("| body | fixed key ns | sealer ns | ratio (median) | ratios (min-max) |");
    println!("|---|---|---|---|---|");
    for size in [64usize, 256, 1400] {
        let body = vec![0x5a; size];
        let mut a = Vec::new();
        let mut b = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..N {
                let c = counter.fetch_add(1, Ordering::Relaxed);
                fixed.seal_into(c, false, black_box(&body), &mut out);
                black_box(&out);
            }
            a.push(t.elapsed().as_nanos() as f64 / f64::from(N));
            let t = Instant::now();
            for _ in 0..N {
                sealer.seal_into(black_box(&body), &mut out);
                black_box(&out);
            }
            b.push(t.elapsed().as_nanos() as f64 / f64::from(N));
        }
        let mut ratios: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y / x).collect();
        ratios.sort_by(f64::total_cmp);
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        println!(
            "| {size} B | {:.0} | {:.0} | {:.3} | {:.3}-{:.3} |",
            a[2], b[2], ratios[2], ratios[0], ratios[4]
        );
    }
}
