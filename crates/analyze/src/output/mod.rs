//! Writers of an `Analysis`: one file per format.
pub mod csv;
pub mod json;
pub mod sites;
pub mod text;
