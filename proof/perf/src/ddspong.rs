//! A tagwire pong for `ddsperf ping` (issue 20 item 5): `tagwire perf rtt
//! --dds` measures ddsperf ping → tagwire pong beside ddsperf ping →
//! ddsperf pong, in the same run.
//!
//! The pong is what a tagwire user would build: a DDS gateway
//! (`tagwire_gateway`, a client of the benchmark's daemon, here in the
//! perf process as `tagwire dds-gateway` would run) maps ddsperf's topics
//! to two tags, and a tagwire process subscribes to the ping tag and
//! publishes each ping on the pong tag with the ping's source timestamp
//! (ddsperf computes the latency from it, as from its own pong's):
//!
//! ```text
//! ddsperf ping ─UDP─▶ gateway ─▶ /ddsperf/ping ─▶ pong thread ─▶ /ddsperf/pong ─▶ gateway ─UDP─▶ ddsperf ping
//! ```
//!
//! ddsperf's topics and type (`DDSPerfRPingKS`, `DDSPerfRPongKS`, the
//! keyed `KeyedSeq`, its key `keyval` at offset 4); its pong reader sits in
//! a partition named after its participant, so the pong topic is mapped
//! with `partition=*`; and ddsperf answers only participants whose
//! USER_DATA says `DDSPerf:0:<pid>:<host>` (see `shared/rtps-notes.md`).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use tagwire::{Client, ClientOptions, Ext, SubscribeOptions};
use tagwire_gateway::{Gateway, GatewayConfig};

use crate::ddsperf::{self, DdsOpts, DdsRtt};

/// The ping and pong tags.
pub const PING_TAG: &str = "/ddsperf/ping";
/// The pong tag.
pub const PONG_TAG: &str = "/ddsperf/pong";

/// The gateway's mapping of ddsperf's default topics.
pub fn mapping() -> String {
    format!(
        "{PING_TAG} DDSPerfRPingKS KeyedSeq key=u32@4\n\
         {PONG_TAG} DDSPerfRPongKS KeyedSeq key=u32@4 partition=*\n"
    )
}

/// A gateway and a pong thread, answering `ddsperf ping` in `domain`.
pub struct TagwirePong {
    gateway: Option<Gateway>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl TagwirePong {
    /// Starts both, as clients of the daemon at `client`; with `spin`, the
    /// pong's and the gateway's subscriptions busy-poll that long before
    /// sleeping.
    pub fn start(
        client: ClientOptions,
        domain: u32,
        spin: Option<Duration>,
    ) -> anyhow::Result<Self> {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_or_else(|_| "localhost".to_owned(), |h| h.trim().to_owned());
        let gateway = Gateway::start(GatewayConfig {
            domain,
            address: Ipv4Addr::LOCALHOST,
            mappings: tagwire_gateway::parse(&mapping())?,
            user_data: format!("DDSPerf:0:{}:{host}", std::process::id()).into_bytes(),
            client: client.clone(),
            busy_poll: spin,
        })
        .context("starting the DDS gateway")?;
        let c = Client::with_options(client)?;
        let mut so = SubscribeOptions::default();
        if let Some(spin) = spin {
            so = so.busy_poll(spin);
        }
        let mut sub = c.subscribe(PING_TAG, so)?;
        let mut publ = c.publisher(PONG_TAG)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tagwire-pong".into())
            .spawn(move || {
                let mut answered = 0;
                let mut buf = Vec::new();
                while !s.load(Ordering::Acquire) {
                    let Ok(info) = sub.receive_into(Some(Duration::from_millis(100)), &mut buf)
                    else {
                        continue;
                    };
                    // The same instance, the ping's own timestamp.
                    let ext = Ext {
                        key: info.key,
                        ..Ext::default()
                    };
                    if publ.send_with(&buf, &ext, Some(info.timestamp)).is_ok() {
                        answered += 1;
                    }
                }
                answered
            })?;
        Ok(Self {
            gateway: Some(gateway),
            stop,
            thread: Some(thread),
        })
    }

    /// Stops both; returns how many pings were answered.
    pub fn stop(mut self) -> u64 {
        self.end()
    }

    fn end(&mut self) -> u64 {
        self.stop.store(true, Ordering::Release);
        let n = self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0);
        if let Some(g) = self.gateway.take() {
            g.stop();
        }
        n
    }
}

impl Drop for TagwirePong {
    fn drop(&mut self) {
        self.end();
    }
}

/// How long the pong and the gateway spin in [`rtt`]'s busy-poll runs.
pub const SPIN: Duration = Duration::from_micros(200);

/// `ddsperf ping` against a tagwire pong on the daemon at `client`, in the
/// domain of `opts`, for about `seconds` seconds (busy-polling `spin`).
pub fn rtt(
    size: u64,
    seconds: u32,
    opts: &DdsOpts,
    client: ClientOptions,
    spin: Option<Duration>,
) -> anyhow::Result<DdsRtt> {
    let pong = TagwirePong::start(client, opts.domain, spin)?;
    let r = ddsperf::ping_with(size, seconds, opts);
    let answered = pong.stop();
    r.with_context(|| format!("the tagwire pong answered {answered} pings"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddsperf_ping_is_answered_by_a_tagwire_pong_if_available() {
        let opts = match DdsOpts::detect() {
            Ok(mut o) => {
                // Its own domain: the ddsperf tests of this crate run beside it.
                o.domain = 200 + std::process::id() % 30;
                o
            }
            Err(why) => {
                println!("skipped: {why}");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tagwired.sock");
        let daemon = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
            socket: socket.clone(),
            ..tagwire_daemon::Config::default()
        })
        .unwrap();
        let client = ClientOptions {
            socket,
            autostart: false,
            ..ClientOptions::default()
        };
        let r = rtt(256, 2, &opts, client, None).unwrap();
        assert_eq!(r.size, 256);
        assert!(r.roundtrips > 10, "{r:?}");
        assert!(r.p50_us > 0.0 && r.p50_us < 100_000.0, "{r:?}");
        daemon.shutdown();
    }
}
