//! The rules a parsed plan must follow. All of them run, so a review sees every problem at once.

use std::collections::{BTreeMap, BTreeSet};

mod inputs;

use super::read_only;
use super::{Check, PlanFile, WriteMode, quoted};

/// The longest reason bf accepts: Delta table comments hold at most 4000 characters.
pub const MAX_REASON_CHARS: usize = 4000;

/// One rule a plan breaks, tied to the key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// The key as written in TOML: `window.end`, `metrics[1].name`, `source.inputs.orders.path`.
    pub key: String,
    pub message: String,
    pub help: Option<String>,
}

/// Collects issues; a small type so each rule reads as one line.
#[derive(Default)]
struct Issues(Vec<Issue>);

impl Issues {
    fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(Issue { key: key.into(), message: message.into(), help: None });
    }

    fn add_with_help(&mut self, key: impl Into<String>, message: impl Into<String>, help: impl Into<String>) {
        self.0.push(Issue { key: key.into(), message: message.into(), help: Some(help.into()) });
    }
}

impl PlanFile {
    /// Every rule this plan breaks; empty when it is valid.
    pub fn validate(&self) -> Vec<Issue> {
        let mut issues = Issues::default();
        self.check_reason(&mut issues);
        self.check_target(&mut issues);
        self.check_window_and_slicing(&mut issues);
        self.check_source(&mut issues);
        self.check_metrics_and_guards(&mut issues);
        self.check_checks(&mut issues);
        if !self.diff.by.is_empty() {
            check_columns("diff.by", &self.diff.by, &mut issues);
        }
        self.check_comment(&mut issues);
        self.check_locations(&mut issues);
        self.check_storage(&mut issues);
        self.check_downstream_and_notify(&mut issues);
        if self.diff.samples > 1000 {
            issues.add(
                "diff.samples",
                format!("`diff.samples = {}` is more than 1000 rows to show", self.diff.samples),
            );
        }
        issues.0
    }

    fn check_reason(&self, issues: &mut Issues) {
        let chars = self.reason.chars().count();
        if self.reason.trim().is_empty() {
            issues.add_with_help(
                "reason",
                "`reason` is empty",
                "say in a sentence why the past is being rewritten; it becomes the table's comment",
            );
        } else if chars > MAX_REASON_CHARS {
            issues.add(
                "reason",
                format!(
                    "`reason` is {chars} characters; a Delta table comment holds at most {MAX_REASON_CHARS}"
                ),
            );
        }
    }

    fn check_target(&self, issues: &mut Issues) {
        let target = &self.target;
        if target.table.trim().is_empty() {
            issues.add("target.table", "`target.table` is empty: name the Delta table to backfill");
        }
        if target.date_column.trim().is_empty() {
            issues.add(
                "target.date_column",
                "`target.date_column` is empty: name the column the window filters on",
            );
        }
        if let Some(key) = &target.key {
            check_columns("target.key", key, issues);
        }
        if self.write.mode == WriteMode::Merge && target.key.is_none() {
            issues.add_with_help(
                "write.mode",
                "`write.mode = \"merge\"` needs `target.key`: a merge matches rows on it",
                "add e.g. `key = [\"order_id\"]` under [target], or use mode = \"replace\"",
            );
        }
        if self.write.delete_missing && self.write.mode != WriteMode::Merge {
            issues.add_with_help(
                "write.delete_missing",
                "`write.delete_missing` applies to `mode = \"merge\"`: a replace already deletes the slice's rows the source lacks",
                "remove it, or set mode = \"merge\"",
            );
        }
        if let Some(rehearsal) = &self.rehearsal.table
            && rehearsal.trim_end_matches('/') == target.table.trim_end_matches('/')
        {
            issues.add(
                "rehearsal.table",
                "the rehearsal table is the target table: a rehearsal must never write the real table",
            );
        }
    }

    fn check_window_and_slicing(&self, issues: &mut Issues) {
        let window = self.window();
        if window.start > window.end {
            issues.add(
                "window.end",
                format!("the window ends ({}) before it starts ({})", window.end, window.start),
            );
            return;
        }
        if self.slicing.parallel == 0 {
            issues.add("slicing.parallel", "`slicing.parallel` must be at least 1");
        }
        let max = self.guards.max_slices;
        if max == 0 {
            issues.add("guards.max_slices", "`guards.max_slices` must be at least 1");
        }
        let outside: Vec<String> = self
            .slicing
            .only
            .iter()
            .filter(|day| !window.contains(day.0))
            .map(|day| day.to_string())
            .collect();
        if !outside.is_empty() {
            issues.add(
                "slicing.only",
                format!(
                    "{} outside the window {window}: `only` picks slices of the window",
                    outside.join(", ")
                ),
            );
        }
        // Count lazily: a window of a million days must not allocate a million slices to say so.
        // With `only`, at most one slice a day named.
        let cap = usize::try_from(max).unwrap_or(usize::MAX);
        let made = || window.slices(self.slicing.every, self.slicing.run_offset);
        let counted = match self.slicing.only.len() {
            0 => made().take(cap.saturating_add(1)).count(),
            _ => self.slices().len(),
        };
        if max > 0 && counted > cap {
            let total = match self.slicing.only.len() {
                0 => made().count(),
                _ => counted,
            };
            issues.add_with_help(
                "window",
                format!(
                    "the window {window} makes {total} slices of `{}`, more than `guards.max_slices = {max}`",
                    self.slicing.every
                ),
                format!(
                    "if that many runs are meant, set `max_slices = {total}` under [guards]; otherwise check the window or use a longer `slicing.every`"
                ),
            );
        }
    }

    fn check_source(&self, issues: &mut Issues) {
        let source = &self.source;
        self.check_inputs(issues);
        match read_only::check_query(&source.query, source.dialect) {
            Err(error) => issues.add("source.query", error.to_string()),
            Ok(query) => {
                for table in &query.tables {
                    if !source.inputs.contains_key(table) {
                        let known: Vec<&str> = source.inputs.keys().map(String::as_str).collect();
                        issues.add_with_help(
                            "source.query",
                            format!("the query reads `{table}`, which is not an input"),
                            if known.is_empty() {
                                "declare it under [source.inputs]".to_owned()
                            } else {
                                format!(
                                    "the inputs are {}; declare `{table}` under [source.inputs]",
                                    quoted(&known)
                                )
                            },
                        );
                    }
                }
            }
        }
    }

    fn check_metrics_and_guards(&self, issues: &mut Issues) {
        let mut names = BTreeSet::new();
        for (i, metric) in self.metrics.iter().enumerate() {
            let key = format!("metrics[{i}]");
            if metric.name == "rows" {
                issues.add(
                    format!("{key}.name"),
                    "`rows` is the row count, which is always compared: pick another name",
                );
            } else if !is_lowercase_identifier(&metric.name) {
                issues.add(
                    format!("{key}.name"),
                    format!(
                        "metric name `{}` is not a lowercase identifier (letters, digits, _)",
                        metric.name
                    ),
                );
            } else if !names.insert(metric.name.as_str()) {
                issues.add(format!("{key}.name"), format!("metric `{}` is declared twice", metric.name));
            }
            if let Err(error) = read_only::check_expression(&metric.sql, self.source.dialect) {
                issues.add(format!("{key}.sql"), error.to_string());
            }
        }
        for (name, pct) in &self.guards.max_change_pct {
            let key = format!("guards.max_change_pct.{name}");
            if name != "rows" && !names.contains(name.as_str()) {
                let mut known = vec!["rows"];
                known.extend(names.iter());
                issues.add_with_help(
                    key.clone(),
                    format!("no metric is named `{name}`"),
                    format!("the metrics are {}", quoted(&known)),
                );
            }
            if !pct.is_finite() || *pct < 0.0 {
                issues.add(key, format!("a change limit is a percentage of 0 or more, not {pct}"));
            }
        }
        if let Some(unfreeze) = &self.guards.unfreeze {
            if unfreeze.from.0 > unfreeze.to.0 {
                issues.add(
                    "guards.unfreeze",
                    format!("the approval's days {}..{} are none", unfreeze.from, unfreeze.to),
                );
            }
            if unfreeze.approved_by.trim().is_empty() || unfreeze.ticket.trim().is_empty() {
                issues.add("guards.unfreeze", "an approval names who approved it and its ticket");
            }
        }
    }

    fn check_checks(&self, issues: &mut Issues) {
        let mut names = BTreeSet::new();
        for (i, check) in self.checks.iter().enumerate() {
            let key = format!("checks[{i}]");
            if check.name.trim().is_empty() {
                issues.add(format!("{key}.name"), "a check needs a name for reports");
            } else if !names.insert(check.name.as_str()) {
                issues.add(format!("{key}.name"), format!("check `{}` is declared twice", check.name));
            }
            let Check { unique, not_null, sql, .. } = check;
            let kinds = [unique.is_some(), not_null.is_some(), sql.is_some()].iter().filter(|k| **k).count();
            if kinds != 1 {
                issues.add_with_help(
                    key.clone(),
                    format!("check `{}` has {kinds} kinds; give exactly one", check.name),
                    "a check is one of `unique = [columns]`, `not_null = [columns]` or `sql = \"SELECT … FROM slice …\"`",
                );
            }
            if let Some(columns) = unique {
                check_columns(&format!("{key}.unique"), columns, issues);
            }
            if let Some(columns) = not_null {
                check_columns(&format!("{key}.not_null"), columns, issues);
            }
            if let Some(sql) = sql {
                match read_only::check_query(sql, self.source.dialect) {
                    Err(error) => issues.add(format!("{key}.sql"), error.to_string()),
                    Ok(query) => {
                        if !query.parameters.is_empty() {
                            issues.add(
                                format!("{key}.sql"),
                                "a check reads the table `slice` and takes no parameters",
                            );
                        }
                        for table in query
                            .tables
                            .iter()
                            .filter(|t| *t != "slice" && !self.source.inputs.contains_key(*t))
                        {
                            issues.add(
                                format!("{key}.sql"),
                                format!("the check reads `{table}`; a check reads `slice` (the rehearsed slice) and the inputs"),
                            );
                        }
                    }
                }
            }
        }
    }

    fn check_comment(&self, issues: &mut Issues) {
        let mut rest = self.record.comment.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                issues.add("record.comment", "`{` without `}` in the comment template");
                return;
            };
            let name = &rest[open + 1..open + close];
            if !super::COMMENT_PLACEHOLDERS.contains(&name) {
                issues.add_with_help(
                    "record.comment",
                    format!("unknown placeholder `{{{name}}}` in the comment template"),
                    format!(
                        "the placeholders are {}",
                        super::COMMENT_PLACEHOLDERS.map(|p| format!("`{{{p}}}`")).join(", ")
                    ),
                );
            }
            rest = &rest[open + close + 1..];
        }
    }

    /// A location bf cannot open would fail deep inside a run; it is refused here, at its line.
    fn check_locations(&self, issues: &mut Issues) {
        let mut locations = vec![("target.table".to_owned(), self.target.table.as_str())];
        locations.extend(self.rehearsal.table.as_deref().map(|t| ("rehearsal.table".to_owned(), t)));
        locations.extend(self.record.log_table.as_deref().map(|t| ("record.log_table".to_owned(), t)));
        for (name, input) in &self.source.inputs {
            locations.push((format!("source.inputs.{name}.path"), input.path.as_str()));
        }
        // DataFusion keeps one store per account host, so `abfss://a@acct…` and `abfss://b@acct…` in
        // one plan would read each other's container.
        let mut containers: BTreeMap<String, String> = BTreeMap::new();
        for (key, written) in &locations {
            let Some(url) = crate::delta::store::uri(written) else { continue };
            if url.username().is_empty()
                || crate::delta::store::Kind::of(&url) != Some(crate::delta::store::Kind::Azure)
            {
                continue;
            }
            let host = url.host_str().unwrap_or_default().to_owned();
            match containers.get(&host) {
                Some(first) if first != url.username() => issues.add_with_help(
                    key.clone(),
                    format!(
                        "container `{}` and container `{first}` of the account {host}: bf reads one container per Azure account in a plan",
                        url.username()
                    ),
                    "keep the plan's tables and files of one account in one container",
                ),
                Some(_) => {}
                None => {
                    containers.insert(host, url.username().to_owned());
                }
            }
        }
        // The tables a plan names may be named as their catalog names them; the catalog says where
        // they live. A rehearsal is bf's own folder, and files are not tables.
        let delta_inputs: Vec<String> = self
            .source
            .inputs
            .iter()
            .filter(|(_, input)| input.format == super::Format::Delta)
            .map(|(name, _)| format!("source.inputs.{name}.path"))
            .collect();
        let names_a_table = |key: &str| {
            key == "target.table" || key == "record.log_table" || delta_inputs.iter().any(|k| k == key)
        };
        for (key, written) in locations {
            match crate::delta::catalog::CatalogName::parse(written) {
                Some(Ok(_)) if names_a_table(&key) => continue,
                Some(Ok(name)) => {
                    issues.add_with_help(
                        key,
                        format!(
                            "{name} is a catalog name, and catalogs name tables: the target, a Delta input, the \
                             log table"
                        ),
                        "give this location as a path (relative to the plan file) or a URI",
                    );
                    continue;
                }
                Some(Err(problem)) => {
                    issues.add_with_help(
                        key,
                        problem,
                        "`uc://catalog.schema.table` (Unity Catalog) or `glue://database.table` (AWS Glue)",
                    );
                    continue;
                }
                None => {}
            }
            if let Some(problem) = crate::delta::store::location_problem(written) {
                issues.add_with_help(
                    key,
                    problem,
                    format!(
                        "give a path (relative to the plan file) or a URI: {}",
                        crate::delta::store::Kind::schemes()
                    ),
                );
            }
        }
    }
}

impl PlanFile {
    fn check_storage(&self, issues: &mut Issues) {
        let storage = &self.storage;
        if let Some(endpoint) = &storage.endpoint {
            match url::Url::parse(endpoint) {
                Ok(url) if !matches!(url.scheme(), "http" | "https") => issues.add(
                    "storage.endpoint",
                    format!("`{endpoint}` is not an endpoint URL: write e.g. \"https://s3.example.com\" or \"http://127.0.0.1:9000\""),
                ),
                Ok(url) if !url.username().is_empty() || url.password().is_some() || url.query().is_some() => {
                    issues.add(
                        "storage.endpoint",
                        "the endpoint holds a credential; credentials come from the environment or the cloud's credential chain",
                    )
                }
                Ok(_) => {}
                Err(_) => issues.add(
                    "storage.endpoint",
                    format!("`{endpoint}` is not an endpoint URL: write e.g. \"https://s3.example.com\" or \"http://127.0.0.1:9000\""),
                ),
            }
        }
        // A setting that names a place becomes part of a request's URL (S3's host is
        // `s3.<region>.amazonaws.com`, Azure's `<account>.blob.core.windows.net`): one holding
        // `@`, `/` or `.` would send the runner's credentials to a host of the plan's choosing.
        // Each may hold only what such a name holds.
        if let Some(region) = &storage.region
            && !is_region(region)
        {
            issues.add_with_help(
                "storage.region",
                "the region is not a region name: lowercase letters, digits and dashes, e.g. \"eu-west-1\"",
                "where bf connects is the operator's choice; a region's name cannot name a host",
            );
        }
        if let Some(account) = &storage.account_name
            && !is_account(account)
        {
            issues.add_with_help(
                "storage.account_name",
                "the account is not a storage account name: 3 to 24 lowercase letters and digits, e.g. \"acmelake\"",
                "where bf connects is the operator's choice; an account's name cannot name a host",
            );
        }
        if let Some(timeout) = &storage.retry_timeout
            && !is_duration(timeout)
        {
            issues.add(
                "storage.retry_timeout",
                format!(
                    "`{timeout}` is not a duration: write a number and a unit, e.g. \"30s\", \"5m\", \"1h\""
                ),
            );
        }
    }
}

/// An S3 region's name (`eu-west-1`, `us-gov-west-1`; an S3-compatible store's own, `garage`):
/// lowercase letters and digits in dash-separated words, nothing that could end a host name.
fn is_region(region: &str) -> bool {
    region.len() <= 64
        && region.split('-').all(|word| {
            !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// An Azure storage account's name, as Azure allows them: 3 to 24 lowercase letters and digits.
fn is_account(account: &str) -> bool {
    (3..=24).contains(&account.len()) && account.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

impl PlanFile {
    /// What one file can say of its chain; what needs the other files is [`crate::plan_file::chain`]'s.
    fn check_downstream_and_notify(&self, issues: &mut Issues) {
        let mut seen = BTreeSet::new();
        for (i, downstream) in self.downstream.iter().enumerate() {
            let key = format!("downstream[{i}].plan");
            if !downstream.plan.ends_with(".toml") {
                issues.add(key, format!("`{}` is not a plan file: name a `.toml` file", downstream.plan));
            } else if !seen.insert(&downstream.plan) {
                issues.add(key, format!("`{}` is downstream twice", downstream.plan));
            }
        }
        let Some(notify) = &self.notify else { return };
        if notify.webhook_env.is_none() && notify.file.is_none() {
            issues.add_with_help(
                "notify",
                "`[notify]` sends nowhere",
                "give `webhook_env` (the environment variable holding the webhook URL), `file`, or both",
            );
        }
        if let Some(name) = &notify.webhook_env {
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
                && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if name.contains("://") {
                issues.add_with_help(
                    "notify.webhook_env",
                    "`webhook_env` holds a URL; a webhook URL is a secret and a plan holds none",
                    "put the URL in an environment variable and name the variable here, e.g. \"FINANCE_BACKFILL_WEBHOOK\"",
                );
            } else if !valid {
                issues.add(
                    "notify.webhook_env",
                    format!("`{name}` is not an environment variable name: write e.g. \"FINANCE_BACKFILL_WEBHOOK\""),
                );
            }
        }
        if notify.owners.iter().any(|o| o.trim().is_empty()) {
            issues.add("notify.owners", "`notify.owners` holds an empty name");
        }
        // Each owner is one line of the notice: a line break would write a line of its own.
        if notify.owners.iter().any(|o| o.chars().any(char::is_control)) {
            issues.add(
                "notify.owners",
                "`notify.owners` holds a name with a line break or a control character",
            );
        }
    }
}

/// `30s`, `5m`, `1h`, `500ms`: the durations deltalake's retry settings read.
fn is_duration(text: &str) -> bool {
    let digits = text.trim().chars().take_while(char::is_ascii_digit).count();
    digits > 0 && matches!(&text.trim()[digits..], "ms" | "s" | "m" | "min" | "h")
}

fn check_columns(key: &str, columns: &[String], issues: &mut Issues) {
    if columns.is_empty() {
        issues.add(key, format!("`{key}` is empty: name at least one column"));
    }
    let mut seen = BTreeSet::new();
    for column in columns {
        if column.trim().is_empty() {
            issues.add(key, format!("`{key}` holds an empty column name"));
        } else if !seen.insert(column) {
            issues.add(key, format!("`{key}` names `{column}` twice"));
        }
    }
}

fn is_lowercase_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
