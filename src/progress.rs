//! Progress lines on stderr for the long commands (`batch`, `index rebuild`, the takeover's
//! catch-up, `replay` without a terminal, `audit`): one line at most every so often, each
//! starting with the command's name, with a rate and, when the total is known, an ETA.

use std::time::{Duration, Instant};

/// Rate-limited progress lines.
#[derive(Debug)]
pub struct Progress {
    label: &'static str,
    every: Option<Duration>,
    last: Instant,
}

impl Progress {
    /// Lines prefixed with `label`, at most every `every`; None: never (quiet).
    pub fn new(label: &'static str, every: Option<Duration>) -> Progress {
        Progress {
            label,
            every,
            last: Instant::now(),
        }
    }

    /// Prints `label: line()` on stderr if the last line is old enough (`line` is only called
    /// then).
    pub fn tick(&mut self, line: impl FnOnce() -> String) {
        let Some(every) = self.every else { return };
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        eprintln!("{}: {}", self.label, line());
    }
}

/// `", 42% done, ETA 12s"` for `done` of `total` items after `elapsed`; "" when the total is
/// unknown (0), reached, or nothing is done yet.
pub fn eta(done: u64, total: u64, elapsed: Duration) -> String {
    if done == 0 || total == 0 || done >= total {
        return String::new();
    }
    let share = done as f64 / total as f64;
    format!(
        ", {:.0}% done, ETA {:.0}s",
        share * 100.0,
        elapsed.as_secs_f64() * (1.0 - share) / share
    )
}

/// Items per second.
pub fn rate(done: u64, elapsed: Duration) -> f64 {
    done as f64 / elapsed.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_only_when_it_means_something() {
        let ten = Duration::from_secs(10);
        assert_eq!(eta(25, 100, ten), ", 25% done, ETA 30s");
        assert_eq!(eta(0, 100, ten), "");
        assert_eq!(eta(100, 100, ten), "");
        assert_eq!(eta(5, 0, ten), "");
        assert_eq!(rate(50, ten), 5.0);
    }
}
