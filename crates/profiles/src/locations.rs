//! Return addresses turned into pprof locations, each symbolised once (`symbols`), with the
//! allocator's own frames at the leaf left out: shared by the profiles of traces and of tables.
use std::collections::HashMap;

use analyze::call_sites::is_allocator_function;

use crate::pprof::{Label, Line, LocationId, Mapping, ProfileBuilder};

pub fn mapping_of(m: &symbols::Mapping) -> Mapping {
    Mapping {
        start: m.start,
        limit: m.end,
        file_offset: m.file_offset,
        file: m.path.clone(),
        build_id: m
            .build_id
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

/// A resolved return address: its location, whether it is in the allocator's own code, and how
/// a person names it (function and file:line, else module+offset).
#[derive(Clone)]
struct Resolved {
    id: LocationId,
    allocator: bool,
    site: String,
}

/// Turns one address space's stacks into locations, each return address resolved once.
pub struct ImageStacks<'a> {
    space: &'a symbols::AddressSpace,
    symbolizer: &'a mut symbols::Symbolizer,
    builder: &'a mut ProfileBuilder,
    addresses: HashMap<u64, Resolved>,
}

impl<'a> ImageStacks<'a> {
    pub fn new(
        space: &'a symbols::AddressSpace,
        symbolizer: &'a mut symbols::Symbolizer,
        builder: &'a mut ProfileBuilder,
    ) -> ImageStacks<'a> {
        ImageStacks {
            space,
            symbolizer,
            builder,
            addresses: HashMap::new(),
        }
    }

    pub fn named(&mut self, name: &str) -> LocationId {
        self.builder.named_location(name)
    }

    pub fn sample(&mut self, stack: &[LocationId], values: &[i64], labels: &[Label]) {
        self.builder.sample(stack, values, labels);
    }

    /// The locations of `addresses` (innermost first), one per return address, without the
    /// allocator's own frames at the leaf (`operator new`, Rust's global allocator: as `analyze
    /// --sites` drops them; one frame is always kept).
    pub fn locations(&mut self, addresses: &[u64]) -> Vec<LocationId> {
        self.kept(addresses).into_iter().map(|r| r.id).collect()
    }

    /// `locations`, and the name of the first one kept: the call site.
    pub fn locations_and_site(&mut self, addresses: &[u64]) -> (Vec<LocationId>, String) {
        let kept = self.kept(addresses);
        let site = kept.first().map(|r| r.site.clone()).unwrap_or_default();
        (kept.into_iter().map(|r| r.id).collect(), site)
    }

    fn kept(&mut self, addresses: &[u64]) -> Vec<Resolved> {
        let resolved: Vec<Resolved> = addresses.iter().map(|&a| self.location(a)).collect();
        let allocator = resolved.iter().take_while(|r| r.allocator).count();
        resolved[allocator.min(resolved.len().saturating_sub(1))..].to_vec()
    }

    fn location(&mut self, address: u64) -> Resolved {
        if let Some(known) = self.addresses.get(&address) {
            return known.clone();
        }
        let mapping = self.space.find(address);
        let frames = self.symbolizer.resolve(mapping, address);
        let lines: Vec<Line> = frames
            .iter()
            .filter_map(|f| {
                Some(Line {
                    function: f.function.clone()?,
                    file: f.file.clone(),
                    line: f.line,
                })
            })
            .collect();
        let allocator = lines
            .last()
            .is_some_and(|l| is_allocator_function(&l.function));
        let site = match frames.first().and_then(|f| Some((f, f.location()?))) {
            Some((f, at)) => format!("{} ({at})", f.label()),
            None => frames.first().map(|f| f.label()).unwrap_or_default(),
        };
        let mapping = mapping.map(|m| self.builder.mapping(&mapping_of(m)));
        // A return address is the instruction after the call: one byte back is inside the call,
        // where pprof's own symbolisation finds the caller's line.
        let id = self
            .builder
            .location(mapping, address.saturating_sub(1), &lines);
        let resolved = Resolved {
            id,
            allocator,
            site,
        };
        self.addresses.insert(address, resolved.clone());
        resolved
    }
}
