//! Which recorded modules an image's addresses may fall in.
use trace::{Module, ProcessInfo};

/// The mappings that can hold the addresses of `image`'s stacks: the modules recorded for it (its pid
/// and exec index), and for a fork child, which inherited its parent's address space, the parent's
/// modules seen before the child started, up the chain of traced ancestors (the shim records a
/// child's modules itself; these only fill what it did not). Later-seen modules come last, so they
/// win where ranges overlap.
pub fn address_space(
    image: &ProcessInfo,
    images: &[ProcessInfo],
    modules: &[Module],
) -> symbols::AddressSpace {
    let mut chosen: Vec<&Module> = modules
        .iter()
        .filter(|m| m.pid == image.pid && m.exec_index == image.exec_index)
        .collect();
    // Inherited mappings: only a first image (exec replaces the address space).
    let mut child = image;
    let mut depth = 0;
    while child.exec_index == 0 && depth < 64 {
        let Some(parent) = images
            .iter()
            .filter(|p| p.pid == child.ppid && p.start_unix_ns <= child.start_unix_ns)
            .max_by_key(|p| p.start_unix_ns)
        else {
            break;
        };
        let before = child.start_unix_ns;
        chosen.extend(modules.iter().filter(|m| {
            m.pid == parent.pid && m.exec_index == parent.exec_index && m.unix_ns <= before
        }));
        child = parent;
        depth += 1;
    }
    // Inherited ones were seen before the child started, so its own come after them.
    chosen.sort_by_key(|m| m.unix_ns);
    symbols::AddressSpace::new(chosen.into_iter().map(symbol_mapping).collect())
}

/// A module of the trace as the symboliser maps it.
pub fn symbol_mapping(m: &trace::Module) -> symbols::Mapping {
    symbols::Mapping {
        path: m.path.clone(),
        build_id: m.build_id.clone(),
        start: m.start,
        end: m.end,
        file_offset: m.file_offset,
        bias: Some(m.bias),
    }
}
