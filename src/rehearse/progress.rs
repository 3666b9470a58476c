//! What a watcher sees of a rehearsal: each step as it starts ([`Progress`], so a terminal can
//! draw a bar; the library prints nothing itself) and how long each took ([`Stopwatch`], summed
//! into the saved plan's timings).

/// Told about each step, so a terminal can show progress; the library prints nothing itself.
pub trait Progress {
    fn slices(&self, _total: usize) {}
    fn slice_written(&self, _index: usize, _first: &str) {}
    fn step(&self, _what: &str) {}
}

/// Progress nobody watches.
pub struct Quiet;
impl Progress for Quiet {}

/// Milliseconds between laps, and since the start.
pub(crate) struct Stopwatch {
    started: std::time::Instant,
    last: std::time::Instant,
}

impl Stopwatch {
    pub(crate) fn start() -> Stopwatch {
        let now = std::time::Instant::now();
        Stopwatch { started: now, last: now }
    }

    /// Milliseconds since the last lap.
    pub(crate) fn lap(&mut self) -> u64 {
        let now = std::time::Instant::now();
        let millis = now.duration_since(self.last).as_millis() as u64;
        self.last = now;
        millis
    }

    pub(crate) fn total(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}
