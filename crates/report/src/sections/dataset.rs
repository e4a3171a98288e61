//! The page of a dataset of `alloclens merge` (docs/dataset.md): hosts and variants side by side,
//! read from the dataset's Parquet files (`summary`, `machines`, `sources`). Ratios are comparable
//! across hosts only for the same command and parameter point, so each such group is a table.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dataset::{read_table, Dataset, DatasetError, Rows};

use crate::document::{Block, Document, Reportable, Section, Table};
use crate::format;

/// One variant's ratios on one host (a summary row).
#[derive(Debug, Clone)]
struct HostFigures {
    host: String,
    variant: String,
    peak_pss_ratio: Option<f64>,
    mean_pss_ratio: Option<f64>,
}

/// The rows of one command and parameter point, over every host.
#[derive(Debug, Clone, Default)]
struct Group {
    baseline: String,
    rows: Vec<HostFigures>,
}

/// A dataset read for its page.
pub struct DatasetData {
    pub dir: PathBuf,
    /// (command, params) -> the group.
    groups: BTreeMap<(String, String), Group>,
    /// command partition -> the command in full (from `runs`).
    commands: BTreeMap<String, String>,
    machines: Rows,
    sources: Rows,
    /// One row per merged trace (`kind=traces`).
    traces: Rows,
}

impl DatasetData {
    pub fn is_dataset(dir: &Path) -> bool {
        Dataset::is_dataset(dir)
    }

    pub fn load(dir: &Path) -> Result<DatasetData, DatasetError> {
        let dataset = Dataset::open(dir)?;
        let summary = read_table(&dataset, "summary")?;
        let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
        for i in 0..summary.len() {
            let text = |n: &str| summary.text(i, n).unwrap_or("").to_string();
            let group = groups.entry((text("command"), text("params"))).or_default();
            group.baseline = text("baseline");
            group.rows.push(HostFigures {
                host: text("host"),
                variant: text("variant"),
                peak_pss_ratio: summary.number(i, "peak_pss_ratio"),
                mean_pss_ratio: summary.number(i, "mean_pss_ratio"),
            });
        }
        let runs = read_table(&dataset, "runs")?;
        let mut commands = BTreeMap::new();
        for i in 0..runs.len() {
            if let (Some(p), Some(c)) = (runs.text(i, "command"), runs.text(i, "command_line")) {
                commands
                    .entry(p.to_string())
                    .or_insert_with(|| c.to_string());
            }
        }
        Ok(DatasetData {
            dir: dir.to_path_buf(),
            groups,
            commands,
            machines: read_table(&dataset, "machines")?,
            sources: read_table(&dataset, "sources")?,
            traces: read_table(&dataset, "traces")?,
        })
    }
}

/// min, median, max of the values present.
fn spread(values: &mut [f64]) -> Option<(f64, f64, f64)> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return None;
    }
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    Some((values[0], median, values[n - 1]))
}

fn spread_text(s: Option<(f64, f64, f64)>) -> String {
    match s {
        Some((lo, med, hi)) => format!(
            "{} ({} – {})",
            format::ratio(med),
            format::ratio(lo),
            format::ratio(hi)
        ),
        None => "–".to_string(),
    }
}

impl Group {
    fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.rows {
            if !v.contains(&r.variant) {
                v.push(r.variant.clone());
            }
        }
        v
    }

    /// Per host, its variants best first by mean PSS ratio (ties and missing figures by name).
    fn rankings(&self) -> BTreeMap<String, Vec<String>> {
        let mut by_host: BTreeMap<String, Vec<&HostFigures>> = BTreeMap::new();
        for r in &self.rows {
            by_host.entry(r.host.clone()).or_default().push(r);
        }
        by_host
            .into_iter()
            .map(|(host, mut rows)| {
                rows.sort_by(|a, b| {
                    let key = |r: &HostFigures| r.mean_pss_ratio.unwrap_or(f64::INFINITY);
                    key(a)
                        .total_cmp(&key(b))
                        .then_with(|| a.variant.cmp(&b.variant))
                });
                (host, rows.into_iter().map(|r| r.variant.clone()).collect())
            })
            .collect()
    }
}

impl DatasetData {
    /// The merged traces, one row each, so a dataset of traces alone does not make an empty page.
    fn traces_section(&self) -> Section {
        let mut section = Section::new("traces", "Traces");
        section.push(Block::Paragraph(
            "Each merged trace; the figures of its process images are SQL over the dataset's \
             `calls` table (docs/sql.md), or `alloclens analyze` of the trace file."
                .to_string(),
        ));
        let t = &self.traces;
        let count = |i: usize, name: &str| {
            t.number(i, name)
                .map_or_else(String::new, |n| format!("{n}"))
        };
        let rows = (0..t.len())
            .map(|i| {
                vec![
                    t.text(i, "host").unwrap_or("").to_string(),
                    t.text(i, "command_line").unwrap_or("").to_string(),
                    t.text(i, "allocator").unwrap_or("").to_string(),
                    count(i, "calls"),
                    count(i, "markers"),
                    match t.number(i, "complete") {
                        Some(n) if n != 0.0 => "yes".to_string(),
                        Some(_) => "no (cut short or damaged)".to_string(),
                        None => String::new(),
                    },
                ]
            })
            .collect();
        section.push(Block::Table(Table {
            caption: None,
            headers: [
                "host",
                "command",
                "allocator",
                "calls",
                "markers",
                "complete",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }));
        section
    }
}

impl Reportable for DatasetData {
    fn document(&self) -> Document {
        let mut sections = vec![
            self.overview_section(),
            self.variants_section(),
            self.ranking_section(),
        ];
        if !self.traces.is_empty() {
            sections.push(self.traces_section());
        }
        sections.push(self.machines_section());
        Document {
            title: format!("alloclens dataset: {}", self.dir.display()),
            sections,
        }
    }
}

impl DatasetData {
    /// The directory, the number of hosts and of sources of each kind.
    fn overview_section(&self) -> Section {
        let mut overview = Section::new("dataset", "The dataset");
        let hosts: std::collections::BTreeSet<&str> = (0..self.sources.len())
            .filter_map(|i| self.sources.text(i, "host"))
            .collect();
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..self.sources.len() {
            *kinds
                .entry(
                    self.sources
                        .text(i, "source_kind")
                        .unwrap_or("")
                        .to_string(),
                )
                .or_default() += 1;
        }
        let mut facts = vec![
            ("directory".to_string(), self.dir.display().to_string()),
            ("hosts".to_string(), hosts.len().to_string()),
        ];
        facts.extend(
            kinds
                .into_iter()
                .map(|(k, n)| (format!("{k} sources"), n.to_string())),
        );
        overview.push(Block::Facts(facts));
        overview
    }

    /// "COMMAND LINE, params P, baseline B": what a group's tables are of.
    fn caption(&self, command: &str, params: &str, group: &Group) -> String {
        format!(
            "{}{}, baseline {}",
            self.commands.get(command).map_or(command, String::as_str),
            if params == "{}" || params.is_empty() {
                String::new()
            } else {
                format!(", params {params}")
            },
            group.baseline
        )
    }

    /// One table per command and parameter point: each variant's ratios over the hosts.
    fn variants_section(&self) -> Section {
        let mut variants = Section::new("variants-across-hosts", "Variants across hosts");
        variants.push(Block::Paragraph(
            "Each variant's peak and mean PSS as a ratio to the baseline of its run (lower is \
             better), over the hosts that ran the same command at the same parameter point: the \
             median, then the lowest and highest host in parentheses."
                .to_string(),
        ));
        for ((command, params), group) in &self.groups {
            variants.push(Block::Table(
                group.variants_table(self.caption(command, params, group)),
            ));
        }
        if self.groups.is_empty() {
            variants.push(Block::Paragraph(
                "The dataset holds no results of `alloclens run` (its summary table is empty)."
                    .to_string(),
            ));
        }
        variants
    }

    /// Per command and parameter point, the hosts that rank the variants otherwise than most do.
    fn ranking_section(&self) -> Section {
        let mut differing = Section::new("ranking-differs", "Hosts where the ranking differs");
        let mut any_differs = false;
        // Some command ran on two hosts or more.
        let mut compared = false;
        for ((command, params), group) in &self.groups {
            let rankings = group.rankings();
            compared |= rankings.len() >= 2;
            let caption = self.caption(command, params, group);
            for block in differing_rankings(caption, &rankings) {
                any_differs = true;
                differing.push(block);
            }
        }
        // "Every host agrees" only where hosts were compared: not over no run, or one host each.
        if !any_differs {
            differing.push(Block::Paragraph(
                if compared {
                    "Every host ranks the variants of each command the same way by mean PSS ratio."
                } else if self.groups.is_empty() {
                    "No results of `alloclens run` to rank."
                } else {
                    "Each command ran on one host only: no ranking to compare across hosts."
                }
                .to_string(),
            ));
        }
        differing
    }

    /// Each distinct machine description, once.
    fn machines_section(&self) -> Section {
        let mut machines = Section::new("machines", "Machines");
        let columns = [
            "host",
            "kernel",
            "cpu_model",
            "cpus",
            "memory_bytes",
            "allocators",
        ];
        let mut seen = std::collections::BTreeSet::new();
        let mut rows = Vec::new();
        for i in 0..self.machines.len() {
            let row: Vec<String> = columns
                .iter()
                .map(|c| match *c {
                    "memory_bytes" => self
                        .machines
                        .number(i, c)
                        .map_or_else(String::new, format::bytes),
                    "cpus" => self
                        .machines
                        .number(i, c)
                        .map_or_else(String::new, |n| format!("{n}")),
                    _ => self.machines.text(i, c).unwrap_or("").to_string(),
                })
                .collect();
            if seen.insert(row.clone()) {
                rows.push(row);
            }
        }
        machines.push(Block::Table(Table {
            caption: None,
            headers: ["host", "kernel", "CPU", "CPUs", "memory", "allocators"]
                .map(String::from)
                .to_vec(),
            rows,
        }));
        machines
    }
}

impl Group {
    /// Per variant: on how many hosts, and the spread of its peak and mean PSS ratios.
    fn variants_table(&self, caption: String) -> Table {
        let mut table = Table {
            caption: Some(caption),
            headers: ["variant", "hosts", "peak PSS ratio", "mean PSS ratio"]
                .map(String::from)
                .to_vec(),
            rows: Vec::new(),
        };
        for variant in self.variants() {
            let rows: Vec<&HostFigures> =
                self.rows.iter().filter(|r| r.variant == variant).collect();
            let mut peak: Vec<f64> = rows.iter().filter_map(|r| r.peak_pss_ratio).collect();
            let mut mean: Vec<f64> = rows.iter().filter_map(|r| r.mean_pss_ratio).collect();
            let hosts: std::collections::BTreeSet<&str> =
                rows.iter().map(|r| r.host.as_str()).collect();
            table.rows.push(vec![
                variant.clone(),
                hosts.len().to_string(),
                spread_text(spread(&mut peak)),
                spread_text(spread(&mut mean)),
            ]);
        }
        table
    }
}

/// The ranking most hosts share and the hosts with another one (a paragraph and a table), or
/// nothing when every host of the group ranks its variants alike.
fn differing_rankings(caption: String, rankings: &BTreeMap<String, Vec<String>>) -> Vec<Block> {
    let mut counts: BTreeMap<&Vec<String>, usize> = BTreeMap::new();
    for r in rankings.values() {
        *counts.entry(r).or_default() += 1;
    }
    let Some((usual, usual_n)) = counts.iter().max_by_key(|(_, n)| **n) else {
        return Vec::new();
    };
    let others: Vec<Vec<String>> = rankings
        .iter()
        .filter(|(_, r)| r != usual)
        .map(|(host, r)| vec![host.clone(), r.join(" < ")])
        .collect();
    if others.is_empty() {
        return Vec::new();
    }
    vec![
        Block::Paragraph(format!(
            "{caption}: {usual_n} of {} hosts rank the variants by mean PSS ratio as {}; \
             these do not:",
            rankings.len(),
            usual.join(" < ")
        )),
        Block::Table(Table {
            caption: Some(caption),
            headers: vec!["host".into(), "ranking (best first)".into()],
            rows: others,
        }),
    ]
}
