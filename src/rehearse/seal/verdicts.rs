//! What the rehearsal found, judged again from the numbers the saved plan records beside each
//! verdict: a check's offending rows, a guard's totals and blast radius, the outside-the-window
//! comparison. A `passed` flag flipped, or a failure erased, is caught here without a key.

use crate::plan_file;
use crate::rehearse::guards;
use crate::rehearse::plan::Plan;

/// What the rehearsal found that stops the apply: failed checks, rows outside the window moved,
/// source rows with a NULL date, a policy's denial. (Guards are judged again: [`verdicts`].)
pub(super) fn failures(plan: &Plan) -> Vec<String> {
    plan.checks
        .iter()
        .filter(|c| !check_passed(plan, c))
        .map(|c| format!("check `{}` failed on slice {}", c.name, c.slice))
        .chain((!plan.outside_window.unchanged).then(|| "rows outside the window changed".to_owned()))
        .chain(
            plan.slices
                .iter()
                .any(|s| s.source.null_date > 0)
                .then(|| "source rows have a NULL date: no slice writes them".to_owned()),
        )
        .chain(plan.policy.iter().flat_map(|d| &d.deny).map(|d| format!("policy denies: {d}")))
        .collect()
}

/// A check's verdict judged from its numbers, whatever its `passed` flag says: no offending row,
/// and for the reconcile as many rows in the slice as the source made for it.
fn check_passed(plan: &Plan, check: &crate::rehearse::checks::CheckResult) -> bool {
    use crate::rehearse::checks::CheckKind;
    let rows_kept = match check.kind {
        CheckKind::Reconcile => plan
            .slices
            .iter()
            .find(|s| s.index == check.slice)
            .is_some_and(|s| s.after.rows >= s.source.written()),
        _ => true,
    };
    check.passed && check.offending == 0 && rows_kept
}

/// The verdicts the apply relies on, made again from what the saved plan records beside them: its
/// guards from the window's totals and the slices' blast radius, the outside-the-window comparison
/// from its measures, and every declared check present for every slice. A verdict flipped to
/// `passed`, or a failed check erased, is caught here without a key; a coherent rewrite of the
/// numbers as well is what `BF_PLAN_KEY` catches. Returns what failed and what is not the plan's.
pub(super) fn verdicts(plan: &Plan, spec: &plan_file::PlanFile) -> (Vec<String>, Vec<String>) {
    use crate::rehearse::blast_radius::BlastRadius;
    let mut failed = Vec::new();
    let mut unbound = Vec::new();
    // The blast radius a guard weighs is the slices', each the files its publication adds, whose
    // sizes `bf apply` checks as it places them.
    let slices_radius = BlastRadius::sum(plan.slices.iter().filter_map(|r| r.blast_radius.as_ref()));
    let radius_bound = plan.blast_radius == slices_radius
        && plan.slices.iter().all(|r| match (&r.publication, &r.blast_radius) {
            (Some(p), Some(radius)) => {
                radius.files_added == p.adds.len() as u64
                    && radius.bytes_added == p.adds.iter().map(|f| f.size).sum::<u64>()
                    && radius.files_removed == p.removes.len() as u64
            }
            _ => true,
        });
    if !radius_bound {
        unbound.push("its blast radius is not its slices' files".into());
    }
    // This format records both for every slice: one missing is one deleted, and a guard on what
    // the apply rewrites would weigh nothing.
    if plan.format >= crate::rehearse::plan::PUBLICATION_FORMAT {
        for slice in plan.slices.iter().filter(|s| s.publication.is_none() || s.blast_radius.is_none()) {
            unbound.push(format!(
                "slice {} has no record of the files it publishes or what it rewrites",
                slice.index
            ));
        }
    }
    // A guard on deleted keys would weigh nothing without their record.
    let recorded_deleted_keys = plan.format >= crate::rehearse::plan::DELETED_KEYS_FORMAT;
    if recorded_deleted_keys && spec.target.key.is_some() && plan.deleted_keys.is_none() {
        unbound.push("it has no record of the deleted keys its rows bring back".into());
    }
    // Absent in plans saved before bf counted them; present, it is what policies read.
    if plan.row_changes.is_some() && plan.row_changes != plan.row_counts() {
        unbound.push("its count of rows added, removed and changed is not its slices'".into());
    }
    // The days outside the window are what their guard weighs: each slice's count of rows outside
    // it must be among them.
    let outside_rows: u64 = plan.outside_days.iter().map(|d| d.rows).sum();
    if plan.format >= crate::rehearse::plan::OUTSIDE_DAYS_FORMAT
        && plan.slices.iter().any(|s| s.source.outside_window > outside_rows)
    {
        unbound.push("its days outside the window do not hold the rows its slices return there".into());
    }
    let guards = guards::run_guards(&spec.guards, &guards::Weighed::of(plan));
    failed.extend(
        guards.iter().filter(|g| !g.passed).map(|g| format!("guard {} failed: {}", g.name, g.detail)),
    );
    // Which guards there are is the text's; whether each passed is the numbers' (above), whatever
    // the saved plan's `passed` flags say.
    let made: Vec<&str> = guards.iter().map(|g| g.name.as_str()).collect();
    let recorded: Vec<&str> = plan.guards.iter().map(|g| g.name.as_str()).collect();
    if made != recorded {
        unbound.push("its guards are not the ones its text declares".into());
    }
    if plan.outside_window.unchanged && !plan.outside_window.before.same_as(&plan.outside_window.after) {
        failed.push("rows outside the window changed".into());
    }
    let declared = spec.checks.iter().map(|c| c.name.as_str()).chain(["reconcile"]);
    for slice in &plan.slices {
        for name in declared.clone() {
            if !plan.checks.iter().any(|c| c.slice == slice.index && c.name == name) {
                unbound.push(format!("check `{name}` of slice {} is not recorded", slice.index));
            }
        }
    }
    (failed, unbound)
}
