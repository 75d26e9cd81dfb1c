//! One active instance, and a member that waits for work it is never given.
//!
//! The decision is single-writer on one index: a second `run` in the same group would split the
//! input between two indexes and miss every duplicate whose original went to the other one. So
//! `run` fetches (and decides) only while its consumer group lists no other member:
//!
//! * A watch thread ([`Watch`]) only observes: it describes the group (its coordinator's member
//!   list, [`super::group`]), counts the input topic's partitions and, while this member fetches
//!   nothing, measures the records waiting beyond the group's committed offsets. Each request
//!   that succeeds also says that the broker is reachable.
//! * The consumer loop owns the state: [`Gate`] says whether to fetch, and [`Waiting`] whether
//!   this member has waited too long for work. Rebalance callbacks only count rebalances and
//!   pause what they assign (the loop decides what fetches).
//!
//! The gate opens only on a description of the group asked for after the latest rebalance that
//! lists no member but this process's own ids (a rejoin after a lost session gets a new id; the
//! old one may stay listed for a session timeout). So a newcomer (an empty index) never decides
//! while another member exists, whichever partitions the assignor gives it, and nothing is
//! decided while the group is split. Holding fewer than every partition is not a reason to wait:
//! a lone member after an outage, or after the topic grew, fetches what it holds.
//!
//! When a settled (`Stable`) group keeps listing another member, a member that never decided
//! alone and whose index was empty at start (the newcomer) stops after the grace period; one
//! that did, or whose index holds articles (the incumbent, also right after a restart, before
//! the group gives it anything), after twice
//! the grace plus a session timeout, so that the newcomer leaves first (or, killed, drops out of
//! the group) and the incumbent goes on. The clock starts once the group has settled with the
//! other member in it, and starts again from zero as soon as a description lists no other
//! member: a newcomer that came and went uses up nothing.

use super::group::{GroupView, Member};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// A description older than this does not count as "another member is seen now".
const RECENT: Duration = Duration::from_secs(10);
/// A measured backlog older than this is not used.
const BACKLOG_RECENT: Duration = Duration::from_secs(10);
/// While waiting, what it waits for is logged again this often.
const WAIT_LOG_EVERY: Duration = Duration::from_secs(60);

/// One description of the group, as the watch took it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub view: GroupView,
    /// Listed members that are not this process (none of its member ids, past or present).
    pub others: Vec<Member>,
    /// This member's id when the group was described.
    pub me: Option<String>,
    /// Rebalances counted when the request was sent: the description is at least that recent.
    pub asked_after: u64,
    pub at: Instant,
}

impl Seen {
    /// Another member is listed. Only known once this member knows its own id (before its
    /// first join completes, the broker may list it under an id it has not been told yet).
    pub fn lists_others(&self) -> bool {
        self.me.is_some() && !self.others.is_empty()
    }
}

/// Records waiting beyond the group's committed offsets, measured while this member fetched
/// nothing.
#[derive(Debug, Clone)]
pub struct Backlog {
    pub records: i64,
    /// Per partition: (partition, committed offset or -1, end offset).
    pub partitions: Vec<(i32, i64, i64)>,
    pub at: Instant,
}

/// What the watch has seen, read by the consumer loop.
#[derive(Debug, Default)]
pub struct Observed {
    /// Partitions of the input topic.
    pub partitions: Option<usize>,
    /// The last successful description of the group.
    pub seen: Option<Seen>,
    /// Why the last description failed (cleared by a success).
    pub describe_error: Option<String>,
    pub backlog: Option<Backlog>,
    pub backlog_error: Option<String>,
    /// End offsets of the held partitions, measured while this member fetches
    /// ([`super::behind`]).
    pub ends: Option<super::behind::Ends>,
}

/// What the consumer loop knows when it asks the gate.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub now: Instant,
    /// Partitions this member holds.
    pub held: usize,
    /// Partitions of the input topic, when known.
    pub total: Option<usize>,
    /// Rebalance callbacks run so far.
    pub rebalances: u64,
    pub seen: Option<&'a Seen>,
}

/// Why the gate is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Nothing assigned to this member.
    NoPartitions,
    /// No description of the group since the last rebalance yet.
    Unconfirmed,
    /// The group lists another member.
    Others,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Fetch and decide.
    Open,
    Closed(Closed),
    /// Another member stayed listed past this member's limit: stop with this error.
    StepDown(String),
}

/// The one-active-instance rule, owned by the consumer loop. Pure: every fact comes in
/// [`Facts`].
#[derive(Debug)]
pub struct Gate {
    group: String,
    topic: String,
    /// None: several members are allowed (`exclusive_grace_ms` = 0).
    grace: Option<Duration>,
    session_timeout: Duration,
    /// This member has decided as the group's only member, or its index held articles at
    /// start (the incumbent): a restarted member is not a newcomer while its group is still
    /// settling, and an empty index must never outlast it.
    incumbent: bool,
    /// Since when a settled group lists another member.
    others_since: Option<Instant>,
    last: Option<Closed>,
}

impl Gate {
    pub fn new(
        group: &str,
        topic: &str,
        grace: Option<Duration>,
        session_timeout: Duration,
        decided_before: bool,
    ) -> Gate {
        Gate {
            group: group.to_owned(),
            topic: topic.to_owned(),
            grace,
            session_timeout,
            incumbent: decided_before,
            others_since: None,
            last: None,
        }
    }

    pub fn exclusive(&self) -> bool {
        self.grace.is_some()
    }

    pub fn incumbent(&self) -> bool {
        self.incumbent
    }

    /// How long another member may stay listed before this one stops.
    pub fn limit(&self) -> Option<Duration> {
        let grace = self.grace?;
        Some(if self.incumbent {
            2 * grace + self.session_timeout
        } else {
            grace
        })
    }

    /// True while another member's presence, not a stuck group, explains why this member waits:
    /// with the rule on, once the group has settled with it (the rule stops one of the two by
    /// its deadline); with the rule off, whenever one is listed (it may hold the partitions).
    pub fn others_in_charge(&self, seen: Option<&Seen>) -> bool {
        let Some(seen) = seen.filter(|s| s.lists_others()) else {
            return false;
        };
        !self.exclusive() || seen.view.stable()
    }

    pub fn step(&mut self, f: &Facts<'_>) -> Verdict {
        let verdict = self.decide(f);
        let now = match &verdict {
            Verdict::Closed(c) => Some(*c),
            Verdict::Open => None,
            Verdict::StepDown(_) => return verdict,
        };
        if now != self.last {
            self.log_change(self.last, now, f);
            self.last = now;
        }
        verdict
    }

    fn decide(&mut self, f: &Facts<'_>) -> Verdict {
        if self.grace.is_none() {
            return if f.held > 0 {
                Verdict::Open
            } else {
                Verdict::Closed(Closed::NoPartitions)
            };
        }
        if let Some(seen) = f.seen.filter(|s| s.me.is_some()) {
            if seen.others.is_empty() {
                self.others_since = None;
            } else if self.others_since.is_none() && seen.view.stable() && f.rebalances > 0 {
                // Counted from a settled group, after this member's own join: a slow join or a
                // rebalance in progress is not another member's doing.
                self.others_since = Some(seen.at);
            }
        }
        if let (Some(since), Some(seen), Some(limit)) = (self.others_since, f.seen, self.limit()) {
            let waited = f.now.saturating_duration_since(since);
            if waited >= limit && f.now.saturating_duration_since(seen.at) <= RECENT {
                return Verdict::StepDown(self.step_down_reason(f, seen, waited));
            }
        }
        match f.seen {
            Some(seen) if seen.lists_others() => Verdict::Closed(Closed::Others),
            _ if f.held == 0 => Verdict::Closed(Closed::NoPartitions),
            // Members unknown (a broker that does not list the group): holding every partition
            // is the best evidence left that no other member holds any.
            Some(seen)
                if seen.asked_after >= f.rebalances
                    && seen.me.is_some()
                    && (seen.view.known || f.total.is_some_and(|t| f.held >= t)) =>
            {
                self.incumbent = true;
                Verdict::Open
            }
            _ => Verdict::Closed(Closed::Unconfirmed),
        }
    }

    fn step_down_reason(&self, f: &Facts<'_>, seen: &Seen, waited: Duration) -> String {
        format!(
            "another instance is active in consumer group {:?}: the group has listed {} for {:.1}s ({}) while this member ({}) held {} of the {} partitions of {}. newsdedup decides with a single writer on one index; two members would split the input between two indexes and miss duplicates. Stop the other instance (or, for an independent pipeline, give this one its own --group-id and --index-dir); a standby (`newsdedup standby`) never joins the group",
            self.group,
            list(&seen.others),
            waited.as_secs_f64(),
            if self.incumbent {
                "this member decided before: it waits twice the grace period plus a session timeout for a newcomer to leave"
            } else {
                "this member never decided alone: a newcomer leaves after the grace period"
            },
            seen.me.as_deref().unwrap_or("no member id"),
            f.held,
            f.total.map_or_else(|| "?".to_owned(), |t| t.to_string()),
            self.topic,
        )
    }

    fn log_change(&self, before: Option<Closed>, now: Option<Closed>, f: &Facts<'_>) {
        match (before, now) {
            (_, Some(Closed::Others)) => {
                let others = f.seen.map(|s| list(&s.others)).unwrap_or_default();
                tracing::warn!(
                    "group {:?} lists another member: {others}; fetching paused, nothing is decided while another instance is in the group (one active instance). Holding {} of the {} partitions of {}; this member stops if the other stays for {:?} once the group has settled{}",
                    self.group,
                    f.held,
                    f.total.map_or_else(|| "?".to_owned(), |t| t.to_string()),
                    self.topic,
                    self.limit().unwrap_or_default(),
                    if self.incumbent { " (it decided before: a newcomer leaves first)" } else { "" }
                );
            }
            (Some(Closed::Others), _) => tracing::info!(
                "group {:?} lists no other member again{}",
                self.group,
                if now.is_none() { ": deciding" } else { "" }
            ),
            _ => {}
        }
    }
}

fn list(members: &[Member]) -> String {
    members
        .iter()
        .map(Member::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long this member has fetched nothing while records wait beyond the group's committed
/// offsets, and what it makes of that: `/ready` 503 after `ready_after`, `/health` 503 after
/// `unhealthy_after` (unless another member's presence explains it: see
/// [`Gate::others_in_charge`]). Pure, owned by the consumer loop.
#[derive(Debug)]
pub struct Waiting {
    ready_after: Duration,
    unhealthy_after: Duration,
    since: Option<Instant>,
    logged: Option<Instant>,
    unhealthy_logged: bool,
}

/// What [`Waiting::step`] concludes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitState {
    /// How long this member has waited with records waiting (None: not waiting).
    pub waited: Option<Duration>,
    pub unready: bool,
    pub unhealthy: bool,
    /// What it waits for, in words.
    pub what: Option<String>,
}

/// The inputs of [`Waiting::step`] besides the time.
pub struct WaitFacts<'a> {
    /// This member fetches nothing (holds no partition, or the gate is closed).
    pub idle: bool,
    pub held: usize,
    pub closed: Option<Closed>,
    pub observed: &'a Observed,
    /// Another member's presence explains the wait (see [`Gate::others_in_charge`]).
    pub others_in_charge: bool,
    /// The broker answers: a member cut off from it is not restarted for waiting.
    pub broker_up: bool,
    pub group: &'a str,
    pub topic: &'a str,
}

impl Waiting {
    pub fn new(ready_after: Duration, unhealthy_after: Duration) -> Waiting {
        Waiting {
            ready_after,
            unhealthy_after,
            since: None,
            logged: None,
            unhealthy_logged: false,
        }
    }

    pub fn step(&mut self, now: Instant, f: &WaitFacts<'_>) -> WaitState {
        let backlog = f
            .observed
            .backlog
            .as_ref()
            .filter(|b| now.saturating_duration_since(b.at) <= BACKLOG_RECENT);
        if !f.idle || backlog.is_some_and(|b| b.records <= 0) {
            if let Some(since) = self.since.take() {
                tracing::info!(
                    "no longer waiting (after {:.1}s): {}",
                    now.saturating_duration_since(since).as_secs_f64(),
                    if f.idle {
                        "no record waits"
                    } else {
                        "fetching"
                    }
                );
            }
            self.logged = None;
            self.unhealthy_logged = false;
            return WaitState::default();
        }
        // Idle with a backlog measured (or, measuring failed since, with one measured before).
        if backlog.is_some() && self.since.is_none() {
            self.since = Some(now);
        }
        let Some(since) = self.since else {
            return WaitState::default();
        };
        let waited = now.saturating_duration_since(since);
        let unready = waited >= self.ready_after;
        let unhealthy = waited >= self.unhealthy_after && !f.others_in_charge && f.broker_up;
        let what = describe_wait(f, waited);
        if unready
            && self
                .logged
                .is_none_or(|t| now.saturating_duration_since(t) >= WAIT_LOG_EVERY)
        {
            self.logged = Some(now);
            tracing::warn!(
                "{what}; /ready answers 503{}",
                if f.others_in_charge {
                    String::new()
                } else {
                    format!(
                        ", /health turns 503 after {:?} of this",
                        self.unhealthy_after
                    )
                }
            );
        }
        if unhealthy && !self.unhealthy_logged {
            self.unhealthy_logged = true;
            tracing::error!(
                "{what}; /health answers 503 (waiting) for the orchestrator to restart this instance: restarting rejoins the group afresh; nothing is lost (the records wait in the input topic)"
            );
        }
        WaitState {
            waited: Some(waited),
            unready,
            unhealthy,
            what: Some(what),
        }
    }
}

fn describe_wait(f: &WaitFacts<'_>, waited: Duration) -> String {
    let o = f.observed;
    let mut s = String::new();
    match f.closed {
        Some(Closed::Others) => {
            let _ = write!(
                s,
                "holding {} partitions of {}, fetching paused (one active instance)",
                f.held, f.topic
            );
        }
        _ if f.held == 0 => {
            let _ = write!(s, "holding no partition of {}", f.topic);
        }
        _ => {
            let _ = write!(
                s,
                "holding {} partitions of {} and fetching nothing",
                f.held, f.topic
            );
        }
    }
    let _ = write!(s, " for {:.0}s", waited.as_secs_f64());
    if let Some(b) = &o.backlog {
        let parts: Vec<String> = b
            .partitions
            .iter()
            .filter(|(_, c, end)| end > c)
            .map(|(p, c, end)| {
                if *c < 0 {
                    format!("{p}: none committed, end {end}")
                } else {
                    format!("{p}: committed {c}, end {end}")
                }
            })
            .collect();
        let _ = write!(
            s,
            " while {} records wait beyond group {:?}'s committed offsets [{}]",
            b.records,
            f.group,
            parts.join("; ")
        );
    }
    match (&o.seen, &o.describe_error) {
        (_, Some(e)) => {
            let _ = write!(s, "; describing the group fails: {e}");
        }
        (Some(seen), None) if !seen.view.known => {
            let _ = write!(
                s,
                "; no broker lists the group, so its members cannot be read: fetching only while holding every partition"
            );
        }
        (Some(seen), None) => {
            let others = seen.lists_others();
            let _ = write!(
                s,
                "; the group is {} with {} member(s){}",
                seen.view.state,
                seen.view.members.len(),
                if !others {
                    format!(
                        ", none but this one ({}): waiting for the group coordinator to give it the partitions",
                        seen.me.as_deref().unwrap_or("not a member yet")
                    )
                } else {
                    format!(": another instance is listed ({})", list(&seen.others))
                }
            );
        }
        (None, None) => {
            let _ = write!(s, "; the group was not described yet");
        }
    }
    if let Some(e) = &o.backlog_error {
        let _ = write!(s, "; measuring the backlog fails: {e}");
    }
    s
}

/// Wakes and stops the watch (the consumer loop wakes it after every rebalance).
#[derive(Debug, Default)]
pub struct Signal {
    state: parking_lot::Mutex<(bool, bool)>,
    cond: parking_lot::Condvar,
}

impl Signal {
    pub fn wake(&self) {
        self.state.lock().0 = true;
        self.cond.notify_all();
    }

    pub(super) fn stop(&self) {
        self.state.lock().1 = true;
        self.cond.notify_all();
    }

    pub(super) fn stopped(&self) -> bool {
        self.state.lock().1
    }

    /// Waits until woken or `every` has passed; false once stopped.
    pub(super) fn wait(&self, every: Duration) -> bool {
        let mut s = self.state.lock();
        if !s.0 && !s.1 {
            let _ = self.cond.wait_for(&mut s, every);
        }
        s.0 = false;
        !s.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(10);
    const SESSION: Duration = Duration::from_secs(6);

    fn member(id: &str) -> Member {
        Member {
            id: id.into(),
            client_id: String::new(),
            host: String::new(),
        }
    }

    fn seen(state: &str, members: &[&str], me: &str, asked_after: u64, at: Instant) -> Seen {
        Seen {
            view: GroupView {
                state: state.into(),
                members: members.iter().map(|m| member(m)).collect(),
                known: true,
            },
            others: members
                .iter()
                .filter(|m| **m != me)
                .map(|m| member(m))
                .collect(),
            me: Some(me.into()),
            asked_after,
            at,
        }
    }

    fn facts(now: Instant, held: usize, rebalances: u64, seen: Option<&Seen>) -> Facts<'_> {
        Facts {
            now,
            held,
            total: Some(1),
            rebalances,
            seen,
        }
    }

    #[test]
    fn a_newcomer_holding_every_partition_waits_while_another_member_is_listed() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", Some(GRACE), SESSION, false);
        // Assigned the only partition; the group lists the incumbent too.
        let s = seen("Stable", &["a", "b"], "b", 2, t0);
        assert_eq!(
            gate.step(&facts(t0, 1, 2, Some(&s))),
            Verdict::Closed(Closed::Others)
        );
        assert!(!gate.incumbent());
        // Still waiting just before the grace period, gone after it.
        let almost = t0 + GRACE - Duration::from_millis(1);
        let s2 = Seen {
            at: almost,
            ..s.clone()
        };
        assert_eq!(
            gate.step(&facts(almost, 1, 2, Some(&s2))),
            Verdict::Closed(Closed::Others)
        );
        let s3 = Seen {
            at: t0 + GRACE,
            ..s
        };
        assert!(matches!(
            gate.step(&facts(t0 + GRACE, 1, 2, Some(&s3))),
            Verdict::StepDown(why) if why.starts_with("another instance is active in consumer group \"g\"")
        ));
    }

    /// A restarted member whose group has not yet given it anything (a broker still settling)
    /// meets a newcomer: the member whose index holds articles outlasts the one whose index is
    /// empty, which would otherwise decide the input against nothing.
    #[test]
    fn a_restarted_member_with_an_index_outlasts_a_newcomer_with_an_empty_one() {
        let t0 = Instant::now();
        let mut restarted = Gate::new("g", "t", Some(GRACE), SESSION, true);
        let mut newcomer = Gate::new("g", "t", Some(GRACE), SESSION, false);
        let both = |me: &str, at: Instant| seen("Stable", &["a", "b"], me, 2, at);
        for (gate, me) in [(&mut restarted, "a"), (&mut newcomer, "b")] {
            assert_eq!(
                gate.step(&facts(t0, 0, 2, Some(&both(me, t0)))),
                Verdict::Closed(Closed::Others)
            );
        }
        let t1 = t0 + GRACE;
        assert!(matches!(
            newcomer.step(&facts(t1, 0, 2, Some(&both("b", t1)))),
            Verdict::StepDown(_)
        ));
        assert_eq!(
            restarted.step(&facts(t1, 0, 2, Some(&both("a", t1)))),
            Verdict::Closed(Closed::Others)
        );
        assert_eq!(restarted.limit(), Some(2 * GRACE + SESSION));
    }

    #[test]
    fn the_gate_opens_only_on_a_description_asked_after_the_last_rebalance() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", Some(GRACE), SESSION, false);
        let old = seen("Stable", &["a"], "a", 1, t0);
        assert_eq!(
            gate.step(&facts(t0, 1, 2, Some(&old))),
            Verdict::Closed(Closed::Unconfirmed)
        );
        assert_eq!(
            gate.step(&facts(t0, 1, 2, None)),
            Verdict::Closed(Closed::Unconfirmed)
        );
        let fresh = seen("Stable", &["a"], "a", 2, t0);
        assert_eq!(gate.step(&facts(t0, 1, 2, Some(&fresh))), Verdict::Open);
        assert!(gate.incumbent());
        assert_eq!(
            gate.step(&facts(t0, 0, 3, Some(&fresh))),
            Verdict::Closed(Closed::NoPartitions)
        );
    }

    #[test]
    fn a_lone_member_holding_fewer_partitions_fetches_and_never_steps_down() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", Some(GRACE), SESSION, false);
        // The topic grew to 3 partitions; this member holds 2 until the next rebalance.
        let s = seen("Stable", &["a"], "a", 4, t0);
        let f = Facts {
            total: Some(3),
            ..facts(t0, 2, 4, Some(&s))
        };
        assert_eq!(gate.step(&f), Verdict::Open);
        // An outage: the assignment is lost, the group cannot be described for a long time.
        let later = t0 + 10 * GRACE;
        assert_eq!(
            gate.step(&facts(later, 0, 5, Some(&s))),
            Verdict::Closed(Closed::NoPartitions)
        );
        // Back: its own earlier member id is still listed (not another instance), then gone.
        let mut back = seen("Stable", &["a-old", "a"], "a", 6, later);
        back.others.clear();
        assert_eq!(gate.step(&facts(later, 2, 6, Some(&back))), Verdict::Open);
    }

    #[test]
    fn the_incumbent_outlasts_a_newcomer_and_its_clock_restarts_when_the_newcomer_leaves() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", Some(GRACE), SESSION, false);
        let alone = seen("Stable", &["a"], "a", 1, t0);
        assert_eq!(gate.step(&facts(t0, 1, 1, Some(&alone))), Verdict::Open);
        // A newcomer joins: during the rebalance the clock does not run.
        let joining = seen("PreparingRebalance", &["a", "b"], "a", 2, t0);
        assert_eq!(
            gate.step(&facts(t0, 0, 2, Some(&joining))),
            Verdict::Closed(Closed::Others)
        );
        let t1 = t0 + Duration::from_secs(30);
        let settled = seen("Stable", &["a", "b"], "a", 3, t1);
        assert_eq!(
            gate.step(&facts(t1, 0, 3, Some(&settled))),
            Verdict::Closed(Closed::Others)
        );
        // Past the newcomer's grace, not past the incumbent's limit.
        let limit = 2 * GRACE + SESSION;
        assert_eq!(gate.limit(), Some(limit));
        let t2 = t1 + limit - Duration::from_secs(1);
        let still = Seen {
            at: t2,
            ..settled.clone()
        };
        assert_eq!(
            gate.step(&facts(t2, 0, 3, Some(&still))),
            Verdict::Closed(Closed::Others)
        );
        // It left: the clock is reset, a long rebalance after it costs nothing.
        let gone = seen("PreparingRebalance", &["a"], "a", 3, t2);
        assert_eq!(
            gate.step(&facts(t2, 0, 4, Some(&gone))),
            Verdict::Closed(Closed::NoPartitions)
        );
        // Another newcomer right after: a full limit again.
        let t3 = t2 + Duration::from_secs(5);
        let next = seen("Stable", &["a", "c"], "a", 5, t3);
        let t4 = t3 + limit - Duration::from_secs(1);
        assert_eq!(
            gate.step(&facts(t3, 0, 5, Some(&next))),
            Verdict::Closed(Closed::Others)
        );
        let next_later = Seen {
            at: t4,
            ..next.clone()
        };
        assert_eq!(
            gate.step(&facts(t4, 0, 5, Some(&next_later))),
            Verdict::Closed(Closed::Others)
        );
        let t5 = t3 + limit;
        let at_limit = Seen { at: t5, ..next };
        assert!(matches!(
            gate.step(&facts(t5, 0, 5, Some(&at_limit))),
            Verdict::StepDown(_)
        ));
    }

    #[test]
    fn with_the_members_unknown_a_member_fetches_only_holding_every_partition() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", Some(GRACE), SESSION, false);
        let s = Seen {
            view: GroupView::unknown(),
            others: Vec::new(),
            me: Some("a".into()),
            asked_after: 1,
            at: t0,
        };
        let f = Facts {
            total: Some(2),
            ..facts(t0, 1, 1, Some(&s))
        };
        assert_eq!(gate.step(&f), Verdict::Closed(Closed::Unconfirmed));
        let f = Facts {
            total: Some(2),
            ..facts(t0, 2, 1, Some(&s))
        };
        assert_eq!(gate.step(&f), Verdict::Open);
        let f = Facts {
            total: None,
            ..facts(t0, 2, 1, Some(&s))
        };
        assert_eq!(gate.step(&f), Verdict::Closed(Closed::Unconfirmed));
    }

    #[test]
    fn another_member_is_said_only_on_a_recent_description() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", Some(GRACE), SESSION, false);
        let s = seen("Stable", &["a", "b"], "b", 1, t0);
        assert_eq!(
            gate.step(&facts(t0, 1, 1, Some(&s))),
            Verdict::Closed(Closed::Others)
        );
        // Long past the grace period, but the group could not be described since (an outage).
        let later = t0 + 3 * GRACE;
        assert_eq!(
            gate.step(&facts(later, 0, 2, Some(&s))),
            Verdict::Closed(Closed::Others)
        );
    }

    #[test]
    fn without_the_rule_a_member_fetches_whatever_it_holds() {
        let t0 = Instant::now();
        let mut gate = Gate::new("g", "t", None, SESSION, false);
        let s = seen("Stable", &["a", "b"], "a", 0, t0);
        assert_eq!(gate.step(&facts(t0, 1, 3, Some(&s))), Verdict::Open);
        assert_eq!(
            gate.step(&facts(t0, 0, 3, Some(&s))),
            Verdict::Closed(Closed::NoPartitions)
        );
        assert!(gate.others_in_charge(Some(&s)));
    }

    fn observed_with(records: i64, at: Instant, seen: Option<Seen>) -> Observed {
        Observed {
            partitions: Some(1),
            seen,
            describe_error: None,
            backlog: Some(Backlog {
                records,
                partitions: vec![(0, 10, 10 + records)],
                at,
            }),
            backlog_error: None,
            ends: None,
        }
    }

    /// A member holding nothing, alone in the group as far as it knows.
    fn idle(observed: &Observed) -> WaitFacts<'_> {
        WaitFacts {
            idle: true,
            held: 0,
            closed: Some(Closed::NoPartitions),
            observed,
            others_in_charge: false,
            broker_up: true,
            group: "g",
            topic: "t",
        }
    }

    #[test]
    fn a_member_without_partitions_while_records_wait_turns_unready_then_unhealthy() {
        let t0 = Instant::now();
        let mut w = Waiting::new(Duration::from_secs(6), Duration::from_secs(20));
        let s = seen("Stable", &["a"], "a", 1, t0);
        let o = observed_with(50, t0, Some(s.clone()));
        let st = w.step(t0, &idle(&o));
        assert_eq!(st.waited, Some(Duration::ZERO));
        assert!(!st.unready && !st.unhealthy);
        let what = st.what.unwrap_or_default();
        assert!(what.contains("holding no partition of t"), "{what}");
        assert!(what.contains("50 records wait"), "{what}");
        assert!(what.contains("waiting for the group coordinator"), "{what}");
        let t1 = t0 + Duration::from_secs(7);
        let o1 = observed_with(60, t1, Some(s.clone()));
        let st = w.step(t1, &idle(&o1));
        assert!(st.unready && !st.unhealthy);
        let t2 = t0 + Duration::from_secs(21);
        let o2 = observed_with(60, t2, Some(s));
        let st = w.step(t2, &idle(&o2));
        assert!(st.unready && st.unhealthy);
        // Another instance in a settled group: the one-active-instance deadline is in charge.
        let excused = WaitFacts {
            others_in_charge: true,
            ..idle(&o2)
        };
        assert!(!w.step(t2, &excused).unhealthy);
        // The broker unreachable: nothing to restart for.
        let down = WaitFacts {
            broker_up: false,
            ..idle(&o2)
        };
        assert!(!w.step(t2, &down).unhealthy);
        // Nothing waits any more: all clear at once.
        let o3 = observed_with(0, t2, None);
        assert_eq!(w.step(t2, &idle(&o3)), WaitState::default());
        // Fetching again: all clear.
        let st = w.step(
            t2,
            &WaitFacts {
                idle: false,
                ..idle(&o2)
            },
        );
        assert_eq!(st, WaitState::default());
    }

    #[test]
    fn waiting_starts_only_once_records_are_known_to_wait() {
        let t0 = Instant::now();
        let mut w = Waiting::new(Duration::from_secs(6), Duration::from_secs(20));
        let unknown = Observed::default();
        assert_eq!(
            w.step(t0 + Duration::from_secs(60), &idle(&unknown)),
            WaitState::default()
        );
    }
}
