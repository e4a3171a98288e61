//! Any bytes given to the trace reader: an error or records, never a panic, a hang or an
//! unbounded allocation. Run with `cargo +nightly fuzz run trace_reader` from this directory.
#![no_main]
use std::io::Cursor;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = trace::TraceReader::from_reader(Cursor::new(data), "fuzz.alt") else {
        return;
    };
    let _ = reader.damage().map(|d| d.to_string());
    for s in 0..reader.streams().len() {
        if let Ok(records) = reader.records(s) {
            for r in records {
                if r.is_err() {
                    break;
                }
            }
        }
    }
});
