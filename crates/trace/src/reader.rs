//! Streaming reader: scans chunk frames once at open (cheap: payloads are skipped), then reads and
//! decodes one chunk at a time, so memory is bounded by a chunk, not by the file.
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::codec::ChunkDecoder;
use crate::error::{Damage, DamageKind, TraceError};
use crate::event::{ProcessInfo, Record};
use crate::format::{
    kind, EndReason, Frame, TraceHeader, Trailer, Untraced, CHUNK_FRAME_LEN, FILE_PREFIX_LEN,
    FORMAT_VERSION, MAGIC, MAX_PAYLOAD, OLDEST_READ_VERSION,
};
use crate::memory::{read_memory_payload, MemorySample};
use crate::residency::{read_residency_payload, Residency};
use crate::stacks::{read_modules_payload, read_stacks_payload, Module, StackTable};

/// Where one events chunk lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    /// Position among all chunks of the file (0-based), for messages.
    pub index: u64,
    /// Byte offset of the chunk frame.
    pub offset: u64,
    pub records: u32,
    payload_len: u32,
    crc: u32,
}

/// One process image's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    pub info: ProcessInfo,
    /// How it ended; `None` when the file ends before the stream's end chunk.
    pub end: Option<EndReason>,
    /// Records announced by the frames of its events chunks (known without decoding).
    pub records: u64,
    pub chunks: Vec<ChunkRef>,
}

/// A chunk read from the file, checksum verified, not yet decoded. `decode` is independent of
/// every other chunk: hand chunks to worker threads to decode in parallel.
#[derive(Debug, Clone)]
pub struct RawChunk {
    /// Index of the stream in `TraceReader::streams`.
    pub stream: usize,
    pub chunk: ChunkRef,
    payload: Vec<u8>,
    path: Arc<Path>,
}

impl RawChunk {
    /// The chunk's payload as stored (for events: raw length, then the zstd frame).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The chunk's records in seq order.
    pub fn decode(&self) -> Result<Vec<Record>, TraceError> {
        let mut out = Vec::new();
        self.decode_into(&mut ChunkDecoder::new(), &mut out)?;
        Ok(out)
    }

    /// The chunk's records in seq order, into `out` (cleared first), reusing `decoder`'s buffers
    /// and `out`'s capacity: what a thread decoding many chunks should call.
    pub fn decode_into(
        &self,
        decoder: &mut ChunkDecoder,
        out: &mut Vec<Record>,
    ) -> Result<(), TraceError> {
        let result = decoder.decode(&self.payload, out);
        result.map_err(|e| self.corrupt(e))
    }

    /// The chunk's records in seq order, `slice` at a time through `each`, the last ones left in
    /// `out` (see [`ChunkDecoder::decode_in_slices`]): on error, the records before the damage
    /// have been handed to `each` or are in `out`.
    pub fn decode_in_slices(
        &self,
        decoder: &mut ChunkDecoder,
        out: &mut Vec<Record>,
        slice: usize,
        each: impl FnMut(&mut Vec<Record>),
    ) -> Result<(), TraceError> {
        let result = decoder.decode_in_slices(&self.payload, out, slice, each);
        result.map_err(|e| self.corrupt(e))
    }

    fn corrupt(&self, e: crate::codec::DecodeError) -> TraceError {
        TraceError::CorruptChunk {
            path: self.path.to_path_buf(),
            chunk: self.chunk.index,
            offset: self.chunk.offset,
            what: e.0,
        }
    }
}

pub struct TraceReader<R> {
    src: R,
    path: Arc<Path>,
    version: u32,
    header: TraceHeader,
    streams: Vec<Stream>,
    notes: Vec<String>,
    untraced: Vec<Untraced>,
    /// `record --leaks`: the LEAKS chunks.
    leaks: Vec<crate::format::Leaks>,
    trailer: Option<Trailer>,
    damage: Option<Damage>,
    stacks: StackTable,
    modules: Vec<Module>,
    /// MEMORY samples, per stream (same index as `streams`).
    memory: Vec<Vec<MemorySample>>,
    /// RESIDENCY readings, per stream (same index as `streams`).
    residency: Vec<Vec<Residency>>,
}

impl TraceReader<BufReader<File>> {
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        // Opening a directory succeeds; reading it fails with a bare "Is a directory".
        if path.is_dir() {
            return Err(TraceError::Directory {
                path: path.to_path_buf(),
            });
        }
        let file = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_reader(BufReader::with_capacity(1 << 16, file), path)
    }
}

impl<R: Read + Seek> TraceReader<R> {
    /// Reads the header and scans the chunk frames. `path` names the source in errors.
    pub fn from_reader(mut src: R, path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path: Arc<Path> = Arc::from(path.as_ref());
        let io_err = |source: io::Error| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file_len = src.seek(SeekFrom::End(0)).map_err(io_err)?;
        src.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let mut prefix = [0u8; FILE_PREFIX_LEN];
        let got = read_full(&mut src, &mut prefix).map_err(io_err)?;
        if file_len == 0 {
            return Err(TraceError::Empty {
                path: path.to_path_buf(),
            });
        }
        if got < MAGIC.len() || prefix[..8] != MAGIC {
            return Err(TraceError::NotATrace {
                path: path.to_path_buf(),
            });
        }
        let bad_header = |what: &str| TraceError::BadHeader {
            path: path.to_path_buf(),
            what: what.to_string(),
        };
        if got < FILE_PREFIX_LEN {
            return Err(bad_header("the file ends inside the header"));
        }
        let version = u32::from_le_bytes(prefix[8..12].try_into().unwrap_or_default());
        if version > FORMAT_VERSION {
            return Err(TraceError::NewerVersion {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(bad_header("format version 0 does not exist"));
        }
        if version < OLDEST_READ_VERSION {
            return Err(TraceError::OlderVersion {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let header_len = u32::from_le_bytes(prefix[12..16].try_into().unwrap_or_default());
        let header_crc = u32::from_le_bytes(prefix[16..20].try_into().unwrap_or_default());
        if u64::from(header_len) > file_len.saturating_sub(FILE_PREFIX_LEN as u64)
            || header_len > MAX_PAYLOAD
        {
            return Err(bad_header("the file ends inside the header"));
        }
        let mut json = vec![0u8; header_len as usize];
        src.read_exact(&mut json).map_err(io_err)?;
        if crc32fast::hash(&json) != header_crc {
            return Err(bad_header("checksum mismatch"));
        }
        let header: TraceHeader =
            serde_json::from_slice(&json).map_err(|e| bad_header(&format!("invalid JSON: {e}")))?;

        let mut reader = TraceReader {
            src,
            path,
            version,
            header,
            streams: Vec::new(),
            notes: Vec::new(),
            untraced: Vec::new(),
            leaks: Vec::new(),
            trailer: None,
            damage: None,
            stacks: StackTable::new(),
            modules: Vec::new(),
            memory: Vec::new(),
            residency: Vec::new(),
        };
        reader.scan(FILE_PREFIX_LEN as u64 + u64::from(header_len), file_len)?;
        Ok(reader)
    }

    fn scan(&mut self, mut offset: u64, file_len: u64) -> Result<(), TraceError> {
        let mut by_id: HashMap<u32, usize> = HashMap::new();
        let mut index: u64 = 0;
        let mut records: u64 = 0;
        let path = self.path.clone();
        let io_err = |source: io::Error| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        loop {
            if offset == file_len {
                return Ok(());
            }
            let damage = |kind: DamageKind| Damage {
                kind,
                offset,
                chunks_recovered: index,
                records_recovered: records,
            };
            if offset + CHUNK_FRAME_LEN as u64 > file_len {
                self.damage = Some(damage(DamageKind::Truncated));
                return Ok(());
            }
            let mut fb = [0u8; CHUNK_FRAME_LEN];
            self.src.seek(SeekFrom::Start(offset)).map_err(io_err)?;
            self.src.read_exact(&mut fb).map_err(io_err)?;
            let Some(frame) = Frame::decode(&fb) else {
                self.damage = Some(damage(DamageKind::Corrupt("no chunk starts here".into())));
                return Ok(());
            };
            if frame.payload_len > MAX_PAYLOAD {
                self.damage = Some(damage(DamageKind::Corrupt(format!(
                    "implausible chunk length {}",
                    frame.payload_len
                ))));
                return Ok(());
            }
            let end = offset + CHUNK_FRAME_LEN as u64 + u64::from(frame.payload_len);
            if end > file_len {
                self.damage = Some(damage(DamageKind::Truncated));
                return Ok(());
            }
            let chunk = ChunkRef {
                index,
                offset,
                records: frame.records,
                payload_len: frame.payload_len,
                crc: frame.crc,
            };
            if frame.kind == kind::EVENTS {
                let Some(&s) = by_id.get(&frame.stream) else {
                    self.damage = Some(damage(DamageKind::Corrupt(format!(
                        "events of unknown stream {}",
                        frame.stream
                    ))));
                    return Ok(());
                };
                self.streams[s].chunks.push(chunk);
                self.streams[s].records += u64::from(frame.records);
                records += u64::from(frame.records);
            } else if [
                kind::PROCESS,
                kind::END,
                kind::NOTE,
                kind::TRAILER,
                kind::UNTRACED,
                kind::STACKS,
                kind::MODULES,
                kind::MEMORY,
                kind::RESIDENCY,
                kind::LEAKS,
            ]
            .contains(&frame.kind)
            {
                let mut payload = vec![0u8; frame.payload_len as usize];
                self.src.read_exact(&mut payload).map_err(io_err)?;
                if Frame::checksum(&fb, &payload) != frame.crc {
                    self.damage = Some(damage(DamageKind::Corrupt("checksum mismatch".into())));
                    return Ok(());
                }
                let result = match frame.kind {
                    kind::PROCESS => parse_process(&payload).map(|info| {
                        by_id.insert(frame.stream, self.streams.len());
                        self.streams.push(Stream {
                            info,
                            end: None,
                            records: 0,
                            chunks: Vec::new(),
                        });
                        self.memory.push(Vec::new());
                        self.residency.push(Vec::new());
                    }),
                    kind::END => match (
                        payload.first().and_then(|&t| EndReason::from_tag(t)),
                        by_id.get(&frame.stream),
                    ) {
                        (Some(reason), Some(&s)) => {
                            self.streams[s].end = Some(reason);
                            self.streams[s].info.truncated = !reason.is_clean();
                            Ok(())
                        }
                        _ => Err("invalid end chunk".to_string()),
                    },
                    kind::NOTE => {
                        self.notes
                            .push(String::from_utf8_lossy(&payload).into_owned());
                        Ok(())
                    }
                    kind::STACKS => read_stacks_payload(&payload, &mut self.stacks),
                    kind::MODULES => read_modules_payload(&payload, self.version >= 5)
                        .map(|m| self.modules.extend(m)),
                    kind::MEMORY => match by_id.get(&frame.stream) {
                        Some(&s) => read_memory_payload(&payload, &mut self.memory[s]),
                        None => Err(format!("memory samples of unknown stream {}", frame.stream)),
                    },
                    kind::RESIDENCY => match by_id.get(&frame.stream) {
                        Some(&s) => read_residency_payload(&payload, &mut self.residency[s]),
                        None => Err(format!("residency of unknown stream {}", frame.stream)),
                    },
                    kind::UNTRACED => serde_json::from_slice(&payload)
                        .map(|u| self.untraced.push(u))
                        .map_err(|e| format!("invalid untraced chunk: {e}")),
                    kind::LEAKS => serde_json::from_slice(&payload)
                        .map(|l| self.leaks.push(l))
                        .map_err(|e| format!("invalid leaks chunk: {e}")),
                    _ => serde_json::from_slice(&payload)
                        .map(|t| self.trailer = Some(t))
                        .map_err(|e| e.to_string()),
                };
                if let Err(what) = result {
                    self.damage = Some(damage(DamageKind::Corrupt(what)));
                    return Ok(());
                }
            }
            // Unknown kinds are skipped: a reader of the same version ignores additions.
            offset = end;
            index += 1;
        }
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Format version of the file (<= FORMAT_VERSION).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Process streams in order of appearance. A stream whose end is missing is marked truncated.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// Warnings the recorder wrote into the trace.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// `record --leaks`: what the blocks live at the command's exit were (LEAKS chunks).
    pub fn leaks(&self) -> &[crate::format::Leaks] {
        &self.leaks
    }

    /// Programs that ran during the recording without the shim (none of their calls are here).
    pub fn untraced(&self) -> &[Untraced] {
        &self.untraced
    }

    /// Which allocations carry a call stack: none, all, or a sample by bytes (the header's
    /// `stack_sample_bytes`; a trace without it has a stack at every allocation when it has
    /// stacks at all).
    pub fn stack_sampling(&self) -> crate::StackSampling {
        crate::StackSampling::of(&self.header)
    }

    /// Every call stack of the trace, by id (`Event::stack`); empty without stacks. Read at
    /// open: a reader holds the whole table (each distinct stack once).
    pub fn stacks(&self) -> &StackTable {
        &self.stacks
    }

    /// The modules the traced processes had mapped, in the order they were seen.
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// The modules of process `pid`, all its images (each process's are recorded under its own
    /// pid, a fork child's included).
    pub fn modules_of(&self, pid: u32) -> impl Iterator<Item = &Module> {
        self.modules.iter().filter(move |m| m.pid == pid)
    }

    /// The modules of one process image: what its stacks' addresses point into.
    pub fn modules_of_image<'a>(
        &'a self,
        info: &'a ProcessInfo,
    ) -> impl Iterator<Item = &'a Module> {
        self.modules
            .iter()
            .filter(move |m| m.pid == info.pid && m.exec_index == info.exec_index)
    }

    /// The recorder's readings of one stream's memory (MEMORY chunks), in the order taken (time
    /// and seq ascending); empty for a trace recorded without them (before alloclens recorded
    /// memory, or with `record --memory-interval 0`), and for an unknown stream. Read at open.
    pub fn memory_samples(&self, stream: usize) -> &[MemorySample] {
        self.memory.get(stream).map_or(&[], Vec::as_slice)
    }

    /// Which pages of one stream's heap mappings were resident (RESIDENCY chunks), in the order
    /// read; each reading's `seq` is that of the memory sample read with it. Empty for a trace
    /// recorded without addresses or before alloclens read them. Read at open.
    pub fn residency(&self, stream: usize) -> &[Residency] {
        self.residency.get(stream).map_or(&[], Vec::as_slice)
    }

    /// True when any stream has memory samples.
    pub fn has_memory_samples(&self) -> bool {
        self.memory.iter().any(|m| !m.is_empty())
    }

    /// True when the trace was recorded with stacks (`record --stacks`).
    pub fn has_stacks(&self) -> bool {
        self.header.stacks || !self.stacks.is_empty()
    }

    /// Present when the recording finished normally.
    pub fn trailer(&self) -> Option<&Trailer> {
        self.trailer.as_ref()
    }

    /// Where the file is damaged (everything before it is readable), if anywhere.
    pub fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads (and checksums) one chunk of a stream.
    pub fn read_chunk(&mut self, stream: usize, chunk: &ChunkRef) -> Result<RawChunk, TraceError> {
        read_chunk_at(&mut self.src, &self.path, stream, chunk)
    }

    /// A handle of its own on the file's chunks, so that another thread reads streams while this
    /// reader reads others (`analyze` analyses several streams at once).
    pub fn chunk_file(&self) -> Result<ChunkFile, TraceError> {
        let file = File::open(&*self.path).map_err(|source| TraceError::Io {
            path: self.path.to_path_buf(),
            source,
        })?;
        Ok(ChunkFile {
            src: BufReader::with_capacity(1 << 16, file),
            path: self.path.clone(),
        })
    }

    /// The undecoded chunks of one stream, in seq order.
    pub fn chunks(&mut self, stream: usize) -> Result<Chunks<'_, R>, TraceError> {
        self.check_stream(stream)?;
        Ok(Chunks {
            reader: self,
            stream,
            next: 0,
        })
    }

    /// The records of one stream in seq order, decoding one chunk at a time. Stops after the
    /// first error (a corrupt chunk), which it yields.
    pub fn records(&mut self, stream: usize) -> Result<Records<'_, R>, TraceError> {
        Ok(Records {
            chunks: self.chunks(stream)?,
            current: Vec::new().into_iter(),
            decoder: ChunkDecoder::new(),
            failed: false,
        })
    }

    fn check_stream(&self, stream: usize) -> Result<(), TraceError> {
        if stream < self.streams.len() {
            Ok(())
        } else {
            Err(TraceError::NoSuchStream {
                path: self.path.to_path_buf(),
                stream,
                count: self.streams.len(),
            })
        }
    }
}

/// The chunks of a trace file read through a file handle of its own ([`TraceReader::chunk_file`]).
pub struct ChunkFile {
    src: BufReader<File>,
    path: Arc<Path>,
}

impl ChunkFile {
    /// Reads (and checksums) one chunk of a stream, as [`TraceReader::read_chunk`].
    pub fn read_chunk(&mut self, stream: usize, chunk: &ChunkRef) -> Result<RawChunk, TraceError> {
        read_chunk_at(&mut self.src, &self.path, stream, chunk)
    }
}

/// Reads the chunk at `chunk.offset` of `src` and checks its checksum.
fn read_chunk_at(
    src: &mut (impl Read + Seek),
    path: &Arc<Path>,
    stream: usize,
    chunk: &ChunkRef,
) -> Result<RawChunk, TraceError> {
    let io_err = |source: io::Error| TraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut fb = [0u8; CHUNK_FRAME_LEN];
    src.seek(SeekFrom::Start(chunk.offset)).map_err(io_err)?;
    src.read_exact(&mut fb).map_err(io_err)?;
    let mut payload = vec![0u8; chunk.payload_len as usize];
    src.read_exact(&mut payload).map_err(io_err)?;
    if Frame::checksum(&fb, &payload) != chunk.crc {
        return Err(TraceError::CorruptChunk {
            path: path.to_path_buf(),
            chunk: chunk.index,
            offset: chunk.offset,
            what: "checksum mismatch".into(),
        });
    }
    Ok(RawChunk {
        stream,
        chunk: *chunk,
        payload,
        path: path.clone(),
    })
}

pub struct Chunks<'a, R> {
    reader: &'a mut TraceReader<R>,
    stream: usize,
    next: usize,
}

impl<R: Read + Seek> Iterator for Chunks<'_, R> {
    type Item = Result<RawChunk, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let chunk = *self.reader.streams[self.stream].chunks.get(self.next)?;
        self.next += 1;
        Some(self.reader.read_chunk(self.stream, &chunk))
    }
}

pub struct Records<'a, R> {
    chunks: Chunks<'a, R>,
    current: std::vec::IntoIter<Record>,
    decoder: ChunkDecoder,
    failed: bool,
}

impl<R: Read + Seek> Iterator for Records<'_, R> {
    type Item = Result<Record, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.current.next() {
                return Some(Ok(r));
            }
            if self.failed {
                return None;
            }
            let mut records = Vec::new();
            match self
                .chunks
                .next()?
                .and_then(|c| c.decode_into(&mut self.decoder, &mut records))
            {
                Ok(()) => self.current = records.into_iter(),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn parse_process(p: &[u8]) -> Result<ProcessInfo, String> {
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let s = p
            .get(pos..pos + n)
            .ok_or_else(|| "process chunk cut short".to_string())?;
        pos += n;
        Ok(s)
    };
    let u32_ = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let pid = u32_(take(4)?);
    let ppid = u32_(take(4)?);
    let exec_index = u32_(take(4)?);
    let start_unix_ns = u64::from_le_bytes(take(8)?.try_into().map_err(|_| "bad start time")?);
    let argc = u32_(take(4)?) as usize;
    let mut cmdline = Vec::with_capacity(argc.min(4096));
    for _ in 0..argc {
        let len = u32_(take(4)?) as usize;
        cmdline.push(String::from_utf8_lossy(take(len)?).into_owned());
    }
    Ok(ProcessInfo {
        pid,
        ppid,
        exec_index,
        cmdline,
        start_unix_ns,
        truncated: true,
    })
}
