//! `bf plan --sample N`: a first look at a long window. A year of daily slices takes a while to
//! rehearse; before anyone has seen one slice, N of them chosen to stand for the rest — the first,
//! the last, the one holding the most rows, and the others spread evenly over the window — are
//! rehearsed and shown as a plan shows them. What the rehearsal saves is a *preview*: it names the
//! slices it left out, and `bf apply` refuses it ([`crate::rehearse::seal::load_reviewed`]), because
//! the slices it would write are not the ones the plan text makes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::window::Slice;

/// What a preview rehearsed of its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Preview {
    /// How many slices the plan makes.
    pub of: usize,
    /// The slices rehearsed, in calendar order.
    pub chosen: Vec<Chosen>,
}

/// One slice a preview rehearsed, and why it stands for the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Chosen {
    pub index: usize,
    pub why: Vec<Why>,
    /// The rows the table held in the slice's days when it was chosen.
    pub rows: u64,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// The window's first slice.
    First,
    /// Its last.
    Last,
    /// The slice where the table holds the most rows: the heaviest a slice of this plan writes
    /// over.
    Largest,
    /// One of the rest, spread evenly between them.
    Spread,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Why::First => "first",
            Why::Last => "last",
            Why::Largest => "largest by rows",
            Why::Spread => "spread",
        })
    }
}

impl Preview {
    /// Chooses `n` of `slices` (at least one): the first and last in calendar order, the one with
    /// the most rows (`rows` of each, the table's), then the rest spread evenly, each nearest its
    /// share of the window not yet chosen. With `n` at least the slices' count, every slice.
    pub fn choose(slices: &[Slice], n: usize, rows: impl Fn(&Slice) -> u64) -> Preview {
        let mut calendar: Vec<&Slice> = slices.iter().collect();
        calendar.sort_by_key(|s| s.index);
        let mut chosen: BTreeMap<usize, Vec<Why>> = BTreeMap::new();
        let mut pick = |at: usize, why: Why| chosen.entry(at).or_default().push(why);
        let n = n.clamp(1, calendar.len().max(1));
        if let (Some(_), Some(last)) = (calendar.first(), calendar.len().checked_sub(1)) {
            pick(0, Why::First);
            if n >= 2 {
                pick(last, Why::Last);
            }
        }
        // The heaviest slice, the earliest of equals; none when the window holds no rows yet.
        let largest = (0..calendar.len())
            .map(|at| (rows(calendar[at]), std::cmp::Reverse(at)))
            .max()
            .filter(|(rows, _)| *rows > 0)
            .map(|(_, std::cmp::Reverse(at))| at);
        if n >= 3
            && let Some(at) = largest
        {
            pick(at, Why::Largest);
        }
        let spread = n.saturating_sub(chosen.len());
        for k in 1..=spread {
            // Its share of the window: k/(spread+1) of the way from the first to the last, rounded.
            let share = spread + 1;
            let aim = (2 * k * (calendar.len() - 1) + share) / (2 * share);
            let free = (0..calendar.len())
                .filter(|at| !chosen.contains_key(at))
                .min_by_key(|at| (at.abs_diff(aim), *at));
            if let Some(at) = free {
                chosen.insert(at, vec![Why::Spread]);
            }
        }
        Preview {
            of: slices.len(),
            chosen: chosen
                .into_iter()
                .map(|(at, mut why)| {
                    why.sort();
                    Chosen { index: calendar[at].index, why, rows: rows(calendar[at]) }
                })
                .collect(),
        }
    }

    /// Whether the preview rehearsed the slice with this index.
    pub fn has(&self, index: usize) -> bool {
        self.chosen.iter().any(|c| c.index == index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{Cadence, Order, RunOffset, Window};

    fn year() -> Vec<Slice> {
        let window = Window { start: "2025-01-01".parse().unwrap(), end: "2025-12-31".parse().unwrap() };
        window.slices(Cadence::Days(1), RunOffset(0)).collect()
    }

    #[test]
    fn three_of_a_year_are_its_first_last_and_largest_day() {
        let slices = year();
        let rows = |s: &Slice| if s.index == 200 { 900 } else { s.index as u64 % 7 };
        let preview = Preview::choose(&slices, 3, rows);
        let picked: Vec<_> = preview.chosen.iter().map(|c| (c.index, c.why.clone(), c.rows)).collect();
        assert_eq!(
            picked,
            [(1, vec![Why::First], 1), (200, vec![Why::Largest], 900), (365, vec![Why::Last], 1)]
        );
        assert_eq!(preview.of, 365);
    }

    #[test]
    fn the_rest_are_spread_evenly_and_every_choice_is_a_different_slice() {
        let slices = year();
        let preview = Preview::choose(&slices, 6, |s| u64::from(s.index == 1) * 10);
        let indices: Vec<_> = preview.chosen.iter().map(|c| c.index).collect();
        // The largest is the first: four more spread between the first and the last, 72 or 73
        // days apart.
        assert_eq!(preview.chosen[0].why, [Why::First, Why::Largest]);
        assert_eq!(indices, [1, 74, 147, 219, 292, 365]);
    }

    #[test]
    fn a_window_without_rows_has_no_largest_and_n_at_least_the_slices_is_all_of_them() {
        let slices = year();
        let preview = Preview::choose(&slices, 3, |_| 0);
        let whys: Vec<_> = preview.chosen.iter().map(|c| (c.index, c.why.clone())).collect();
        assert_eq!(whys, [(1, vec![Why::First]), (183, vec![Why::Spread]), (365, vec![Why::Last])]);
        let few = &slices[..4];
        assert_eq!(Preview::choose(few, 10, |_| 1).chosen.len(), 4);
        assert_eq!(
            Preview::choose(&slices, 1, |_| 1).chosen.iter().map(|c| c.index).collect::<Vec<_>>(),
            [1]
        );
    }

    #[test]
    fn a_backward_plan_is_chosen_by_the_calendar() {
        let slices = Order::Backward.arrange(year());
        let preview = Preview::choose(&slices, 2, |_| 1);
        let whys: Vec<_> = preview.chosen.iter().map(|c| (c.index, c.why.clone())).collect();
        assert_eq!(whys, [(1, vec![Why::First]), (365, vec![Why::Last])]);
    }

    proptest::proptest! {
        #[test]
        fn n_distinct_slices_of_the_plan_always(n in 1usize..40, days in 1usize..60, heavy in 0usize..60) {
            let slices: Vec<Slice> = year().into_iter().take(days).collect();
            let preview = Preview::choose(&slices, n, |s| u64::from(s.index == heavy + 1) * 5);
            let indices: Vec<_> = preview.chosen.iter().map(|c| c.index).collect();
            proptest::prop_assert_eq!(indices.len(), n.min(days));
            proptest::prop_assert!(indices.windows(2).all(|w| w[0] < w[1]));
            proptest::prop_assert!(indices.iter().all(|i| slices.iter().any(|s| s.index == *i)));
            proptest::prop_assert_eq!(indices[0], 1);
            if n >= 2 { proptest::prop_assert_eq!(indices.last().copied(), Some(days)); }
            if n >= 3 && heavy < days { proptest::prop_assert!(indices.contains(&(heavy + 1))); }
        }
    }
}
