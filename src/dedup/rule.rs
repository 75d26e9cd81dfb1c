//! The decision rule: the settings of `[dedup]` and the judgement of one candidate against
//! them (which rule fires at a simhash distance and second-check score, the relation of the
//! pair, the template text to leave out, and the explanation `compare` prints). Pure: it reads
//! scores and knows no store; `Deduper` asks it about each candidate in turn.

use crate::headline::ChromeCheck;
use crate::index::{MatchRule, Relation};
use crate::segments::SegmentMask;
use crate::sketch::{BinMask, Similarity, TEMPLATE_PAGE_BINS};
use crate::topic::Topic;
use serde::{Deserialize, Serialize};

/// The extension rule's sanity check: the estimated share of A's 4-grams found in B must be at
/// least this share of B's share of A's length, which is what it is with B whole inside A (32
/// bins estimate 0.6 within about 0.09; 0.75 leaves two of those).
pub const EXTENSION_SHARE_SLACK: f64 = 0.75;

/// Settings of the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupConfig {
    /// Largest Hamming distance at which two articles are near-duplicates. Up to 3 is exhaustive
    /// (pigeonhole over four 16-bit blocks); above 3 only candidates sharing a block are seen.
    pub threshold: u32,
    /// Second check of candidates within `threshold`: the estimated 4-gram containment must be at
    /// least this (0 disables). Removes templated reports whose word mix is alike but text is not.
    pub confirm_min_containment: f64,
    /// Candidates beyond `threshold` up to this distance (found because they share a 16-bit block)
    /// are duplicates if the second check is strong: admits reposts whose edits moved the simhash a
    /// little too far. 0 disables.
    pub rescue_distance: u32,
    /// The resemblance rule, for candidates beyond `threshold` (up to `rescue_distance`, or any
    /// found by `sketch_search`): a duplicate when at least this share of the new article's
    /// 4-grams is estimated to be in the candidate and their Jaccard is at least
    /// `rescue_min_jaccard` (a repost whose edits moved the simhash too far). Directional: a
    /// later article quoting an earlier one among as much material of its own is not caught.
    pub rescue_min_containment: f64,
    /// Minimum estimated 4-gram Jaccard for the resemblance rule.
    pub rescue_min_jaccard: f64,
    /// Up to this simhash distance the resemblance rule also accepts less containment
    /// (`near_min_containment`, with `near_min_jaccard`): the two articles' weighted vocabulary
    /// (names, places, figures) nearly agrees, so a reworded repost is told from a template
    /// sibling, whose slots (names, figures) differ and move the simhash further. 0 disables.
    pub near_distance: u32,
    /// Resemblance rule's containment within `near_distance`.
    pub near_min_containment: f64,
    /// Resemblance rule's Jaccard within `near_distance`.
    pub near_min_jaccard: f64,
    /// The containment rule, for the same candidates: a duplicate when at least this share of
    /// the new article's 4-grams is estimated to be in the candidate, however much longer the
    /// candidate is (an excerpt: it says nothing the earlier article did not). Stricter than
    /// `rescue_min_containment`, since with a low Jaccard the estimate rests on fewer bins. 0
    /// disables.
    pub excerpt_min_containment: f64,
    /// Evidence floor of the containment rule: minimum estimated Jaccard (this share of the
    /// sketch's 32 bins must agree), so a short text is not "contained" in a much longer one on
    /// two or three bins; it bounds how much longer the candidate may be (about 1 / this).
    pub excerpt_min_jaccard: f64,
    /// Also look for candidates through the content sketch's LSH bands (finds reposts whose simhash
    /// moved far, e.g. truncated ones); they are judged by the rescue rule.
    pub sketch_search: bool,
    /// The extension rule, for the same candidates: a duplicate when at least this share of the
    /// candidate's 4-grams is estimated to be in the new article (the earlier report whole inside
    /// the later)... 0 disables.
    pub extension_min_contained: f64,
    /// ...and the candidate makes up at least this share of the new article (by 4-gram count:
    /// exact). The rest is new text of the same report (an update); a digest or roundup in which
    /// the earlier item is a small part stays unique.
    pub extension_min_share: f64,
    /// The topic check of an extension whose earlier report is a smaller share of it: when B is
    /// (almost) whole inside A (`extension_min_contained`) but less than `extension_min_share` of
    /// it, A is still an update if the text it adds repeats at least this share (by TF-IDF
    /// weight) of the heavy words of B's part of A; a digest's other items do not. Computed only
    /// for such candidates. 0 disables.
    pub extension_min_coherence: f64,
    /// The topic check is made only for a B at least this share of A's length: a smaller one is
    /// the size of one entry of a digest (the earlier item a fifth or less of the later), too
    /// small a part for the later to be "that story".
    pub extension_topic_min_share: f64,
    /// A duplicate is an `excerpt` or an `extension` only when its length differs from the
    /// candidate's by at least this share (of the shorter, in 4-gram windows: exact): the later
    /// is at most 1 / (1 + this) of the earlier's length, or at least 1 + this times it. Two
    /// texts of about one length are a `copy` or a `rewrite` whatever their sketches say: a few
    /// sentences more on one side and fewer on the other is not "a part" or "the whole plus new
    /// text", and estimates from 32 bins cannot tell which side has the few more.
    pub relation_min_length_change: f64,
    /// A duplicate is a `copy` (rather than a `rewrite`) when the estimated Jaccard is at least
    /// this.
    pub copy_min_jaccard: f64,
    /// Which relations make a duplicate. A candidate whose relation is not listed is not a match
    /// (the next candidate is tried).
    pub duplicate_relations: Vec<Relation>,
    /// Template text does not carry a decision: sketch bins whose value many indexed articles
    /// hold (the band bucket holding it is crowded) are left out of the second check.
    pub template_discount: bool,
    /// A candidate whose second check lost bins to template text is a duplicate only if at least
    /// this share of the new article's remaining (not template) 4-grams is in it, when at least
    /// `template_min_bins` such bins are left to tell: two reports that share a template, page
    /// chrome or boilerplate differ in the rest.
    pub template_min_containment: f64,
    /// Fewer of the new article's bins than this left after the template discount: too little to
    /// tell, and simhash decides, unless the article is mostly template (`sketch::
    /// TEMPLATE_PAGE_BINS` of its bins or more): then nothing but the template is known to be
    /// shared, and no rule accepts the candidate.
    pub template_min_bins: u32,
    /// Segment signatures ([`crate::segments`]) count as evidence only when the text they are
    /// measured on has at least this many compared letters and digits (a few short sentences
    /// say little).
    pub segment_min_chars: u32,
    /// B is whole inside A by its segments when at least this share of B's compared characters
    /// is in segments A holds verbatim (exact, where the bins estimate). With B the smaller
    /// part of A, that is what the extension rule and the topic check ask of B. 0 disables.
    pub segment_whole_min_share: f64,
    /// With B whole inside A by its segments, the topic check is made for a B down to this
    /// share of A's length (an update whose earlier report is a fifth of it: a statement, then
    /// the full text), where the bins alone stop at `extension_topic_min_share`.
    pub segment_topic_min_share: f64,
    /// A resemblance or containment match beyond the threshold needs at least this share of the
    /// new article's compared text in clauses the candidate holds verbatim (when both have
    /// `segment_min_chars`). 0 disables.
    pub segment_min_confirm: f64,
    /// The clause confirmation (`segment_min_confirm`, `segment_extension_min_held`) applies
    /// from this Hamming distance on. Nearer, the weighted vocabulary nearly agrees as well as
    /// the bins: a repost whose edits (typos, markup) touch most of its few clauses, where two
    /// reports of one form lie further apart.
    pub segment_confirm_min_distance: u32,
    /// An extension match (the topic check's included) needs at least this share of the
    /// candidate's compared text in clauses the new article holds. 0 disables.
    pub segment_extension_min_held: f64,
    /// Template segments (held by `index::TEMPLATE_SEGMENT_ARTICLES` unique articles or more)
    /// shared by the pair overrule every rule when, left out, less than this share of A's
    /// remaining segments is in B and of B's in A: two rulings of one court, two lots of one
    /// tender share the form, not a report.
    pub segment_template_max_shared: f64,
    /// Event slots ([`crate::slots`]) count as evidence only when both texts keep at least this
    /// many of the kind (names, figures): one or two say little.
    pub slot_min_kept: u32,
    /// A match is refused when less than this share of the poorer side's kept names (the text
    /// that keeps fewer) is kept by the other: two fillings of one form name other defendants,
    /// bidders or delegates, where a rewrite keeps its names. Read for two texts of about one
    /// length only (`slot_max_length_ratio`). 0 disables.
    pub slot_min_name_share: f64,
    /// The same for figures (amounts, counts, dates, lot numbers). 0 disables.
    pub slot_min_figure_share: f64,
    /// The slot check reads a pair only when the longer text is at most this many times the
    /// shorter's length, and a kind only when both texts keep every one they hold (a text with
    /// more figures than it keeps may leave the other's out of its sample however much of it
    /// it holds).
    pub slot_max_length_ratio: f64,
    /// Page chrome under a headline carries no decision ([`crate::headline`]): a match is
    /// refused when the new article's text holds almost none of its own title's bigrams nor the
    /// candidate's, and the titles disagree (a disclaimer or sign-in page under many titles).
    pub headline_check: bool,
}

impl DedupConfig {
    /// Whether a candidate at simhash `distance` with second-check score `sim` (the new article
    /// as A, the candidate as B) is a duplicate.
    pub fn accepts(&self, distance: u32, sim: Option<Similarity>) -> bool {
        self.judge(distance, sim).is_some()
    }

    /// The rule and relation that make the new article a duplicate of the candidate, if any: a
    /// rule must fire and the relation must be one of `duplicate_relations`.
    pub fn judge(&self, distance: u32, sim: Option<Similarity>) -> Option<(MatchRule, Relation)> {
        self.judge_with(distance, sim, None)
    }

    /// [`Self::judge`] with the topic check's result for a candidate that [`Self::wants_topic`].
    pub fn judge_with(
        &self,
        distance: u32,
        sim: Option<Similarity>,
        topic: Option<Topic>,
    ) -> Option<(MatchRule, Relation)> {
        let rule = self.rule_for_with(distance, sim, topic)?;
        let relation = self.relation_of(sim);
        self.duplicate_relations
            .contains(&relation)
            .then_some((rule, relation))
    }

    /// The bins to leave out of the second check, from the crowded bands of the new article's
    /// sketch (none when `template_discount` is off).
    pub fn template_bins(&self, crowded_bands: u16) -> BinMask {
        if self.template_discount {
            crate::sketch::template_bins(crowded_bands)
        } else {
            0
        }
    }

    /// The segments to leave out of the second check: the new article's segments that many
    /// indexed articles hold (none when `template_discount` is off).
    pub fn template_segments(&self, template: SegmentMask) -> SegmentMask {
        if self.template_discount {
            template
        } else {
            0
        }
    }

    /// Whether the page-chrome check refuses a pair the rules accept: `check` is the pair's
    /// ([`ChromeCheck::of`]; None when A's text holds its title or a title is missing).
    pub fn chrome_refuses(&self, check: Option<&ChromeCheck>) -> bool {
        self.headline_check && check.is_some_and(ChromeCheck::is_chrome)
    }

    /// The template discount overrules a match: bins were left out as template text, and either
    /// enough of A's remaining bins show that little of the rest is shared, or A is mostly
    /// template ([`TEMPLATE_PAGE_BINS`] of its bins or more) and too few bins are left to show
    /// that anything but the template is shared (two pages of one site's chrome).
    fn template_overrules(&self, s: &Similarity) -> bool {
        s.template_bins > 0
            && if s.a_bins() >= self.template_min_bins {
                s.a_in_b < self.template_min_containment
            } else {
                s.template_bins >= TEMPLATE_PAGE_BINS
            }
    }

    /// B whole inside A by its segments (see `segment_whole_min_share`), A clearly the longer
    /// (`relation_min_length_change`): B plus new text, not two texts of one length that share
    /// most clauses (a copy or a template's two fillings, which the other rules judge).
    fn holds_whole_by_segments(&self, s: &Similarity) -> bool {
        let o = &s.segments;
        self.segment_whole_min_share > 0.0
            && s.length_ratio() >= 1.0 + self.relation_min_length_change.max(0.0)
            && o.b >= 2
            && o.b_chars >= self.segment_min_chars
            && o.b_in_a()
                .is_some_and(|x| x >= self.segment_whole_min_share)
    }

    /// Whether the segments bear out a sketch rule beyond the threshold: when both texts have
    /// enough compared text (`segment_min_chars`), the direction the rule rests on must show
    /// in verbatim clauses too: at least `segment_min_confirm` of A's text in B for resemblance
    /// and containment (A says what B said), at least `segment_extension_min_held` of B's text in
    /// A for an extension (B is inside A). 32 bins agree by chance on two reports of one form
    /// (two resolutions of one session, two days of one statistics bulletin); their clauses do
    /// not.
    fn segments_confirm(&self, rule: MatchRule, distance: u32, s: &Similarity) -> bool {
        let o = &s.segments;
        if distance < self.segment_confirm_min_distance
            || o.a_chars < self.segment_min_chars
            || o.b_chars < self.segment_min_chars
        {
            return true;
        }
        let (share, bar) = match rule {
            MatchRule::Extension => (o.b_in_a(), self.segment_extension_min_held),
            _ => (o.a_in_b(), self.segment_min_confirm),
        };
        share.is_some_and(|x| x >= bar)
    }

    /// The sketch rule whose bars `s` passes but whose segments do not bear it out
    /// ([`Self::segments_confirm`]), for `explain`.
    fn unconfirmed_rule(&self, distance: u32, s: &Similarity) -> Option<MatchRule> {
        let passes = [
            (
                MatchRule::Resemblance,
                self.resemblance_bars(distance, s).is_some(),
            ),
            (
                MatchRule::Containment,
                self.excerpt_min_containment > 0.0
                    && s.a_in_b >= self.excerpt_min_containment
                    && s.jaccard >= self.excerpt_min_jaccard,
            ),
            (MatchRule::Extension, self.is_extension(s)),
        ];
        passes
            .into_iter()
            .find(|(rule, pass)| *pass && !self.segments_confirm(*rule, distance, s))
            .map(|(rule, _)| rule)
    }

    /// The pair shares template segments and, those left out, little else (see
    /// `segment_template_max_shared`).
    fn segments_overrule(&self, s: &Similarity) -> bool {
        let o = &s.segments;
        let little = |x: Option<f64>| x.is_none_or(|x| x < self.segment_template_max_shared);
        self.segment_template_max_shared > 0.0
            && o.template_chars > 0
            && o.a_chars >= self.segment_min_chars
            && o.b_chars >= self.segment_min_chars
            && little(o.a_in_b())
            && little(o.b_in_a())
    }

    /// The extension test: A the longer, B (almost) whole inside it and a large enough part of
    /// it. With B whole inside A, the share of A's 4-grams found in B is B's share of A's length;
    /// an estimate far below that ([`EXTENSION_SHARE_SLACK`]) means the few bins that saw B's
    /// 4-grams were lucky (a template sibling that shares B's form, not B).
    fn is_extension(&self, s: &Similarity) -> bool {
        (self.holds_whole(s) || self.holds_whole_by_segments(s))
            && s.b_share_of_a() >= self.extension_min_share
    }

    /// B (almost) whole inside the longer A, whatever its share of A (see [`Self::is_extension`]).
    fn holds_whole(&self, s: &Similarity) -> bool {
        self.extension_min_contained > 0.0
            && s.a_shingles >= s.b_shingles
            && s.b_in_a >= self.extension_min_contained
            && s.a_in_b >= EXTENSION_SHARE_SLACK * s.b_share_of_a()
            && s.jaccard >= self.excerpt_min_jaccard
    }

    /// The resemblance bars (containment, Jaccard) that `s` passes at `distance`, if any: the
    /// ordinary ones, else within `near_distance` the near ones (less containment, a little more
    /// Jaccard; the flag says which).
    fn resemblance_bars(&self, distance: u32, s: &Similarity) -> Option<(f64, f64, bool)> {
        let passes =
            |containment: f64, jaccard: f64| s.a_in_b >= containment && s.jaccard >= jaccard;
        if passes(self.rescue_min_containment, self.rescue_min_jaccard) {
            Some((self.rescue_min_containment, self.rescue_min_jaccard, false))
        } else if distance <= self.near_distance
            && passes(self.near_min_containment, self.near_min_jaccard)
        {
            Some((self.near_min_containment, self.near_min_jaccard, true))
        } else {
            None
        }
    }

    /// The names or figures the two texts keep disagree beyond what one report's copies show (see
    /// `slot_min_name_share`): which kind, the share and its bar.
    fn slots_overrule_by(&self, s: &Similarity) -> Option<(&'static str, f64, f64)> {
        let ratio = s.length_ratio();
        let max = self.slot_max_length_ratio.max(1.0);
        if ratio > max || ratio * max < 1.0 {
            return None;
        }
        let read = |share: &crate::slots::SlotShare, bar: f64, kind: &'static str| {
            let kept = |n: u32| n >= self.slot_min_kept.max(1);
            (bar > 0.0
                && share.complete
                && kept(share.shared + share.only_later)
                && kept(share.shared + share.only_earlier))
            .then(|| share.poorer_share())
            .flatten()
            .filter(|&x| x < bar)
            .map(|x| (kind, x, bar))
        };
        read(&s.slots.entities, self.slot_min_name_share, "names")
            .or_else(|| read(&s.slots.figures, self.slot_min_figure_share, "figures"))
    }

    fn slots_overrule(&self, s: &Similarity) -> bool {
        self.slots_overrule_by(s).is_some()
    }

    /// Whether the decision ever reads the new article's outline (the topic check is on).
    pub fn reads_outlines(&self) -> bool {
        self.extension_min_coherence > 0.0 && self.extension_min_contained > 0.0
    }

    /// Whether the candidate needs the topic check: beyond the threshold, no other rule fires,
    /// and B is whole inside A but too small a part of it for the extension rule alone.
    ///
    /// The sketch alone cannot vouch for such a B: with B a third of A, only about ten of A's
    /// bins see B's 4-grams, too few for the share checks of [`Self::holds_whole`] and the
    /// template discount (which expects most of A in B). The topic check places B's own sampled
    /// 4-grams in A's text instead ([`Topic::located`]), which needs only B's bins.
    pub fn wants_topic(&self, distance: u32, sim: Option<Similarity>) -> bool {
        sim.is_some_and(|s| {
            // B whole inside A: by its bins, or (exactly, and for a smaller B) by its segments.
            let by_bins = s.b_in_a >= self.extension_min_contained
                && s.b_share_of_a() >= self.extension_topic_min_share
                && s.shared_bins >= self.template_min_bins
                && !(s.template_bins >= TEMPLATE_PAGE_BINS && s.a_bins() < self.template_min_bins);
            let by_segments = self.holds_whole_by_segments(&s)
                && s.b_share_of_a() >= self.segment_topic_min_share;
            self.reads_outlines()
                && distance > self.threshold
                && (self.sketch_search || distance <= self.rescue_distance)
                && s.a_shingles >= s.b_shingles
                && s.b_share_of_a() < self.extension_min_share
                && (by_bins || by_segments)
                && !self.segments_overrule(&s)
                && !self.slots_overrule(&s)
                && self.segments_confirm(MatchRule::Extension, distance, &s)
                && self.rule_for_plain(distance, sim).is_none()
        })
    }

    /// The topic check passes: B's sampled 4-grams are found in one B-sized stretch of A (B is
    /// whole inside A), and A's added text is about B's story.
    fn topic_holds(&self, topic: Option<Topic>) -> bool {
        topic.is_some_and(|t| {
            f64::from(t.located) >= self.extension_min_contained * f64::from(t.sampled)
                && t.coherence >= self.extension_min_coherence
        })
    }

    /// The rule that makes the new article a duplicate of the candidate, if one does (whatever
    /// its relation).
    pub fn rule_for(&self, distance: u32, sim: Option<Similarity>) -> Option<MatchRule> {
        self.rule_for_with(distance, sim, None)
    }

    /// [`Self::rule_for`] with the topic check's result (the extension rule for a B that is a
    /// small share of A).
    pub fn rule_for_with(
        &self,
        distance: u32,
        sim: Option<Similarity>,
        topic: Option<Topic>,
    ) -> Option<MatchRule> {
        let plain = self.rule_for_plain(distance, sim);
        if plain.is_none() && self.topic_holds(topic) && self.wants_topic(distance, sim) {
            Some(MatchRule::Extension)
        } else {
            plain
        }
    }

    /// The rules that the sketch and the distance decide alone.
    fn rule_for_plain(&self, distance: u32, sim: Option<Similarity>) -> Option<MatchRule> {
        if distance <= self.threshold {
            sim.is_none_or(|s| {
                s.containment >= self.confirm_min_containment
                    && !self.template_overrules(&s)
                    && !self.segments_overrule(&s)
                    && !self.slots_overrule(&s)
            })
            .then_some(MatchRule::Simhash)
        } else {
            let s = sim.filter(|_| self.sketch_search || distance <= self.rescue_distance)?;
            if self.template_overrules(&s) || self.segments_overrule(&s) || self.slots_overrule(&s)
            {
                None
            } else if self.resemblance_bars(distance, &s).is_some()
                && self.segments_confirm(MatchRule::Resemblance, distance, &s)
            {
                Some(MatchRule::Resemblance)
            } else if self.excerpt_min_containment > 0.0
                && s.a_in_b >= self.excerpt_min_containment
                && s.jaccard >= self.excerpt_min_jaccard
                && self.segments_confirm(MatchRule::Containment, distance, &s)
            {
                Some(MatchRule::Containment)
            } else if self.is_extension(&s)
                && self.segments_confirm(MatchRule::Extension, distance, &s)
            {
                Some(MatchRule::Extension)
            } else {
                None
            }
        }
    }

    /// What kind of repeat A is of B: what A removes or adds, from the lengths (exact) and the
    /// second check in both directions. `excerpt` when A is clearly the shorter
    /// ([`Self::relation_min_length_change`]) and (almost) all of it is in B, `extension` when A
    /// is clearly the longer and holds (almost) all of B; otherwise `copy` when the texts are
    /// near-identical, `rewrite` when each has material the other lacks. Without a sketch only
    /// simhash agreed: `copy`.
    pub fn relation_of(&self, sim: Option<Similarity>) -> Relation {
        let Some(s) = sim.filter(|s| s.compared_bins() > 0) else {
            return Relation::Copy;
        };
        let contained = self.excerpt_min_containment.max(0.5);
        let holds = self.extension_min_contained.max(0.5);
        let change = 1.0 + self.relation_min_length_change.max(0.0);
        let ratio = s.length_ratio();
        if s.a_in_b >= contained && ratio * change <= 1.0 {
            Relation::Excerpt
        } else if (s.b_in_a >= holds || self.holds_whole_by_segments(&s)) && ratio >= change {
            Relation::Extension
        } else if s.jaccard >= self.copy_min_jaccard {
            Relation::Copy
        } else {
            Relation::Rewrite
        }
    }

    /// Whether a sketch rule (resemblance, containment or extension) accepts `sim` for a
    /// candidate beyond the threshold that is searched (found through a band).
    pub fn sketch_rule_may_accept(&self, sim: Similarity) -> bool {
        let beyond = self.threshold.saturating_add(1);
        self.judge(beyond, Some(sim)).is_some() || self.wants_topic(beyond, Some(sim))
    }

    /// Why `judge` decided as it did, in one sentence (for `compare`): the rule that fired or
    /// why none did, the relation and what it rests on, and the template bins left out.
    pub fn explain(&self, distance: u32, sim: Option<Similarity>) -> String {
        self.explain_with(distance, sim, None)
    }

    /// [`Self::explain`] with the topic check's result, for a candidate that
    /// [`Self::wants_topic`].
    pub fn explain_with(
        &self,
        distance: u32,
        sim: Option<Similarity>,
        topic: Option<Topic>,
    ) -> String {
        let beyond = format!("distance {distance} > threshold {}", self.threshold);
        let Some(s) = sim else {
            return match self.judge(distance, sim) {
                Some(_) => format!(
                    "simhash: distance {distance} <= threshold {}; relation copy (no sketch to \
                     compare)",
                    self.threshold
                ),
                None if distance <= self.threshold => format!(
                    "none: relation copy (no sketch to compare) is not in duplicate_relations {}",
                    self.relations_list()
                ),
                None => format!("none: {beyond}, and no sketch to compare"),
            };
        };
        let template = if s.template_bins > 0 {
            format!(
                "; {} bins left out as template text (held by many indexed articles)",
                s.template_bins
            )
        } else {
            String::new()
        };
        let segments = format!("{}{}", segments_text(&s), slots_text(&s));
        let share = format!(
            "an estimated {:.0}% of A's 4-grams are in B ({} of A's sampled 4-grams seen in B, {} not)",
            100.0 * s.a_in_b,
            s.shared_bins,
            s.a_only_bins
        );
        let relation = self.relation_of(sim);
        let why_relation = match relation {
            // No bin holds evidence (a text that cleaning empties, or every bin template):
            // only simhash agreed, as without a sketch.
            Relation::Copy if s.compared_bins() == 0 => {
                "no sketch bins to compare: simhash alone agreed".to_owned()
            }
            Relation::Copy => format!(
                "Jaccard {:.2} >= {}, A {:.0}% of B's length",
                s.jaccard,
                self.copy_min_jaccard,
                100.0 * s.length_ratio()
            ),
            Relation::Excerpt => format!(
                "A is {:.0}% of B's length and {:.0}% of it is in B",
                100.0 * s.length_ratio(),
                100.0 * s.a_in_b
            ),
            Relation::Extension => format!(
                "A is {:.0}% of B's length and holds {:.0}% of B",
                100.0 * s.length_ratio(),
                100.0 * s.b_in_a
            ),
            Relation::Rewrite => format!(
                "{:.0}% of A in B, {:.0}% of B in A, Jaccard {:.2}, A {:.0}% of B's length",
                100.0 * s.a_in_b,
                100.0 * s.b_in_a,
                s.jaccard,
                100.0 * s.length_ratio()
            ),
        };
        let relation_text = format!("relation {} ({why_relation})", relation.as_str());
        let rule = self.rule_for_with(distance, sim, topic);
        let topic_text = match topic {
            Some(t) => format!(
                "{} of B's {} sampled 4-grams are placed in one B-sized stretch of A, and the \
                 text A adds ({:.0}% of A) repeats {:.0}% of the heavy words (by TF-IDF weight) of \
                 that stretch",
                t.located,
                t.sampled,
                100.0 * t.added_share,
                100.0 * t.coherence
            ),
            None => "B's sampled 4-grams are not found in A's text".to_owned(),
        };
        if rule.is_some() && !self.duplicate_relations.contains(&relation) {
            return format!(
                "none: {relation_text} is not in duplicate_relations {}{template}",
                self.relations_list()
            );
        }
        // The sketch rule whose bars pass but whose clauses do not bear it out, if any.
        let unconfirmed = self.unconfirmed_rule(distance, &s);
        let fired = match rule {
            Some(MatchRule::Editor) => "editor: an editor merged A into B".to_owned(),
            Some(MatchRule::Simhash) => {
                format!("simhash: distance {distance} <= threshold {}", self.threshold)
            }
            Some(MatchRule::Resemblance) => {
                let (containment, jaccard, near) =
                    self.resemblance_bars(distance, &s).unwrap_or_default();
                let near = if near {
                    format!(
                        ", the bars within distance {} (the weighted vocabulary nearly agrees)",
                        self.near_distance
                    )
                } else {
                    String::new()
                };
                format!(
                    "resemblance: {beyond}, but {share} (>= {containment}) and Jaccard {:.2} >= \
                     {jaccard}{near}",
                    s.jaccard
                )
            }
            Some(MatchRule::Containment) => format!(
                "containment: {beyond}, but {share} (>= {}; Jaccard {:.2} >= {}): A says nothing B did not",
                self.excerpt_min_containment, s.jaccard, self.excerpt_min_jaccard
            ),
            Some(MatchRule::Extension) if !self.is_extension(&s) => format!(
                "extension: {beyond}, but an estimated {:.0}% of B's 4-grams are in A (>= {}) and, \
                 though B is only {:.0}% of A's length (< {:.0}%), {topic_text} (>= {:.0}% placed, \
                 >= {:.0}% repeated): B whole, plus more of its story, not a digest",
                100.0 * s.b_in_a,
                self.extension_min_contained,
                // Rounded down: "54.9% < 55%" must not read "55% < 55%".
                (100.0 * s.b_share_of_a()).floor(),
                100.0 * self.extension_min_share,
                100.0 * self.extension_min_contained,
                100.0 * self.extension_min_coherence
            ),
            Some(MatchRule::Extension) => format!(
                "extension: {beyond}, but an estimated {:.0}% of B's 4-grams are in A (>= {}) and \
                 B is {:.0}% of A's length (>= {:.0}%): B whole, plus new text",
                100.0 * s.b_in_a,
                self.extension_min_contained,
                100.0 * s.b_share_of_a(),
                100.0 * self.extension_min_share
            ),
            None if self.wants_topic(distance, sim) => format!(
                "none: {beyond}; an estimated {:.0}% of B's 4-grams are in A, but B is only {:.0}% \
                 of A's length (< {:.0}%) and {topic_text}: not an update of B's story (needs \
                 {:.0}% of B's sampled 4-grams placed and {:.0}% of the heavy words repeated)",
                100.0 * s.b_in_a,
                (100.0 * s.b_share_of_a()).floor(),
                100.0 * self.extension_min_share,
                100.0 * self.extension_min_contained,
                100.0 * self.extension_min_coherence
            ),
            None if self.slots_overrule(&s) => {
                let (kind, share, bar) = self.slots_overrule_by(&s).unwrap_or_default();
                format!(
                    "none: the two texts are about other {kind}: only {:.0}% of the {kind} the \
                     poorer side keeps are kept by the other (< {:.0}%): one form filled twice, \
                     not one report",
                    // Rounded down: "54.5% < 55%" must not read "55% < 55%".
                    (100.0 * share).floor(),
                    100.0 * bar
                )
            }
            None if self.segments_overrule(&s) => format!(
                "none: the two share template segments ({} characters held by many indexed \
                 articles) and, those left out, less than {:.0}% of either text's segments: a \
                 shared form, not a report",
                s.segments.template_chars,
                100.0 * self.segment_template_max_shared
            ),
            None if distance > self.threshold
                && !self.template_overrules(&s)
                && unconfirmed.is_some() =>
            {
                let rule = unconfirmed.unwrap_or(MatchRule::Resemblance);
                let (whose, bar) = if rule == MatchRule::Extension {
                    ("B's", self.segment_extension_min_held)
                } else {
                    ("A's", self.segment_min_confirm)
                };
                format!(
                    "none: {beyond}; the bins pass the {} rule ({share}, Jaccard {:.2}, {:.0}% of \
                     B in A), but the clauses do not bear it out: less than {:.0}% of {whose} \
                     text is in verbatim clauses of the other (two reports of one form, not one \
                     report)",
                    rule.as_str(),
                    s.jaccard,
                    100.0 * s.b_in_a,
                    100.0 * bar
                )
            }
            None if self.template_overrules(&s) && s.a_bins() >= self.template_min_bins => {
                format!(
                    "none: once template text is left out only {share} (< {}): the two share a \
                     template, not a report",
                    self.template_min_containment
                )
            }
            None if self.template_overrules(&s) => format!(
                "none: A is mostly template text and only {} of its bins are left (< {}): \
                 nothing but the template is known to be shared",
                s.a_bins(),
                self.template_min_bins
            ),
            None if distance <= self.threshold => format!(
                "none: distance {distance} <= threshold, but containment {:.2} < {}",
                s.containment, self.confirm_min_containment
            ),
            None if self.sketch_search || distance <= self.rescue_distance => format!(
                "none: {beyond}; {share}, Jaccard {:.2}, {:.0}% of B in A, B {:.0}% of A's length: \
                 below resemblance (>= {} with Jaccard >= {}{}), containment (>= {} with Jaccard \
                 >= {}) and extension (B in A >= {}, B >= {:.0}% of A)",
                s.jaccard,
                100.0 * s.b_in_a,
                100.0 * s.b_share_of_a(),
                self.rescue_min_containment,
                self.rescue_min_jaccard,
                if distance <= self.near_distance {
                    format!(
                        "; within distance {}: >= {} with Jaccard >= {}",
                        self.near_distance, self.near_min_containment, self.near_min_jaccard
                    )
                } else {
                    String::new()
                },
                self.excerpt_min_containment,
                self.excerpt_min_jaccard,
                self.extension_min_contained,
                100.0 * self.extension_min_share
            ),
            None => format!("none: {beyond}"),
        };
        if rule.is_some() {
            format!("{fired}; {relation_text}{template}{segments}")
        } else {
            format!("{fired}{template}{segments}")
        }
    }

    fn relations_list(&self) -> String {
        let names: Vec<&str> = self
            .duplicate_relations
            .iter()
            .map(|r| r.as_str())
            .collect();
        format!("[{}]", names.join(", "))
    }
}

/// The names and figures a pair keeps, for `explain` (empty when neither keeps any).
fn slots_text(s: &Similarity) -> String {
    let o = &s.slots;
    if o.entities.total() == 0 && o.figures.total() == 0 {
        return String::new();
    }
    let kind = |x: &crate::slots::SlotShare| {
        format!(
            "{} shared, {} A's only, {} B's only",
            x.shared, x.only_later, x.only_earlier
        )
    };
    format!(
        "; slots: names {}, figures {}",
        kind(&o.entities),
        kind(&o.figures)
    )
}

/// The segments a pair shares, for `explain` (empty when neither text has any compared).
fn segments_text(s: &Similarity) -> String {
    let o = &s.segments;
    if o.a == 0 && o.b == 0 && o.template == 0 {
        return String::new();
    }
    let pct = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{:.0}%", 100.0 * x));
    let template = if o.template > 0 {
        format!(
            ", {} template segments left out ({} shared characters)",
            o.template, o.template_chars
        )
    } else {
        String::new()
    };
    format!(
        "; segments: {} shared ({} characters), {} of A's text in B, {} of B's in A{template}",
        o.shared,
        o.shared_chars,
        pct(o.a_in_b()),
        pct(o.b_in_a())
    )
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            threshold: 3,
            confirm_min_containment: 0.0,
            rescue_distance: 0,
            rescue_min_containment: 0.8,
            rescue_min_jaccard: 0.45,
            near_distance: 8,
            near_min_containment: 0.7,
            near_min_jaccard: 0.5,
            excerpt_min_containment: 0.9,
            excerpt_min_jaccard: 0.15,
            sketch_search: true,
            extension_min_contained: 0.85,
            extension_min_share: 0.55,
            extension_min_coherence: 0.88,
            extension_topic_min_share: 0.25,
            relation_min_length_change: 0.15,
            copy_min_jaccard: 0.8,
            duplicate_relations: Relation::ALL.to_vec(),
            template_discount: true,
            template_min_containment: 0.5,
            template_min_bins: 3,
            segment_min_chars: 40,
            segment_whole_min_share: 0.75,
            segment_topic_min_share: 0.15,
            segment_min_confirm: 0.3,
            segment_confirm_min_distance: 6,
            segment_extension_min_held: 0.5,
            segment_template_max_shared: 0.3,
            slot_min_kept: 3,
            slot_min_name_share: 0.0,
            slot_min_figure_share: 0.55,
            slot_max_length_ratio: 1.5,
            headline_check: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second check with `shared`, `a_only`, `b_only` bins and the texts' 4-gram counts.
    fn sim(shared: u32, a_only: u32, b_only: u32, na: u32, nb: u32) -> Similarity {
        let used = f64::from(shared + a_only + b_only);
        let share = |miss: u32| f64::from(shared) / f64::from(shared + miss).max(1.0);
        Similarity {
            jaccard: f64::from(shared) / used,
            containment: 1.0,
            a_in_b: share(a_only),
            b_in_a: share(b_only),
            shared_bins: shared,
            a_only_bins: a_only,
            b_only_bins: b_only,
            template_bins: 0,
            a_shingles: na,
            b_shingles: nb,
            segments: crate::segments::Overlap::default(),
            slots: crate::slots::SlotOverlap::default(),
        }
    }

    /// `s` with segment overlap: `shared` characters shared, A and B compared on `a` and `b`.
    fn with_segments(mut s: Similarity, shared: u32, a: u32, b: u32) -> Similarity {
        s.segments = crate::segments::Overlap {
            shared: 1,
            shared_chars: shared,
            a: 2,
            a_chars: a,
            b: 2,
            b_chars: b,
            template_chars: 0,
            template: 0,
        };
        s
    }

    /// Bins that pass a sketch rule do not make a duplicate when the clauses do not bear the
    /// rule's direction out (two resolutions of one form, two days of one bulletin); with
    /// too little text to compare, the bins decide as before.
    #[test]
    fn sketch_rules_need_their_direction_in_verbatim_clauses() {
        let rule = DedupConfig::default();
        let resembling = sim(27, 4, 4, 1000, 1000);
        assert_eq!(
            rule.rule_for(9, Some(resembling)),
            Some(MatchRule::Resemblance)
        );
        assert_eq!(
            rule.rule_for(9, Some(with_segments(resembling, 24, 154, 181))),
            None
        );
        assert!(rule
            .explain(9, Some(with_segments(resembling, 24, 154, 181)))
            .contains("the clauses do not bear it out"));
        assert_eq!(
            rule.rule_for(9, Some(with_segments(resembling, 90, 154, 181))),
            Some(MatchRule::Resemblance)
        );
        assert_eq!(
            rule.rule_for(9, Some(with_segments(resembling, 10, 30, 30))),
            Some(MatchRule::Resemblance)
        );
        // Near the fingerprint (a short repost whose typos touch most of its few clauses),
        // the bins stand alone.
        assert_eq!(
            rule.rule_for(5, Some(with_segments(resembling, 0, 154, 181))),
            Some(MatchRule::Resemblance)
        );
        assert_eq!(
            rule.rule_for(6, Some(with_segments(resembling, 0, 154, 181))),
            None
        );
        // An extension: B 62% of A, its bins in A, but a third of its clauses.
        let extended = sim(15, 16, 1, 1000, 620);
        assert_eq!(
            rule.rule_for(15, Some(extended)),
            Some(MatchRule::Extension)
        );
        assert_eq!(
            rule.rule_for(15, Some(with_segments(extended, 117, 544, 336))),
            None
        );
    }

    /// A B a fifth of A whose clauses are (nearly) all in A gets the topic check that the bins
    /// alone give only from a quarter on.
    #[test]
    fn segments_whole_inside_open_the_topic_check_for_a_small_earlier_part() {
        let rule = DedupConfig::default();
        let small = sim(6, 26, 0, 1000, 180);
        assert!(!rule.wants_topic(20, Some(small)));
        let whole = with_segments(small, 130, 900, 150);
        assert!(rule.wants_topic(20, Some(whole)));
        let topic = |coherence| {
            Some(Topic {
                located: 30,
                sampled: 32,
                added_share: 0.8,
                coherence,
            })
        };
        assert_eq!(
            rule.rule_for_with(20, Some(whole), topic(0.9)),
            Some(MatchRule::Extension)
        );
        assert_eq!(rule.rule_for_with(20, Some(whole), topic(0.6)), None);
        // Half its clauses only: not whole, no topic check.
        assert!(!rule.wants_topic(20, Some(with_segments(small, 75, 900, 150))));
    }

    #[test]
    fn relation_follows_what_the_later_removes_or_adds() {
        let rule = DedupConfig::default();
        let cases = [
            // Near-identical.
            (sim(30, 1, 1, 500, 500), Relation::Copy),
            // A is half of B, all of it in B.
            (sim(16, 0, 16, 250, 500), Relation::Excerpt),
            // A holds B whole plus as much again.
            (sim(16, 16, 0, 1000, 500), Relation::Extension),
            // Each has a third the other lacks.
            (sim(16, 8, 8, 500, 500), Relation::Rewrite),
            // A truncated repost: all of A in B, B a fifth longer. Similar enough for a copy
            // (Jaccard 0.81), but A keeps only a part.
            (sim(26, 0, 6, 400, 480), Relation::Excerpt),
            // The same shares between two texts of one length (a template's two fillings, a
            // repost under other chrome): neither is a part of the other.
            (sim(26, 0, 6, 480, 480), Relation::Copy),
            // Each holds 86% of the other and A is one window longer: not the earlier whole plus
            // new text, but each with text the other lacks.
            (sim(24, 4, 4, 587, 586), Relation::Rewrite),
            // A holds B and adds a fifth: an update.
            (sim(26, 6, 0, 480, 400), Relation::Extension),
        ];
        for (s, want) in cases {
            assert_eq!(rule.relation_of(Some(s)), want, "{s:?}");
        }
        // No sketch: only simhash agreed.
        assert_eq!(rule.relation_of(None), Relation::Copy);
        // Sketches with no bin to compare (cleaning left no text): simhash alone, a copy, and
        // the explanation does not quote a Jaccard it never measured.
        let empty = sim(0, 0, 0, 0, 0);
        assert_eq!(rule.relation_of(Some(empty)), Relation::Copy);
        let why = rule.explain(0, Some(empty));
        assert!(why.contains("simhash alone agreed"), "{why}");
        assert!(!why.contains("Jaccard"), "{why}");
        // 0 keeps only the direction: any shorter A wholly in B is an excerpt.
        let directional = DedupConfig {
            relation_min_length_change: 0.0,
            ..DedupConfig::default()
        };
        assert_eq!(
            directional.relation_of(Some(sim(24, 0, 2, 479, 480))),
            Relation::Excerpt
        );
    }

    #[test]
    fn extension_rule_takes_updates_not_digests() {
        let rule = DedupConfig::default();
        let beyond = rule.threshold + 5;
        // B whole in A, B 60% of A: an update.
        let update = sim(19, 13, 0, 1000, 600);
        assert_eq!(
            rule.judge(beyond, Some(update)),
            Some((MatchRule::Extension, Relation::Extension))
        );
        // B whole in A but a fifth of it: a digest.
        assert_eq!(rule.judge(beyond, Some(sim(7, 25, 0, 1000, 200))), None);
        // B's bins say "inside A", but far too few of A's 4-grams are in B for B to be 60% of A:
        // lucky bins (a template sibling), not an extension.
        assert_eq!(rule.judge(beyond, Some(sim(13, 19, 1, 1000, 600))), None);
        // A shorter than B is never an extension.
        assert!(!rule.is_extension(&sim(19, 13, 0, 500, 600)));
        // A relation left out of duplicate_relations is not a match.
        let strict = DedupConfig {
            duplicate_relations: vec![Relation::Copy, Relation::Rewrite, Relation::Excerpt],
            ..DedupConfig::default()
        };
        assert_eq!(strict.judge(beyond, Some(update)), None);
        assert!(strict
            .explain(beyond, Some(update))
            .contains("not in duplicate_relations"));
    }

    #[test]
    fn resemblance_asks_less_containment_when_simhash_is_near() {
        let rule = DedupConfig::default();
        // A reworded report: 73% of A in B, Jaccard 0.58.
        let rewrite = sim(19, 7, 7, 700, 700);
        assert_eq!(
            rule.judge(rule.near_distance, Some(rewrite)),
            Some((MatchRule::Resemblance, Relation::Rewrite))
        );
        assert!(rule
            .explain(rule.near_distance, Some(rewrite))
            .contains("the bars within distance 8"));
        // Further apart the vocabulary differs (a template sibling's names and figures): the
        // ordinary bars apply.
        assert_eq!(rule.judge(rule.near_distance + 1, Some(rewrite)), None);
        assert!(rule
            .explain(rule.near_distance + 1, Some(rewrite))
            .starts_with("none:"));
        // The near bars add to the ordinary ones: 83% of A in B with Jaccard 0.47 passes those.
        assert_eq!(
            rule.judge(rule.near_distance, Some(sim(15, 3, 14, 700, 900))),
            Some((MatchRule::Resemblance, Relation::Rewrite))
        );
        let off = DedupConfig {
            near_distance: 0,
            ..DedupConfig::default()
        };
        assert_eq!(off.judge(rule.near_distance, Some(rewrite)), None);
    }

    #[test]
    fn topic_check_takes_updates_with_a_small_earlier_share_not_digests() {
        let rule = DedupConfig::default();
        let beyond = rule.threshold + 8;
        // B whole in A and 38% of it: too small a share for the extension rule alone.
        let whole = sim(12, 19, 0, 1000, 380);
        assert_eq!(rule.judge(beyond, Some(whole)), None);
        assert!(rule.wants_topic(beyond, Some(whole)));
        let topic = |located: u32, coherence: f64| Topic {
            located,
            sampled: 32,
            added_share: 0.62,
            coherence,
        };
        // What A adds repeats the heavy words of B's part: an update.
        assert_eq!(
            rule.judge_with(beyond, Some(whole), Some(topic(31, 0.95))),
            Some((MatchRule::Extension, Relation::Extension))
        );
        let why = rule.explain_with(beyond, Some(whole), Some(topic(31, 0.95)));
        assert!(
            why.starts_with("extension: ") && why.contains("95%"),
            "{why}"
        );
        // Other stories around B: a digest.
        assert_eq!(
            rule.judge_with(beyond, Some(whole), Some(topic(31, 0.3))),
            None
        );
        let why = rule.explain_with(beyond, Some(whole), Some(topic(31, 0.3)));
        assert!(why.starts_with("none: ") && why.contains("30%"), "{why}");
        // B's sampled 4-grams not found together in A: B is not whole inside it.
        assert_eq!(
            rule.judge_with(beyond, Some(whole), Some(topic(20, 0.95))),
            None
        );
        // Not computed for a candidate another rule takes, within the threshold, for a B that is
        // a tiny part of A, or with the check off.
        assert!(!rule.wants_topic(beyond, Some(sim(19, 13, 0, 1000, 600))));
        assert!(!rule.wants_topic(rule.threshold, Some(whole)));
        assert!(!rule.wants_topic(beyond, Some(sim(4, 28, 0, 1000, 100))));
        let off = DedupConfig {
            extension_min_coherence: 0.0,
            ..DedupConfig::default()
        };
        assert!(!off.wants_topic(beyond, Some(whole)));
        assert_eq!(
            off.judge_with(beyond, Some(whole), Some(topic(31, 0.95))),
            None
        );
        // A relation left out of duplicate_relations is not a match either way.
        let strict = DedupConfig {
            duplicate_relations: vec![Relation::Copy, Relation::Rewrite, Relation::Excerpt],
            ..DedupConfig::default()
        };
        assert_eq!(
            strict.judge_with(beyond, Some(whole), Some(topic(31, 0.95))),
            None
        );
    }

    #[test]
    fn names_and_figures_the_poorer_side_keeps_must_be_in_the_other() {
        use crate::slots::{SlotOverlap, SlotShare};
        let rule = DedupConfig {
            slot_min_name_share: 0.6,
            slot_min_figure_share: 0.5,
            ..DedupConfig::default()
        };
        let share = |shared, only_later, only_earlier| SlotShare {
            shared,
            only_later,
            only_earlier,
            complete: true,
        };
        let with_slots = |entities, figures| Similarity {
            slots: SlotOverlap {
                entities,
                figures,
                ..SlotOverlap::default()
            },
            ..sim(24, 4, 4, 500, 520)
        };
        // A rewrite: most names and figures kept by both.
        let rewrite = with_slots(share(8, 2, 3), share(4, 1, 0));
        assert!(rule.judge(1, Some(rewrite)).is_some());
        assert!(rule.judge(7, Some(rewrite)).is_some());
        // Two fillings of one form: the words agree, the names do not (3 of 10 = 30% < 60%).
        let sibling = with_slots(share(3, 7, 9), share(4, 0, 0));
        assert_eq!(rule.judge(1, Some(sibling)), None);
        assert_eq!(rule.judge(7, Some(sibling)), None);
        assert!(rule.explain(7, Some(sibling)).contains("other names"));
        // The figures alone disagree (1 of 4).
        let lots = with_slots(share(9, 1, 1), share(1, 3, 5));
        assert_eq!(rule.judge(7, Some(lots)), None);
        assert!(rule.explain(7, Some(lots)).contains("other figures"));
        // Too few kept to tell (2 < slot_min_kept): the rest decides.
        assert!(rule
            .judge(7, Some(with_slots(share(0, 2, 2), share(0, 0, 0))))
            .is_some());
        // Counts over samples (a text held more than it keeps) are not read.
        let sampled = Similarity {
            slots: SlotOverlap {
                figures: SlotShare {
                    complete: false,
                    ..share(1, 3, 5)
                },
                ..lots.slots
            },
            ..lots
        };
        assert!(rule.judge(7, Some(sampled)).is_some());
        // A much longer A (an update) is not read: its 16 names may leave B's out.
        let longer = Similarity {
            a_shingles: 1200,
            ..sibling
        };
        assert!(!rule.slots_overrule(&longer));
        // Both bars at 0: the check is off.
        assert!(!DedupConfig {
            slot_min_name_share: 0.0,
            slot_min_figure_share: 0.0,
            ..rule.clone()
        }
        .slots_overrule(&sibling));
    }

    #[test]
    fn template_bins_overrule_a_simhash_match() {
        let rule = DedupConfig::default();
        // Within the threshold, 10 bins were template; of the 10 left, 2 are shared: the two share
        // a template, not a report.
        let templated = Similarity {
            template_bins: 10,
            ..sim(2, 8, 8, 500, 500)
        };
        assert_eq!(rule.judge(1, Some(templated)), None);
        assert!(rule.explain(1, Some(templated)).contains("template"));
        // The same numbers without template bins: simhash decides.
        assert!(rule.judge(1, Some(sim(2, 8, 8, 500, 500))).is_some());
        // Mostly template and only two bins left: nothing but the template is known to be shared.
        let page = Similarity {
            template_bins: 20,
            ..sim(2, 0, 0, 300, 300)
        };
        assert_eq!(rule.judge(1, Some(page)), None);
        assert_eq!(rule.judge(9, Some(page)), None);
        // A few template bins (a common phrase) and the rest shared: still a duplicate.
        let phrase = Similarity {
            template_bins: 3,
            ..sim(27, 1, 1, 500, 500)
        };
        assert_eq!(
            rule.judge(1, Some(phrase)),
            Some((MatchRule::Simhash, Relation::Copy))
        );
        // The discount off: no bins are left out.
        let off = DedupConfig {
            template_discount: false,
            ..DedupConfig::default()
        };
        assert_eq!(off.template_bins(0xfff), 0);
        assert_ne!(rule.template_bins(0xfff), 0);
    }
}
