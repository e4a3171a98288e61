//! Snapshots as one pprof heap profile: a sample per stack and process, its values the rounded
//! estimates, its standard errors and its process as numeric labels; mappings from the tables'
//! module records (with build-ids, so pprof can symbolise what alloclens could not).
use std::path::PathBuf;

use super::{Module, Snapshot};
use crate::locations::{mapping_of, ImageStacks};
use crate::pprof::{self, Label, ProfileBuilder};

/// How snapshots are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// Where separate debug files are looked for.
    pub debug_roots: Vec<PathBuf>,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            debug_roots: vec!["/usr/lib/debug".into()],
        }
    }
}

/// The profile of some snapshots, and what could not be symbolised.
#[derive(Debug, Clone)]
pub struct SnapshotProfile {
    pub profile: pprof::proto::Profile,
    /// The sum of each value over the samples, in `pprof::HEAP_SAMPLE_TYPES` order.
    pub totals: [i64; 4],
    pub warnings: Vec<String>,
}

/// The location of samples whose stack could not be taken or stored (the table's empty stack).
const STACK_NOT_TAKEN: &str = "[stack not taken]";

/// The labels that carry a sample's standard errors, in `pprof::HEAP_SAMPLE_TYPES` order.
pub const STDERR_LABELS: [&str; 4] = [
    "alloc_objects_stderr",
    "alloc_space_stderr",
    "inuse_objects_stderr",
    "inuse_space_stderr",
];

/// The pprof profile of `snapshots`, naming each stack's call site (`StackEstimate::site`) as
/// it goes. Several processes give one profile, each sample labelled with its `pid`.
pub fn to_pprof(snapshots: &mut [Snapshot], options: &SnapshotOptions) -> SnapshotProfile {
    let mut symbolizer = symbols::Symbolizer::new(options.debug_roots.clone());
    to_pprof_with(snapshots, &mut symbolizer)
}

/// [`to_pprof`] with a symboliser the caller keeps: a watch taking a snapshot at each trigger
/// reads each file's symbols and DWARF once, not at every snapshot.
pub fn to_pprof_with(
    snapshots: &mut [Snapshot],
    symbolizer: &mut symbols::Symbolizer,
) -> SnapshotProfile {
    let mut builder = ProfileBuilder::heap();
    if let Some(first) = snapshots.first() {
        let start = snapshots.iter().map(|s| s.start_unix_ns).min().unwrap_or(0);
        builder.time(start, first.taken_unix_ns.saturating_sub(start));
        builder.period("space", "bytes", first.sample_bytes);
    }
    let mut intervals: Vec<u64> = snapshots.iter().map(|s| s.sample_bytes).collect();
    intervals.dedup();
    builder.comment(&format!(
        "alloclens snapshot: values are estimates from allocations sampled once per {} bytes on \
         average; each sample's standard errors are in its *_stderr labels",
        intervals
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // pprof takes the first mapping for the main binary: the executable of the process that
    // holds the most.
    let main = snapshots.iter().rev().max_by(|a, b| {
        a.totals()
            .inuse_space
            .value
            .total_cmp(&b.totals().inuse_space.value)
    });
    if let Some(main) = main {
        let mut modules: Vec<&Module> = main.modules.iter().collect();
        modules.sort_by_key(|m| (m.path != main.exe, m.start));
        for m in modules {
            builder.mapping(&mapping_of(&symbol_mapping(m)));
        }
    }
    let mut totals = [0i64; 4];
    for snapshot in snapshots.iter_mut() {
        let space =
            symbols::AddressSpace::new(snapshot.modules.iter().map(symbol_mapping).collect());
        let mut stacks = ImageStacks::new(&space, symbolizer, &mut builder);
        for stack in &mut snapshot.stacks {
            let estimates = [
                stack.alloc_objects,
                stack.alloc_space,
                stack.inuse_objects,
                stack.inuse_space,
            ];
            let values = estimates.map(|e| e.value.round() as i64);
            let (locations, site) = if stack.frames.is_empty() {
                (
                    vec![stacks.named(STACK_NOT_TAKEN)],
                    STACK_NOT_TAKEN.to_string(),
                )
            } else {
                stacks.locations_and_site(&stack.frames)
            };
            stack.site = Some(site);
            if values.iter().all(|&v| v == 0) {
                continue;
            }
            let mut labels = vec![Label::Num {
                key: "pid".into(),
                value: snapshot.pid.into(),
                unit: None,
            }];
            for ((key, e), (_, unit)) in STDERR_LABELS
                .iter()
                .zip(estimates)
                .zip(pprof::HEAP_SAMPLE_TYPES)
            {
                labels.push(Label::Num {
                    key: key.to_string(),
                    value: e.stderr.round() as i64,
                    unit: (unit == "bytes").then(|| unit.to_string()),
                });
            }
            for (t, v) in totals.iter_mut().zip(values) {
                *t += v;
            }
            stacks.sample(&locations, &values, &labels);
        }
    }
    let warnings = symbolizer
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    SnapshotProfile {
        profile: builder.build(),
        totals,
        warnings,
    }
}

fn symbol_mapping(m: &Module) -> symbols::Mapping {
    symbols::Mapping {
        path: m.path.clone(),
        build_id: m.build_id.as_ref().map(|hex| {
            (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                .collect()
        }),
        start: m.start,
        end: m.end,
        file_offset: m.file_offset,
        bias: Some(m.bias),
    }
}
