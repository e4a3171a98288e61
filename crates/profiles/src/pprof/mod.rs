//! pprof's profile format (`proto/profile.proto`, gzip-compressed on disk), as `go tool pprof`,
//! Pyroscope, Parca, Grafana and speedscope read it: [`ProfileBuilder`] makes one from mappings,
//! locations and samples with values, whatever they come from; [`write_gzipped`] writes it.
mod builder;
pub mod proto;

pub use builder::{Label, Line, LocationId, Mapping, MappingId, ProfileBuilder};

use std::io::{self, Read, Write};

use prost::Message;

/// The sample types of a heap profile, in the order of the values (Go's heap profiles use the
/// same names): objects and bytes allocated over the whole profile, objects and bytes in use at
/// its end.
pub const HEAP_SAMPLE_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// Added after the heap types for a trace with heap residency readings (`record --addresses`,
/// every stack recorded), at the reading `analyze --sites` takes (`analyze::residency::site_reading`,
/// the last at the peak of heap RSS): the resident bytes of the pages live
/// blocks hold, apportioned to the blocks by their bytes there (tcmalloc's name), and the
/// resident pages that hold only free memory, to the stack of the last block freed on them
/// (docs/memory-metrics.md, "Heap residency").
pub const RESIDENCY_SAMPLE_TYPES: [(&str, &str); 2] =
    [("resident_space", "bytes"), ("free_left_space", "bytes")];

/// What `go tool pprof` shows first in a heap profile (as Go's own).
pub const HEAP_DEFAULT_SAMPLE_TYPE: &str = "inuse_space";

/// Writes `profile` as pprof files are stored: the encoded message, gzip-compressed.
pub fn write_gzipped(profile: &proto::Profile, out: &mut dyn Write) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// Reads a pprof file (gzip-compressed or not, as pprof accepts both).
pub fn read(bytes: &[u8]) -> io::Result<proto::Profile> {
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut raw)?;
        raw
    } else {
        bytes.to_vec()
    };
    proto::Profile::decode(raw.as_slice())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
