//! RESIDENCY chunks: which pages of a process image's heap mappings were resident, read by the
//! recorder beside a memory sample (docs/trace-format.md, "Heap residency"). With the addresses
//! of the events they tell which blocks hold resident pages and which pages only free memory
//! holds.

/// The resident pages of an image's heap mappings at one memory sample.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Residency {
    /// The `seq` of the memory sample read with it (`MemorySample::seq`): every call below it had
    /// happened.
    pub seq: u64,
    /// The `t_ns` of that memory sample (several samples of an idle program share a seq).
    pub t_ns: u64,
    /// Bytes per page (a power of two).
    pub page_size: u64,
    /// The heap mappings (the smaps split's heap), in address order.
    pub mappings: Vec<ResidentMapping>,
}

/// One heap mapping and its resident runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResidentMapping {
    pub start: u64,
    pub end: u64,
    /// `[start, end)` address runs of resident pages, ascending, inside the mapping.
    pub runs: Vec<(u64, u64)>,
}

impl Residency {
    /// Resident bytes of all the mappings.
    pub fn resident_bytes(&self) -> u64 {
        self.mappings
            .iter()
            .flat_map(|m| &m.runs)
            .map(|(s, e)| e - s)
            .sum()
    }
}

/// zstd level of the payload: readings repeat from one sample to the next.
const LEVEL: i32 = 3;
/// Largest decompressed payload a reader accepts.
const MAX_RAW: u64 = 64 << 20;

/// The payload of a RESIDENCY chunk: `u32` raw length, then one zstd frame of the varint layout
/// of docs/trace-format.md ("Heap residency"): per reading its seq, page shift and mappings, each
/// mapping and run as (gap, length) in pages.
pub fn residency_payload(readings: &[Residency]) -> Vec<u8> {
    let mut raw = Vec::new();
    put(&mut raw, readings.len() as u64);
    for r in readings {
        let page = r.page_size.max(1);
        put(&mut raw, r.seq);
        put(&mut raw, r.t_ns);
        put(&mut raw, u64::from(page.trailing_zeros()));
        put(&mut raw, r.mappings.len() as u64);
        let mut at = 0u64;
        for m in &r.mappings {
            let (start, end) = (m.start / page, m.end / page);
            put(&mut raw, start.saturating_sub(at));
            put(&mut raw, end.saturating_sub(start));
            put(&mut raw, m.runs.len() as u64);
            let mut run_at = start;
            for &(s, e) in &m.runs {
                let (s, e) = (s / page, e / page);
                put(&mut raw, s.saturating_sub(run_at));
                put(&mut raw, e.saturating_sub(s));
                run_at = e;
            }
            at = end;
        }
    }
    let packed = zstd::bulk::compress(&raw, LEVEL).unwrap_or_default();
    let mut p = Vec::with_capacity(4 + packed.len());
    p.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    p.extend_from_slice(&packed);
    p
}

/// Decodes a RESIDENCY chunk's payload (appending to `out`).
pub(crate) fn read_residency_payload(p: &[u8], out: &mut Vec<Residency>) -> Result<(), String> {
    let cut = || "residency chunk cut short".to_string();
    let raw_len = p
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(cut)?;
    if u64::from(raw_len) > MAX_RAW {
        return Err(format!("residency chunk of {raw_len} bytes decompressed"));
    }
    let raw = zstd::bulk::decompress(&p[4..], raw_len as usize)
        .map_err(|e| format!("residency chunk: zstd: {e}"))?;
    let mut c = crate::varint::Cursor::new(&raw);
    let mut next = || c.varint().ok_or_else(cut);
    let n = next()?;
    for _ in 0..n {
        let seq = next()?;
        let t_ns = next()?;
        let shift = next()?;
        if !(9..=30).contains(&shift) {
            return Err(format!("residency chunk with pages of 2^{shift} bytes"));
        }
        let page = 1u64 << shift;
        let count = next()?;
        let mut mappings = Vec::new();
        let mut at = 0u64;
        for _ in 0..count {
            let start = at.checked_add(next()?).ok_or_else(overflow)?;
            let end = start.checked_add(next()?).ok_or_else(overflow)?;
            let run_count = next()?;
            let mut runs = Vec::new();
            let mut run_at = start;
            for _ in 0..run_count {
                let s = run_at.checked_add(next()?).ok_or_else(overflow)?;
                let e = s.checked_add(next()?).ok_or_else(overflow)?;
                if e > end {
                    return Err("residency chunk: a run past its mapping's end".into());
                }
                runs.push((s * page, e * page));
                run_at = e;
            }
            if end > u64::MAX / page {
                return Err(overflow());
            }
            mappings.push(ResidentMapping {
                start: start * page,
                end: end * page,
                runs,
            });
            at = end;
        }
        out.push(Residency {
            seq,
            t_ns,
            page_size: page,
            mappings,
        });
    }
    Ok(())
}

fn overflow() -> String {
    "residency chunk: an address past 2^64".into()
}

fn put(out: &mut Vec<u8>, v: u64) {
    crate::varint::put(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_round_trip() {
        let readings = vec![
            Residency {
                seq: 42,
                t_ns: 7,
                page_size: 4096,
                mappings: vec![
                    ResidentMapping {
                        start: 0x55d0_0000_0000,
                        end: 0x55d0_0010_0000,
                        runs: vec![(0x55d0_0000_0000, 0x55d0_0000_3000)],
                    },
                    ResidentMapping {
                        start: 0x7f00_0000_0000,
                        end: 0x7f00_0400_0000,
                        runs: vec![
                            (0x7f00_0000_1000, 0x7f00_0000_2000),
                            (0x7f00_0001_0000, 0x7f00_0400_0000),
                        ],
                    },
                ],
            },
            Residency {
                seq: 99,
                t_ns: 8,
                page_size: 16384,
                mappings: vec![],
            },
        ];
        let mut back = Vec::new();
        read_residency_payload(&residency_payload(&readings), &mut back).unwrap();
        assert_eq!(back, readings);
        assert_eq!(readings[0].resident_bytes(), 0x3000 + 0x1000 + 0x3ff_0000);
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let good = residency_payload(&[Residency {
            seq: 1,
            t_ns: 2,
            page_size: 4096,
            mappings: vec![ResidentMapping {
                start: 0x1000,
                end: 0x3000,
                runs: vec![(0x1000, 0x2000)],
            }],
        }]);
        for cut in 0..good.len() {
            let _ = read_residency_payload(&good[..cut], &mut Vec::new());
        }
        // A run past its mapping.
        let mut raw = Vec::new();
        for v in [1, 1, 0, 12, 1, 1, 2, 1, 0, 5] {
            put(&mut raw, v);
        }
        let mut p = (raw.len() as u32).to_le_bytes().to_vec();
        p.extend_from_slice(&zstd::bulk::compress(&raw, 1).unwrap());
        let err = read_residency_payload(&p, &mut Vec::new()).unwrap_err();
        assert!(err.contains("past its mapping"), "{err}");
    }
}
