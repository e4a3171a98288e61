//! The terminal tables: `alloclens run`'s summary, markers and with `--ksm` the saving,
//! `alloclens watch`'s summary, and `alloclens replay`'s tables.
pub(crate) mod ksm;
pub(crate) mod replay;
pub(crate) mod run_summary;
pub(crate) mod tune;
pub(crate) mod watch;

use crate::tables::Table;

/// A table as the terminal shows it (without its caption): the first column left-aligned, the
/// others right-aligned, two spaces apart, indented by two; each row followed by its `notes`, if
/// any, as "      ! NOTE" lines.
pub(crate) fn table(t: &Table, notes: &[Vec<String>]) -> String {
    let columns = t
        .rows
        .iter()
        .map(Vec::len)
        .fold(t.headers.len(), usize::max);
    let mut widths = vec![0; columns];
    for row in std::iter::once(&t.headers).chain(&t.rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for (i, row) in std::iter::once(&t.headers).chain(&t.rows).enumerate() {
        let mut line = String::from(" ");
        for (j, (cell, w)) in row.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if j == 0 {
                line.push_str(&format!(" {cell}{pad}"));
            } else {
                line.push_str(&format!("  {pad}{cell}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if i > 0 {
            for note in notes.get(i - 1).into_iter().flatten() {
                out.push_str(&format!("      ! {note}\n"));
            }
        }
    }
    out
}

/// A table of text cells for the terminal, drawn as every other terminal table of alloclens (see
/// [`table`]): `headers`, then each row with its notes (a row with fewer cells than headers leaves
/// the rest blank; its notes say why).
pub fn render_terminal_table(
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: &[Vec<String>],
) -> String {
    table(
        &Table {
            caption: None,
            headers,
            rows,
        },
        notes,
    )
}
