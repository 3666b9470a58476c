//! How reports look in a terminal. Commands build a report value first and render it last, so the
//! text and `--json` forms cannot say different things.

use comfy_table::{ContentArrangement, Table, presets};

/// A table in bf's house style: light borders, columns fitted to the terminal.
pub fn table<const N: usize>(header: [&str; N]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    table
}

/// `1 slice`, `30 slices`.
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}
