//! Renderers that need no file of their own: a `Document` as a self-contained HTML page, and the
//! terminal tables `alloclens run` prints (its summary, markers, and with `--ksm` the saving), and `alloclens watch`'s summary.
pub(crate) mod escape;
pub(crate) mod html;
pub(crate) mod ksm_table;
pub(crate) mod run_table;
pub(crate) mod watch_summary;
