//! What a candidate is judged on: the figures of one evaluation, the objective, the constraints.
use serde::{Deserialize, Serialize};

/// A figure measured by one evaluation of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Time-weighted mean PSS of the whole tree, bytes.
    MeanPss,
    /// Peak PSS of the whole tree, bytes.
    PeakPss,
    /// Wall time, seconds.
    Wall,
    /// Units per second (`--throughput`).
    Throughput,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::MeanPss,
        Metric::PeakPss,
        Metric::Wall,
        Metric::Throughput,
    ];

    /// Whether a smaller value is better (all but throughput).
    pub fn lower_is_better(self) -> bool {
        self != Metric::Throughput
    }

    /// How the summary names it.
    pub fn name(self) -> &'static str {
        match self {
            Metric::MeanPss => "mean PSS",
            Metric::PeakPss => "peak PSS",
            Metric::Wall => "time",
            Metric::Throughput => "throughput",
        }
    }
}

/// The figures of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Figures {
    /// NaN when the run ended before its memory could be sampled (`get` gives None; results.json
    /// has null, read back as NaN).
    #[serde(deserialize_with = "nan_when_null")]
    pub mean_pss: f64,
    #[serde(deserialize_with = "nan_when_null")]
    pub peak_pss: f64,
    pub wall: f64,
    pub throughput: Option<f64>,
}

/// serde_json writes a NaN as null.
fn nan_when_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Figures {
    pub fn get(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::MeanPss => Some(self.mean_pss),
            Metric::PeakPss => Some(self.peak_pss),
            Metric::Wall => Some(self.wall),
            Metric::Throughput => self.throughput,
        }
        .filter(|v| v.is_finite() && *v > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_without_memory_go_through_results_json() {
        let f = Figures {
            mean_pss: f64::NAN,
            peak_pss: f64::NAN,
            wall: 0.05,
            throughput: None,
        };
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains(r#""mean_pss":null"#), "{json}");
        let back: Figures = serde_json::from_str(&json).unwrap();
        assert_eq!(back.get(Metric::MeanPss), None);
        assert_eq!(back.get(Metric::Wall), Some(0.05));
    }
}

/// What the search minimises (or, for throughput, maximises).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Mean PSS of the tree (the memory a program holds over its life).
    Memory,
    /// Peak PSS of the tree.
    Peak,
    /// Wall time.
    Time,
    /// Throughput read from the output (`--throughput REGEX`).
    Throughput,
}

impl Objective {
    pub fn metric(self) -> Metric {
        match self {
            Objective::Memory => Metric::MeanPss,
            Objective::Peak => Metric::PeakPss,
            Objective::Time => Metric::Wall,
            Objective::Throughput => Metric::Throughput,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Objective::Memory => "memory",
            Objective::Peak => "peak",
            Objective::Time => "time",
            Objective::Throughput => "throughput",
        }
    }
}

/// Limits on the other figures, as ratios to the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Constraints {
    /// At most this wall-time ratio (1.05: at most 5 % slower than the baseline).
    pub max_time_ratio: Option<f64>,
    /// At most this mean-PSS ratio.
    pub max_memory_ratio: Option<f64>,
}

impl Constraints {
    /// The constrained metrics with their limit.
    pub fn limits(&self) -> Vec<(Metric, f64)> {
        let mut out = Vec::new();
        if let Some(r) = self.max_time_ratio {
            out.push((Metric::Wall, r));
        }
        if let Some(r) = self.max_memory_ratio {
            out.push((Metric::MeanPss, r));
        }
        out
    }
}
