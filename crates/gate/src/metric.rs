//! The figures a limit can name: their names in a limits file, their class (which exit status a
//! failure sets) and their unit.

/// A figure the gate measures. Every one is "lower is better": a limit is an upper bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// A run's peak RSS of the whole tree (results.json `peak_rss`), median over the repeats.
    PeakRss,
    /// A run's peak PSS of the tree, median over the repeats.
    PeakPss,
    /// A run's mean RSS over its samples, median over the repeats.
    MeanRss,
    /// A run's mean PSS over its samples, median over the repeats.
    MeanPss,
    /// The tree's RSS read at a run's last marker of the `[retained]` label (memory kept once the
    /// work is done), median over the repeats.
    RetainedRss,
    /// A trace's peak live bytes (requested), summed over its process images.
    PeakLiveBytes,
    /// A trace's allocating calls.
    Allocations,
    /// A trace's requested bytes, cumulated.
    RequestedBytes,
    /// Bytes still allocated when the process ended (heaptrack's "leaked"), suppressions excepted.
    NotFreedBytes,
    /// Blocks still allocated when the process ended, suppressions excepted.
    NotFreedBlocks,
    /// Slope of the peak live bytes of the iterations after the warm-up, bytes per iteration.
    LiveGrowthPerIteration,
    /// `record --leaks`: bytes no pointer reaches (memcheck's "definitely lost").
    DefinitelyLostBytes,
    /// `record --leaks`: bytes reached only from lost blocks.
    IndirectlyLostBytes,
    /// `record --leaks`: bytes reached only through interior pointers.
    PossiblyLostBytes,
    /// Definitely plus indirectly lost: what valgrind's `--errors-for-leak-kinds=definite,indirect`
    /// fails on.
    LostBytes,
}

/// What kind of regression a failed limit is: one bit of the exit status each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// RSS, PSS, peak live bytes.
    Memory,
    /// Memory not freed, growth per iteration.
    Leaks,
    /// Allocation counts and bytes.
    Allocations,
    /// A limit of one call site's figures.
    Site,
}

impl Class {
    /// Its bit in the exit status (`16 | bits`, docs/gate.md).
    pub fn bit(self) -> i32 {
        match self {
            Class::Memory => 1,
            Class::Leaks => 2,
            Class::Allocations => 4,
            Class::Site => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::Memory => "memory",
            Class::Leaks => "leaks",
            Class::Allocations => "allocations",
            Class::Site => "sites",
        }
    }
}

/// How a figure is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Count,
    BytesPerIteration,
}

impl Metric {
    pub const ALL: [Metric; 15] = [
        Metric::PeakRss,
        Metric::PeakPss,
        Metric::MeanRss,
        Metric::MeanPss,
        Metric::RetainedRss,
        Metric::PeakLiveBytes,
        Metric::Allocations,
        Metric::RequestedBytes,
        Metric::NotFreedBytes,
        Metric::NotFreedBlocks,
        Metric::LiveGrowthPerIteration,
        Metric::DefinitelyLostBytes,
        Metric::IndirectlyLostBytes,
        Metric::PossiblyLostBytes,
        Metric::LostBytes,
    ];

    /// The kinds of `record --leaks` and the figure of each.
    pub const LEAK_KINDS: [(&'static str, Metric); 3] = [
        ("definitely lost", Metric::DefinitelyLostBytes),
        ("indirectly lost", Metric::IndirectlyLostBytes),
        ("possibly lost", Metric::PossiblyLostBytes),
    ];

    /// The figures a `[[site]]` limit can name: those that add up over a site's stacks.
    pub const OF_SITES: [Metric; 4] = [
        Metric::Allocations,
        Metric::RequestedBytes,
        Metric::NotFreedBytes,
        Metric::NotFreedBlocks,
    ];

    /// Its key in a limits or baseline file.
    pub fn name(self) -> &'static str {
        match self {
            Metric::PeakRss => "peak_rss",
            Metric::PeakPss => "peak_pss",
            Metric::MeanRss => "mean_rss",
            Metric::MeanPss => "mean_pss",
            Metric::RetainedRss => "retained_rss",
            Metric::PeakLiveBytes => "peak_live_bytes",
            Metric::Allocations => "allocations",
            Metric::RequestedBytes => "requested_bytes",
            Metric::NotFreedBytes => "not_freed_bytes",
            Metric::NotFreedBlocks => "not_freed_blocks",
            Metric::LiveGrowthPerIteration => "live_growth_per_iteration",
            Metric::DefinitelyLostBytes => "definitely_lost_bytes",
            Metric::IndirectlyLostBytes => "indirectly_lost_bytes",
            Metric::PossiblyLostBytes => "possibly_lost_bytes",
            Metric::LostBytes => "lost_bytes",
        }
    }

    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn names() -> String {
        Metric::ALL.map(Metric::name).join(", ")
    }

    pub fn class(self) -> Class {
        match self {
            Metric::PeakRss
            | Metric::PeakPss
            | Metric::MeanRss
            | Metric::MeanPss
            | Metric::RetainedRss
            | Metric::PeakLiveBytes => Class::Memory,
            Metric::NotFreedBytes
            | Metric::NotFreedBlocks
            | Metric::LiveGrowthPerIteration
            | Metric::DefinitelyLostBytes
            | Metric::IndirectlyLostBytes
            | Metric::PossiblyLostBytes
            | Metric::LostBytes => Class::Leaks,
            Metric::Allocations | Metric::RequestedBytes => Class::Allocations,
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::Allocations | Metric::NotFreedBlocks => Unit::Count,
            Metric::LiveGrowthPerIteration => Unit::BytesPerIteration,
            _ => Unit::Bytes,
        }
    }

    /// Whether `record --leaks` measures it.
    pub fn of_leak_check(self) -> bool {
        matches!(
            self,
            Metric::DefinitelyLostBytes
                | Metric::IndirectlyLostBytes
                | Metric::PossiblyLostBytes
                | Metric::LostBytes
        )
    }

    /// What a `[[suppress]]` takes out of the program's figure.
    pub fn suppressible(self) -> bool {
        self.of_leak_check() || matches!(self, Metric::NotFreedBytes | Metric::NotFreedBlocks)
    }

    /// Whether a run (results directory) measures it; the others come from a trace.
    pub fn of_runs(self) -> bool {
        matches!(
            self,
            Metric::PeakRss
                | Metric::PeakPss
                | Metric::MeanRss
                | Metric::MeanPss
                | Metric::RetainedRss
        )
    }
}

/// `value` in the metric's unit, for people: "41.2 MiB", "1,204", "3.0 KiB/iteration".
pub fn format_value(unit: Unit, value: f64) -> String {
    let bytes = |v: f64| {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}{}", trace::human_bytes(v.abs().round() as u64))
    };
    match unit {
        Unit::Bytes => bytes(value),
        Unit::Count => format!("{}", value.round() as i64),
        Unit::BytesPerIteration => format!("{}/iteration", bytes(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_classes_have_distinct_bits() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(m));
        }
        assert_eq!(Metric::from_name("peak-rss"), None);
        let bits: Vec<i32> = [Class::Memory, Class::Leaks, Class::Allocations, Class::Site]
            .map(Class::bit)
            .to_vec();
        assert_eq!(bits.iter().fold(0, |a, b| a | b), 15);
    }

    #[test]
    fn values_print_in_their_unit() {
        assert_eq!(format_value(Unit::Bytes, 1536.0), "1.5 KiB");
        assert_eq!(format_value(Unit::Count, 1204.0), "1204");
        assert_eq!(
            format_value(Unit::BytesPerIteration, -2048.0),
            "-2.0 KiB/iteration"
        );
    }
}
