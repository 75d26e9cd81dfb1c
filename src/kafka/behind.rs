//! A member that fetches and still falls behind.
//!
//! It holds partitions, the group rules let it fetch, backpressure does not pause it and the
//! pipeline is nearly empty, yet the records waiting beyond its position do not shrink: what it
//! decides is bounded by what the broker hands it, not by the service. A soak found one (issue
//! 52): for minutes it decided 8 records/s against 100/s arriving, logged nothing, and `/health`
//! said 200. The broker was Tansu 0.6, which answers a fetch with nothing once reading the
//! partition from its memory storage takes longer than the request's `fetch.wait.max.ms`; its
//! reads slow down as a partition grows, so with 10 ms every fetch came back empty past ~10,000
//! records a partition. Nothing in the service fails then: only the backlog says so.
//!
//! [`Behind`] is pure and owned by the consumer loop (as [`super::exclusive::Waiting`] is): the
//! group watch measures the end offsets of the held partitions, the loop adds its positions.
//! `/ready` answers 503 once the backlog has not shrunk for `ready_after`, `/health` once it has
//! not for `unhealthy_after` (the progress timeout): an orchestrator then restarts the member,
//! and an operator reads the log line, which names the likely cause and the setting to change.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// While it lasts, what it is is logged again this often.
const LOG_EVERY: Duration = Duration::from_secs(60);
/// Growth of the backlog below this is noise (commits, batches, measurement timing).
const MIN_GROWTH: i64 = 50;

/// End offsets of the partitions this member holds, measured by the group watch while it
/// fetches.
#[derive(Debug, Clone)]
pub struct Ends {
    pub partitions: Vec<(i32, i64)>,
    pub at: Instant,
}

/// What the consumer loop knows at one look.
#[derive(Debug, Clone, Copy)]
pub struct BehindFacts {
    /// Holds partitions and fetches them: the group rules let it, backpressure does not pause
    /// it, and the pipeline has room (a full pipeline is the service's own pace, not the
    /// broker's).
    pub fetching: bool,
    /// Records beyond this member's position in the partitions it holds, and when the end
    /// offsets were measured; None when they were not measured recently (broker unreachable).
    pub waiting: Option<(i64, Instant)>,
    /// Records consumed so far over the held partitions (the sum of the positions): the pace.
    pub consumed: i64,
    pub held: usize,
}

/// What [`Behind::step`] concludes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BehindState {
    pub unready: bool,
    pub unhealthy: bool,
    /// What is seen, in words (None: not falling behind).
    pub what: Option<String>,
}

/// One measurement: when, records waiting, records consumed.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    waiting: i64,
    consumed: i64,
}

#[derive(Debug)]
pub struct Behind {
    ready_after: Duration,
    unhealthy_after: Duration,
    /// Since when records have waited beyond the position at every measurement while fetching.
    since: Option<Instant>,
    /// Measurements of that stretch (older ones dropped once past `unhealthy_after`).
    samples: VecDeque<Sample>,
    logged: Option<Instant>,
    unhealthy_logged: bool,
    /// The advice added to the log line (the fetch wait in use).
    advice: String,
}

impl Behind {
    pub fn new(ready_after: Duration, unhealthy_after: Duration, advice: String) -> Behind {
        Behind {
            ready_after,
            unhealthy_after,
            since: None,
            samples: VecDeque::new(),
            logged: None,
            unhealthy_logged: false,
            advice,
        }
    }

    fn reset(&mut self, now: Instant) {
        if let Some(since) = self.since.take() {
            if self.logged.is_some() {
                tracing::info!(
                    "no longer falling behind (after {:.0}s): the records waiting beyond this member's position shrink again",
                    now.saturating_duration_since(since).as_secs_f64()
                );
            }
        }
        self.samples.clear();
        self.logged = None;
        self.unhealthy_logged = false;
    }

    /// The latest sample taken at least `d` before the newest one, when the stretch is that long.
    fn back(&self, d: Duration) -> Option<Sample> {
        let newest = self.samples.back()?;
        let cutoff = newest.at.checked_sub(d)?;
        self.samples.iter().rev().find(|s| s.at <= cutoff).copied()
    }

    /// Falling behind over the last `d`: nothing consumed at all while records waited, or the
    /// backlog grew (by more than noise) faster than this member consumed. A member keeping up
    /// under a steady load sees its backlog wander around a constant, which is neither; one that
    /// decides at least half of what arrives is slow but not starved, and is not either.
    fn behind_for(&self, d: Duration) -> Option<Sample> {
        let newest = self.samples.back()?;
        self.back(d).filter(|then| {
            let consumed = newest.consumed - then.consumed;
            let grew = newest.waiting - then.waiting;
            consumed <= 0 || (grew >= MIN_GROWTH && grew > consumed)
        })
    }

    pub fn step(&mut self, now: Instant, f: &BehindFacts) -> BehindState {
        let (waiting, measured) = match f.waiting {
            Some((w, at)) if f.fetching && w > 0 => (w, at),
            _ => {
                self.reset(now);
                return BehindState::default();
            }
        };
        self.since.get_or_insert(measured);
        if self.samples.back().is_none_or(|s| s.at < measured) {
            self.samples.push_back(Sample {
                at: measured,
                waiting,
                consumed: f.consumed,
            });
        }
        // Keep one sample older than the longest look-back.
        while self.samples.len() > 2
            && self.samples[1].at + self.unhealthy_after
                <= self.samples.back().map_or(measured, |s| s.at)
        {
            self.samples.pop_front();
        }
        let Some(then) = self.behind_for(self.ready_after) else {
            return BehindState::default();
        };
        let unhealthy = self.behind_for(self.unhealthy_after).is_some();
        let newest = self.samples.back().copied().unwrap_or(then);
        let span = newest.at.saturating_duration_since(then.at);
        let secs = span.as_secs_f64().max(1.0);
        let pace = (newest.consumed - then.consumed).max(0) as f64 / secs;
        let what = format!(
            "holding {} partition(s) and fetching, yet falling behind for {:.0}s: {} records wait beyond this member's position ({} {:.0}s ago), and it consumed {:.1} records/s meanwhile with its pipeline nearly empty: the broker hands out fewer records than arrive. {}",
            f.held,
            now.saturating_duration_since(self.since.unwrap_or(now)).as_secs_f64(),
            newest.waiting,
            then.waiting,
            span.as_secs_f64(),
            pace,
            self.advice,
        );
        if self
            .logged
            .is_none_or(|t| now.saturating_duration_since(t) >= LOG_EVERY)
        {
            self.logged = Some(now);
            tracing::warn!(
                "{what}; /ready answers 503, /health turns 503 after {:?} of this",
                self.unhealthy_after
            );
        }
        if unhealthy && !self.unhealthy_logged {
            self.unhealthy_logged = true;
            tracing::error!(
                "falling behind for longer than {:?} (--progress-timeout-ms): /health answers 503 (falling_behind) for the orchestrator to restart this instance; nothing is lost, the records wait in the input",
                self.unhealthy_after
            );
        }
        BehindState {
            unready: true,
            unhealthy,
            what: Some(what),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(waiting: i64, at: Instant, consumed: i64) -> BehindFacts {
        BehindFacts {
            fetching: true,
            waiting: Some((waiting, at)),
            consumed,
            held: 4,
        }
    }

    const READY: Duration = Duration::from_secs(30);
    const HEALTH: Duration = Duration::from_secs(120);

    #[test]
    fn a_backlog_that_keeps_growing_while_fetching_turns_unready_then_unhealthy() {
        let t0 = Instant::now();
        let mut b = Behind::new(READY, HEALTH, "advice".into());
        let mut state = BehindState::default();
        // 100 records/s arrive, 8/s are consumed: measured every 5 s.
        for i in 0..=30u64 {
            let at = t0 + Duration::from_secs(5 * i);
            let consumed = (40 * i) as i64;
            let waiting = 500 + (460 * i) as i64;
            state = b.step(at, &facts(waiting, at, consumed));
            let elapsed = Duration::from_secs(5 * i);
            assert_eq!(state.unready, elapsed >= READY, "at {elapsed:?}");
            assert_eq!(state.unhealthy, elapsed >= HEALTH, "at {elapsed:?}");
        }
        let what = state.what.unwrap_or_default();
        assert!(what.contains("falling behind"), "{what}");
        assert!(what.contains("8.0 records/s"), "{what}");
        assert!(what.ends_with("advice"), "{what}");
    }

    #[test]
    fn catching_up_or_not_fetching_is_not_falling_behind() {
        let t0 = Instant::now();
        let mut b = Behind::new(READY, HEALTH, String::new());
        // A backlog after an outage, worked off at 300/s while 100/s arrive.
        for i in 0..=40u64 {
            let at = t0 + Duration::from_secs(5 * i);
            let waiting = (10_000 - 1000 * i as i64).max(0);
            assert_eq!(
                b.step(at, &facts(waiting, at, (1500 * i) as i64)),
                BehindState::default()
            );
        }
        // Growing, but paused (the group rules or backpressure): not this rule's business.
        for i in 0..=40u64 {
            let at = t0 + Duration::from_secs(300 + 5 * i);
            let f = BehindFacts {
                fetching: false,
                ..facts(100 * i as i64 + 1, at, 0)
            };
            assert_eq!(b.step(at, &f), BehindState::default());
        }
        // Growing, then one look with nothing waiting: the clock starts again.
        let t1 = t0 + Duration::from_secs(600);
        for i in 0..=8u64 {
            let at = t1 + Duration::from_secs(5 * i);
            b.step(at, &facts(100 + 100 * i as i64, at, 0));
        }
        let at = t1 + Duration::from_secs(45);
        assert_eq!(b.step(at, &facts(0, at, 0)), BehindState::default());
        let at = t1 + Duration::from_secs(50);
        assert!(!b.step(at, &facts(2000, at, 0)).unready);
        // Unmeasured (the broker unreachable): nothing is concluded, the clock starts again.
        let at = t1 + Duration::from_secs(90);
        let f = BehindFacts {
            waiting: None,
            ..facts(0, at, 0)
        };
        assert_eq!(b.step(at, &f), BehindState::default());
    }

    #[test]
    fn a_steady_backlog_is_not_falling_behind_but_one_that_never_moves_is() {
        let t0 = Instant::now();
        let mut b = Behind::new(READY, HEALTH, String::new());
        // Keeping up at 5,000/s with a few thousand records prefetched: the backlog wanders.
        for i in 0..=40u64 {
            let at = t0 + Duration::from_secs(5 * i);
            let waiting = 3_000 + [0, 400, -300, 200, 100][(i % 5) as usize];
            let consumed = (25_000 * i) as i64;
            assert_eq!(
                b.step(at, &facts(waiting, at, consumed)),
                BehindState::default(),
                "at {i}"
            );
        }
        // Caught up once; then nothing consumed while a constant backlog waits (no new
        // records): falling behind.
        let t1 = t0 + Duration::from_secs(400);
        let caught_up = t1 - Duration::from_secs(5);
        b.step(caught_up, &facts(0, caught_up, 1_000_000));
        let mut state = BehindState::default();
        for i in 0..=6u64 {
            let at = t1 + Duration::from_secs(5 * i);
            state = b.step(at, &facts(800, at, 1_000_000));
        }
        assert!(state.unready && !state.unhealthy, "{state:?}");
    }

    #[test]
    fn the_same_measurement_seen_twice_counts_once() {
        let t0 = Instant::now();
        let mut b = Behind::new(READY, HEALTH, String::new());
        let m0 = t0;
        b.step(t0, &facts(100, m0, 0));
        // The loop looks every 250 ms; the watch measures every 5 s.
        for k in 1..=100u64 {
            let now = t0 + Duration::from_millis(250 * k);
            assert!(!b.step(now, &facts(100, m0, 0)).unready);
        }
        assert_eq!(b.samples.len(), 1);
    }
}
