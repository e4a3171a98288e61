//! Any bytes as the decompressed body of an events chunk (the columns after zstd): an error or
//! records, never a panic, a hang or an unbounded allocation. The file-level target rarely gets
//! this far (every chunk has a checksum); this one mutates the columns directly.
//! Run with `cargo +nightly fuzz run chunk_payload` from this directory.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    let mut payload = (raw.len() as u32).to_le_bytes().to_vec();
    payload.extend(zstd::bulk::compress(raw, 1).expect("zstd compresses any bytes"));
    let _ = trace::codec::decode_payload(&payload);
});
