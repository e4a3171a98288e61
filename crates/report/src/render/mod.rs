//! Renderers that need no file of their own: a `Document` as a self-contained HTML page, and the
//! terminal tables `alloclens run` prints.
pub(crate) mod escape;
pub(crate) mod html;
pub(crate) mod run_table;
