//! `analyze --residency`: the heap residency split as text or JSON.
use std::io::{self, Write};

use trace::human_bytes;

use crate::residency::{ProcessResidency, ResidencyAnalysis, ResidencyReading};

/// The whole analysis as one JSON object (`processes`, `warnings`; fields in
/// docs/memory-metrics.md, "Heap residency").
pub fn write_residency_json<W: Write>(analysis: &ResidencyAnalysis, mut out: W) -> io::Result<()> {
    serde_json::to_writer(&mut out, analysis)?;
    out.write_all(b"\n")
}

/// Per process image: the split over time, then the call sites at the reading with the most
/// resident heap (at most `sites` of them).
pub fn write_residency_text<W: Write>(
    analysis: &ResidencyAnalysis,
    sites: usize,
    mut out: W,
) -> io::Result<()> {
    for (i, p) in analysis.processes.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        write_process(p, sites, &mut out)?;
    }
    Ok(())
}

const COLUMNS: [&str; 10] = [
    "t (s)",
    "smaps heap",
    "resident",
    "live blocks",
    "free only",
    "metadata",
    "outside",
    "live bytes",
    "not resident",
    "reclaimable",
];

fn write_process<W: Write>(p: &ProcessResidency, sites: usize, out: &mut W) -> io::Result<()> {
    writeln!(
        out,
        "process {} (exec {}): {}",
        p.pid,
        p.exec_index,
        super::command_line(&p.cmdline)
    )?;
    writeln!(
        out,
        "heap resident pages held by: live blocks, free memory only, allocator metadata, outside the blocks' mappings"
    )?;
    let header: Vec<String> = COLUMNS.iter().map(|c| format!("{c:>13}")).collect();
    writeln!(out, "{}", header.join(""))?;
    for r in &p.readings {
        let cells = [
            format!("{:.3}", r.t_ns as f64 / 1e9),
            r.smaps_heap.map_or("?".into(), human_bytes),
            human_bytes(r.parts.resident),
            human_bytes(r.parts.live_blocks),
            human_bytes(r.parts.free_only),
            human_bytes(r.parts.metadata),
            human_bytes(r.parts.outside),
            human_bytes(r.parts.live_bytes),
            human_bytes(r.parts.live_not_resident),
            human_bytes(r.reclaimable),
        ];
        let row: Vec<String> = cells.iter().map(|c| format!("{c:>13}")).collect();
        writeln!(out, "{}", row.join(""))?;
    }
    let Some(top) = p.readings.iter().max_by_key(|r| r.parts.resident) else {
        return Ok(());
    };
    writeln!(
        out,
        "call sites at the most resident reading (seq {}, t {:.3} s):",
        top.seq,
        top.t_ns as f64 / 1e9
    )?;
    write_sites(top, sites, out)
}

fn write_sites<W: Write>(r: &ResidencyReading, sites: usize, out: &mut W) -> io::Result<()> {
    writeln!(
        out,
        "{:>12}{:>12}{:>12}{:>14}  site",
        "resident", "free left", "live bytes", "not resident"
    )?;
    for s in r.sites.iter().take(sites) {
        writeln!(
            out,
            "{:>12}{:>12}{:>12}{:>14}  {}",
            human_bytes(s.resident),
            human_bytes(s.free_left),
            human_bytes(s.live_bytes),
            human_bytes(s.live_not_resident),
            s.site
        )?;
    }
    if r.sites.len() > sites {
        writeln!(out, "  ... and {} more sites", r.sites.len() - sites)?;
    }
    Ok(())
}
