//! Per-partition offset bookkeeping: which consumed messages are done (indexed and their output
//! acknowledged by the broker) and which offset may therefore be committed.
//!
//! The committable offset of a partition is the offset of its earliest message that is not done
//! yet, or one past the last registered message when everything is done: exactly "that message
//! and every earlier message of its partition have been written to the index and their output
//! acknowledged". Offsets need not be contiguous (compaction, transaction markers): only messages
//! actually handed to the pipeline count.
//!
//! Each assignment of a partition gets a fresh epoch; acknowledgements carry the epoch they were
//! registered under, so late acknowledgements of work abandoned on revocation are ignored.

use std::collections::{BTreeMap, HashMap};

/// A registered message not yet released.
#[derive(Debug, Clone, Copy)]
struct Pending {
    done: bool,
    /// Its size, counted in flight until it is done.
    bytes: usize,
}

#[derive(Debug, Default)]
struct PartitionState {
    epoch: u64,
    /// Registered offsets not yet released.
    pending: BTreeMap<i64, Pending>,
    /// One past the last released (done, contiguous) offset, if any.
    released_upto: Option<i64>,
    /// One past the highest registered offset.
    consumed_upto: Option<i64>,
    /// The first offset registered under this epoch.
    first: Option<i64>,
    /// Last offset confirmed committed by the broker.
    committed: Option<i64>,
    /// Messages released since the last commit.
    released_since_commit: u64,
}

impl PartitionState {
    /// Bytes of the registered messages that are not done.
    fn bytes_not_done(&self) -> usize {
        self.pending
            .values()
            .filter(|p| !p.done)
            .map(|p| p.bytes)
            .sum()
    }

    /// Offsets released (done) beyond the last confirmed commit: lost to this member if the
    /// partition goes now.
    fn released_uncommitted(&self) -> u64 {
        match (self.released_upto, self.committed.or(self.first)) {
            (Some(released), Some(from)) => u64::try_from(released - from).unwrap_or(0),
            _ => 0,
        }
    }

    fn release(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            if !entry.get().done {
                break;
            }
            let offset = *entry.key();
            entry.remove();
            self.released_upto = Some(self.released_upto.map_or(offset + 1, |r| r.max(offset + 1)));
            self.released_since_commit += 1;
        }
    }

    /// The offset to commit: the first pending (not done) offset, or one past the last released
    /// one when nothing is pending. None until something has been released.
    fn committable(&self) -> Option<i64> {
        let released = self.released_upto?;
        Some(
            self.pending
                .first_key_value()
                .map_or(released, |(&first, _)| first),
        )
    }
}

/// Offsets of the partitions of the input topic assigned to this consumer.
#[derive(Debug, Default)]
pub struct OffsetTracker {
    partitions: HashMap<i32, PartitionState>,
    next_epoch: u64,
    in_flight: usize,
    in_flight_bytes: usize,
    /// Records dropped in flight (revoked, lost or reassigned partitions), ever.
    abandoned: u64,
    /// Offsets done but not committed when their partition was dropped, ever.
    dropped_uncommitted: u64,
}

/// An offset that can be committed for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitCandidate {
    pub partition: i32,
    pub offset: i64,
    /// The assignment it was computed under: a commit of it is only valid while that lasts.
    pub epoch: u64,
}

/// Per-partition numbers for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionProgress {
    pub partition: i32,
    pub consumed_upto: Option<i64>,
    pub committed: Option<i64>,
    pub in_flight: usize,
}

impl OffsetTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts tracking `partition` under a fresh epoch (forgetting any earlier state of it).
    pub fn assign(&mut self, partition: i32) -> u64 {
        self.next_epoch += 1;
        let epoch = self.next_epoch;
        if let Some(old) = self.partitions.insert(
            partition,
            PartitionState {
                epoch,
                ..Default::default()
            },
        ) {
            self.drop_state(&old);
        }
        epoch
    }

    /// Stops tracking `partition`; its in-flight messages are abandoned (never committed here).
    /// Returns how many were abandoned.
    pub fn revoke(&mut self, partition: i32) -> usize {
        match self.partitions.remove(&partition) {
            Some(old) => {
                self.drop_state(&old);
                old.pending.len()
            }
            None => 0,
        }
    }

    fn drop_state(&mut self, old: &PartitionState) {
        self.in_flight -= old.pending.len();
        self.in_flight_bytes -= old.bytes_not_done();
        self.abandoned += old.pending.len() as u64;
        self.dropped_uncommitted += old.released_uncommitted();
    }

    /// What dropped partitions took with them, ever: (records abandoned in flight, offsets done
    /// but not committed).
    pub fn given_up(&self) -> (u64, u64) {
        (self.abandoned, self.dropped_uncommitted)
    }

    pub fn is_assigned(&self, partition: i32) -> bool {
        self.partitions.contains_key(&partition)
    }

    pub fn assigned(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.partitions.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Registers a consumed message (in consumption order). Returns the epoch to acknowledge it
    /// with. A partition not yet assigned is assigned implicitly.
    pub fn register(&mut self, partition: i32, offset: i64) -> u64 {
        self.register_sized(partition, offset, 0)
    }

    /// As `register`, counting `bytes` in flight until the message is done.
    pub fn register_sized(&mut self, partition: i32, offset: i64, bytes: usize) -> u64 {
        if !self.partitions.contains_key(&partition) {
            self.assign(partition);
        }
        let Some(state) = self.partitions.get_mut(&partition) else {
            return 0;
        };
        // A re-delivered offset (the client rewound) that is still pending is tracked once.
        state.first.get_or_insert(offset);
        if let std::collections::btree_map::Entry::Vacant(slot) = state.pending.entry(offset) {
            slot.insert(Pending { done: false, bytes });
            self.in_flight += 1;
            self.in_flight_bytes += bytes;
        }
        state.consumed_upto = Some(
            state
                .consumed_upto
                .map_or(offset + 1, |c| c.max(offset + 1)),
        );
        state.epoch
    }

    /// Marks a message done. Returns false if it belongs to an abandoned epoch or is unknown.
    pub fn done(&mut self, partition: i32, epoch: u64, offset: i64) -> bool {
        let Some(state) = self.partitions.get_mut(&partition) else {
            return false;
        };
        if state.epoch != epoch {
            return false;
        }
        match state.pending.get_mut(&offset) {
            Some(p) if !p.done => {
                p.done = true;
                self.in_flight_bytes -= p.bytes;
                let before = state.pending.len();
                state.release();
                self.in_flight -= before - state.pending.len();
                true
            }
            _ => false,
        }
    }

    /// Messages registered and not yet released, over all partitions.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Bytes of the registered messages not yet done, over all partitions.
    pub fn in_flight_bytes(&self) -> usize {
        self.in_flight_bytes
    }

    /// Messages registered and not yet released in the given partitions.
    pub fn in_flight_of(&self, partitions: &[i32]) -> usize {
        partitions
            .iter()
            .filter_map(|p| self.partitions.get(p))
            .map(|s| s.pending.len())
            .sum()
    }

    /// Messages released since the last confirmed commit, over all partitions.
    pub fn released_since_commit(&self) -> u64 {
        self.partitions
            .values()
            .map(|s| s.released_since_commit)
            .sum()
    }

    /// Offsets that are ahead of the last confirmed commit (restricted to `only` if given).
    pub fn commit_candidates(&self, only: Option<&[i32]>) -> Vec<CommitCandidate> {
        let mut out: Vec<CommitCandidate> = self
            .partitions
            .iter()
            .filter(|(p, _)| only.is_none_or(|o| o.contains(p)))
            .filter_map(|(&partition, s)| {
                let offset = s.committable()?;
                (s.committed.is_none_or(|c| offset > c)).then_some(CommitCandidate {
                    partition,
                    offset,
                    epoch: s.epoch,
                })
            })
            .collect();
        out.sort_unstable_by_key(|c| c.partition);
        out
    }

    /// True while the assignment `c` was computed under lasts: once its partition is revoked or
    /// lost (and maybe reassigned), another member may have committed further, and committing
    /// `c` would move the group's offset backwards.
    pub fn is_current(&self, c: &CommitCandidate) -> bool {
        self.partitions
            .get(&c.partition)
            .is_some_and(|s| s.epoch == c.epoch)
    }

    /// Records a commit confirmed by the broker.
    pub fn committed(&mut self, partition: i32, offset: i64) {
        if let Some(s) = self.partitions.get_mut(&partition) {
            if s.committed.is_none_or(|c| offset > c) {
                s.committed = Some(offset);
            }
        }
    }

    /// Records the committed offset read from the broker on assignment.
    pub fn set_committed(&mut self, partition: i32, offset: i64) {
        if let Some(s) = self.partitions.get_mut(&partition) {
            s.committed = Some(offset);
        }
    }

    /// Resets the "released since commit" counters (after a commit was requested).
    pub fn commit_requested(&mut self, candidates: &[CommitCandidate]) {
        for c in candidates {
            if let Some(s) = self.partitions.get_mut(&c.partition) {
                s.released_since_commit = 0;
            }
        }
    }

    pub fn progress(&self) -> Vec<PartitionProgress> {
        let mut v: Vec<PartitionProgress> = self
            .partitions
            .iter()
            .map(|(&partition, s)| PartitionProgress {
                partition,
                consumed_upto: s.consumed_upto,
                committed: s.committed,
                in_flight: s.pending.len(),
            })
            .collect();
        v.sort_unstable_by_key(|p| p.partition);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(t: &OffsetTracker) -> Vec<(i32, i64)> {
        t.commit_candidates(None)
            .iter()
            .map(|c| (c.partition, c.offset))
            .collect()
    }

    #[test]
    fn a_dropped_partition_counts_what_it_takes_with_it() {
        let mut t = OffsetTracker::new();
        let e = t.assign(0);
        t.set_committed(0, 10);
        for o in 10..15 {
            t.register(0, o);
        }
        // 10..12 done (released, not committed), 12 and 14 pending, 13 done but behind 12.
        for o in [10, 11, 13] {
            t.done(0, e, o);
        }
        assert_eq!(t.given_up(), (0, 0));
        assert_eq!(t.revoke(0), 3);
        assert_eq!(t.given_up(), (3, 2));
        // Never committed: counted from the first offset registered.
        let e = t.assign(1);
        t.register(1, 100);
        t.register(1, 101);
        t.done(1, e, 100);
        t.assign(1);
        assert_eq!(t.given_up(), (4, 3));
    }

    #[test]
    fn commits_only_contiguous_done_prefix() {
        let mut t = OffsetTracker::new();
        let e = t.assign(0);
        for o in [10, 11, 13, 14] {
            assert_eq!(t.register(0, o), e);
        }
        assert_eq!(t.in_flight(), 4);
        assert!(cands(&t).is_empty());
        assert!(t.done(0, e, 11));
        assert!(t.done(0, e, 14));
        assert!(
            cands(&t).is_empty(),
            "10 is not done: nothing may be committed"
        );
        assert!(t.done(0, e, 10));
        assert_eq!(
            cands(&t),
            [(0, 13)],
            "13 is the first not done (12 was never consumed)"
        );
        assert!(t.done(0, e, 13));
        assert_eq!(cands(&t), [(0, 15)]);
        assert_eq!(t.in_flight(), 0);
        assert!(!t.done(0, e, 13), "double ack ignored");
        assert_eq!(t.released_since_commit(), 4);
        let c = t.commit_candidates(None);
        t.commit_requested(&c);
        t.committed(0, 15);
        assert!(cands(&t).is_empty());
        assert_eq!(t.released_since_commit(), 0);
    }

    #[test]
    fn bytes_in_flight_follow_done_revoke_and_reassign() {
        let mut t = OffsetTracker::new();
        let e = t.assign(0);
        t.register_sized(0, 0, 100);
        t.register_sized(0, 1, 50);
        t.register_sized(0, 1, 50);
        assert_eq!(t.in_flight_bytes(), 150, "a re-delivery counts once");
        assert!(t.done(0, e, 1));
        assert_eq!(t.in_flight_bytes(), 100, "done, though not yet released");
        t.register_sized(1, 0, 70);
        t.revoke(0);
        assert_eq!(t.in_flight_bytes(), 70);
        t.assign(1);
        assert_eq!(t.in_flight_bytes(), 0);
    }

    #[test]
    fn a_candidate_outlived_by_its_assignment_is_not_current() {
        let mut t = OffsetTracker::new();
        let e = t.assign(3);
        t.register(3, 100);
        assert!(t.done(3, e, 100));
        let c = t.commit_candidates(None);
        assert_eq!(c.len(), 1);
        assert!(t.is_current(&c[0]));
        // A slow commit: meanwhile the partition is lost and assigned again.
        t.revoke(3);
        assert!(!t.is_current(&c[0]), "revoked");
        t.assign(3);
        assert!(!t.is_current(&c[0]), "reassigned under a new epoch");
    }

    #[test]
    fn partitions_are_independent_and_revoke_abandons() {
        let mut t = OffsetTracker::new();
        let e0 = t.assign(0);
        let e1 = t.assign(1);
        t.register(0, 0);
        t.register(1, 0);
        t.register(1, 1);
        t.done(1, e1, 0);
        assert_eq!(cands(&t), [(1, 1)]);
        assert_eq!(t.in_flight_of(&[1]), 1);
        assert_eq!(t.revoke(1), 1);
        assert_eq!(t.in_flight(), 1);
        assert!(!t.done(1, e1, 1), "ack of a revoked partition is ignored");
        let e1b = t.assign(1);
        assert_ne!(e1, e1b);
        t.register(1, 1);
        assert!(!t.done(1, e1, 1), "ack from the old epoch is ignored");
        assert!(t.done(1, e1b, 1));
        assert!(t.done(0, e0, 0));
        assert_eq!(cands(&t), [(0, 1), (1, 2)]);
        assert_eq!(t.commit_candidates(Some(&[1])).len(), 1);
    }

    #[test]
    fn redelivery_never_moves_commits_backwards() {
        let mut t = OffsetTracker::new();
        let e = t.assign(0);
        for o in 0..5 {
            t.register(0, o);
            t.done(0, e, o);
        }
        t.committed(0, 5);
        // The client rewinds to 3 (e.g. after a fetch error): reprocessing is harmless, and the
        // commit position never goes back.
        t.register(0, 3);
        assert!(cands(&t).is_empty());
        t.done(0, e, 3);
        assert!(cands(&t).is_empty());
        t.register(0, 5);
        t.done(0, e, 5);
        assert_eq!(cands(&t), [(0, 6)]);
    }

    #[test]
    fn unassigned_partition_is_assigned_on_register() {
        let mut t = OffsetTracker::new();
        let e = t.register(3, 7);
        assert!(t.is_assigned(3));
        assert!(t.done(3, e, 7));
        assert_eq!(cands(&t), [(3, 8)]);
    }
}
