//! How reports look in a terminal. Commands build a report value first and render it last, so the
//! text and `--json` forms cannot say different things. One module per report; every verb and the
//! demo print through them.

pub mod airflow;
pub mod apply;
pub mod freeze;
pub mod history;
pub mod plan;
pub mod policy;
pub mod rollback;
pub mod slices;
pub mod status;

/// A report as the one JSON document `--json` prints on stdout.
pub fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).expect("reports serialize") + "\n"
}

use comfy_table::{ContentArrangement, Table, presets};

/// A table in bf's house style: light borders, columns fitted to the terminal.
pub fn table<T: ToString>(header: impl IntoIterator<Item = T>) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.into_iter().map(|h| h.to_string()));
    table
}

use bf::words::percent;
pub use bf::words::{count, number};

/// A value a report shows, or `—` where there is none (the SUM of no rows).
pub fn value(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), number)
}

/// `412 → 409 (−3, −0.7%)`: a before/after pair with its change; `— → 6,487.85` from nothing.
pub fn change(before: Option<f64>, after: Option<f64>) -> String {
    let show = value;
    match (before, after) {
        (Some(b), Some(a)) if a == b => format!("{} (=)", number(b)),
        (Some(b), Some(a)) => format!(
            "{} → {} ({}{})",
            number(b),
            number(a),
            signed(a - b),
            percent(b, a).map(|p| format!(", {p}")).unwrap_or_default()
        ),
        (b, a) => format!("{} → {}", show(b), show(a)),
    }
}

/// `+3` / `−3`.
pub fn signed(value: f64) -> String {
    if value > 0.0 { format!("+{}", number(value)) } else { number(value) }
}
