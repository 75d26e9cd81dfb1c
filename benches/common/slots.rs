//! Event slots for the benches' synthetic articles (shared by index_latency and retention_disk).

use newsdedup::slots::{SlotCollector, SlotKind, Slots};
use rand::rngs::SmallRng;
use rand::Rng;

/// Event slots the size of a typical article's (12 names, 5 figures kept: the mean over the
/// natural pairs' texts).
pub fn random_slots(rng: &mut SmallRng) -> Slots {
    let mut c = SlotCollector::default();
    for _ in 0..12 {
        c.add(SlotKind::Entity, rng.gen(), rng.gen_range(1..6));
    }
    for _ in 0..5 {
        c.add(SlotKind::Figure, rng.gen(), rng.gen_range(1..4));
    }
    c.finish()
}
