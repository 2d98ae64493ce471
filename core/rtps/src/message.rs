//! RTPS messages: the header and the submessages (specification §8.3 and
//! §9.4), parsed from a datagram and built into one.

use crate::cursor::{Cur, Out};
use crate::plist::ParameterList;
use crate::types::{
    EntityId, FragmentNumberSet, GuidPrefix, SequenceNumber, SequenceNumberSet, Time,
};
use crate::RtpsError;

/// Length of the RTPS header.
pub const HEADER_LEN: usize = 20;

/// The RTPS header: protocol version, vendor, and the sender's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Protocol version (major, minor): Cyclone 0.10 sends 2.1, Fast DDS 2.2
    /// or 2.3; tagwire sends 2.1.
    pub version: (u8, u8),
    /// Vendor id.
    pub vendor: [u8; 2],
    /// The sending participant's GUID prefix.
    pub prefix: GuidPrefix,
}

/// Submessage ids (specification §9.4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmessageId;

impl SubmessageId {
    /// PAD.
    pub const PAD: u8 = 0x01;
    /// ACKNACK.
    pub const ACKNACK: u8 = 0x06;
    /// HEARTBEAT.
    pub const HEARTBEAT: u8 = 0x07;
    /// GAP.
    pub const GAP: u8 = 0x08;
    /// INFO_TS.
    pub const INFO_TS: u8 = 0x09;
    /// INFO_SRC.
    pub const INFO_SRC: u8 = 0x0c;
    /// INFO_DST.
    pub const INFO_DST: u8 = 0x0e;
    /// NACK_FRAG.
    pub const NACK_FRAG: u8 = 0x12;
    /// HEARTBEAT_FRAG.
    pub const HEARTBEAT_FRAG: u8 = 0x13;
    /// DATA.
    pub const DATA: u8 = 0x15;
    /// DATA_FRAG.
    pub const DATA_FRAG: u8 = 0x16;
}

const E: u8 = 0x01;

/// A DATA submessage: one sample (or the key of a disposed or unregistered
/// instance) of a writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data<'a> {
    /// The reader addressed (`EntityId::UNKNOWN`: every matched reader).
    pub reader: EntityId,
    /// The writer.
    pub writer: EntityId,
    /// The sample's sequence number.
    pub sn: SequenceNumber,
    /// Inline QoS (key hash, status info, …), if any.
    pub inline_qos: Option<ParameterList<'a>>,
    /// The serialized payload (with its 4-byte encapsulation header), if
    /// any: the sample, or with `key` set only its key.
    pub payload: Option<&'a [u8]>,
    /// The payload is the serialized key (a dispose or unregister).
    pub key: bool,
    /// The payload is not in a standard encapsulation (N flag).
    pub non_standard: bool,
}

/// A DATA_FRAG submessage: some fragments of one large sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFrag<'a> {
    /// The reader addressed.
    pub reader: EntityId,
    /// The writer.
    pub writer: EntityId,
    /// The sample's sequence number.
    pub sn: SequenceNumber,
    /// The first fragment here (1-based).
    pub fragment_start: u32,
    /// How many fragments are here.
    pub fragments: u16,
    /// Bytes per fragment (the last one of the sample may be shorter).
    pub fragment_size: u16,
    /// Bytes of the whole serialized sample.
    pub sample_size: u32,
    /// Inline QoS, if any.
    pub inline_qos: Option<ParameterList<'a>>,
    /// The sample is a serialized key (K flag).
    pub key: bool,
    /// Not a standard encapsulation (N flag).
    pub non_standard: bool,
    /// The fragments' bytes.
    pub bytes: &'a [u8],
}

/// One submessage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submessage<'a> {
    /// Padding.
    Pad,
    /// A reader's acknowledgement (below `state.base`) and negative
    /// acknowledgement (the set's members).
    AckNack {
        /// The reader.
        reader: EntityId,
        /// The writer.
        writer: EntityId,
        /// Everything below the base is acknowledged; members are missing.
        state: SequenceNumberSet,
        /// Strictly increasing per reader.
        count: u32,
        /// F: no reply is needed.
        final_flag: bool,
    },
    /// A writer's announcement of the samples it has.
    Heartbeat {
        /// The reader (`UNKNOWN`: all).
        reader: EntityId,
        /// The writer.
        writer: EntityId,
        /// First sample available.
        first: SequenceNumber,
        /// Last sample written (`first - 1`: none).
        last: SequenceNumber,
        /// Strictly increasing per writer.
        count: u32,
        /// F: no reply required.
        final_flag: bool,
        /// L: asserts liveliness.
        liveliness: bool,
    },
    /// Samples that will never come: `[start, list.base)` and the list's
    /// members.
    Gap {
        /// The reader.
        reader: EntityId,
        /// The writer.
        writer: EntityId,
        /// First irrelevant sample.
        start: SequenceNumber,
        /// More irrelevant samples.
        list: SequenceNumberSet,
    },
    /// The source timestamp of the submessages that follow (`None`: invalidate).
    InfoTs(Option<Time>),
    /// The source of the submessages that follow.
    InfoSrc {
        /// Protocol version.
        version: (u8, u8),
        /// Vendor.
        vendor: [u8; 2],
        /// The source participant's prefix.
        prefix: GuidPrefix,
    },
    /// The participant the submessages that follow are for (zeros: all).
    InfoDst(GuidPrefix),
    /// A sample.
    Data(Data<'a>),
    /// Fragments of a sample.
    DataFrag(DataFrag<'a>),
    /// The fragments a writer has of one sample.
    HeartbeatFrag {
        /// The reader.
        reader: EntityId,
        /// The writer.
        writer: EntityId,
        /// The sample.
        sn: SequenceNumber,
        /// Last fragment available.
        last_fragment: u32,
        /// Strictly increasing per writer.
        count: u32,
    },
    /// The fragments a reader misses of one sample.
    NackFrag {
        /// The reader.
        reader: EntityId,
        /// The writer.
        writer: EntityId,
        /// The sample.
        sn: SequenceNumber,
        /// The missing fragments.
        state: FragmentNumberSet,
        /// Strictly increasing per reader.
        count: u32,
    },
    /// A submessage this crate does not interpret (vendor-specific, or
    /// security); readers skip it.
    Unknown {
        /// Its id.
        id: u8,
        /// Its flags (E included).
        flags: u8,
        /// Its body, in its own byte order.
        body: &'a [u8],
    },
}

/// A parsed datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    /// The header.
    pub header: Header,
    /// The submessages, in order.
    pub submessages: Vec<Submessage<'a>>,
}

/// The most submessages one datagram may hold here (a 64 KiB datagram of
/// empty PADs would be 16 K of them): bounds what a hostile sender makes
/// us allocate.
const MAX_SUBMESSAGES: usize = 4096;

impl<'a> Message<'a> {
    /// Parses a datagram (see the crate docs for what is refused).
    pub fn parse(dgram: &'a [u8]) -> Result<Self, RtpsError> {
        if dgram.len() < HEADER_LEN || &dgram[..4] != b"RTPS" {
            return Err(RtpsError::NotRtps);
        }
        let version = (dgram[4], dgram[5]);
        if version.0 != 2 {
            return Err(RtpsError::Version(version.0, version.1));
        }
        let mut prefix = [0u8; 12];
        prefix.copy_from_slice(&dgram[8..20]);
        let header = Header {
            version,
            vendor: [dgram[6], dgram[7]],
            prefix: GuidPrefix(prefix),
        };
        // Room for what a datagram of small samples holds, so that a
        // datagram full of them is not grown into step by step.
        let mut submessages = Vec::with_capacity((dgram.len() - HEADER_LEN) / 96 + 1);
        let mut at = HEADER_LEN;
        while at < dgram.len() {
            if submessages.len() >= MAX_SUBMESSAGES {
                return Err(RtpsError::Invalid("too many submessages"));
            }
            let rest = &dgram[at..];
            if rest.len() < 4 {
                return Err(RtpsError::Truncated {
                    what: "submessage header",
                    needed: 4 - rest.len(),
                });
            }
            let (id, flags) = (rest[0], rest[1]);
            let le = flags & E != 0;
            let raw = [rest[2], rest[3]];
            let declared = usize::from(if le {
                u16::from_le_bytes(raw)
            } else {
                u16::from_be_bytes(raw)
            });
            let avail = rest.len() - 4;
            let len = match declared {
                // 0: to the end of the message, but for PAD and INFO_TS.
                0 if id != SubmessageId::PAD && id != SubmessageId::INFO_TS => avail,
                n if n > avail => {
                    return Err(RtpsError::Truncated {
                        what: "submessage",
                        needed: n - avail,
                    })
                }
                n => n,
            };
            let last = 4 + len == rest.len();
            if len % 4 != 0 && !last {
                return Err(RtpsError::Invalid(
                    "submessage length not a multiple of 4 before another submessage",
                ));
            }
            let body = &rest[4..4 + len];
            submessages.push(parse_submessage(id, flags, body)?);
            at += 4 + len;
        }
        Ok(Self {
            header,
            submessages,
        })
    }
}

fn parse_submessage(id: u8, flags: u8, body: &[u8]) -> Result<Submessage<'_>, RtpsError> {
    let mut c = Cur::new(body, flags & E != 0);
    let ids = |c: &mut Cur<'_>| -> Result<(EntityId, EntityId), RtpsError> {
        Ok((EntityId(c.array()?), EntityId(c.array()?)))
    };
    Ok(match id {
        SubmessageId::PAD => Submessage::Pad,
        SubmessageId::ACKNACK => {
            let (reader, writer) = ids(&mut c)?;
            let state = SequenceNumberSet::read(&mut c)?;
            // Base 0 with no bits is the pre-emptive ACK some vendors send.
            if state.base.0 < 1 && !(state.base.0 == 0 && state.num_bits == 0) {
                return Err(RtpsError::Invalid("ACKNACK set based below 1"));
            }
            Submessage::AckNack {
                reader,
                writer,
                state,
                count: c.u32()?,
                final_flag: flags & 0x02 != 0,
            }
        }
        SubmessageId::HEARTBEAT => {
            let (reader, writer) = ids(&mut c)?;
            let first = SequenceNumber::read(&mut c)?;
            let last = SequenceNumber::read(&mut c)?;
            if first.0 < 1 || last.0 < first.0 - 1 {
                return Err(RtpsError::Invalid("HEARTBEAT range"));
            }
            Submessage::Heartbeat {
                reader,
                writer,
                first,
                last,
                count: c.u32()?,
                final_flag: flags & 0x02 != 0,
                liveliness: flags & 0x04 != 0,
            }
        }
        SubmessageId::GAP => {
            let (reader, writer) = ids(&mut c)?;
            let start = SequenceNumber::read(&mut c)?;
            let list = SequenceNumberSet::read(&mut c)?;
            if start.0 < 1 || list.base.0 < start.0 {
                return Err(RtpsError::Invalid("GAP range"));
            }
            Submessage::Gap {
                reader,
                writer,
                start,
                list,
            }
        }
        SubmessageId::INFO_TS if flags & 0x02 != 0 => Submessage::InfoTs(None),
        SubmessageId::INFO_TS => Submessage::InfoTs(Some(Time {
            seconds: c.u32()?,
            fraction: c.u32()?,
        })),
        SubmessageId::INFO_SRC => {
            let _unused = c.u32()?;
            let v = c.array::<2>()?;
            Submessage::InfoSrc {
                version: (v[0], v[1]),
                vendor: c.array()?,
                prefix: GuidPrefix(c.array()?),
            }
        }
        SubmessageId::INFO_DST => Submessage::InfoDst(GuidPrefix(c.array()?)),
        SubmessageId::DATA => Submessage::Data(parse_data(&mut c, body, flags)?),
        SubmessageId::DATA_FRAG => Submessage::DataFrag(parse_data_frag(&mut c, body, flags)?),
        SubmessageId::HEARTBEAT_FRAG => {
            let (reader, writer) = ids(&mut c)?;
            Submessage::HeartbeatFrag {
                reader,
                writer,
                sn: SequenceNumber::read(&mut c)?,
                last_fragment: c.u32()?,
                count: c.u32()?,
            }
        }
        SubmessageId::NACK_FRAG => {
            let (reader, writer) = ids(&mut c)?;
            let sn = SequenceNumber::read(&mut c)?;
            let state = FragmentNumberSet::read(&mut c)?;
            if state.base < 1 {
                return Err(RtpsError::Invalid("NACK_FRAG set based below 1"));
            }
            Submessage::NackFrag {
                reader,
                writer,
                sn,
                state,
                count: c.u32()?,
            }
        }
        _ => Submessage::Unknown { id, flags, body },
    })
}

/// The fixed part of DATA and DATA_FRAG up to the inline QoS: extra flags,
/// `octetsToInlineQos`, reader and writer ids, sequence number. Returns
/// where the inline QoS (or what follows the fixed part) starts.
fn data_head(c: &mut Cur<'_>) -> Result<(EntityId, EntityId, SequenceNumber, usize), RtpsError> {
    let _extra = c.u16()?;
    let to_qos = usize::from(c.u16()?);
    if to_qos % 4 != 0 {
        return Err(RtpsError::Invalid("octetsToInlineQos not a multiple of 4"));
    }
    let from = c.position();
    let reader = EntityId(c.array()?);
    let writer = EntityId(c.array()?);
    let sn = SequenceNumber::read(c)?;
    if sn.0 < 1 {
        return Err(RtpsError::Invalid("sequence number below 1"));
    }
    Ok((reader, writer, sn, from + to_qos))
}

/// The inline QoS at `at` when `present`, and where what follows starts.
fn inline_qos<'a>(
    body: &'a [u8],
    at: usize,
    present: bool,
    le: bool,
) -> Result<(Option<ParameterList<'a>>, usize), RtpsError> {
    if at > body.len() {
        return Err(RtpsError::Truncated {
            what: "DATA before its inline QoS",
            needed: at - body.len(),
        });
    }
    if !present {
        return Ok((None, at));
    }
    let (list, used) = ParameterList::parse_prefix(&body[at..], le)?;
    Ok((Some(list), at + used))
}

fn parse_data<'a>(c: &mut Cur<'a>, body: &'a [u8], flags: u8) -> Result<Data<'a>, RtpsError> {
    let (d, k) = (flags & 0x04 != 0, flags & 0x08 != 0);
    if d && k {
        return Err(RtpsError::Invalid("DATA with both data and key"));
    }
    let le = flags & E != 0;
    let (reader, writer, sn, qos_at) = data_head(c)?;
    // (The inline QoS may not start inside the fixed part.)
    let (inline_qos, at) = inline_qos(body, qos_at.max(c.position()), flags & 0x02 != 0, le)?;
    let payload = (d || k).then(|| &body[at..]);
    Ok(Data {
        reader,
        writer,
        sn,
        inline_qos,
        payload,
        key: k,
        non_standard: flags & 0x10 != 0,
    })
}

fn parse_data_frag<'a>(
    c: &mut Cur<'a>,
    body: &'a [u8],
    flags: u8,
) -> Result<DataFrag<'a>, RtpsError> {
    let le = flags & E != 0;
    let (reader, writer, sn, qos_at) = data_head(c)?;
    let fragment_start = c.u32()?;
    let fragments = c.u16()?;
    let fragment_size = c.u16()?;
    let sample_size = c.u32()?;
    if fragment_start < 1 || fragment_size == 0 {
        return Err(RtpsError::Invalid("DATA_FRAG numbering"));
    }
    let (inline_qos, at) = inline_qos(body, qos_at.max(c.position()), flags & 0x02 != 0, le)?;
    Ok(DataFrag {
        reader,
        writer,
        sn,
        fragment_start,
        fragments,
        fragment_size,
        sample_size,
        inline_qos,
        key: flags & 0x04 != 0,
        non_standard: flags & 0x08 != 0,
        bytes: &body[at..],
    })
}

/// Builds one datagram: the header, then submessages, little-endian.
#[derive(Debug)]
pub struct MessageBuilder {
    out: Out,
}

impl MessageBuilder {
    /// A message from `header`.
    pub fn new(header: Header) -> Self {
        let mut out = Out::default();
        out.bytes(b"RTPS")
            .u8(header.version.0)
            .u8(header.version.1)
            .bytes(&header.vendor)
            .bytes(&header.prefix.0);
        Self { out }
    }

    /// The bytes so far.
    pub fn len(&self) -> usize {
        self.out.buf.len()
    }

    /// Whether only the header is there.
    pub fn is_empty(&self) -> bool {
        self.out.buf.len() <= HEADER_LEN
    }

    /// Appends a submessage, its body padded to 4 bytes. Fails (appending
    /// nothing) when the body does not fit a submessage's 16-bit length.
    pub fn push(&mut self, sm: &Submessage<'_>) -> Result<&mut Self, RtpsError> {
        let mut body = Out::default();
        if matches!(sm, Submessage::Unknown { body, .. } if body.is_empty()) {
            // (Length 0 would mean "to the end of the message".)
            return Err(RtpsError::Invalid(
                "an empty submessage body other than PAD's",
            ));
        }
        let (id, flags) = encode_body(sm, &mut body);
        body.pad4();
        let len = u16::try_from(body.buf.len())
            .map_err(|_| RtpsError::Invalid("submessage body over 64 KiB"))?;
        // An unknown submessage keeps its flags and so its byte order.
        let len = match sm {
            Submessage::Unknown { flags, .. } if flags & E == 0 => len.to_be_bytes(),
            _ => len.to_le_bytes(),
        };
        self.out.u8(id).u8(flags).bytes(&len).bytes(&body.buf);
        Ok(self)
    }

    /// The datagram.
    pub fn finish(self) -> Vec<u8> {
        self.out.buf
    }
}

fn entity_pair(o: &mut Out, reader: EntityId, writer: EntityId) {
    o.bytes(&reader.0).bytes(&writer.0);
}

/// Writes `sm`'s body into `o` (little-endian); returns its id and flags.
fn encode_body(sm: &Submessage<'_>, o: &mut Out) -> (u8, u8) {
    let (id, flags) = match sm {
        Submessage::Pad => (SubmessageId::PAD, 0),
        Submessage::AckNack {
            reader,
            writer,
            state,
            count,
            final_flag,
        } => {
            entity_pair(o, *reader, *writer);
            state.write(o);
            o.u32(*count);
            (SubmessageId::ACKNACK, if *final_flag { 0x02 } else { 0 })
        }
        Submessage::Heartbeat {
            reader,
            writer,
            first,
            last,
            count,
            final_flag,
            liveliness,
        } => {
            entity_pair(o, *reader, *writer);
            first.write(o);
            last.write(o);
            o.u32(*count);
            let f = if *final_flag { 0x02 } else { 0 } | if *liveliness { 0x04 } else { 0 };
            (SubmessageId::HEARTBEAT, f)
        }
        Submessage::Gap {
            reader,
            writer,
            start,
            list,
        } => {
            entity_pair(o, *reader, *writer);
            start.write(o);
            list.write(o);
            (SubmessageId::GAP, 0)
        }
        Submessage::InfoTs(None) => (SubmessageId::INFO_TS, 0x02),
        Submessage::InfoTs(Some(t)) => {
            o.u32(t.seconds).u32(t.fraction);
            (SubmessageId::INFO_TS, 0)
        }
        Submessage::InfoSrc {
            version,
            vendor,
            prefix,
        } => {
            o.u32(0)
                .u8(version.0)
                .u8(version.1)
                .bytes(vendor)
                .bytes(&prefix.0);
            (SubmessageId::INFO_SRC, 0)
        }
        Submessage::InfoDst(p) => {
            o.bytes(&p.0);
            (SubmessageId::INFO_DST, 0)
        }
        Submessage::Data(d) => {
            o.u16(0).u16(16);
            entity_pair(o, d.reader, d.writer);
            d.sn.write(o);
            let mut f = 0;
            if let Some(q) = &d.inline_qos {
                q.write_le(o);
                f |= 0x02;
            }
            if let Some(p) = d.payload {
                o.bytes(p);
                f |= if d.key { 0x08 } else { 0x04 };
            }
            if d.non_standard {
                f |= 0x10;
            }
            (SubmessageId::DATA, f)
        }
        Submessage::DataFrag(d) => {
            o.u16(0).u16(28);
            entity_pair(o, d.reader, d.writer);
            d.sn.write(o);
            o.u32(d.fragment_start)
                .u16(d.fragments)
                .u16(d.fragment_size)
                .u32(d.sample_size);
            let mut f = 0;
            if let Some(q) = &d.inline_qos {
                q.write_le(o);
                f |= 0x02;
            }
            o.bytes(d.bytes);
            if d.key {
                f |= 0x04;
            }
            if d.non_standard {
                f |= 0x08;
            }
            (SubmessageId::DATA_FRAG, f)
        }
        Submessage::HeartbeatFrag {
            reader,
            writer,
            sn,
            last_fragment,
            count,
        } => {
            entity_pair(o, *reader, *writer);
            sn.write(o);
            o.u32(*last_fragment).u32(*count);
            (SubmessageId::HEARTBEAT_FRAG, 0)
        }
        Submessage::NackFrag {
            reader,
            writer,
            sn,
            state,
            count,
        } => {
            entity_pair(o, *reader, *writer);
            sn.write(o);
            state.write(o);
            o.u32(*count);
            (SubmessageId::NACK_FRAG, 0)
        }
        Submessage::Unknown { id, flags, body } => {
            o.bytes(body);
            return (*id, *flags);
        }
    };
    (id, flags | E)
}
