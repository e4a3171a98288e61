//! What a candidate is judged on: the figures of one evaluation, the objective, the constraints
//! (results.json's types, in `runner::tune_record`).
pub use runner::tune_record::{Constraints, Figures, Metric, Objective};
