//! What `bf status` prints: the saved plan, and how far its apply got.

use std::fmt::Write;

use bf::apply::ApplyState;
use bf::rehearse::plan::Plan;

use super::plan::summary;

/// `cannot_publish`: why `bf apply` could not publish the pending slices, if it could not;
/// `unverified`: the committed slices whose rows are not the rehearsal's.
pub fn text(plan: &Plan, state: &ApplyState, cannot_publish: Option<&str>, unverified: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan {} for {} (made {}):",
        plan.id,
        state.table,
        plan.created_at.format("%Y-%m-%d %H:%M UTC")
    );
    let _ = writeln!(out, "  {}", summary(plan));
    out.push_str(&super::freeze::periods(&state.frozen, &state.approval_uses));
    if let Some(preview) = &plan.preview {
        let _ = writeln!(
            out,
            "  a preview of {} of its {} slices (`bf plan --sample`): never applied; `bf plan {}` without `--sample` \
             makes the plan `bf apply` takes",
            plan.slices.len(),
            preview.of,
            plan.plan_file.path
        );
        return out;
    }
    if let Some(first_kept) = state.log_cleaned_before {
        let _ = writeln!(
            out,
            "  the table's log before version {first_kept} was cleaned up since the plan \
             (delta.logRetentionDuration): {} of {} slices committed, by their Delta transactions{}; whether the \
             apply finished or was rolled back can no longer be read. `bf apply` refuses this plan as stale: plan \
             again for what the table needs now (`bf gaps` finds missing days).",
            state.committed.len(),
            plan.slices.len(),
            state.backfill_id.as_ref().map(|id| format!(" (backfill {id})")).unwrap_or_default(),
        );
        return out;
    }
    match &state.backfill_id {
        None => {
            let why = if plan.appliable() {
                "not applied yet"
            } else {
                "cannot be applied (failed checks or guards)"
            };
            let _ = writeln!(
                out,
                "  {why}: 0 of {} slices committed; the table is at version {}",
                plan.slices.len(),
                state.table_version
            );
            if plan.appliable() {
                let _ = writeln!(out, "  next: {}", apply_step(cannot_publish));
            }
            return out;
        }
        Some(id) if state.rolled_back.is_some() => {
            let _ = writeln!(
                out,
                "  backfill {id}: rolled back at version {}, to the rows of version {}; the table is at version {}",
                state.rolled_back.unwrap_or_default(),
                state.pre_version,
                state.table_version
            );
            // As `bf apply`'s refusal of this plan says: the one command that moves on.
            let _ = writeln!(
                out,
                "  next: `bf plan {}` rehearses against the table as the rollback left it, and that plan applies",
                plan.plan_file.path
            );
            return out;
        }
        Some(id) => {
            let _ = writeln!(
                out,
                "  backfill {id}: {} of {} slices committed",
                state.committed.len(),
                plan.slices.len()
            );
        }
    }
    // Slices applied by separate processes (an orchestrator's tasks) say which committed each.
    let workers: std::collections::BTreeSet<&String> = state.committed_by.values().collect();
    if workers.len() > 1 {
        for (slice, by) in &state.committed_by {
            let _ = writeln!(out, "    slice {slice}: committed by {by}");
        }
    }
    if !unverified.is_empty() {
        let _ = writeln!(out, "  FAILED verification — this backfill cannot be finished:");
        for failure in unverified {
            let _ = writeln!(out, "    {failure}");
        }
        let _ = writeln!(
            out,
            "  `bf rollback` puts the table back to version {}; `bf apply --rerun all` writes every slice again",
            state.pre_version
        );
    }
    let _ = if !state.pending.is_empty() {
        let pending: Vec<String> = state.pending.iter().map(|d| d.to_string()).collect();
        writeln!(out, "  pending: {}\n  next: {}", pending.join(", "), apply_step(cannot_publish))
    } else if state.commented {
        writeln!(out, "  done: every slice committed and the comment set")
    } else {
        writeln!(
            out,
            "  every slice committed; the comment is not set yet: run `bf apply` (or `bf apply --finish`)"
        )
    };
    let _ = writeln!(out, "  the version to go back to: {}", state.pre_version);
    out
}

/// The one command that resumes (or starts) the apply: `bf apply`, which publishes the rehearsed
/// files, or `bf apply --recompute` when they cannot be published, and why.
fn apply_step(cannot_publish: Option<&str>) -> String {
    match cannot_publish {
        None => "`bf apply` publishes the rehearsed files of the slices left: exactly what the plan shows"
            .to_owned(),
        Some(why) => format!(
            "`bf apply --recompute` runs the queries of the slices left again: the rehearsed files cannot be \
             published ({why})"
        ),
    }
}
