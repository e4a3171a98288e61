//! The growth between two heap profiles (two snapshots of a program, hours or days apart): each
//! stack matched across the two runs by its frames normalised to their module (build-id, or file,
//! and file offset: address space layout randomisation moves the addresses), processes merged.
//! Each growth carries its standard error, `sqrt(se_a² + se_b²)`, from the snapshots'
//! `*_stderr` labels.
use std::collections::HashMap;

use serde::Serialize;

use crate::pprof::{self, proto, Label, Line, LocationId, Mapping, ProfileBuilder};
use crate::snapshot::STDERR_LABELS;

/// The change of one figure of a stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Change {
    pub a: f64,
    pub b: f64,
    pub growth: f64,
    /// None when either profile has no standard errors (not a snapshot of alloclens).
    pub stderr: Option<f64>,
}

impl Change {
    /// Growth (or shrinking) beyond two standard errors: not the sampling's noise.
    pub fn significant(&self) -> bool {
        self.stderr.is_some_and(|se| self.growth.abs() > 2.0 * se)
    }
}

/// One stack's growth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Growth {
    /// Its call site: the first frame's function and file:line, else module+offset.
    pub site: String,
    pub inuse_space: Change,
    pub inuse_objects: Change,
}

/// The growth of every stack in either profile, largest in-use growth first, and B - A as a
/// profile.
#[derive(Debug, Clone)]
pub struct ProfileDiff {
    pub rows: Vec<Growth>,
    /// Whether both profiles carry standard errors.
    pub has_stderr: [bool; 2],
    pub profile: proto::Profile,
}

/// Why two profiles cannot be compared.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DiffError(pub String);

/// A frame normalised across runs: its module (build-id, else file) and file offset, or the
/// name of a location without a mapping.
type FrameKey = (String, u64);

/// Per stack: values, variances (`HEAP_SAMPLE_TYPES` order), and where to find it again.
#[derive(Default)]
struct Side {
    values: [f64; 4],
    variances: [f64; 4],
    /// The first sample of this stack: (which profile, sample index).
    found: Option<(usize, usize)>,
}

/// B - A. `a` and `b` must be heap profiles (in-use space and objects).
pub fn diff(a: &proto::Profile, b: &proto::Profile) -> Result<ProfileDiff, DiffError> {
    let profiles = [a, b];
    let mut stacks: HashMap<Vec<FrameKey>, [Side; 2]> = HashMap::new();
    let mut order: Vec<Vec<FrameKey>> = Vec::new();
    let mut has_stderr = [false; 2];
    for (side, p) in profiles.iter().enumerate() {
        let index = Index::of(p).ok_or_else(|| {
            DiffError(format!(
                "profile {} is not a heap profile (no inuse_space and inuse_objects)",
                ["A", "B"][side]
            ))
        })?;
        has_stderr[side] = p.sample.iter().all(|s| index.has_stderr(s)) && !p.sample.is_empty();
        for (i, sample) in p.sample.iter().enumerate() {
            let key = index.key(sample);
            let entry = stacks.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                Default::default()
            });
            let s = &mut entry[side];
            s.found.get_or_insert((side, i));
            for t in 0..4 {
                s.values[t] += index.value(sample, t);
                s.variances[t] += index.stderr(sample, t).powi(2);
            }
        }
    }
    let known = has_stderr[0] && has_stderr[1];
    let mut builder = ProfileBuilder::heap();
    builder.time(
        b.time_nanos as u64,
        b.time_nanos.saturating_sub(a.time_nanos) as u64,
    );
    builder.comment("alloclens diff: values are B - A, stacks matched by module and file offset");
    let mut copier = Copier::default();
    let mut rows = Vec::new();
    for key in order {
        let sides = &stacks[&key];
        let change = |t: usize| Change {
            a: sides[0].values[t],
            b: sides[1].values[t],
            growth: sides[1].values[t] - sides[0].values[t],
            stderr: known.then(|| (sides[0].variances[t] + sides[1].variances[t]).sqrt()),
        };
        let (side, i) = sides[1]
            .found
            .or(sides[0].found)
            .expect("a stack of either");
        let sample = &profiles[side].sample[i];
        let changes: Vec<Change> = (0..4).map(change).collect();
        let stack = copier.stack(&mut builder, side, profiles[side], sample);
        let mut labels = Vec::new();
        for (key, c) in STDERR_LABELS.iter().zip(&changes) {
            if let Some(se) = c.stderr {
                labels.push(Label::Num {
                    key: key.to_string(),
                    value: se.round() as i64,
                    unit: key.contains("space").then(|| "bytes".to_string()),
                });
            }
        }
        let values: Vec<i64> = changes.iter().map(|c| c.growth.round() as i64).collect();
        builder.sample(&stack, &values, &labels);
        rows.push(Growth {
            site: site_of(profiles[side], sample),
            inuse_objects: changes[2],
            inuse_space: changes[3],
        });
    }
    rows.sort_by(|x, y| y.inuse_space.growth.total_cmp(&x.inuse_space.growth));
    Ok(ProfileDiff {
        rows,
        has_stderr,
        profile: builder.build(),
    })
}

/// Where a profile's values and labels are.
struct Index<'a> {
    profile: &'a proto::Profile,
    /// The value index of each `HEAP_SAMPLE_TYPES` type, if the profile has it.
    types: [Option<usize>; 4],
    /// The string index of each stderr label's key.
    stderr_keys: [Option<i64>; 4],
    locations: HashMap<u64, &'a proto::Location>,
    mappings: HashMap<u64, &'a proto::Mapping>,
}

impl<'a> Index<'a> {
    fn of(p: &'a proto::Profile) -> Option<Index<'a>> {
        let string = |s: &str| p.string_table.iter().position(|x| x == s).map(|i| i as i64);
        let types = pprof::HEAP_SAMPLE_TYPES.map(|(t, _)| {
            let t = string(t)?;
            p.sample_type.iter().position(|v| v.r#type == t)
        });
        types[2]?;
        types[3]?;
        Some(Index {
            profile: p,
            types,
            stderr_keys: STDERR_LABELS.map(string),
            locations: p.location.iter().map(|l| (l.id, l)).collect(),
            mappings: p.mapping.iter().map(|m| (m.id, m)).collect(),
        })
    }

    fn value(&self, s: &proto::Sample, t: usize) -> f64 {
        self.types[t]
            .and_then(|i| s.value.get(i))
            .map_or(0.0, |&v| v as f64)
    }

    fn stderr(&self, s: &proto::Sample, t: usize) -> f64 {
        self.stderr_keys[t]
            .and_then(|k| s.label.iter().find(|l| l.key == k))
            .map_or(0.0, |l| l.num as f64)
    }

    fn has_stderr(&self, s: &proto::Sample) -> bool {
        [2, 3]
            .iter()
            .all(|&t| self.stderr_keys[t].is_some_and(|k| s.label.iter().any(|l| l.key == k)))
    }

    fn key(&self, s: &proto::Sample) -> Vec<FrameKey> {
        let strings = &self.profile.string_table;
        let string = |i: i64| strings.get(i as usize).cloned().unwrap_or_default();
        s.location_id
            .iter()
            .map(|id| {
                let Some(l) = self.locations.get(id) else {
                    return (format!("[location {id}]"), 0);
                };
                match self.mappings.get(&l.mapping_id) {
                    Some(m) => {
                        let module = if m.build_id != 0 {
                            string(m.build_id)
                        } else {
                            string(m.filename)
                        };
                        (
                            module,
                            l.address
                                .wrapping_sub(m.memory_start)
                                .wrapping_add(m.file_offset),
                        )
                    }
                    None => {
                        let names: Vec<String> = l
                            .line
                            .iter()
                            .map(|line| function_name(self.profile, line.function_id))
                            .collect();
                        (names.join(";"), l.address)
                    }
                }
            })
            .collect()
    }
}

fn function_name(p: &proto::Profile, id: u64) -> String {
    p.function
        .iter()
        .find(|f| f.id == id)
        .and_then(|f| p.string_table.get(f.name as usize))
        .cloned()
        .unwrap_or_default()
}

/// How a person names a sample's stack: its first location's innermost function and file:line,
/// else its module and file offset.
fn site_of(p: &proto::Profile, s: &proto::Sample) -> String {
    let Some(l) = s
        .location_id
        .first()
        .and_then(|id| p.location.iter().find(|l| l.id == *id))
    else {
        return "[no stack]".into();
    };
    if let Some(line) = l.line.first() {
        let name = function_name(p, line.function_id);
        let file = p
            .function
            .iter()
            .find(|f| f.id == line.function_id)
            .and_then(|f| p.string_table.get(f.filename as usize))
            .filter(|f| !f.is_empty())
            .map(|f| f.rsplit('/').next().unwrap_or(f).to_string());
        return match file {
            Some(file) if line.line > 0 => format!("{name} ({file}:{})", line.line),
            Some(file) => format!("{name} ({file})"),
            None => name,
        };
    }
    match p.mapping.iter().find(|m| m.id == l.mapping_id) {
        Some(m) => {
            let file = p
                .string_table
                .get(m.filename as usize)
                .cloned()
                .unwrap_or_default();
            format!(
                "{}+{:#x}",
                file.rsplit('/').next().unwrap_or(&file),
                l.address
                    .wrapping_sub(m.memory_start)
                    .wrapping_add(m.file_offset)
            )
        }
        None => format!("{:#x}", l.address),
    }
}

/// Copies stacks of either profile into the diff's, each location once.
#[derive(Default)]
struct Copier {
    locations: HashMap<(usize, u64), LocationId>,
}

impl Copier {
    fn stack(
        &mut self,
        builder: &mut ProfileBuilder,
        side: usize,
        p: &proto::Profile,
        s: &proto::Sample,
    ) -> Vec<LocationId> {
        s.location_id
            .iter()
            .filter_map(|id| {
                if let Some(&known) = self.locations.get(&(side, *id)) {
                    return Some(known);
                }
                let l = p.location.iter().find(|l| l.id == *id)?;
                let string = |i: i64| p.string_table.get(i as usize).cloned().unwrap_or_default();
                let lines: Vec<Line> = l
                    .line
                    .iter()
                    .filter_map(|line| {
                        let f = p.function.iter().find(|f| f.id == line.function_id)?;
                        Some(Line {
                            function: string(f.name),
                            file: (f.filename != 0).then(|| string(f.filename)),
                            line: (line.line > 0).then_some(line.line as u32),
                        })
                    })
                    .collect();
                let mapping = p.mapping.iter().find(|m| m.id == l.mapping_id).map(|m| {
                    builder.mapping(&Mapping {
                        start: m.memory_start,
                        limit: m.memory_limit,
                        file_offset: m.file_offset,
                        file: string(m.filename),
                        build_id: (m.build_id != 0).then(|| string(m.build_id)),
                    })
                });
                let new = match (mapping, lines.first()) {
                    (None, Some(first)) if l.address == 0 => {
                        builder.named_location(&first.function)
                    }
                    _ => builder.location(mapping, l.address, &lines),
                };
                self.locations.insert((side, *id), new);
                Some(new)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile of one mapping at `base` with samples (file offset, inuse bytes, its stderr).
    fn profile(base: u64, samples: &[(u64, i64, Option<i64>)]) -> proto::Profile {
        let mut b = ProfileBuilder::heap();
        let m = b.mapping(&Mapping {
            start: base,
            limit: base + 0x10000,
            file_offset: 0x1000,
            file: "/bin/p".into(),
            build_id: Some("abcd".into()),
        });
        for &(offset, bytes, se) in samples {
            let loc = b.location(
                Some(m),
                base + offset - 0x1000,
                &[Line {
                    function: format!("f{offset:x}"),
                    file: Some("/src/p.c".into()),
                    line: Some(7),
                }],
            );
            let labels: Vec<Label> = se
                .into_iter()
                .flat_map(|se| {
                    ["inuse_space_stderr", "inuse_objects_stderr"].map(|k| Label::Num {
                        key: k.into(),
                        value: se,
                        unit: None,
                    })
                })
                .collect();
            b.sample(&[loc], &[0, 0, 1, bytes], &labels);
        }
        b.build()
    }

    /// Stacks at other addresses (another run's layout) are matched by their file offset; the
    /// growth's error combines both; a profile without errors gives none.
    #[test]
    fn stacks_are_matched_across_runs_and_growth_has_its_error() {
        let a = profile(
            0x5500_0000,
            &[(0x1100, 1000, Some(30)), (0x1200, 500, Some(0))],
        );
        let b = profile(
            0x7700_0000,
            &[(0x1100, 5000, Some(40)), (0x1300, 64, Some(0))],
        );
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.rows.len(), 3);
        let first = &d.rows[0];
        assert_eq!(first.site, "f1100 (p.c:7)");
        assert_eq!(
            (
                first.inuse_space.a,
                first.inuse_space.b,
                first.inuse_space.growth
            ),
            (1000.0, 5000.0, 4000.0)
        );
        assert_eq!(first.inuse_space.stderr, Some(50.0));
        assert!(first.inuse_space.significant());
        assert_eq!(
            d.rows[2].inuse_space.growth, -500.0,
            "gone: shrank by all it held"
        );
        let values: Vec<i64> = d.profile.sample.iter().map(|s| s.value[3]).collect();
        assert_eq!(values, [4000, -500, 64]);

        let plain = profile(0x7700_0000, &[(0x1100, 5000, None)]);
        let d = diff(&a, &plain).unwrap();
        assert_eq!(d.has_stderr, [true, false]);
        assert!(d.rows.iter().all(|r| r.inuse_space.stderr.is_none()));
    }

    #[test]
    fn a_profile_of_another_kind_is_refused() {
        let cpu =
            ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")], "cpu").build();
        let heap = profile(0x1000, &[]);
        let e = diff(&cpu, &heap).unwrap_err().to_string();
        assert!(e.contains("profile A is not a heap profile"), "{e}");
    }
}
