//! Untrusted pull requests: a plan file written by anyone who can open one, run by `bf plan` on a
//! machine holding the lake's credentials, and data values written by anyone who can load a row.
//! Each attack runs through the real binary in a temp folder holding a fake secret beside the
//! repository (`secret.csv`, `secret.txt`) and the repository (`repo/`, with a `.git` folder), and
//! each must be refused or inert: the secret in no output, comment or saved plan, no request to a
//! hostile endpoint (a listener on 127.0.0.1 counts connections), nothing written outside the root,
//! a tampered saved plan writing no table.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use proptest::prelude::*;
use pulldown_cmark::{Event, Options, Parser, Tag};
use serde_json::Value;

use crate::common::{bf, orders_table, snapshot, write_plan};

mod endpoints;
mod rendering;
mod root;
mod tampered;
mod values;
mod writes;

/// The fake secret: a value no output of bf may hold.
const SECRET: &str = "FAKE-SECRET-wJalrXUtnFEMI-K7MDENG";

/// A temp folder holding the secrets and, beside them, the repository a CI job would check out.
struct Checkout {
    dir: tempfile::TempDir,
}

impl Checkout {
    /// `secret.csv` and `secret.txt` beside `repo/`; in `repo/`: `.git/`, the table
    /// `warehouse/orders` (March, one currency wrong), `landing/orders.csv` (the corrected March)
    /// and `plans/`.
    async fn new() -> Checkout {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("secret.csv"),
            format!("order_id,customer,amount,currency,order_date\n1,{SECRET},1.0,EUR,2026-03-02\n"),
        )
        .unwrap();
        std::fs::write(root.join("secret.txt"), format!("[default]\naws_secret_access_key = {SECRET}\n"))
            .unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("landing")).unwrap();
        std::fs::create_dir_all(repo.join("plans")).unwrap();
        orders_table(
            &repo.join("warehouse/orders"),
            false,
            &[&[(1, "C01", 10.0, "USD", "2026-03-02"), (2, "C02", 20.0, "EUR", "2026-03-03")]],
        )
        .await;
        std::fs::write(
            repo.join("landing/orders.csv"),
            "order_id,customer,amount,currency,order_date\n1,C01,10.0,EUR,2026-03-02\n2,C02,20.0,EUR,2026-03-03\n",
        )
        .unwrap();
        Checkout { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// Writes `plans/<name>` with the good plan's text changed by `edit`; returns its path.
    fn plan(&self, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
        write_plan(&self.repo().join("plans"), name, &edit(GOOD_PLAN.to_owned()))
    }

    /// Runs bf in the repository, as a CI job does, with no operator setting from the test's
    /// environment.
    fn bf(&self, args: &[&str]) -> Output {
        self.bf_with(args, &[])
    }

    fn bf_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = bf();
        command.current_dir(self.repo());
        for name in [
            "BF_STATE_DIR",
            "BF_ROOT",
            "BF_ALLOWED_LOCATIONS",
            "BF_ALLOWED_ENDPOINTS",
            "BF_PLAN_KEY",
            "BF_SAMPLES",
            "BF_MAX_SLICES",
            "BF_MAX_READ_BYTES",
        ] {
            command.env_remove(name);
        }
        command.args(args).envs(env.iter().copied()).output().unwrap()
    }

    /// Every file of the temp folder outside the repository, and the table's: what nothing may change.
    fn untouched(&self) -> (Vec<PathBuf>, std::collections::BTreeMap<PathBuf, u64>) {
        let mut outside: Vec<PathBuf> =
            std::fs::read_dir(self.root()).unwrap().map(|e| e.unwrap().path()).collect();
        outside.sort();
        (outside, snapshot(&self.repo().join("warehouse")))
    }
}

const GOOD_PLAN: &str = r#"reason = "Fix March's currency."

[target]
table = "../warehouse/orders"
date_column = "order_date"
key = ["order_id"]

[window]
start = 2026-03-01
end = 2026-03-31

[slicing]
every = "month"

[source]
inputs.orders = { path = "../landing/orders.csv", format = "csv" }
query = "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders"
"#;

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Refused with exit 1 at `line` of `plan`, the secret nowhere in what bf said, no plan saved.
fn refused_at(checkout: &Checkout, output: &Output, plan: &Path, line: usize, expect: &str) {
    let text = said(output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(expect), "expected {expect:?} in:\n{text}");
    let at = format!("{}:{line}:", plan.strip_prefix(checkout.repo()).unwrap_or(plan).display());
    assert!(text.contains(&at), "expected {at} in:\n{text}");
    assert!(!text.contains(SECRET), "the secret was printed:\n{text}");
    assert!(!checkout.repo().join(".bf/plan.json").exists(), "a plan was saved");
}

/// The pull request's view of the plan: `bf show` as markdown, every detail.
fn bf_show(checkout: &Checkout, env: &[(&str, &str)]) -> String {
    let output = checkout.bf_with(&["show", "--format", "markdown", "--detail", "all"], env);
    assert!(output.status.success(), "{}", said(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Plans `plans/march.toml` (the good plan) and returns the saved plan.
async fn planned(checkout: &Checkout, env: &[(&str, &str)]) -> Value {
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf_with(&["plan", &plan.display().to_string(), "-q"], env);
    assert!(output.status.success(), "{}", said(&output));
    serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap()).unwrap()
}

fn save(checkout: &Checkout, plan: &Value) {
    std::fs::write(checkout.repo().join(".bf/plan.json"), serde_json::to_string_pretty(plan).unwrap())
        .unwrap();
}
