//! The lines workloads write, and the /proc readings some of them include.
//!
//! Every line is flushed as soon as it is written: `alloclens run` timestamps marker lines as they
//! arrive, and forked children must not inherit half-written buffers.
//!
//! The last two lines of every workload are, exactly:
//! ```text
//! done: workload=<name> ops=<u64> unit=<unit> elapsed_s=<f64, 3 decimals> allocator_calls=<u64> checksum=<16 hex digits>
//! throughput: <f64, 1 decimal> <unit>/s
//! ```
//! so `alloclens run --throughput 'throughput: ([0-9.]+)'` reads the rate.

use std::fmt::Arguments;
use std::io::Write;

use crate::{Summary, WorkloadError};

/// Writes one line and flushes it.
pub fn line(out: &mut dyn Write, args: Arguments<'_>) -> Result<(), WorkloadError> {
    // Formatted into one buffer first so the line reaches the fd in one write(2): lines from forked
    // workers sharing a pipe then never interleave mid-line.
    let mut text = args.to_string();
    text.push('\n');
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The `done:` line of a summary.
pub fn done_line(s: &Summary) -> String {
    format!(
        "done: workload={} ops={} unit={} elapsed_s={:.3} allocator_calls={} checksum={:016x}",
        s.workload,
        s.ops,
        s.unit,
        s.elapsed.as_secs_f64(),
        s.allocator_calls,
        s.checksum
    )
}

/// The `throughput:` line of a summary (the last line of every workload).
pub fn throughput_line(s: &Summary) -> String {
    format!("throughput: {:.1} {}/s", s.throughput(), s.unit)
}

/// Writes the two closing lines and hands the summary back.
pub(crate) fn finish(out: &mut dyn Write, s: Summary) -> Result<Summary, WorkloadError> {
    line(out, format_args!("{}", done_line(&s)))?;
    line(out, format_args!("{}", throughput_line(&s)))?;
    Ok(s)
}

/// VmRSS of the calling process in kB, from /proc/self/status.
pub fn self_vmrss_kb() -> Result<u64, WorkloadError> {
    let path = "/proc/self/status";
    let text =
        std::fs::read_to_string(path).map_err(|source| WorkloadError::Proc { path, source })?;
    field_kb(&text, "VmRSS:").ok_or_else(|| missing(path, "VmRSS"))
}

/// (Rss, Pss) of the calling process in kB, from /proc/self/smaps_rollup.
pub fn self_rss_pss_kb() -> Result<(u64, u64), WorkloadError> {
    let path = "/proc/self/smaps_rollup";
    let text =
        std::fs::read_to_string(path).map_err(|source| WorkloadError::Proc { path, source })?;
    let rss = field_kb(&text, "Rss:").ok_or_else(|| missing(path, "Rss"))?;
    let pss = field_kb(&text, "Pss:").ok_or_else(|| missing(path, "Pss"))?;
    Ok((rss, pss))
}

fn missing(path: &'static str, field: &str) -> WorkloadError {
    WorkloadError::Proc {
        path,
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("no {field} field (kernel too old?)"),
        ),
    }
}

/// The number in a `Name:   1234 kB` line.
fn field_kb(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn closing_lines_have_the_documented_format() {
        let s = Summary {
            workload: "events",
            ops: 200,
            unit: "events",
            elapsed: Duration::from_millis(500),
            allocator_calls: 12,
            checksum: 0xabc,
            rss_marks: vec![],
            processes: vec![],
        };
        assert_eq!(
            done_line(&s),
            "done: workload=events ops=200 unit=events elapsed_s=0.500 allocator_calls=12 checksum=0000000000000abc"
        );
        assert_eq!(throughput_line(&s), "throughput: 400.0 events/s");
    }

    #[test]
    fn reads_own_memory_from_proc() {
        let rss = self_vmrss_kb().unwrap();
        let (rss2, pss) = self_rss_pss_kb().unwrap();
        assert!(rss > 0 && rss2 > 0 && pss > 0);
        assert!(pss <= rss2);
        assert_eq!(field_kb("A: 1\nVmRSS:\t  42 kB\n", "VmRSS:"), Some(42));
    }
}
