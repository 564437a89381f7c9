//! H.264 access units for one picture, encoded by `less-avc` (lossless I_PCM macroblocks,
//! every picture an IDR): access unit delimiter, SPS, PPS, IDR slice, in Annex B byte
//! stream format. Each access unit is therefore a random access point on its own.

use less_avc::ycbcr_image::{DataPlane, Planes, YCbCrImage};
use less_avc::{BitDepth, LessEncoder};

use super::picture::{Canvas, HEIGHT, WIDTH};

/// Access unit delimiter (H.264 §7.3.2.4), required at the start of every access unit
/// carried in MPEG-2 TS (ISO/IEC 13818-1 §2.14): nal_unit_type 9, primary_pic_type 0
/// (I slices only), then the RBSP stop bit.
const AUD: [u8; 6] = [0, 0, 0, 1, 0x09, 0x10];

/// `level_idc` written into the SPS: 3.1 (Annex A, Table A-1: up to 3600 macroblocks per
/// frame, 108 000 per second, 14 Mbit/s for Baseline), which covers this picture size at
/// every frame rate the origin uses. The encoder writes level 1.0, whose 99-macroblock
/// frame limit this picture exceeds.
const LEVEL_IDC: u8 = 31;
/// `constraint_set0_flag` and `constraint_set1_flag` (§7.4.2.1.1): the stream obeys the
/// Baseline and Main constraints, i.e. it is Constrained Baseline, which every player
/// decodes.
const CONSTRAINTS: u8 = 0xC0;

/// Why a picture could not be encoded (only a mismatched canvas, a programming error).
#[derive(Debug, thiserror::Error)]
#[error("H.264 encoding failed: {0}")]
pub(crate) struct EncodeError(String);

/// Encodes `canvas` as one self-contained access unit.
pub(crate) fn access_unit(canvas: &Canvas) -> Result<Vec<u8>, EncodeError> {
    fn plane(data: &[u8], stride: usize) -> DataPlane<'_> {
        DataPlane { data, stride, bit_depth: BitDepth::Depth8 }
    }
    let image = YCbCrImage {
        planes: Planes::YCbCr((
            plane(&canvas.y, WIDTH),
            plane(&canvas.cb, WIDTH / 2),
            plane(&canvas.cr, WIDTH / 2),
        )),
        width: WIDTH as u32,
        height: HEIGHT as u32,
    };
    // A fresh encoder per picture: it hands back SPS and PPS with the first frame, which is
    // what an all-IDR stream repeats in every access unit anyway.
    let (units, _) = LessEncoder::new(&image).map_err(|e| EncodeError(e.to_string()))?;
    let mut sps = units.sps.to_annex_b_data();
    // Bytes: start code (4), NAL header 0x67, profile_idc, constraint flags, level_idc.
    if sps.len() < 8 || sps[4] != 0x67 {
        return Err(EncodeError("unexpected SPS layout".into()));
    }
    sps[6] = CONSTRAINTS;
    sps[7] = LEVEL_IDC;
    let pps = units.pps.to_annex_b_data();
    let slice = units.frame.to_annex_b_data();
    let mut au = Vec::with_capacity(AUD.len() + sps.len() + pps.len() + slice.len());
    au.extend_from_slice(&AUD);
    au.extend_from_slice(&sps);
    au.extend_from_slice(&pps);
    au.extend_from_slice(&slice);
    Ok(au)
}

#[cfg(test)]
mod tests {
    use super::super::picture::Scene;
    use super::*;

    fn au(ms: u64) -> Vec<u8> {
        let mut c = Canvas::new();
        c.draw(&Scene { label: "LIVE", media_ms: ms, counter: "SEQ 1", background: 1 });
        access_unit(&c).unwrap()
    }

    #[test]
    fn access_units_have_a_fixed_size_and_the_expected_nal_units() {
        let a = au(0);
        let b = au(123_456);
        assert_eq!(a.len(), b.len(), "I_PCM with nonzero samples has a fixed size");
        assert_ne!(a, b);
        assert_eq!(&a[..6], &AUD);
        // SPS: Baseline (66), constraint flags, level 3.1.
        assert_eq!(&a[6..12], &[0, 0, 0, 1, 0x67, 66]);
        assert_eq!(a[12], CONSTRAINTS);
        assert_eq!(a[13], LEVEL_IDC);
        // NAL unit types in order: AUD 9, SPS 7, PPS 8, IDR slice 5.
        let types: Vec<u8> =
            a.windows(4).filter(|w| w[..3] == [0, 0, 1]).map(|w| w[3] & 0x1F).collect();
        assert_eq!(types, vec![9, 7, 8, 5]);
        // 144 macroblocks of 384 samples each, plus headers.
        assert!(a.len() > 144 * 384 && a.len() < 144 * 390, "{}", a.len());
    }
}
