//! `record --leaks`: the LEAKS chunks of a trace, by call site, for the text output.
use crate::call_sites::{address_space, is_allocator_function};

/// The leak check of one process image, its sites named.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LeakReport {
    #[serde(flatten)]
    pub leaks: trace::Leaks,
    /// Per entry of `leaks.sites`: the allocating function and its caller, with their
    /// locations, the first frames of the stack outside the allocator, innermost first and
    /// joined by " < " ("" without stacks).
    pub site_labels: Vec<String>,
}

/// memcheck's kinds in its order, then the degraded one.
const KINDS: [&str; 5] = [
    "definitely lost",
    "indirectly lost",
    "possibly lost",
    "still reachable",
    "not freed at exit",
];

/// (kind, blocks, bytes) for each kind present, in memcheck's order.
pub fn totals(leaks: &trace::Leaks) -> Vec<(&'static str, u64, u64)> {
    KINDS
        .iter()
        .filter_map(|&k| {
            let of_kind = leaks.sites.iter().filter(|s| s.kind == k);
            let (n, b) = of_kind.fold((0, 0), |(n, b), s| (n + s.blocks, b + s.bytes));
            (n > 0).then_some((k, n, b))
        })
        .collect()
}

/// One line: "leaks at exit of pid 12: definitely lost 216 B in 3 blocks, ...".
pub fn totals_line(leaks: &trace::Leaks) -> String {
    let kinds: Vec<String> = totals(leaks)
        .iter()
        .map(|(k, n, b)| format!("{k} {} in {n} blocks", trace::human_bytes(*b)))
        .collect();
    let what = if kinds.is_empty() {
        "no block left".to_string()
    } else {
        kinds.join(", ")
    };
    match (&leaks.degraded, leaks.scanned) {
        (Some(why), false) => format!(
            "leaks at exit of pid {} NOT CHECKED ({why}): {what}",
            leaks.pid
        ),
        _ => format!("leaks at exit of pid {}: {what}", leaks.pid),
    }
}

/// Frames of a site's name: the allocating function and its caller (a helper such as
/// `xmalloc` or `new_node` alone would name many sites).
const SITE_FRAMES: usize = 2;

/// Names each site of `leaks` by its stack's first frames outside the allocator.
pub fn name_sites(
    leaks: &trace::Leaks,
    images: &[trace::ProcessInfo],
    stacks: &trace::StackTable,
    modules: &[trace::Module],
    symbolizer: &mut symbols::Symbolizer,
) -> LeakReport {
    let image = images
        .iter()
        .find(|i| i.pid == leaks.pid && i.exec_index == leaks.exec_index);
    let space = match image {
        Some(image) => address_space(image, images, modules),
        None => symbols::AddressSpace::new(Vec::new()),
    };
    let site_labels = leaks
        .sites
        .iter()
        .map(|s| {
            let Some(frames) = stacks.get(s.stack) else {
                return String::new();
            };
            let named: Vec<String> = frames
                .iter()
                .flat_map(|&pc| {
                    let mapping = space.find(pc.saturating_sub(1));
                    symbolizer.resolve(mapping, pc.saturating_sub(1)).to_vec()
                })
                .skip_while(|f| is_allocator_function(f.function.as_deref().unwrap_or("")))
                .take(SITE_FRAMES)
                .map(|f| match f.location() {
                    Some(at) => format!("{} ({at})", f.label()),
                    None => f.label(),
                })
                .collect();
            named.join(" < ")
        })
        .collect();
    LeakReport {
        leaks: leaks.clone(),
        site_labels,
    }
}

/// The leaks section of `analyze`'s text: totals per kind, then the `top` largest sites.
pub fn write_text(
    r: &LeakReport,
    top: Option<usize>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    writeln!(out, "\n{}", totals_line(&r.leaks))?;
    if r.leaks.scanned {
        writeln!(
            out,
            "  ({} threads and {} of roots scanned; docs/leaks.md says what each kind means)",
            r.leaks.threads,
            trace::human_bytes(r.leaks.root_bytes)
        )?;
    }
    let n = top.unwrap_or(usize::MAX);
    for (s, label) in r.leaks.sites.iter().zip(&r.site_labels).take(n) {
        let site = if label.is_empty() {
            "(no stack)"
        } else {
            label
        };
        let held = s
            .root
            .as_ref()
            .map(|r| format!("  held by {r}"))
            .unwrap_or_default();
        writeln!(
            out,
            "  {:<17} {:>9} in {:>5} blocks  {site}{held}",
            s.kind,
            trace::human_bytes(s.bytes),
            s.blocks
        )?;
    }
    Ok(())
}
