//! Building a profile: the string table, and mappings, functions and locations each stored once.
use std::collections::HashMap;

use super::proto;

/// A file mapped in the profiled process: its bytes from `file_offset` on at `start..limit`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    pub start: u64,
    pub limit: u64,
    pub file_offset: u64,
    pub file: String,
    /// The GNU build-id in lower-case hex, as pprof matches binaries by it.
    pub build_id: Option<String>,
}

/// One function at a location: inlined ones come first, the function they sit in last.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Line {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// A label of a sample: a number (with its unit, if any) or a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    Num {
        key: String,
        value: i64,
        unit: Option<String>,
    },
    Str {
        key: String,
        value: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MappingId(u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocationId(u64);

/// A profile in the making. Mappings, locations and functions are given ids in the order first
/// added (pprof takes the first mapping for the main binary: add the executable's first).
pub struct ProfileBuilder {
    profile: proto::Profile,
    strings: HashMap<String, i64>,
    mappings: HashMap<Mapping, MappingId>,
    locations: HashMap<(Option<MappingId>, u64), LocationId>,
    named_locations: HashMap<String, LocationId>,
    functions: HashMap<(String, Option<String>), u64>,
}

impl ProfileBuilder {
    /// A profile whose samples have one value per `(type, unit)` of `sample_types`, `default`
    /// the type shown first.
    pub fn new(sample_types: &[(&str, &str)], default: &str) -> ProfileBuilder {
        let mut b = ProfileBuilder {
            profile: proto::Profile::default(),
            strings: HashMap::new(),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            named_locations: HashMap::new(),
            functions: HashMap::new(),
        };
        b.string(""); // string_table[0] must be "".
        b.profile.sample_type = sample_types
            .iter()
            .map(|(t, u)| b.value_type(t, u))
            .collect();
        b.profile.default_sample_type = b.string(default);
        b
    }

    /// A heap profile (`super::HEAP_SAMPLE_TYPES`).
    pub fn heap() -> ProfileBuilder {
        Self::new(&super::HEAP_SAMPLE_TYPES, super::HEAP_DEFAULT_SAMPLE_TYPE)
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, r#type: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(r#type),
            unit: self.string(unit),
        }
    }

    /// When the profile's data starts (ns since the Unix epoch) and how long it covers.
    pub fn time(&mut self, start_unix_ns: u64, duration_ns: u64) {
        self.profile.time_nanos = start_unix_ns as i64;
        self.profile.duration_nanos = duration_ns as i64;
    }

    /// The sampling: one sample per `period` units of `(type, unit)` on average (values stay
    /// unsampled, as profile.proto asks; this says how they were estimated).
    pub fn period(&mut self, r#type: &str, unit: &str, period: u64) {
        self.profile.period_type = Some(self.value_type(r#type, unit));
        self.profile.period = period as i64;
    }

    pub fn comment(&mut self, text: &str) {
        let i = self.string(text);
        self.profile.comment.push(i);
    }

    /// The id of `m`, added the first time.
    pub fn mapping(&mut self, m: &Mapping) -> MappingId {
        if let Some(&id) = self.mappings.get(m) {
            return id;
        }
        let id = MappingId(self.profile.mapping.len() as u64 + 1);
        let mapping = proto::Mapping {
            id: id.0,
            memory_start: m.start,
            memory_limit: m.limit,
            file_offset: m.file_offset,
            filename: self.string(&m.file),
            build_id: m.build_id.as_deref().map_or(0, |b| self.string(b)),
            ..Default::default()
        };
        self.profile.mapping.push(mapping);
        self.mappings.insert(m.clone(), id);
        id
    }

    /// The id of the location at `address` in `mapping`, added the first time with `lines` (empty
    /// when the address is not symbolised: pprof then symbolises the mapping's locations itself
    /// from its file, unless another location of it has lines).
    pub fn location(
        &mut self,
        mapping: Option<MappingId>,
        address: u64,
        lines: &[Line],
    ) -> LocationId {
        if let Some(&id) = self.locations.get(&(mapping, address)) {
            return id;
        }
        let id = LocationId(self.profile.location.len() as u64 + 1);
        let line = lines.iter().map(|l| self.line(l)).collect();
        if let Some(m) = mapping {
            // pprof leaves a mapping with any of these set as it is (its own symbolisation would
            // replace alloclens's names by its own).
            let m = &mut self.profile.mapping[m.0 as usize - 1];
            m.has_functions |= !lines.is_empty();
            m.has_filenames |= lines.iter().any(|l| l.file.is_some());
            m.has_line_numbers |= lines.iter().any(|l| l.line.is_some());
            m.has_inline_frames |= lines.len() > 1;
        }
        self.profile.location.push(proto::Location {
            id: id.0,
            mapping_id: mapping.map_or(0, |m| m.0),
            address,
            line,
            is_folded: false,
        });
        self.locations.insert((mapping, address), id);
        id
    }

    /// A location of no address and no mapping, its one function `name`: what stands for a stack
    /// that is not known (`[no stack]`).
    pub fn named_location(&mut self, name: &str) -> LocationId {
        if let Some(&id) = self.named_locations.get(name) {
            return id;
        }
        let id = LocationId(self.profile.location.len() as u64 + 1);
        let line = vec![self.line(&Line {
            function: name.to_string(),
            file: None,
            line: None,
        })];
        self.profile.location.push(proto::Location {
            id: id.0,
            line,
            ..Default::default()
        });
        self.named_locations.insert(name.to_string(), id);
        id
    }

    fn line(&mut self, l: &Line) -> proto::Line {
        let key = (l.function.clone(), l.file.clone());
        let function_id = match self.functions.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.profile.function.len() as u64 + 1;
                let name = self.string(&l.function);
                let filename = l.file.as_deref().map_or(0, |f| self.string(f));
                self.profile.function.push(proto::Function {
                    id,
                    name,
                    system_name: name,
                    filename,
                    start_line: 0,
                });
                self.functions.insert(key, id);
                id
            }
        };
        proto::Line {
            function_id,
            line: l.line.map_or(0, i64::from),
        }
    }

    /// A sample: its stack (leaf first), one value per sample type, its labels.
    pub fn sample(&mut self, stack: &[LocationId], values: &[i64], labels: &[Label]) {
        assert_eq!(
            values.len(),
            self.profile.sample_type.len(),
            "one value per sample type"
        );
        let label = labels
            .iter()
            .map(|l| match l {
                Label::Num { key, value, unit } => proto::Label {
                    key: self.string(key),
                    num: *value,
                    num_unit: unit.as_deref().map_or(0, |u| self.string(u)),
                    ..Default::default()
                },
                Label::Str { key, value } => proto::Label {
                    key: self.string(key),
                    str: self.string(value),
                    ..Default::default()
                },
            })
            .collect();
        self.profile.sample.push(proto::Sample {
            location_id: stack.iter().map(|l| l.0).collect(),
            value: values.to_vec(),
            label,
        });
    }

    pub fn build(self) -> proto::Profile {
        self.profile
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The string table starts with "", each string is stored once, and every id is the
    /// 1-based position of what it names: what profile.proto requires and pprof checks.
    #[test]
    fn strings_and_ids_follow_profile_proto() {
        let mut b = ProfileBuilder::heap();
        let exe = Mapping {
            start: 0x1000,
            limit: 0x2000,
            file_offset: 0,
            file: "/bin/p".into(),
            build_id: Some("ab12".into()),
        };
        let m = b.mapping(&exe);
        assert_eq!(b.mapping(&exe), m);
        let lines = [
            Line {
                function: "inlined".into(),
                file: Some("p.c".into()),
                line: Some(3),
            },
            Line {
                function: "outer".into(),
                file: Some("p.c".into()),
                line: Some(9),
            },
        ];
        let a = b.location(Some(m), 0x1010, &lines);
        assert_eq!(b.location(Some(m), 0x1010, &[]), a);
        let c = b.named_location("[no stack]");
        assert_ne!(b.named_location("[stack not taken]"), c);
        b.sample(
            &[a, c],
            &[1, 2, 3, 4],
            &[Label::Num {
                key: "pid".into(),
                value: 7,
                unit: None,
            }],
        );
        let p = b.build();
        assert_eq!(p.string_table[0], "");
        let mut unique = p.string_table.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), p.string_table.len());
        let s = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, super::super::HEAP_SAMPLE_TYPES);
        assert_eq!(s(p.default_sample_type), "inuse_space");
        assert_eq!((p.mapping.len(), p.mapping[0].id), (1, 1));
        assert_eq!(s(p.mapping[0].build_id), "ab12");
        let flags = &p.mapping[0];
        assert!(
            flags.has_functions
                && flags.has_filenames
                && flags.has_line_numbers
                && flags.has_inline_frames
        );
        assert_eq!(p.location.len(), 3);
        assert_eq!(p.location[0].line.len(), 2);
        assert_eq!(p.location[1].mapping_id, 0);
        assert_eq!(p.function.len(), 4);
        assert_eq!(s(p.function[1].name), "outer");
        assert_eq!(p.sample[0].location_id, vec![1, 2]);
        assert_eq!(s(p.sample[0].label[0].key), "pid");
    }

    /// Written gzipped, read back the same.
    #[test]
    fn a_profile_written_gzipped_reads_back() {
        let mut b = ProfileBuilder::heap();
        b.comment("hello");
        let loc = b.location(None, 0x42, &[]);
        b.sample(&[loc], &[1, 100, 0, 0], &[]);
        let p = b.build();
        let mut bytes = Vec::new();
        super::super::write_gzipped(&p, &mut bytes).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        assert_eq!(super::super::read(&bytes).unwrap(), p);
    }
}
