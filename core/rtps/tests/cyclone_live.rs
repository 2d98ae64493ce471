//! Against a running Cyclone DDS (Debian's `ddsperf`, loopback only): our
//! participant and Cyclone's find each other (SPDP); our participant's
//! discovery (SPDP, then SEDP over the reliable built-in
//! endpoints) and a reliable reader made of this crate's parts receive a
//! Cyclone writer's samples, in order; a reliable writer made of them is
//! read by a Cyclone reader, which loses none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use tagwire_rtps::discovery::{EndpointData, ParticipantData, BUILTIN_ENDPOINTS};
use tagwire_rtps::qos::{Qos, Reliability};
use tagwire_rtps::reliable::{Reader, Writer};
use tagwire_rtps::sedp::{Sedp, SedpEvent};
use tagwire_rtps::spdp::{Spdp, SpdpConfig, SpdpEvent};
use tagwire_rtps::{EntityId, Guid, GuidPrefix, Header, Locator, Message, Submessage, Transmit};

const CYCLONE_LOOPBACK: &str = concat!(
    "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/>",
    "</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>",
    "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>",
    "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>"
);

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The live tests one at a time: two Cyclone writers of one topic would
/// mix their samples in one reader.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn have_ddsperf() -> bool {
    if std::process::Command::new("ddsperf")
        .arg("-h")
        .output()
        .is_err()
    {
        println!(
            "SKIPPED: ddsperf is not installed (apt install cyclonedds-tools; .ci/run installs it)"
        );
        return false;
    }
    true
}

fn ddsperf(args: &[&str], stdout: std::process::Stdio) -> Kill {
    Kill(
        std::process::Command::new("ddsperf")
            .args(args)
            .env("CYCLONEDDS_URI", CYCLONE_LOOPBACK)
            .stdout(stdout)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Our participant: one socket for discovery and data, SPDP and SEDP.
struct Node {
    sock: UdpSocket,
    header: Header,
    spdp: Spdp,
    sedp: Sedp,
    buf: Vec<u8>,
}

impl Node {
    fn new(t0: Instant, id: u8, user_data: &[u8]) -> Self {
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let here = Locator::udp_v4(Ipv4Addr::LOCALHOST, sock.local_addr().unwrap().port());
        let pid = std::process::id().to_le_bytes();
        let prefix = GuidPrefix([
            0x01, 0x99, 7, 7, pid[0], pid[1], pid[2], pid[3], 0, 0, 0, id,
        ]);
        let header = Header {
            version: (2, 1),
            vendor: [0x01, 0x99],
            prefix,
        };
        let me = ParticipantData {
            prefix,
            version: (2, 1),
            vendor: [0x01, 0x99],
            builtin_endpoints: BUILTIN_ENDPOINTS,
            lease: tagwire_rtps::qos::Duration {
                seconds: 10,
                fraction: 0,
            },
            domain: Some(0),
            metatraffic_unicast: vec![here],
            metatraffic_multicast: Vec::new(),
            default_unicast: vec![here],
            default_multicast: Vec::new(),
            user_data: user_data.to_vec(),
        };
        let spdp = Spdp::new(
            SpdpConfig {
                local: me,
                peers: (0..10)
                    .map(|i| Locator::udp_v4(Ipv4Addr::LOCALHOST, 7410 + 2 * i))
                    .collect(),
                announce_every: Duration::from_millis(500),
            },
            t0,
        );
        Self {
            sock,
            header,
            spdp,
            sedp: Sedp::new(header),
            buf: vec![0u8; 65536],
        }
    }

    fn endpoint(&self, entity: EntityId, qos: Qos) -> EndpointData {
        // ddsperf's data topic: R reliable, U best effort.
        let topic = match qos.reliability.0 {
            Reliability::Reliable => "DDSPerfRDataKS",
            Reliability::BestEffort => "DDSPerfUDataKS",
        };
        EndpointData {
            guid: Guid {
                prefix: self.header.prefix,
                entity,
            },
            topic: topic.into(),
            type_name: "KeyedSeq".into(),
            qos,
            unicast: Vec::new(),
            multicast: Vec::new(),
            expects_inline_qos: false,
        }
    }

    /// Sends what is due (discovery's and `extra`'s), then handles one
    /// datagram if one comes: discovery takes it, then `on`, with the SEDP
    /// events it caused.
    fn step<S>(
        &mut self,
        st: &mut S,
        extra: impl FnOnce(&mut S, Instant) -> Vec<Transmit>,
        on: impl FnOnce(&mut S, Instant, &Message<'_>, Vec<SedpEvent>, &Spdp),
    ) {
        let now = Instant::now();
        self.spdp.handle_timeout(now);
        self.sedp.handle_timeout(now);
        let mut out = extra(st, now);
        out.extend(std::iter::from_fn(|| self.spdp.poll_transmit()));
        out.extend(std::iter::from_fn(|| self.sedp.poll_transmit()));
        for t in out {
            let _ = self.sock.send_to(&t.bytes, t.to.to_udp_v4().unwrap());
        }
        let Ok(n) = self.sock.recv(&mut self.buf) else {
            return;
        };
        let now = Instant::now();
        let _ = self.spdp.handle_datagram(now, &self.buf[..n]);
        while let Some(e) = self.spdp.poll_event() {
            match e {
                SpdpEvent::Discovered(p) => self.sedp.add_participant(now, &p),
                SpdpEvent::Lost(p) => self.sedp.remove_participant(p),
                SpdpEvent::Changed(_) => {}
            }
        }
        let Ok(m) = Message::parse(&self.buf[..n]) else {
            return;
        };
        self.sedp.handle_message(now, &m);
        let events: Vec<SedpEvent> = std::iter::from_fn(|| self.sedp.poll_event()).collect();
        on(st, now, &m, events, &self.spdp);
    }
}

/// Where a remote endpoint takes its data: its own locators, else its
/// participant's default ones.
fn data_locators(e: &EndpointData, spdp: &Spdp) -> Vec<Locator> {
    if e.unicast.is_empty() {
        spdp.remote(e.guid.prefix)
            .map(|p| p.default_unicast.clone())
            .unwrap_or_default()
    } else {
        e.unicast.clone()
    }
}

#[test]
fn a_cyclone_dds_participant_and_ours_find_each_other() {
    let _one = serial();
    if !have_ddsperf() {
        return;
    }
    let _pong = ddsperf(&["-D8", "pong"], std::process::Stdio::null());
    let t0 = Instant::now();
    let mut node = Node::new(t0, 3, b"");
    let me = node.header.prefix;
    let mut answered = false;
    let found = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(6),
            "no Cyclone participant found"
        );
        node.step(
            &mut answered,
            |_, _| Vec::new(),
            |answered, _, m, _, _| {
                // Cyclone accepted us if it addresses its announcement to us.
                *answered |= m.submessages.contains(&Submessage::InfoDst(me));
            },
        );
        let cyclone = node
            .spdp
            .participants()
            .find(|p| p.user_data.starts_with(b"DDSPerf:"))
            .cloned();
        if let (Some(p), true) = (cyclone, answered) {
            break p;
        }
    };
    assert_eq!(found.vendor, [0x01, 0x10], "Cyclone's vendor id");
    assert!(found
        .metatraffic_unicast
        .iter()
        .any(|l| l.to_udp_v4().is_some()));
}

#[test]
fn a_cyclone_dds_writer_matches_our_reader_through_sedp_and_its_samples_arrive_in_order() {
    cyclone_writer_to_our_reader(64, "100Hz", 30, 1, false);
}

#[test]
fn a_best_effort_cyclone_dds_writer_reaches_our_best_effort_reader() {
    cyclone_writer_to_our_reader(64, "100Hz", 30, 6, true);
}

#[test]
fn a_cyclone_dds_writers_30_kb_samples_come_in_fragments_and_arrive_whole_and_in_order() {
    cyclone_writer_to_our_reader(30_000, "20Hz", 10, 4, false);
}

/// A Cyclone writer (`ddsperf pub` of `size`-byte samples at `rate`) and
/// our reader: `want` samples, whole, in order.
fn cyclone_writer_to_our_reader(size: usize, rate: &str, want: usize, id: u8, best_effort: bool) {
    let _one = serial();
    if !have_ddsperf() {
        return;
    }
    // Cyclone publishes DDSPerfRDataKS (KeyedSeq, reliable, keep-all).
    let size_arg = size.to_string();
    let mut args = vec!["-D10", "pub", rate, "size", &size_arg];
    if best_effort {
        args.insert(0, "-u");
    }
    let _publisher = ddsperf(&args, std::process::Stdio::null());
    let t0 = Instant::now();
    let mut node = Node::new(t0, id, b"");
    let header = node.header;
    // Our subscription: a reliable reader of the topic.
    let reader_id = EntityId([0, 0, 1, 0x07]);
    let mut qos = Qos::default_for(false);
    if !best_effort {
        qos.reliability.0 = Reliability::Reliable;
    }
    let ours = node.endpoint(reader_id, qos);
    node.sedp.announce(t0, &ours);
    let reader = if best_effort {
        Reader::best_effort(header, reader_id)
    } else {
        Reader::new(header, reader_id, Duration::from_millis(10))
    };
    let mut st = (reader, None, Vec::<u32>::new());
    while t0.elapsed() < Duration::from_secs(8) && st.2.len() < want {
        node.step(
            &mut st,
            |(reader, _, _), now| {
                reader.handle_timeout(now);
                std::iter::from_fn(|| reader.poll_transmit()).collect()
            },
            |(reader, matched, seqs), now, m, events, spdp| {
                for e in events {
                    if let SedpEvent::Writer(w) = e {
                        if EndpointData::matches(&ours, &w).is_ok() {
                            reader.add_writer(now, w.guid, data_locators(&w, spdp), false);
                            *matched = Some(w);
                        }
                    }
                }
                reader.handle_message(now, m);
                while let Some(d) = reader.poll_delivery() {
                    // KeyedSeq in CDR_LE: seq u32, keyval u32, baggage
                    // (ddsperf's size counts the 12 bytes before it).
                    assert_eq!(&d.change.payload[..2], &[0x00, 0x01], "CDR_LE");
                    assert_eq!(d.change.payload.len(), 4 + size, "a whole sample");
                    seqs.push(u32::from_le_bytes(
                        d.change.payload[4..8].try_into().unwrap(),
                    ));
                }
            },
        );
    }
    let (_, matched, seqs) = st;
    let w = matched.expect("SEDP announced Cyclone's data writer");
    assert_eq!(w.qos.reliability.0 == Reliability::BestEffort, best_effort);
    assert!(seqs.len() >= want, "only {} samples arrived", seqs.len());
    assert!(
        seqs.windows(2).all(|p| p[1] == p[0] + 1),
        "samples out of order or missing: {seqs:?}"
    );
}

/// The last "total T lost L" that `ddsperf sub` printed.
fn counted(lines: &[String]) -> Option<(u64, u64)> {
    let l = lines.iter().rev().find(|l| l.contains(" total "))?;
    let words: Vec<&str> = l.split_whitespace().collect();
    let after = |key: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse().ok()
    };
    Some((after("total")?, after("lost")?))
}

#[test]
fn our_writer_matches_a_cyclone_dds_reader_which_counts_every_sample_and_loses_none() {
    our_writer_to_cyclone_reader(64, 200, 2, false);
}

#[test]
fn our_best_effort_writer_reaches_a_best_effort_cyclone_dds_reader_which_loses_none_on_loopback() {
    our_writer_to_cyclone_reader(64, 200, 7, true);
}

#[test]
fn our_writers_30_kb_samples_go_in_fragments_and_a_cyclone_dds_reader_loses_none() {
    our_writer_to_cyclone_reader(30_000, 50, 5, false);
}

/// Our writer and a Cyclone reader (`ddsperf sub`): `want` samples of
/// `size` bytes (as ddsperf counts them), none lost.
fn our_writer_to_cyclone_reader(size: usize, want: u64, id: u8, best_effort: bool) {
    let _one = serial();
    if !have_ddsperf() {
        return;
    }
    // Cyclone subscribes to DDSPerfRDataKS and prints, each second, how
    // many samples it got and how many it lost (by their seq field).
    let args: &[&str] = if best_effort {
        &["-u", "-D8", "sub"]
    } else {
        &["-D8", "sub"]
    };
    let mut sub = ddsperf(args, std::process::Stdio::piped());
    let out = sub.0.stdout.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l2 = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(l);
        }
    });
    let t0 = Instant::now();
    // ddsperf knows its peers by USER_DATA "DDSPerf:<has reader>:<pid>:<host>".
    let ud = format!("DDSPerf:0:{}:tagwire", std::process::id());
    let mut node = Node::new(t0, id, ud.as_bytes());
    let header = node.header;
    let writer_id = EntityId([0, 0, 2, 0x02]);
    let mut qos = Qos::default_for(true);
    if best_effort {
        qos.reliability.0 = Reliability::BestEffort;
    }
    let ours = node.endpoint(writer_id, qos);
    node.sedp.announce(t0, &ours);
    let writer = if best_effort {
        Writer::best_effort(header, writer_id)
    } else {
        Writer::new(header, writer_id, 10_000, Duration::from_millis(50))
    };
    // (writer, matched, samples sent, next write)
    let mut st = (writer, false, 0u32, t0);
    while t0.elapsed() < Duration::from_secs(7) {
        if counted(&lines.lock().unwrap()).is_some_and(|(t, _)| t >= want) {
            break;
        }
        node.step(
            &mut st,
            |(writer, matched, sent, next_write), now| {
                if *matched && now >= *next_write && *sent < 10_000 {
                    // 200 samples a second: KeyedSeq in CDR_LE, baggage of
                    // size - 12 bytes.
                    *next_write = now + Duration::from_millis(5);
                    *sent += 1;
                    let baggage = size - 12;
                    let mut p = vec![0x00, 0x01, 0x00, 0x00];
                    p.extend_from_slice(&sent.to_le_bytes());
                    p.extend_from_slice(&0u32.to_le_bytes());
                    p.extend_from_slice(&(baggage as u32).to_le_bytes());
                    p.extend(std::iter::repeat_n(0xab, baggage));
                    writer.write(now, p);
                }
                writer.handle_timeout(now);
                std::iter::from_fn(|| writer.poll_transmit()).collect()
            },
            |(writer, matched, _, _), now, m, events, spdp| {
                for e in events {
                    if let SedpEvent::Reader(r) = e {
                        if EndpointData::matches(&r, &ours).is_ok() {
                            writer.add_reader(now, r.guid, data_locators(&r, spdp));
                            *matched = true;
                        }
                    }
                }
                writer.handle_message(now, m);
            },
        );
    }
    let (_, matched, sent, _) = st;
    assert!(matched, "SEDP announced no matching Cyclone reader");
    let (got, lost) = counted(&lines.lock().unwrap()).expect("ddsperf sub counted samples");
    assert!(got >= want, "Cyclone got {got} of {sent} samples");
    assert_eq!(lost, 0, "Cyclone counted {lost} lost");
}
