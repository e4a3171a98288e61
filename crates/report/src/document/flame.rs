//! Flame graphs and the sortable table of call sites, built from generic input: stacks as root-first
//! frame names with a value each. The HTML page draws both from the page's JSON block (page.js); they
//! know nothing of traces.
use std::collections::BTreeMap;

use serde::Serialize;

use super::chart::Unit;

/// Frames narrower than this share of the total are left out of a flame graph (under a hundredth of a
/// pixel on a 1300 px graph), so that a trace with a million distinct stacks still makes a small page.
pub const MIN_FLAME_SHARE: f64 = 1.0 / 20_000.0;

/// One flame graph: every stack's value added into a tree of frames (siblings by name, in name order,
/// as flamegraph.pl does), stored flat in pre-order for the page.
#[derive(Debug, Clone, Serialize)]
pub struct FlameGraph {
    /// Unique in a report (an HTML anchor).
    pub id: String,
    pub title: String,
    pub unit: Unit,
    /// Frame names, each once; nodes refer to them by index.
    pub names: Vec<String>,
    /// Pre-order: node i is `names[name[i]]` at `depth[i]` (the root, "all", is depth 0) with `value[i]`,
    /// which includes its children's.
    pub name: Vec<u32>,
    pub depth: Vec<u16>,
    pub value: Vec<u64>,
    /// Frames left out for being narrower than `MIN_FLAME_SHARE` of the total.
    pub omitted: u64,
}

#[derive(Default)]
struct Node {
    value: u64,
    children: BTreeMap<String, Node>,
}

/// Deeper frames are cut (their value stays in the frame above): a flame graph this deep is unreadable
/// and the page's layout is linear in depth.
const MAX_DEPTH: usize = 1000;

impl FlameGraph {
    /// Adds up `stacks` (root-first frame names, value) into a flame graph; zero values are skipped.
    pub fn new<I, S>(
        id: impl Into<String>,
        title: impl Into<String>,
        unit: Unit,
        stacks: I,
    ) -> FlameGraph
    where
        I: IntoIterator<Item = (S, u64)>,
        S: IntoIterator,
        S::Item: AsRef<str>,
    {
        let mut root = Node::default();
        for (frames, value) in stacks {
            if value == 0 {
                continue;
            }
            root.value += value;
            let mut node = &mut root;
            for frame in frames.into_iter().take(MAX_DEPTH) {
                node = node.children.entry(frame.as_ref().to_string()).or_default();
                node.value += value;
            }
        }
        let mut graph = FlameGraph {
            id: id.into(),
            title: title.into(),
            unit,
            names: Vec::new(),
            name: Vec::new(),
            depth: Vec::new(),
            value: Vec::new(),
            omitted: 0,
        };
        let min = (root.value as f64 * MIN_FLAME_SHARE).ceil() as u64;
        let mut index = BTreeMap::new();
        graph.push("all", 0, &root, min, &mut index);
        graph
    }

    /// The total of all stacks (the root's value).
    pub fn total(&self) -> u64 {
        self.value.first().copied().unwrap_or(0)
    }

    pub fn has_data(&self) -> bool {
        self.total() > 0
    }

    fn push(
        &mut self,
        name: &str,
        depth: u16,
        node: &Node,
        min: u64,
        index: &mut BTreeMap<String, u32>,
    ) {
        let next = index.len() as u32;
        let i = *index.entry(name.to_string()).or_insert_with(|| {
            self.names.push(name.to_string());
            next
        });
        self.name.push(i);
        self.depth.push(depth);
        self.value.push(node.value);
        for (child_name, child) in &node.children {
            if child.value < min {
                self.omitted += 1;
                continue;
            }
            self.push(child_name, depth + 1, child, min, index);
        }
    }
}

/// A column of a [`SiteTable`]: its heading and how its values are shown.
#[derive(Debug, Clone, Serialize)]
pub struct SiteColumn {
    pub label: String,
    pub unit: Unit,
    /// Every cell with this many decimals (a percentage, microseconds), so that a column reads in
    /// one format; None: the unit's own format.
    pub decimals: Option<usize>,
}

/// One call site (a function, or a whole stack shown by its innermost frames).
#[derive(Debug, Clone, Serialize)]
pub struct SiteRow {
    /// What the flame graphs' search looks for when the row is clicked (a frame name).
    pub name: String,
    /// Shown under the name: `file:line`, the rest of the stack, ...
    pub detail: Option<String>,
    /// One per column.
    pub values: Vec<f64>,
}

/// A table of call sites the reader sorts by clicking a heading; clicking a site searches for it in the
/// flame graphs listed in `flames`.
#[derive(Debug, Clone, Serialize)]
pub struct SiteTable {
    pub id: String,
    pub caption: Option<String>,
    /// Heading of the first column (the site's name).
    pub site_label: String,
    pub columns: Vec<SiteColumn>,
    pub rows: Vec<SiteRow>,
    /// Ids of the flame graphs a click on a site searches.
    pub flames: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(g: &FlameGraph, i: usize) -> (&str, u16, u64) {
        (g.names[g.name[i] as usize].as_str(), g.depth[i], g.value[i])
    }

    #[test]
    fn stacks_add_up_by_prefix_in_pre_order() {
        let g = FlameGraph::new(
            "f",
            "t",
            Unit::Count,
            vec![
                (vec!["main", "b", "helper"], 10),
                (vec!["main", "a", "helper"], 1000),
                (vec!["main", "a"], 5),
                (vec!["main", "zero"], 0),
            ],
        );
        let nodes: Vec<_> = (0..g.name.len()).map(|i| node(&g, i)).collect();
        assert_eq!(
            nodes,
            [
                ("all", 0, 1015),
                ("main", 1, 1015),
                ("a", 2, 1005),
                ("helper", 3, 1000),
                ("b", 2, 10),
                ("helper", 3, 10)
            ]
        );
        // A name is stored once however many frames carry it.
        assert_eq!(g.names.iter().filter(|n| *n == "helper").count(), 1);
        assert_eq!(g.omitted, 0);
    }

    #[test]
    fn frames_too_narrow_to_see_are_left_out_and_counted() {
        let g = FlameGraph::new(
            "f",
            "t",
            Unit::Bytes,
            vec![(vec!["big"], 1_000_000), (vec!["tiny"], 1)],
        );
        assert_eq!(g.name.len(), 2);
        assert_eq!(g.omitted, 1);
        assert_eq!(
            g.total(),
            1_000_001,
            "the root still counts what is not drawn"
        );
    }
}
