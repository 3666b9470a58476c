//! How much work a plan may ask for before anyone reviewed it: the operator's bounds on slices,
//! bytes read and rows written (`BF_MAX_SLICES`, `BF_MAX_READ_BYTES`, `BF_MAX_WRITE_ROWS`), each
//! with a default that holds when the operator sets nothing. Read from the environment once, with
//! the rest of the operator's policy (`confine::Policy`).

use crate::plan_file::root::PolicyError;

/// The operator's variable bounding how many slices a plan may ask for (`[guards] max_slices`).
pub const MAX_SLICES: &str = "BF_MAX_SLICES";
/// The most slices a plan may ask for unless the operator raises it: 27 years of daily slices.
/// Each slice is work done before review (a lookup per `{date}` file at validation, a query and a
/// commit at plan), so a plan cannot ask for 4,294,967,295 of them.
pub const DEFAULT_MAX_SLICES: u32 = 10_000;
/// The operator's variable bounding how many bytes of input a rehearsal may read, e.g. `"5 TiB"`.
pub const MAX_READ_BYTES: &str = "BF_MAX_READ_BYTES";
/// The most bytes of input one rehearsal reads unless the operator raises it: a day of reading on
/// one machine. Counted from the sizes of the files each slice's inputs list (every file of a
/// folder, every live file of a Delta input's version), before any of them is read, so a plan in
/// an unreviewed pull request cannot keep a runner reading a lake for days.
pub const DEFAULT_MAX_READ_BYTES: u64 = 1 << 40;
/// The operator's variable bounding how many rows a rehearsal's queries may return, e.g. `"50000000"`.
pub const MAX_WRITE_ROWS: &str = "BF_MAX_WRITE_ROWS";
/// Unless the operator sets [`MAX_WRITE_ROWS`], a rehearsal writes at most this many rows, plus
/// [`ROWS_PER_BYTE_READ`] for every byte its queries scan: a backfill writes about what it reads,
/// and a query making far more rows than its inputs hold (an `unnest`, inputs joined to themselves)
/// is making them out of nothing, on a runner, before review.
pub const BASE_WRITE_ROWS: u64 = 1_000_000;
/// No file format keeps a row in less than a tenth of a byte.
pub const ROWS_PER_BYTE_READ: u64 = 10;

/// The operator's bounds on a plan's work, or `None` for each default.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    /// The most slices a plan may ask for.
    max_slices: Option<u32>,
    /// The most bytes of input a rehearsal may read.
    max_read_bytes: Option<u64>,
    /// The most rows a rehearsal's queries may return.
    max_write_rows: Option<u64>,
}

impl Bounds {
    /// The bounds the environment sets; a value that is not a number or a size is an error naming
    /// its variable.
    pub fn from_env() -> Result<Bounds, PolicyError> {
        let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let number = |name: &str, what: &str| {
            set(name)
                .map(|v| {
                    v.trim()
                        .replace('_', "")
                        .parse()
                        .map_err(|_| PolicyError(format!("{name}: `{v}` is not {what}")))
                })
                .transpose()
        };
        Ok(Bounds {
            max_slices: number(MAX_SLICES, "a number of slices")?
                .map(|n: u64| u32::try_from(n).unwrap_or(u32::MAX)),
            max_read_bytes: set(MAX_READ_BYTES)
                .map(|v| {
                    v.trim().parse::<bytesize::ByteSize>().map(|size| size.as_u64()).map_err(|_| {
                        PolicyError(format!(
                            "{MAX_READ_BYTES}: `{v}` is not a size (write one like \"5 TiB\")"
                        ))
                    })
                })
                .transpose()?,
            max_write_rows: number(MAX_WRITE_ROWS, "a number of rows")?,
        })
    }

    /// The most slices a plan may ask for: the operator's, or [`DEFAULT_MAX_SLICES`].
    pub fn max_slices(&self) -> u32 {
        self.max_slices.unwrap_or(DEFAULT_MAX_SLICES)
    }

    /// The most bytes of input a rehearsal may read: the operator's, or [`DEFAULT_MAX_READ_BYTES`].
    pub fn max_read_bytes(&self) -> u64 {
        self.max_read_bytes.unwrap_or(DEFAULT_MAX_READ_BYTES)
    }

    /// The most rows a rehearsal whose queries scanned `read` bytes may write, and what makes it so:
    /// the operator's, or [`BASE_WRITE_ROWS`] and [`ROWS_PER_BYTE_READ`] for each byte read.
    pub fn max_write_rows(&self, read: u64) -> (u64, String) {
        match self.max_write_rows {
            Some(max) => (max, "the operator's bound".to_owned()),
            None => (
                BASE_WRITE_ROWS.saturating_add(read.saturating_mul(ROWS_PER_BYTE_READ)),
                format!(
                    "{} and {ROWS_PER_BYTE_READ} for every byte the queries scanned, {}",
                    crate::words::count(BASE_WRITE_ROWS, "row"),
                    crate::plan_file::Size(read)
                ),
            ),
        }
    }
}
