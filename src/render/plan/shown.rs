//! Which slices a plan's text and markdown forms show at each detail level: a long plan is read
//! through its largest slices and the ones furthest from the rest, so neither form hides either.

use bf::rehearse::plan::{Plan, SliceReport};

use super::Detail;

/// Plans longer than this are shown as a summary first, with their largest slices.
const LONG_PLAN: usize = 12;
/// How many slices a summary lists, and how many slices' changed rows it shows.
const TOP_SLICES: usize = 10;
const TOP_SAMPLES: usize = 3;

/// What a detail level shows of a plan: which slices' rows, and which slices' changed rows.
pub(super) struct Shown<'p> {
    pub(super) slices: Vec<&'p SliceReport>,
    /// How many of `slices` were chosen for being far from the rest rather than for their size.
    outliers: usize,
    /// How many slices a summary leaves out for changing nothing: counted, never listed.
    unchanged: usize,
    pub(super) samples: Vec<&'p SliceReport>,
}

impl<'p> Shown<'p> {
    pub(super) fn of(plan: &'p Plan, detail: Detail) -> Shown<'p> {
        let everything = detail == Detail::All || (detail == Detail::Auto && plan.slices.len() <= LONG_PLAN);
        let largest = |n: usize, candidates: Vec<&'p SliceReport>| {
            let mut by_change = candidates;
            by_change.sort_by(|a, b| change_size(b).total_cmp(&change_size(a)));
            let mut top: Vec<&SliceReport> = by_change.into_iter().take(n).collect();
            top.sort_by_key(|s| s.index);
            top
        };
        let all = || plan.slices.iter().collect::<Vec<_>>();
        let with_samples = |slices: Vec<&'p SliceReport>| -> Vec<&'p SliceReport> {
            slices.into_iter().filter(|s| has_samples(s)).collect()
        };
        let largest_samples = || largest(TOP_SAMPLES, with_samples(all()));
        // The largest slices, and the slices whose change is furthest from the others' (a day that
        // moved the other way, or not at all): a sample that hides neither.
        let chosen = || {
            // An unchanged day among changed ones is an outlier worth showing; it is never one of
            // "those with the most changes".
            let outliers = outliers(&all(), OUTLIERS);
            // A slice that changes nothing is never one of "those with the most changes".
            let rest: Vec<&SliceReport> = all()
                .into_iter()
                .filter(|s| !outliers.iter().any(|o| o.index == s.index) && changes(s))
                .collect();
            let mut slices = largest(TOP_SLICES - outliers.len(), rest);
            let count = outliers.len();
            slices.extend(outliers);
            slices.sort_by_key(|s| s.index);
            (slices, count)
        };
        // The slices left out for changing nothing: counted, never listed.
        let unchanged = |shown: &[&SliceReport]| {
            plan.slices.iter().filter(|s| !changes(s) && !shown.iter().any(|o| o.index == s.index)).count()
        };
        match detail {
            _ if everything => Shown {
                slices: plan.slices.iter().collect(),
                outliers: 0,
                unchanged: 0,
                samples: with_samples(plan.slices.iter().collect()),
            },
            Detail::Slices => Shown { slices: all(), outliers: 0, unchanged: 0, samples: largest_samples() },
            Detail::Summary => {
                let (slices, outliers) = chosen();
                Shown { unchanged: unchanged(&slices), slices, outliers, samples: Vec::new() }
            }
            _ => {
                let (slices, outliers) = chosen();
                Shown { unchanged: unchanged(&slices), slices, outliers, samples: largest_samples() }
            }
        }
    }

    /// `those with the most changes`, the outliers when there are any, and how many slices changed
    /// nothing.
    pub(super) fn chosen_by(&self) -> String {
        let chosen = match self.outliers {
            0 => "those with the most changes".to_owned(),
            n => format!("those with the most changes and the {n} furthest from the rest"),
        };
        match self.unchanged {
            0 => chosen,
            1 => format!("{chosen} (1 slice changes nothing)"),
            n => format!("{chosen} ({n} slices change nothing)"),
        }
    }
}

/// How many slices a summary shows for being far from the others.
const OUTLIERS: usize = 2;

/// Up to `n` of the changed `slices` whose relative change (of the first metric, else the rows) is
/// furthest from their median — by more than a point and three median deviations, so that a
/// steady backfill has none.
fn outliers<'p>(slices: &[&'p SliceReport], n: usize) -> Vec<&'p SliceReport> {
    let pct = |s: &SliceReport| {
        let (b, a) = match s.before.metrics.iter().next() {
            Some((name, b)) => (*b, s.after.metrics.get(name).copied().flatten()),
            None => (Some(s.before.rows as f64), Some(s.after.rows as f64)),
        };
        match (b, a) {
            (Some(b), Some(a)) if b != 0.0 => Some((a - b) / b.abs() * 100.0),
            _ => None,
        }
    };
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let changes: Vec<(&SliceReport, f64)> = slices.iter().filter_map(|s| pct(s).map(|p| (*s, p))).collect();
    let Some(middle) = median(changes.iter().map(|(_, p)| *p).collect()) else { return Vec::new() };
    let spread = median(changes.iter().map(|(_, p)| (p - middle).abs()).collect()).unwrap_or(0.0);
    let mut far: Vec<(&SliceReport, f64)> = changes
        .into_iter()
        .map(|(s, p)| (s, (p - middle).abs()))
        .filter(|(_, off)| *off > 1.0 && *off > 3.0 * spread)
        .collect();
    far.sort_by(|a, b| b.1.total_cmp(&a.1));
    far.into_iter().take(n).map(|(s, _)| s).collect()
}

/// How much a slice changes: rows added, removed and changed by key (else the change in its row
/// count), then, to rank slices whose rows are as many as before, each metric's relative change.
fn change_size(slice: &SliceReport) -> f64 {
    let rows = match &slice.changes {
        Some(c) => c.added + c.removed + c.changed,
        None => slice.before.rows.abs_diff(slice.after.rows),
    };
    let metrics: f64 = slice
        .before
        .metrics
        .iter()
        .map(|(name, before)| {
            let (b, a) =
                (before.unwrap_or(0.0), slice.after.metrics.get(name).copied().flatten().unwrap_or(0.0));
            if a == b { 0.0 } else { ((a - b) / b.abs().max(f64::MIN_POSITIVE)).abs().min(1e6) }
        })
        .sum();
    rows as f64 + metrics.min(0.999)
}

/// Whether a slice changes anything the rehearsal measured: rows by key, its row count, a metric.
fn changes(slice: &SliceReport) -> bool {
    change_size(slice) > 0.0 || !slice.before.same_as(&slice.after)
}

/// Whether a slice kept changed rows to show: a slice without any has no diff to print.
pub(super) fn has_samples(slice: &SliceReport) -> bool {
    slice.changes.as_ref().is_some_and(|c| !c.samples.is_empty())
}
