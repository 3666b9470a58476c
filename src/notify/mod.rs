//! Stage: notify, the top of the library. In: a plan and the report of its apply or rollback. Out: a
//! notice — a webhook POST and a markdown file — whose text from plans and data went through
//! [`markdown`], the one escaper.
//!
//! Telling the people who read the tables: one notice per chain, after an apply and after a rollback.
//!
//! Correct data nobody knows about still causes confusion: finance quoted March's revenue, and it
//! moved. The notice says which tables changed, over which days, why, from which version to which,
//! and the rows and metrics before → after, with the command that undoes it. It goes as a JSON POST
//! to a webhook (its `text` field is what Slack, Teams and Google Chat show) and as markdown to a
//! file. The webhook URL is a secret: it is read from the environment variable the plan names and
//! never printed, saved or put in an error. A notice that cannot be delivered is a loud warning
//! with its text, never a reason to undo data that landed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::apply::ApplyReport;
use crate::markdown;
use crate::plan_file::Notify;
use crate::rehearse::plan::Plan;
use crate::rollback::RollbackReport;
use crate::words::before_after;

/// How long a webhook may take to answer before the notice counts as not delivered.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// What happened to the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    Applied,
    RolledBack,
}

/// One notice: every table of a chain, upstream first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    pub event: Event,
    /// The chain's id (its first plan's id, `bf.cascade` in the tables' commits).
    pub chain: String,
    pub owners: Vec<String>,
    pub tables: Vec<TableNotice>,
    /// The command that undoes an apply, run where the saved plan is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_command: Option<String>,
}

/// One table's part of a notice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableNotice {
    /// Its name (`orders_silver`), and where it is.
    pub name: String,
    pub table: String,
    pub backfill_id: String,
    pub window: String,
    pub reason: String,
    /// The version before, and the version the apply or rollback left.
    pub from_version: u64,
    pub to_version: u64,
    pub rows_before: u64,
    pub rows_after: u64,
    /// Each declared metric over the window, before → after.
    pub metrics: Vec<MetricChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricChange {
    pub name: String,
    pub before: Option<f64>,
    pub after: Option<f64>,
}

impl TableNotice {
    /// A table of `plan` as its backfill changed it: the plan's totals over the window, which the
    /// apply verified slice by slice.
    pub fn applied(plan: &Plan, backfill_id: &str, post_version: u64) -> TableNotice {
        let (before, after) = (&plan.total.before, &plan.total.after);
        TableNotice {
            name: table_name(&plan.target.uri),
            table: display(&plan.target.uri),
            backfill_id: backfill_id.to_owned(),
            window: plan.window.to_string(),
            reason: plan.reason.clone(),
            from_version: plan.target.pre_version,
            to_version: post_version,
            rows_before: before.rows,
            rows_after: after.rows,
            metrics: before
                .metrics
                .iter()
                .map(|(name, b)| MetricChange {
                    name: name.clone(),
                    before: *b,
                    after: after.metrics.get(name).copied().flatten(),
                })
                .collect(),
        }
    }

    /// A table of `plan` as a rollback put it back: the window's rows before and after the
    /// rollback, the versions it went from and to, and the plan's metrics read the other way round.
    pub fn rolled_back(plan: &Plan, report: &RollbackReport) -> TableNotice {
        let mut notice = TableNotice::applied(plan, &report.backfill_id, report.new_version);
        notice.from_version = report.new_version.saturating_sub(report.wrote.len() as u64);
        notice.rows_before = report.rows_before;
        notice.rows_after = report.rows_after;
        for metric in &mut notice.metrics {
            std::mem::swap(&mut metric.before, &mut metric.after);
        }
        notice
    }
}

impl Notice {
    /// The notice of a chain's apply: `reports` are its tables' applies, in the chain's order.
    pub fn of_apply(root: &Plan, owners: &[String], reports: &[ApplyReport]) -> Notice {
        Notice {
            event: Event::Applied,
            chain: root.id.clone(),
            owners: owners.to_vec(),
            tables: root
                .chain()
                .into_iter()
                .zip(reports)
                .map(|(plan, report)| TableNotice::applied(plan, &report.backfill_id, report.post_version))
                .collect(),
            rollback_command: Some(
                if reports.len() > 1 { "bf rollback --cascade" } else { "bf rollback" }.to_owned(),
            ),
        }
    }

    /// The notice of a rollback of the chain's backfills (`reports` upstream first): each table's
    /// window back to its pre-version, with the plan's metrics read the other way round.
    pub fn of_rollback(root: &Plan, owners: &[String], reports: &[RollbackReport]) -> Notice {
        let tables = reports
            .iter()
            .filter_map(|report| {
                // A rerun's backfill id extends its plan's.
                let plan = root.chain().into_iter().find(|p| report.backfill_id.starts_with(&p.id))?;
                Some(TableNotice::rolled_back(plan, report))
            })
            .collect();
        Notice {
            event: Event::RolledBack,
            chain: root.id.clone(),
            owners: owners.to_vec(),
            tables,
            rollback_command: None,
        }
    }

    fn headline(&self) -> String {
        let first = self.tables.first();
        let names: Vec<&str> = self.tables.iter().map(|t| t.name.as_str()).collect();
        let window = first.map_or("", |t| t.window.as_str());
        match self.event {
            Event::Applied => format!("Backfill applied: {} for {window}", names.join(" → ")),
            Event::RolledBack => format!("Backfill rolled back: {} for {window}", names.join(" → ")),
        }
    }

    /// The notice as Slack's `mrkdwn` (also read well as plain text).
    pub fn text(&self) -> String {
        // Every field on its one line: a line break in a reason or a name would write a line of its own.
        let mut out = format!("*{}*\n", mrkdwn(&self.headline()));
        if let Some(first) = self.tables.first() {
            let _ = writeln!(out, "Reason: {}", mrkdwn(&first.reason));
        }
        for table in &self.tables {
            let _ = writeln!(
                out,
                "• *{}* ({}) version {} → {}: rows {}{}",
                mrkdwn(&table.name),
                mrkdwn(&table.backfill_id),
                table.from_version,
                table.to_version,
                before_after(Some(table.rows_before as f64), Some(table.rows_after as f64)),
                table
                    .metrics
                    .iter()
                    .map(|m| format!("; {} {}", mrkdwn(&m.name), before_after(m.before, m.after)))
                    .collect::<String>()
            );
        }
        if !self.owners.is_empty() {
            let owners: Vec<String> = self.owners.iter().map(|o| mrkdwn(o)).collect();
            let _ = writeln!(out, "For: {}", owners.join(", "));
        }
        if let Some(command) = &self.rollback_command {
            let _ = writeln!(out, "Undo: `{}`", mrkdwn(command));
        }
        out
    }

    /// The notice as a markdown section, for a file, a pull request or a wiki.
    pub fn markdown(&self) -> String {
        let mut out = format!("## {}\n\n", markdown::text(&self.headline()));
        if let Some(first) = self.tables.first() {
            let _ = writeln!(out, "**Reason** {}\n", markdown::text(&first.reason));
        }
        let _ = writeln!(out, "| table | backfill | versions | rows | metrics |\n|---|---|---|---|---|");
        for table in &self.tables {
            let metrics: Vec<String> = table
                .metrics
                .iter()
                .map(|m| format!("{} {}", m.name, before_after(m.before, m.after)))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} → {} | {} | {} |",
                markdown::code(&table.name),
                markdown::code(&table.backfill_id),
                table.from_version,
                table.to_version,
                before_after(Some(table.rows_before as f64), Some(table.rows_after as f64)),
                markdown::text(&metrics.join("; "))
            );
        }
        if !self.owners.is_empty() {
            let owners: Vec<String> = self.owners.iter().map(|o| markdown::text(o)).collect();
            let _ = writeln!(out, "\n**For** {}", owners.join(", "));
        }
        if let Some(command) = &self.rollback_command {
            let _ = writeln!(out, "\n**Undo** `{command}`");
        }
        let _ = writeln!(out, "\nChain {}.", markdown::code(&self.chain));
        out
    }

    /// The webhook's JSON body: `text` for chat tools, the rest for anything that reads fields.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::to_value(self).expect("a notice serializes");
        body["text"] = serde_json::Value::String(self.text());
        body
    }
}

/// Where one copy of a notice went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// POSTed to the webhook of this environment variable; it answered 2xx.
    Posted { env: String },
    /// Written to this file.
    Written { file: PathBuf },
    /// Not delivered, and why (never holding the URL).
    Failed { to: String, why: String },
}

impl Delivery {
    pub fn failed(&self) -> bool {
        matches!(self, Delivery::Failed { .. })
    }
}

/// Sends `notice` where `spec` says (`file` relative to `plan_dir`, through the write gate within
/// `root`): every destination is tried, whatever the others did.
pub async fn send(
    spec: &Notify,
    plan_dir: &Path,
    root: &crate::plan_file::confine::Root,
    notice: &Notice,
) -> Vec<Delivery> {
    let mut deliveries = Vec::new();
    if let Some(path) = file_path(spec, plan_dir) {
        // Inside the root, never through a link, never into `.git`, never over a file that runs.
        let gate = crate::write_gate::WriteGate::within([root.path()]);
        let written =
            gate.write_file(&path, notice.markdown().as_bytes(), crate::write_gate::Readers::Everyone);
        deliveries.push(match written {
            Ok(()) => Delivery::Written { file: path },
            Err(e) => Delivery::Failed { to: path.display().to_string(), why: e.to_string() },
        });
    }
    if let Some(env) = &spec.webhook_env {
        let to = format!("the webhook in {env}");
        deliveries.push(match std::env::var(env) {
            Ok(url) if !url.trim().is_empty() => match post(url.trim(), &notice.body()).await {
                Ok(()) => Delivery::Posted { env: env.clone() },
                Err(why) => Delivery::Failed { to, why },
            },
            _ => Delivery::Failed { to, why: format!("{env} is not set") },
        });
    }
    deliveries
}

/// The file a notice is written to: the plan's `[notify] file`, relative to its folder, cleaned as
/// it is written. The plan shows it, so a reviewer reads where an apply will write.
pub fn file_path(spec: &Notify, plan_dir: &Path) -> Option<PathBuf> {
    spec.file.as_ref().map(|file| path_clean::clean(plan_dir.join(file)))
}

/// Where a notice goes, in words: "written to notices/march.md; posted to the webhook in X". The
/// file is named from `plan_dir` when given, else as the plan writes it, cleaned (relative to the
/// plan file's folder: what a comment shows, with no path of the machine that planned).
pub fn destinations(spec: &Notify, plan_dir: Option<&Path>) -> Option<String> {
    let file = match plan_dir {
        Some(dir) => file_path(spec, dir).map(|path| format!("written to {}", path.display())),
        None => spec.file.as_ref().map(|file| {
            format!("written to {} (from the plan file's folder)", path_clean::clean(file).display())
        }),
    };
    let webhook = spec.webhook_env.as_ref().map(|env| format!("posted to the webhook in {env}"));
    let both: Vec<String> = file.into_iter().chain(webhook).collect();
    (!both.is_empty()).then(|| both.join("; "))
}

/// One POST of `body`; an answer other than 2xx, a timeout or a refused connection is an error
/// that names neither the URL nor its query.
async fn post(url: &str, body: &serde_json::Value) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .timeout(WEBHOOK_TIMEOUT)
        .build()
        .map_err(|e| e.without_url().to_string())?;
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("it answered {status}")) }
}

/// `text` for Slack's `mrkdwn`, on one line: `&`, `<` and `>` escaped as Slack asks, so a value
/// cannot write a mention (`<!channel>`, `<@U123>`) or a link (`<https://…|here>`).
fn mrkdwn(text: &str) -> String {
    markdown::one_line(text).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn table_name(uri: &str) -> String {
    url::Url::parse(uri).map(|u| crate::plan_file::chain::table_name(&u)).unwrap_or_else(|_| uri.to_owned())
}

fn display(uri: &str) -> String {
    url::Url::parse(uri).map(|u| crate::delta::store::display_url(&u)).unwrap_or_else(|_| uri.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_cannot_mention_link_or_reorder_in_a_chat_notice() {
        assert_eq!(mrkdwn("<!channel> & <@U1>"), "&lt;!channel&gt; &amp; &lt;@U1&gt;");
        assert_eq!(
            mrkdwn("<https://evil.example|your invoice>"),
            "&lt;https://evil.example|your invoice&gt;"
        );
        assert_eq!(mrkdwn("a\nb\u{202E}txt.exe\u{1b}[31m"), "a b txt.exe [31m");
    }
}
