//! Policy as code on the saved plan, as platform teams write it for Terraform plans with OPA and
//! conftest: Rego policies (`package main`, Rego v1) whose `deny` and `warn` sets of messages are
//! evaluated, in-process with regorus, against the saved plan's JSON — the same document `bf show
//! --json` prints. A `deny` stops the plan; a `warn` is shown.
//!
//! `bf policy test DIR` runs a policy folder's fixtures, as `opa test` does: each
//! `fixtures/<name>.json` (a saved plan) beside `fixtures/<name>.expected.json`
//! (`{"deny": [...], "warn": [...]}`, sorted), so a policy change is reviewed with the decisions it
//! changes.

use std::path::{Path, PathBuf};

pub use crate::rehearse::plan::Decision;
use crate::rehearse::plan::Plan;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{path}: {problem}")]
    Unreadable { path: String, problem: String },
    #[error("{folder} holds no Rego policy (`*.rego`)")]
    Empty { folder: String },
    #[error("evaluating the policies in {folder}: {problem}")]
    Evaluation { folder: String, problem: String },
}

/// The Rego policies of a folder (its `*.rego` files, not its fixtures), parsed once: each
/// decision evaluates a copy of the parsed engine with its own input.
pub struct Policies {
    folder: PathBuf,
    engine: regorus::Engine,
}

impl Policies {
    pub fn load(folder: &Path) -> Result<Policies, PolicyError> {
        let unreadable = |e: std::io::Error| PolicyError::Unreadable {
            path: folder.display().to_string(),
            problem: e.to_string(),
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
            .map_err(unreadable)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rego"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(PolicyError::Empty { folder: folder.display().to_string() });
        }
        // Parsed now: a broken policy is named before anything is rehearsed.
        let mut engine = regorus::Engine::new();
        for file in &files {
            engine.add_policy_from_file(file).map_err(|e| PolicyError::Unreadable {
                path: file.display().to_string(),
                problem: e.to_string(),
            })?;
        }
        Ok(Policies { folder: folder.to_owned(), engine })
    }

    /// The decision about `plan`, as its saved JSON reads.
    pub fn decide(&self, plan: &Plan) -> Result<Decision, PolicyError> {
        self.decide_json(&serde_json::to_string(plan).expect("a plan serializes"))
    }

    /// Decides about `plan`, and records the decision in it: each `deny` a problem (the plan can
    /// no longer be applied), each `warn` a warning, every rendering showing both.
    /// A chain's plans are decided one by one, each as its own saved JSON reads.
    pub fn apply_to(&self, plan: &mut Plan) -> Result<(), PolicyError> {
        let decision = self.decide(plan)?;
        // Decided again at apply on a saved plan that already holds the plan's decision: each
        // message once.
        let once = |list: &mut Vec<String>, message: String| {
            if !list.contains(&message) {
                list.push(message);
            }
        };
        for deny in &decision.deny {
            once(&mut plan.problems, format!("policy denies: {deny}"));
        }
        for warn in &decision.warn {
            once(&mut plan.warnings, format!("policy warns: {warn}"));
        }
        plan.policy = Some(decision);
        for below in &mut plan.downstream {
            self.apply_to(below)?;
        }
        Ok(())
    }

    fn decide_json(&self, input: &str) -> Result<Decision, PolicyError> {
        let mut engine = self.engine.clone();
        engine.set_input_json(input).map_err(|e| self.evaluation(e))?;
        Ok(Decision { deny: self.messages(&mut engine, "deny")?, warn: self.messages(&mut engine, "warn")? })
    }

    /// The messages of `data.main.<rule>`, sorted; none when no policy defines the rule.
    fn messages(&self, engine: &mut regorus::Engine, rule: &str) -> Result<Vec<String>, PolicyError> {
        let results =
            engine.eval_query(format!("data.main.{rule}"), false).map_err(|e| self.evaluation(e))?;
        let Some(value) = results.result.first().and_then(|r| r.expressions.first()).map(|e| &e.value) else {
            return Ok(Vec::new());
        };
        let json: serde_json::Value =
            serde_json::from_str(&value.to_json_str().map_err(|e| self.evaluation(e))?).unwrap_or_default();
        let mut messages: Vec<String> = match json {
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(|m| match m {
                    serde_json::Value::String(text) => text,
                    other => other.to_string(),
                })
                .collect(),
            _ => {
                return Err(self.evaluation(format!("`data.main.{rule}` is not a set of messages")));
            }
        };
        messages.sort();
        Ok(messages)
    }

    fn evaluation(&self, problem: impl std::fmt::Display) -> PolicyError {
        PolicyError::Evaluation { folder: self.folder.display().to_string(), problem: problem.to_string() }
    }

    /// Runs the folder's fixtures: each saved plan's decision against the one expected.
    pub fn test(&self) -> Result<Vec<FixtureOutcome>, PolicyError> {
        let fixtures = self.folder.join("fixtures");
        let unreadable = |path: &Path, e: &dyn std::fmt::Display| PolicyError::Unreadable {
            path: path.display().to_string(),
            problem: e.to_string(),
        };
        let mut plans: Vec<PathBuf> = std::fs::read_dir(&fixtures)
            .map_err(|e| unreadable(&fixtures, &e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|e| e == "json") && !p.to_string_lossy().ends_with(".expected.json")
            })
            .collect();
        plans.sort();
        let mut outcomes = Vec::new();
        for plan in plans {
            let expected_path = plan.with_extension("expected.json");
            let read = |path: &Path| std::fs::read_to_string(path).map_err(|e| unreadable(path, &e));
            let expected: Decision =
                serde_json::from_str(&read(&expected_path)?).map_err(|e| unreadable(&expected_path, &e))?;
            let decided = self.decide_json(&read(&plan)?)?;
            outcomes.push(FixtureOutcome { fixture: plan, expected, decided });
        }
        Ok(outcomes)
    }
}

/// One fixture's run: what was expected and what the policies decided.
#[derive(Debug)]
pub struct FixtureOutcome {
    pub fixture: PathBuf,
    pub expected: Decision,
    pub decided: Decision,
}

impl FixtureOutcome {
    pub fn passed(&self) -> bool {
        let sorted = |d: &Decision| {
            let (mut deny, mut warn) = (d.deny.clone(), d.warn.clone());
            deny.sort();
            warn.sort();
            (deny, warn)
        };
        sorted(&self.expected) == sorted(&self.decided)
    }
}
