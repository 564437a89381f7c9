//! MPEG-2 transport stream packetisation (ISO/IEC 13818-1) of one H.264 program, built on
//! the `mpeg2ts` crate's packet writer: PAT and PMT, one PES packet per access unit with its
//! PTS, PCR and random-access flag on the first TS packet of every access unit, and null
//! packets as filler. HLS carries such TS directly (RFC 8216 §3.2).
//!
//! Continuity counters (§2.4.3.3) start from values the caller computes, so separately
//! built segments and parts join into one continuous stream.

use mpeg2ts::es::{StreamId, StreamType};
use mpeg2ts::pes::PesHeader;
use mpeg2ts::time::{ClockReference, Timestamp};
use mpeg2ts::ts::payload::{Bytes as TsBytes, Pat, Pes, Pmt};
use mpeg2ts::ts::{
    AdaptationField, ContinuityCounter, EsInfo, Pid, ProgramAssociation,
    TransportScramblingControl, TsHeader, TsPacket, TsPacketWriter, TsPayload, VersionNumber,
    WriteTsPacket,
};

/// Size of a TS packet.
pub const PACKET: usize = TsPacket::SIZE;
/// PID of the program map table.
pub(crate) const PMT_PID: u16 = 0x1000;
/// PID of the H.264 elementary stream, which also carries the PCR.
pub(crate) const VIDEO_PID: u16 = 0x100;
/// 90 kHz ticks the PTS runs ahead of the PCR, so every access unit arrives before it is due
/// (the decoder buffer model of §2.4.2 needs PCR ≤ DTS).
const PTS_LEAD: u64 = 9_000;
/// PTS and PCR base are 33-bit counters (§2.4.3.5, §2.4.3.7).
const WRAP_33: u64 = 1 << 33;

/// A null packet (PID 0x1FFF, payload only, §2.4.3.3): demultiplexers discard it, which makes
/// it the filler that brings a segment to its configured size.
const NULL_PACKET: [u8; PACKET] = {
    let mut p = [0xFF; PACKET];
    p[0] = 0x47;
    p[1] = 0x1F;
    p[2] = 0xFF;
    p[3] = 0x10;
    p
};

/// Why packetisation failed: only for out-of-range values, a programming error.
#[derive(Debug, thiserror::Error)]
#[error("TS packetisation failed: {0}")]
pub(crate) struct MuxError(String);

fn err(e: mpeg2ts::Error) -> MuxError {
    MuxError(e.to_string())
}

/// Continuity counters of the three PIDs with a payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub pat: u8,
    pub pmt: u8,
    pub video: u8,
}

/// Writes TS packets into a growing buffer.
pub(crate) struct Muxer {
    buf: Vec<u8>,
    cc: Counters,
}

fn header(pid: u16, cc: &mut u8) -> Result<TsHeader, MuxError> {
    let h = TsHeader {
        transport_error_indicator: false,
        transport_priority: false,
        pid: Pid::new(pid).map_err(err)?,
        transport_scrambling_control: TransportScramblingControl::NotScrambled,
        continuity_counter: ContinuityCounter::from_u8(*cc & 0x0F).map_err(err)?,
    };
    *cc = (*cc + 1) & 0x0F;
    Ok(h)
}

impl Muxer {
    /// A muxer whose first packets use the counters `cc`, writing into `buf`.
    pub(crate) fn new(buf: Vec<u8>, cc: Counters) -> Self {
        Self { buf, cc }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    fn write(&mut self, p: &TsPacket) -> Result<(), MuxError> {
        TsPacketWriter::new(&mut self.buf).write_ts_packet(p).map_err(err)
    }

    /// PAT and PMT (§2.4.4.3, §2.4.4.8): one program, one H.264 stream.
    pub(crate) fn tables(&mut self) -> Result<(), MuxError> {
        let pmt_pid = Pid::new(PMT_PID).map_err(err)?;
        let video_pid = Pid::new(VIDEO_PID).map_err(err)?;
        let pat = TsPacket {
            header: header(Pid::PAT, &mut self.cc.pat)?,
            adaptation_field: None,
            payload: Some(TsPayload::Pat(Pat {
                transport_stream_id: 1,
                version_number: VersionNumber::new(),
                table: vec![ProgramAssociation { program_num: 1, program_map_pid: pmt_pid }],
            })),
        };
        self.write(&pat)?;
        let pmt = TsPacket {
            header: header(PMT_PID, &mut self.cc.pmt)?,
            adaptation_field: None,
            payload: Some(TsPayload::Pmt(Pmt {
                program_num: 1,
                pcr_pid: Some(video_pid),
                version_number: VersionNumber::new(),
                program_info: Vec::new(),
                es_info: vec![EsInfo {
                    stream_type: StreamType::H264,
                    elementary_pid: video_pid,
                    descriptors: Vec::new(),
                }],
            })),
        };
        self.write(&pmt)
    }

    /// One access unit as one PES packet presented at `ticks` (90 kHz media time). The first
    /// TS packet carries the PCR for `ticks` and the random access indicator (every access
    /// unit is an IDR picture); the last is padded with adaptation-field stuffing.
    pub(crate) fn access_unit(&mut self, au: &[u8], ticks: u64) -> Result<(), MuxError> {
        let pts = Timestamp::new((ticks + PTS_LEAD) % WRAP_33).map_err(err)?;
        let pcr = ClockReference::new((ticks % WRAP_33) * 300).map_err(err)?;
        let af = AdaptationField {
            discontinuity_indicator: false,
            random_access_indicator: true,
            es_priority_indicator: false,
            pcr: Some(pcr),
            opcr: None,
            splice_countdown: None,
            transport_private_data: Vec::new(),
            extension: None,
        };
        let pes_header = PesHeader {
            stream_id: StreamId::new(StreamId::VIDEO_MIN),
            priority: false,
            data_alignment_indicator: true,
            copyright: false,
            original_or_copy: false,
            pts: Some(pts),
            dts: None,
            escr: None,
        };
        // 184 payload bytes, less the adaptation field (length, flags, PCR: 8 bytes) and the
        // PES header (9 bytes + 5 of PTS).
        let first = au.len().min(TsBytes::MAX_SIZE - 8 - 14);
        let start = TsPacket {
            header: header(VIDEO_PID, &mut self.cc.video)?,
            adaptation_field: Some(af),
            payload: Some(TsPayload::PesStart(Pes {
                header: pes_header,
                // 0: unbounded, allowed for video elementary streams in TS (§2.4.3.7).
                pes_packet_len: 0,
                data: TsBytes::new(&au[..first]).map_err(err)?,
            })),
        };
        self.write(&start)?;
        for chunk in au[first..].chunks(TsBytes::MAX_SIZE) {
            let p = TsPacket {
                header: header(VIDEO_PID, &mut self.cc.video)?,
                adaptation_field: None,
                payload: Some(TsPayload::PesContinuation(TsBytes::new(chunk).map_err(err)?)),
            };
            self.write(&p)?;
        }
        Ok(())
    }

    /// `n` null packets.
    pub(crate) fn filler(&mut self, n: usize) {
        self.buf.reserve(n * PACKET);
        for _ in 0..n {
            self.buf.extend_from_slice(&NULL_PACKET);
        }
    }
}

/// TS packets needed for one access unit of `au_len` bytes.
pub(crate) fn packets_for(au_len: usize) -> usize {
    let first = au_len.min(TsBytes::MAX_SIZE - 8 - 14);
    1 + (au_len - first).div_ceil(TsBytes::MAX_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpeg2ts::ts::{ReadTsPacket, TsPacketReader};

    #[test]
    fn packets_parse_back_with_continuous_counters_and_timestamps() {
        let au: Vec<u8> = (0..5000u32).map(|i| (i % 200) as u8 + 1).collect();
        let mut m = Muxer::new(Vec::new(), Counters { pat: 3, pmt: 15, video: 14 });
        m.tables().unwrap();
        m.access_unit(&au, 90_000).unwrap();
        m.filler(2);
        m.access_unit(&au, 93_000).unwrap();
        let bytes = m.into_inner();
        assert_eq!(bytes.len() % PACKET, 0);
        assert_eq!(bytes.len() / PACKET, 2 + 2 * packets_for(au.len()) + 2);

        let mut r = TsPacketReader::new(&bytes[..]);
        let mut video_cc = Vec::new();
        let mut es = Vec::new();
        let mut pts = Vec::new();
        let mut pcr = Vec::new();
        let mut nulls = 0;
        while let Some(p) = r.read_ts_packet().unwrap() {
            match p.header.pid.as_u16() {
                0 => assert_eq!(p.header.continuity_counter.as_u8(), 3),
                PMT_PID => assert_eq!(p.header.continuity_counter.as_u8(), 15),
                VIDEO_PID => {
                    video_cc.push(p.header.continuity_counter.as_u8());
                    if let Some(af) = &p.adaptation_field
                        && let Some(c) = af.pcr
                    {
                        pcr.push(c.as_u64());
                        assert!(af.random_access_indicator);
                    }
                    match p.payload {
                        Some(TsPayload::PesStart(pes)) => {
                            pts.push(pes.header.pts.unwrap().as_u64());
                            es.extend_from_slice(&pes.data);
                        }
                        Some(TsPayload::PesContinuation(b)) => es.extend_from_slice(&b),
                        other => panic!("unexpected payload {other:?}"),
                    }
                }
                0x1FFF => nulls += 1,
                pid => panic!("unexpected pid {pid}"),
            }
        }
        assert_eq!(nulls, 2);
        let want: Vec<u8> = (0..video_cc.len()).map(|i| ((14 + i) % 16) as u8).collect();
        assert_eq!(video_cc, want);
        assert_eq!(pts, vec![99_000, 102_000]);
        assert_eq!(pcr, vec![90_000 * 300, 93_000 * 300]);
        assert_eq!(es.len(), 2 * au.len());
        assert_eq!(&es[..au.len()], &au[..]);
    }

    #[test]
    fn timestamps_wrap_at_33_bits() {
        let mut m = Muxer::new(Vec::new(), Counters::default());
        m.access_unit(&[1; 10], WRAP_33 * 5 - 1).unwrap();
        assert_eq!(m.len(), PACKET);
    }
}
