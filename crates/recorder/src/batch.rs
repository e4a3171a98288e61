//! A batch: one future events chunk of one stream, as merged records in seq order, handed from
//! the drain thread to an encoder thread.
//!
//! Chunks decode on their own (the encoder resets its tables per chunk; only time anchors carry
//! over), so a batch holds everything its chunk needs: the records, the markers at their place
//! and the anchors that bracket it. Batches are recycled (`clear` keeps the capacity): glibc hands
//! buffers of this size back to the kernel, and faulting them in again per chunk showed in the
//! profile.
use trace::{ChunkEncoder, Event, Marker, Op, OrderError, UncompressedChunk};

use crate::protocol::{OP_SHIFT, SEQ_MASK};

#[derive(Default)]
pub struct Batch {
    /// The stream (process image) it belongs to and its pid; set when the batch is handed off.
    pub stream: u32,
    pub pid: u32,
    /// Ring records in seq order: `seq | op << OP_SHIFT`, address, size, old address.
    pub records: Vec<[u64; 4]>,
    /// The thread of each record.
    pub tids: Vec<u32>,
    /// Markers, each with the index in `records` of the event it precedes (sorted).
    pub markers: Vec<(usize, Marker)>,
    /// Time anchors (seq, t_ns): from the last one at or before the first record on.
    pub anchors: Vec<(u64, u64)>,
}

impl Batch {
    /// Records (events and markers): what `chunk_records` counts.
    #[inline]
    pub fn len(&self) -> usize {
        self.records.len() + self.markers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.records.clear();
        self.tids.clear();
        self.markers.clear();
        self.anchors.clear();
    }

    /// Adds an anchor with the encoder's rules (`trace::codec::append_anchor`).
    pub fn push_anchor(&mut self, seq: u64, t_ns: u64) {
        trace::codec::append_anchor(&mut self.anchors, seq, t_ns);
    }

    /// The highest seq in the batch (markers included), `None` when empty.
    fn last_seq(&self) -> Option<u64> {
        let event = self.records.last().map(|r| r[0] & SEQ_MASK);
        let marker = self.markers.last().map(|(_, m)| m.seq);
        event.max(marker)
    }

    /// Copies into `next` (a cleared batch) the anchors the following chunk may need: from the
    /// last one at or before `last_seq + 1` on (what `ChunkEncoder::finish_raw` keeps).
    pub fn carry_anchors_to(&self, next: &mut Batch) {
        let keep = match self.last_seq() {
            Some(last) => self
                .anchors
                .iter()
                .rposition(|a| a.0 <= last + 1)
                .unwrap_or(0),
            None => 0,
        };
        next.anchors.extend_from_slice(&self.anchors[keep..]);
    }

    /// Feeds the batch to `encoder` and seals the chunk into `raw` (a buffer to reuse).
    /// `encoder` must be fresh or have encoded only earlier batches of the same stream: its
    /// leftover anchors then come before this batch's.
    pub fn encode(
        &self,
        encoder: &mut ChunkEncoder,
        raw: Vec<u8>,
    ) -> Result<Option<UncompressedChunk>, OrderError> {
        for &(seq, t) in &self.anchors {
            encoder.push_anchor(seq, t);
        }
        let result = self.push_records(encoder);
        // Sealed even after an error: that resets the encoder's columns for the next batch.
        let chunk = encoder.finish_raw(raw);
        result.map(|()| chunk)
    }

    fn push_records(&self, encoder: &mut ChunkEncoder) -> Result<(), OrderError> {
        // The records between two markers' places in one loop: no marker test per record.
        let mut from = 0;
        for (at, m) in &self.markers {
            let to = (*at).clamp(from, self.records.len());
            self.push_events(encoder, from..to)?;
            encoder.push_marker(m)?;
            from = to;
        }
        self.push_events(encoder, from..self.records.len())
    }

    fn push_events(
        &self,
        encoder: &mut ChunkEncoder,
        range: std::ops::Range<usize>,
    ) -> Result<(), OrderError> {
        let records = self.records.get(range.clone()).unwrap_or_default();
        let tids = self.tids.get(range).unwrap_or_default();
        for (&[seq_op, addr, size, old_addr], &tid) in records.iter().zip(tids) {
            // Tags were checked when the record left the ring.
            let Some(op) = Op::from_tag((seq_op >> OP_SHIFT) as u8) else {
                continue;
            };
            encoder.push_event(&Event {
                seq: seq_op & SEQ_MASK,
                t_ns: 0,
                tid,
                op,
                addr,
                size,
                old_addr,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, addr: u64) -> [u64; 4] {
        [seq | (Op::Malloc as u64) << OP_SHIFT, addr, 16, 0]
    }

    fn marker(seq: u64, label: &str) -> Marker {
        Marker {
            seq,
            t_ns: 7,
            tid: 0,
            label: label.into(),
        }
    }

    fn decode(chunk: &UncompressedChunk) -> Vec<trace::Record> {
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        let encoded = chunk.compress(&mut c).unwrap();
        trace::codec::decode_payload(&encoded.payload).unwrap()
    }

    /// Two batches of one stream encoded by one encoder, and the second alone by a fresh one,
    /// give the same chunk: what lets batches of a stream go to any encoder thread.
    #[test]
    fn a_batch_encodes_the_same_on_a_fresh_or_a_used_encoder() {
        let mut first = Batch::default();
        first.push_anchor(0, 0);
        for s in 0..10 {
            first.records.push(event(s, 0x1000 + s * 32));
            first.tids.push(5);
        }
        first.push_anchor(10, 1000);
        let mut second = Batch::default();
        first.carry_anchors_to(&mut second);
        second.markers.push((0, marker(10, "m")));
        for s in 10..20 {
            second.records.push(event(s, 0x1000 + s * 32));
            second.tids.push(if s % 2 == 0 { 5 } else { 6 });
        }
        second.push_anchor(20, 3000);

        let mut used = ChunkEncoder::new(1);
        first.encode(&mut used, Vec::new()).unwrap().unwrap();
        let a = second.encode(&mut used, Vec::new()).unwrap().unwrap();
        let b = second
            .encode(&mut ChunkEncoder::new(1), Vec::new())
            .unwrap()
            .unwrap();
        assert_eq!(a.raw, b.raw);
        let records = decode(&a);
        assert_eq!(records.len(), 11);
        let trace::Record::Marker(m) = &records[0] else {
            panic!("the marker comes first: {:?}", records[0]);
        };
        assert_eq!((m.seq, m.label.as_str()), (10, "m"));
        let trace::Record::Event(e) = &records[10] else {
            panic!("an event last");
        };
        // Interpolated between the carried anchor (10, 1000) and (20, 3000).
        assert_eq!((e.seq, e.tid, e.t_ns), (19, 6, 2800));
    }

    #[test]
    fn anchors_carried_start_at_the_last_one_before_the_next_record() {
        let mut b = Batch::default();
        for (s, t) in [(0, 0), (4, 10), (8, 20), (8, 30), (8, 40), (12, 50)] {
            b.push_anchor(s, t);
        }
        assert_eq!(b.anchors, [(0, 0), (4, 10), (8, 20), (8, 40), (12, 50)]);
        for s in 0..8 {
            b.records.push(event(s, 0x1000));
            b.tids.push(1);
        }
        let mut next = Batch::default();
        b.carry_anchors_to(&mut next);
        assert_eq!(next.anchors, [(8, 40), (12, 50)]);
    }
}
