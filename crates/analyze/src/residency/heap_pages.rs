//! One residency reading as a lookup: which heap mapping an address is in and which of its pages
//! are resident.
use trace::Residency;

/// The resident runs of a reading, flattened (mappings are in address order and their runs
/// ascending, so the whole list is), and the mappings' ranges.
pub struct HeapPages {
    pub page_size: u64,
    runs: Vec<(u64, u64)>,
    mappings: Vec<(u64, u64)>,
}

impl HeapPages {
    pub fn new(reading: &Residency) -> HeapPages {
        HeapPages {
            page_size: reading.page_size,
            runs: reading
                .mappings
                .iter()
                .flat_map(|m| m.runs.iter().copied())
                .collect(),
            mappings: reading.mappings.iter().map(|m| (m.start, m.end)).collect(),
        }
    }

    /// The resident runs, ascending.
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// The index of the mapping holding `address`.
    pub fn mapping_of(&self, address: u64) -> Option<usize> {
        let i = self.mappings.partition_point(|m| m.1 <= address);
        (self.mappings.get(i)?.0 <= address).then_some(i)
    }

    pub fn mapping_count(&self) -> usize {
        self.mappings.len()
    }

    pub fn mapping(&self, i: usize) -> (u64, u64) {
        self.mappings[i]
    }

    /// Calls `each(page, overlap)` for every resident page `[start, end)` overlaps, with the
    /// bytes of the range on it.
    pub fn for_resident_pages(&self, start: u64, end: u64, mut each: impl FnMut(u64, u64)) {
        let first = self.runs.partition_point(|r| r.1 <= start);
        for &(run_start, run_end) in &self.runs[first..] {
            if run_start >= end {
                break;
            }
            let (from, to) = (start.max(run_start), end.min(run_end));
            let mut page = from - from % self.page_size;
            while page < to {
                let next = page + self.page_size;
                each(page, to.min(next) - from.max(page));
                page = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::ResidentMapping;

    #[test]
    fn overlaps_count_only_resident_pages() {
        let pages = HeapPages::new(&Residency {
            seq: 0,
            t_ns: 0,
            page_size: 0x1000,
            mappings: vec![ResidentMapping {
                start: 0x10000,
                end: 0x20000,
                runs: vec![(0x10000, 0x12000), (0x15000, 0x16000)],
            }],
        });
        let mut seen = Vec::new();
        pages.for_resident_pages(0x10800, 0x15010, |p, b| seen.push((p, b)));
        assert_eq!(
            seen,
            vec![(0x10000, 0x800), (0x11000, 0x1000), (0x15000, 0x10)]
        );
        assert_eq!(pages.mapping_of(0x1ffff), Some(0));
        assert_eq!(pages.mapping_of(0x20000), None);
        assert_eq!(pages.mapping_of(0xffff), None);
    }
}
