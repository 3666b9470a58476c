//! What stops an apply, each error saying what to do next.

use deltalake::DeltaTableError;

use crate::apply::staleness::Overtaken;
use crate::delta::ledger;
use crate::delta::store::StoreError;
use crate::delta::table;
use crate::window::Slice;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the saved plan is stale:\n{0}")]
    Stale(String),
    #[error(transparent)]
    Table(#[from] table::TableError),
    #[error(transparent)]
    Open(#[from] crate::delta::store::OpenError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    UnsafeCommits(#[from] crate::delta::store::UnsafeCommits),
    #[error(transparent)]
    Catalog(#[from] crate::delta::catalog::CatalogError),
    #[error(transparent)]
    Frozen(#[from] crate::delta::freeze::FreezeError),
    #[error(transparent)]
    Source(#[from] crate::source::run::SourceError),
    #[error(transparent)]
    Write(#[from] crate::rehearse::slice_writer::WriteError),
    #[error(
        "{slice}: the table holds {found} rows of it after the commit, but the rehearsal held {expected}"
    )]
    Verify { slice: Slice, expected: u64, found: u64 },
    #[error(
        "{slice} conflicts with another writer's commit ({kind}), so it was not written:\n{commits}\n\
         The slices committed before it stay recorded. Run `bf plan` again to plan against the new version."
    )]
    Conflict { slice: Slice, kind: String, commits: String },
    #[error(
        "{slice}: another writer committed first at each of {attempts} attempts at its commit, so it was not \
         written. The slices committed before it stay recorded; run `bf apply` again to resume."
    )]
    Raced { slice: Slice, attempts: usize },
    #[error(
        "bf cannot publish the rehearsed slices: {0}.\nRun `bf plan` to rehearse again, or `bf apply --recompute` \
         to run each slice's query again and write its rows (what lands may then differ from what was reviewed)."
    )]
    Unpublishable(String),
    #[error("slice {slice} ({first}) was not published: {message}")]
    Publish { slice: usize, first: String, message: String },
    #[error("{}", overtaken_message(.slices, *.committed, .plan_file))]
    Overtaken { slices: Vec<(Slice, Overtaken)>, committed: usize, plan_file: String },
    #[error(
        "{}\nThe table differs from the plan there, so bf will not finish this backfill (no comment, change log \
         or notice). `bf rollback` puts the table back to the pre-version; `bf apply --rerun all` writes every \
         slice again under a new backfill id.",
        .0.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n")
    )]
    Unverified(Vec<Unverified>),
    #[error(
        "{}\nNothing was written. Apply them first, or run these slices with `--recompute` (a recomputed slice \
         rewrites whatever the table holds on its days).",
        .0.iter().map(|(s, before)| format!(
            "{s} rewrites files that slices {} write: it can only be published after them",
            before.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
        )).collect::<Vec<_>>().join("\n")
    )]
    OutOfOrder(Vec<(Slice, Vec<usize>)>),
    #[error(
        "{}\nNothing was written. Apply them with `--recompute` too (`bf apply --recompute`): each slice's query \
         runs again over the table as it is, as it did for the slices before.",
        .0.iter().map(|(s, before)| {
            let named = before.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
            let (which, was) = if before.len() == 1 { ("slice", "was") } else { ("slices", "were") };
            format!(
                "{s} rewrites files the rehearsal of {which} {named} wrote, but {which} {named} {was} written with \
                 `--recompute`: the table holds other files, which only recomputing can rewrite"
            )
        }).collect::<Vec<_>>().join("\n")
    )]
    AfterRecomputed(Vec<(Slice, Vec<usize>)>),
    #[error(
        "backfill {backfill} of this plan was rolled back at version {at}: the table does not hold its rows, \
         and nothing was written. To write them again, run `bf plan {plan_file}` again: it rehearses against \
         the table as the rollback left it, and that plan applies"
    )]
    RolledBack { backfill: String, at: u64, plan_file: String },
    #[error("the plan has slices 1 to {count}; it has no slice {missing}")]
    NoSuchSlice { count: usize, missing: String },
    #[error(
        "the backfill cannot be finished: {count} of its slices are not committed yet: {missing}\n\
         Apply them first (`bf apply --slice N`), then finish."
    )]
    Unfinished { count: usize, missing: String },
    #[error(
        "this plan has downstream plans: a chain is applied by `bf apply` as a whole, upstream first; \
         `--slice` and `--finish` apply the slices of a plan without `[[downstream]]`"
    )]
    FanOutChain,
    #[error("{0}")]
    Delta(String),
    #[error(transparent)]
    Unsupported(#[from] crate::delta::compat::Unsupported),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
}

/// A committed slice whose rows are not the rehearsal's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    pub slice: Slice,
    /// The version that committed it, where it was counted.
    pub version: u64,
    pub expected: u64,
    pub found: u64,
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}, committed at version {}, holds {} of its days, but the rehearsal held {}",
            self.slice,
            self.version,
            crate::words::count(self.found, "row"),
            self.expected
        )
    }
}

fn overtaken_message(slices: &[(Slice, Overtaken)], committed: usize, plan_file: &str) -> String {
    let each: Vec<String> = slices
        .iter()
        .map(|(slice, by)| {
            format!("{slice} was not written: since the plan, other commits touch its rows:\n{by}")
        })
        .collect();
    let kept = match committed {
        0 => "No slice of this backfill is committed.".to_owned(),
        1 => "The slice of this backfill already committed stays recorded.".to_owned(),
        n => format!("The {n} slices of this backfill already committed stay recorded."),
    };
    format!(
        "{}\n{kept} Run `bf plan {plan_file}` again: it rehearses against the table as it is now, the other \
         writers' rows included.",
        each.join("\n")
    )
}

/// The log since the plan cannot be read whole: what other writers did to the slices' days in the
/// versions cleaned up cannot be told, so the plan is stale.
impl From<ledger::WholeLogError> for ApplyError {
    fn from(error: ledger::WholeLogError) -> Self {
        match error {
            ledger::WholeLogError::Cleaned { .. } => ApplyError::Stale(format!(
                "{error} since the plan: what other writers did to the window in those versions cannot be told \
                 any more. Plan again (`bf plan PLAN_FILE`)"
            )),
            ledger::WholeLogError::Delta(error) => error.into(),
        }
    }
}

impl From<DeltaTableError> for ApplyError {
    fn from(error: DeltaTableError) -> Self {
        ApplyError::Delta(error.to_string())
    }
}
