//! Writes a trace file: the header, then framed chunks in any interleaving of streams.
use std::io::{self, Write};

use crate::codec::{ChunkEncoder, EncodedChunk};
use crate::event::{ProcessInfo, Record};
use crate::format::{
    kind, EndReason, Frame, TraceHeader, Trailer, Untraced, FILE_PREFIX_LEN, MAGIC,
};
use crate::memory::{memory_payload, MemorySample};
use crate::residency::{residency_payload, Residency};
use crate::stacks::{compressed_modules_payload, modules_payload, Module, StackEncoder};

/// Index of a process stream in a file (assigned in order of `begin_process`).
pub type StreamId = u32;

/// Writes chunks as they come; every chunk is self-delimiting and checksummed, so whatever prefix
/// reaches the disk stays readable. Call `flush` regularly.
pub struct TraceWriter<W: Write> {
    out: W,
    next_stream: StreamId,
    bytes: u64,
    chunks: u64,
    /// The header said `stacks`: events chunks of `write_records` keep stack ids.
    stacks: bool,
    free_stacks: bool,
    /// `TraceHeader::sampled_stack_chunks`.
    sampled_stacks: bool,
    /// The file's version (`TraceHeader::version`): from 5 on MODULES chunks are compressed.
    version: u32,
    stack_encoder: StackEncoder,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(mut out: W, header: &TraceHeader) -> io::Result<Self> {
        let json = serde_json::to_vec(header).map_err(io::Error::other)?;
        let mut prefix = [0u8; FILE_PREFIX_LEN];
        prefix[0..8].copy_from_slice(&MAGIC);
        // Only sampled stacks use what version 5 added, only stacks what version 4 did: a trace
        // without them is written as the older version, which older readers read.
        let version = header.version();
        prefix[8..12].copy_from_slice(&version.to_le_bytes());
        prefix[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
        prefix[16..20].copy_from_slice(&crc32fast::hash(&json).to_le_bytes());
        out.write_all(&prefix)?;
        out.write_all(&json)?;
        Ok(TraceWriter {
            out,
            next_stream: 0,
            bytes: (FILE_PREFIX_LEN + json.len()) as u64,
            chunks: 0,
            stacks: header.stacks,
            free_stacks: header.free_stacks,
            sampled_stacks: header.sampled_stack_chunks(),
            version,
            stack_encoder: StackEncoder::new(),
        })
    }

    fn chunk(&mut self, kind: u8, stream: u32, records: u32, payload: &[u8]) -> io::Result<()> {
        let payload_len =
            u32::try_from(payload.len()).map_err(|_| io::Error::other("chunk too large"))?;
        let mut frame = Frame {
            kind,
            stream,
            payload_len,
            records,
            crc: 0,
        };
        frame.crc = Frame::checksum(&frame.encode(), payload);
        self.out.write_all(&frame.encode())?;
        self.out.write_all(payload)?;
        self.bytes += (frame.encode().len() + payload.len()) as u64;
        self.chunks += 1;
        Ok(())
    }

    /// Announces a process image; its events chunks follow under the returned id.
    pub fn begin_process(&mut self, info: &ProcessInfo) -> io::Result<StreamId> {
        let id = self.next_stream;
        self.next_stream += 1;
        let mut p = Vec::with_capacity(64);
        p.extend_from_slice(&info.pid.to_le_bytes());
        p.extend_from_slice(&info.ppid.to_le_bytes());
        p.extend_from_slice(&info.exec_index.to_le_bytes());
        p.extend_from_slice(&info.start_unix_ns.to_le_bytes());
        p.extend_from_slice(&(info.cmdline.len() as u32).to_le_bytes());
        for arg in &info.cmdline {
            p.extend_from_slice(&(arg.len() as u32).to_le_bytes());
            p.extend_from_slice(arg.as_bytes());
        }
        self.chunk(kind::PROCESS, id, 0, &p)?;
        Ok(id)
    }

    pub fn write_events(&mut self, stream: StreamId, chunk: &EncodedChunk) -> io::Result<()> {
        self.chunk(kind::EVENTS, stream, chunk.records, &chunk.payload)
    }

    /// Ends a stream; `records` is how many records it holds (a check for readers).
    pub fn end_process(
        &mut self,
        stream: StreamId,
        reason: EndReason,
        records: u64,
    ) -> io::Result<()> {
        let mut p = vec![reason as u8];
        p.extend_from_slice(&records.to_le_bytes());
        self.chunk(kind::END, stream, 0, &p)
    }

    /// Stacks `first_id`, `first_id + 1`, ... (a STACKS chunk). Ids start at 1 and the chunks
    /// of a file must continue each other: readers refuse a chunk that skips or repeats ids.
    pub fn write_stacks<'a>(
        &mut self,
        first_id: u32,
        stacks: impl IntoIterator<Item = &'a [u64]>,
    ) -> io::Result<()> {
        let payload = self.stack_encoder.payload(first_id, stacks)?;
        self.write_stacks_payload(&payload)
    }

    /// A STACKS chunk whose payload was made elsewhere (`trace::StackEncoder`); do not mix with
    /// `write_stacks`, whose encoder would not know these stacks.
    pub fn write_stacks_payload(&mut self, payload: &[u8]) -> io::Result<()> {
        self.chunk(kind::STACKS, u32::MAX, 0, payload)
    }

    /// Modules seen mapped (a MODULES chunk).
    pub fn write_modules(&mut self, modules: &[Module]) -> io::Result<()> {
        let payload = if self.version >= 5 {
            compressed_modules_payload(modules)?
        } else {
            modules_payload(modules)?
        };
        self.chunk(kind::MODULES, u32::MAX, 0, &payload)
    }

    /// Heap residency readings of a stream (a RESIDENCY chunk; any number per stream, in the
    /// order taken).
    pub fn write_residency(&mut self, stream: StreamId, readings: &[Residency]) -> io::Result<()> {
        self.chunk(kind::RESIDENCY, stream, 0, &residency_payload(readings))
    }

    /// Memory samples of a stream (a MEMORY chunk; any number per stream, in the order taken).
    pub fn write_memory(&mut self, stream: StreamId, samples: &[MemorySample]) -> io::Result<()> {
        self.chunk(kind::MEMORY, stream, 0, &memory_payload(samples))
    }

    /// A warning for whoever reads the trace ("tracing stopped in pid 12: disk full").
    pub fn note(&mut self, text: &str) -> io::Result<()> {
        self.chunk(kind::NOTE, u32::MAX, 0, text.as_bytes())
    }

    /// A program that ran without the shim (docs/trace-format.md, UNTRACED).
    pub fn untraced(&mut self, u: &Untraced) -> io::Result<()> {
        let json = serde_json::to_vec(u).map_err(io::Error::other)?;
        self.chunk(kind::UNTRACED, u32::MAX, 0, &json)
    }

    /// What the blocks live at the command's exit were (docs/trace-format.md, LEAKS).
    pub fn leaks(&mut self, l: &crate::format::Leaks) -> io::Result<()> {
        let json = serde_json::to_vec(l).map_err(io::Error::other)?;
        self.chunk(kind::LEAKS, u32::MAX, 0, &json)
    }

    /// Writes the trailer and flushes; the file is complete.
    pub fn finish(mut self, trailer: &Trailer) -> io::Result<W> {
        let json = serde_json::to_vec(trailer).map_err(io::Error::other)?;
        self.chunk(kind::TRAILER, u32::MAX, 0, &json)?;
        self.out.flush()?;
        Ok(self.out)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The output, e.g. to cut a half-written chunk after a failed write (`bytes_written` is
    /// where the last whole chunk ends).
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Bytes of the whole chunks written so far: a chunk whose write failed is not counted.
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    pub fn chunks_written(&self) -> u64 {
        self.chunks
    }

    /// Convenience for complete in-memory streams (tests, tools): encodes `records` with their
    /// exact times (one anchor per event) in chunks of `chunk_records`; their stack ids are kept
    /// when the header said `stacks` (of frees, when it said `free_stacks`).
    pub fn write_records(
        &mut self,
        stream: StreamId,
        records: &[Record],
        chunk_records: usize,
    ) -> io::Result<()> {
        let mut enc = ChunkEncoder::new(3);
        if self.sampled_stacks {
            enc = enc.with_sampled_stacks();
        } else if self.stacks {
            enc = enc.with_stacks(self.free_stacks);
        }
        for r in records {
            match r {
                Record::Event(e) => {
                    enc.push_anchor(e.seq, e.t_ns);
                    enc.push_event(e).map_err(io::Error::other)?;
                }
                Record::Marker(m) => enc.push_marker(m).map_err(io::Error::other)?,
            }
            if enc.len() >= chunk_records.max(1) {
                if let Some(c) = enc.finish()? {
                    self.write_events(stream, &c)?;
                }
            }
        }
        if let Some(c) = enc.finish()? {
            self.write_events(stream, &c)?;
        }
        Ok(())
    }
}
