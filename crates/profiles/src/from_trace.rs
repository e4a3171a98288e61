//! The heap profile of a trace recorded with stacks: one sample per stack and process image, with
//! `analyze`'s per-site figures (`analyze::sites::SiteAnalyzer`) as its values: calls and
//! requested bytes as allocated, the blocks still live at the end of the image's stream as in
//! use. Sampled stacks give `analyze --sites`'s estimates (the same estimator, unsampled values).
use std::path::{Path, PathBuf};

use analyze::call_sites::address_space;
use analyze::sampling::Sampling;
use analyze::sites::{ProcessSites, SiteAnalyzer, SiteStats};
use trace::{Losses, ProcessInfo, Record, TraceReader};

use crate::locations::{mapping_of, ImageStacks};
use crate::pprof::{self, Label, ProfileBuilder};
use crate::ProfileError;

/// How a trace's profile is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    /// Where separate debug files are looked for (as `analyze --sites --debug-dir`).
    pub debug_roots: Vec<PathBuf>,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            debug_roots: vec!["/usr/lib/debug".into()],
        }
    }
}

/// A trace's profile and what to say about it.
#[derive(Debug, Clone)]
pub struct TraceProfile {
    pub profile: pprof::proto::Profile,
    /// Process images profiled.
    pub images: usize,
    /// The sum of each value over the samples, in `pprof::HEAP_SAMPLE_TYPES` order.
    pub totals: [i64; 4],
    /// `resident_space` and `free_left_space` summed, when the profile has them
    /// (`pprof::RESIDENCY_SAMPLE_TYPES`).
    pub residency_totals: Option<[i64; 2]>,
    /// Mean bytes between sampled stacks, when the stacks were sampled (the values are estimates).
    pub sample_bytes: Option<u64>,
    /// What was lost (damage, an unfinished recording) and what could not be symbolised.
    pub warnings: Vec<String>,
}

/// The location of the calls recorded without a stack (`--stacks=all`: before the shim could
/// unwind, or when unwinding failed) and of sampled calls whose stack could not be taken.
const NO_STACK: &str = "[no stack]";
const STACK_NOT_TAKEN: &str = "[stack not taken]";

/// The heap profile of the trace at `path` (which must have stacks), telling `progress` the
/// records read.
pub fn from_trace(
    path: &Path,
    options: &TraceOptions,
    progress: &dyn trace::Progress,
) -> Result<TraceProfile, ProfileError> {
    let mut reader = TraceReader::open(path)?;
    if !reader.has_stacks() {
        return Err(ProfileError::NoStacks {
            path: path.to_path_buf(),
        });
    }
    let mut losses = Losses::of(&reader);
    let sampling = Sampling::of(reader.stack_sampling());
    let infos: Vec<ProcessInfo> = reader.streams().iter().map(|s| s.info.clone()).collect();
    let images = site_figures(&mut reader, &mut losses, sampling, progress)?;
    let with_residency = images.iter().any(|i| i.residency.is_some());

    let mut builder = if with_residency {
        let types: Vec<(&str, &str)> = pprof::HEAP_SAMPLE_TYPES
            .into_iter()
            .chain(pprof::RESIDENCY_SAMPLE_TYPES)
            .collect();
        ProfileBuilder::new(&types, pprof::HEAP_DEFAULT_SAMPLE_TYPE)
    } else {
        ProfileBuilder::heap()
    };
    if let Some(first) = infos.first() {
        builder.time(first.start_unix_ns, 0);
    }
    // pprof takes the first mapping for the main binary (its name heads `-top`, a binary named
    // on its command line symbolises it): the executable of the image that requested the most
    // bytes (a wrapper that exec'd or forked the real program requested little). The shim does
    // not always see the executable first; it is the module mapped lowest (libraries are mapped
    // from the top of the address space down), whether position-independent or not.
    let main = images
        .iter()
        .rev() // max_by_key keeps the last of equals: the first image wins ties.
        .max_by_key(|i| i.sites.iter().map(|s| s.requested_bytes).sum::<u64>());
    if let Some(main) = main {
        let mut modules: Vec<&trace::Module> = reader
            .modules()
            .iter()
            .filter(|m| m.pid == main.info.pid && m.exec_index == main.info.exec_index)
            .collect();
        modules.sort_by_key(|m| m.start);
        for m in modules {
            builder.mapping(&mapping_of(&analyze::call_sites::symbol_mapping(m)));
        }
    }
    if let Some(s) = sampling {
        builder.period("space", "bytes", s.mean_bytes());
        builder.comment(&format!(
            "alloclens: stacks sampled once per {} bytes on average; values are estimates \
             (as analyze --sites gives them)",
            s.mean_bytes()
        ));
    }
    let mut symbolizer = symbols::Symbolizer::new(options.debug_roots.clone());
    let mut totals = [0i64; 4];
    let mut residency_totals = [0i64; 2];
    for image in &images {
        let space = address_space(&image.info, &infos, reader.modules());
        let mut stacks = ImageStacks::new(&space, &mut symbolizer, &mut builder);
        let labels = labels(&image.info);
        for site in &image.sites {
            // Sampled: the calls without a stack are the unsampled ones, whose share the sampled
            // sites' estimates already hold.
            if site.stack == 0 && sampling.is_some() {
                continue;
            }
            let mut values = values(site).to_vec();
            if with_residency {
                let [resident, free_left] = [
                    site.resident_bytes.round() as i64,
                    site.free_left_bytes as i64,
                ];
                residency_totals[0] += resident;
                residency_totals[1] += free_left;
                values.extend([resident, free_left]);
            }
            if values.iter().all(|&v| v == 0) {
                continue;
            }
            let stack = match reader.stacks().get(site.stack) {
                None => vec![stacks.named(NO_STACK)],
                Some([]) => vec![stacks.named(STACK_NOT_TAKEN)],
                Some(addresses) => stacks.locations(addresses),
            };
            for (t, v) in totals.iter_mut().zip(&values) {
                *t += v;
            }
            stacks.sample(&stack, &values, &labels);
        }
    }
    let mut warnings = losses.warnings("profiled");
    warnings.extend(symbolizer.warnings().iter().map(ToString::to_string));
    Ok(TraceProfile {
        profile: builder.build(),
        images: images.len(),
        totals,
        residency_totals: with_residency.then_some(residency_totals),
        sample_bytes: sampling.map(Sampling::mean_bytes),
        warnings,
    })
}

/// The per-stack figures of every image (`analyze`'s per-site pass), the blocks live where an
/// image's stream stops counted as in use; with residency readings and every stack, each stack's
/// resident and free-left bytes at the reading `analyze --sites` takes them at (sampled stacks
/// leave most blocks without a site, and an estimate of resident pages by site is not made). A
/// damaged stream is read up to the damage.
fn site_figures<R: std::io::Read + std::io::Seek>(
    reader: &mut TraceReader<R>,
    losses: &mut Losses,
    sampling: Option<Sampling>,
    progress: &dyn trace::Progress,
) -> Result<Vec<ProcessSites>, ProfileError> {
    const STEP: u64 = 1 << 16;
    progress.start(reader.streams().iter().map(|s| s.records).sum());
    let infos: Vec<ProcessInfo> = reader.streams().iter().map(|s| s.info.clone()).collect();
    let mut images = Vec::with_capacity(infos.len());
    for (s, info) in infos.iter().enumerate() {
        let mut sites = SiteAnalyzer::with_sampling(info.clone(), sampling).live_at_cut_is_leaked();
        if sampling.is_none() {
            sites = sites.with_residency(reader.residency(s));
        }
        let mut read = 0u64;
        for record in reader.records(s)? {
            match record {
                Ok(Record::Event(e)) => sites.push(&e),
                Ok(_) => {}
                Err(e) => {
                    losses.stream_stopped(info, &e, read);
                    sites.mark_truncated();
                    break;
                }
            }
            read += 1;
            if read.is_multiple_of(STEP) {
                progress.advance(STEP);
            }
        }
        progress.advance(read % STEP);
        images.push(sites.finish());
    }
    Ok(images)
}

/// A site's values in `pprof::HEAP_SAMPLE_TYPES` order: with sampled stacks, its estimates
/// rounded; in use is what it left live at the end of the image's stream.
fn values(site: &SiteStats) -> [i64; 4] {
    match &site.estimates {
        Some(e) => [e.calls, e.requested_bytes, e.leaked_blocks, e.leaked_bytes]
            .map(|x| x.rounded() as i64),
        None => [
            site.calls,
            site.requested_bytes,
            site.leaked_blocks,
            site.leaked_bytes,
        ]
        .map(|x| x as i64),
    }
}

/// Every sample is labelled with its process (`-tagfocus=pid=N` keeps one), and an exec'd image
/// with its rank.
fn labels(info: &ProcessInfo) -> Vec<Label> {
    let mut labels = vec![Label::Num {
        key: "pid".into(),
        value: info.pid.into(),
        unit: None,
    }];
    if info.exec_index > 0 {
        labels.push(Label::Num {
            key: "exec_index".into(),
            value: info.exec_index.into(),
            unit: None,
        });
    }
    labels
}
