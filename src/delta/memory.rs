//! The operator's memory bound for bf's queries (`BF_MEMORY_LIMIT=256MiB`): each DataFusion
//! session bf runs a slice in — its source query and its write, and the comparison — gets a memory
//! pool of that size, which sorts, aggregations and sort-merge joins spill to disk beyond. A query
//! that cannot fit even so fails with DataFusion's "Resources exhausted", which [`hint`] names the
//! setting in, rather than growing until the process is killed. It bounds the operators, not what
//! no pool accounts for (the writer's Parquet buffers, batches in flight: docs/BENCHMARKS.md, W3).
//! Unset, nothing changes: the source and the write are unbounded, the comparison keeps its own.

use deltalake::datafusion::execution::SessionState;

/// The setting's name.
pub const MEMORY_LIMIT: &str = "BF_MEMORY_LIMIT";

/// The bound the operator set, in bytes; an error naming the setting for a value that is not a
/// size.
pub fn limit() -> Result<Option<u64>, String> {
    let Ok(value) = std::env::var(MEMORY_LIMIT) else { return Ok(None) };
    if value.trim().is_empty() {
        return Ok(None);
    }
    match value.trim().parse::<bytesize::ByteSize>() {
        Ok(size) if size.as_u64() > 0 => Ok(Some(size.as_u64())),
        _ => Err(format!("{MEMORY_LIMIT}: `{value}` is not a size (write one like \"256 MiB\")")),
    }
}

/// A session state for one of bf's queries: its memory pool the operator's bound where set (the
/// smaller of it and `own`, a bound the query keeps anyway), else `own`, else unbounded.
pub fn session_state(own: Option<usize>) -> SessionState {
    let mut state = deltalake::delta_datafusion::create_session_state_with_spill_config(pool(own), None);
    // `1234567.89` is the decimal it is written as, as in Spark and the SQL standard: read as a
    // DOUBLE, `amount = 1234567.89` on a DECIMAL(18,2) column matched no row (the literal's nearest
    // double is not the decimal), while smaller ones happened to.
    state.config_mut().options_mut().sql_parser.parse_float_as_decimal = true;
    if bound().is_some() {
        // Sort-merge joins spill; a hash join holds its whole build side.
        state.config_mut().options_mut().optimizer.prefer_hash_join = false;
    }
    state
}

/// The operator's bound, in bytes, where set and valid.
fn bound() -> Option<usize> {
    limit().ok().flatten().map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// The memory pool of a query that keeps `own` anyway: the smaller of it and the operator's bound,
/// either where only one is set, else unbounded (`None`).
pub fn pool(own: Option<usize>) -> Option<usize> {
    match (bound(), own) {
        (Some(bound), Some(own)) => Some(bound.min(own)),
        (bound, own) => bound.or(own),
    }
}

/// What to change when `message` (an error bf is about to print) says a query ran out of the
/// memory it may hold; `None` for any other error.
pub fn hint(message: &str) -> Option<String> {
    if !message.contains("Resources exhausted") {
        return None;
    }
    let held = match limit() {
        Ok(Some(bytes)) => format!(
            "bf's queries may hold {} in memory ({MEMORY_LIMIT}) and spill the rest to disk; this one could not",
            bytesize::ByteSize(bytes).display().iec()
        ),
        _ => "the comparison's queries may hold 512 MiB in memory and spill the rest to disk; this one could not"
            .to_owned(),
    };
    Some(format!("{held}. Raise {MEMORY_LIMIT}, or cut the slices smaller (`slicing.every`)"))
}

/// `message` with its [`hint`] below it, when it has one.
pub fn explain(message: &str) -> String {
    match hint(message) {
        Some(hint) => format!("{message}\nhelp: {hint}"),
        None => message.to_owned(),
    }
}
