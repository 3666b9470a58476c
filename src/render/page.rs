//! The one page every HTML report is: self-contained (its style inline, its charts inline SVG, no
//! script), under a Content-Security-Policy that forbids loading anything, so that a report
//! opened from a ticket or an artifact store sends no request anywhere, and whatever a plan or its
//! data holds is text (maud escapes every value it is given).

use maud::{DOCTYPE, Markup, html};

/// Nothing may be loaded or sent: no script, image, font, frame or form target; the inline style
/// is the page's own.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2330; margin: 0 auto; max-width: 1000px; padding: 24px; }
h1 { font-size: 20px; margin: 0 0 12px; } h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid #dde; }
h3 { font-size: 14px; margin: 16px 0 4px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; } dt { color: #667; }
dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 6px 0; } td, th { border: 1px solid #dde; padding: 3px 8px; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1a7f37; } .bad { color: #cf222e; font-weight: 600; }
.plot { position: relative; width: 100%; } .plot svg { width: 100%; height: auto; display: block; }
.plot svg.overlay { position: absolute; left: 0; top: 0; }
rect.window { fill: #4c78a8; fill-opacity: 0.09; }
rect.hit, rect.day { fill: transparent; } rect.hit:hover, rect.day:hover { fill: #000; fill-opacity: 0.12; }
.legend span { display: inline-block; width: 12px; height: 12px; vertical-align: -1px; margin: 0 4px 0 12px; }
pre { background: #f6f8fa; padding: 8px; white-space: pre-wrap; overflow-wrap: anywhere; }
details summary { cursor: pointer; color: #445; }
";

/// A whole page titled `title`.
pub fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (maud::PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
    .into_string()
}
