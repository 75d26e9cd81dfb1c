//! Article text -> weighted features -> 64-bit simhash. What determines a fingerprint (the
//! settings, the resource texts and the identity over them) is `fingerprint/identity.rs`; the
//! tables built from the texts are kept between starts by `fingerprint/image.rs`.

use crate::error::ResourceError;
use crate::headline;
use crate::simhash::{self, Fingerprint, SimhashAccumulator};
use crate::sketch::Sketch;
use crate::slots::{SlotCollector, SlotKind, Slots};
use crate::text::clean::Cleaner;
use crate::text::filter::{parse_stopwords, TokenFilter};
use crate::text::lexicon::Lexicon;
use crate::text::segment::{Segmenter, WordKey};
use crate::text::weigh::{quantize, tfidf, IdfTable};
use crate::topic::{Outline, OUTLINE_TERMS};
use jieba_rs::Jieba;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::path::Path;

mod identity;
pub mod image;
use identity::{read_resource, BUILTIN_DICT, BUILTIN_IDF, BUILTIN_STOPWORDS};
pub use identity::{FingerprintConfig, FingerprintIdentity, CLEANING_VERSION};
pub use image::{ImageConfig, ImageUse};

/// One weighted feature, for explanations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Feature {
    pub word: String,
    pub weight: f64,
    pub tf: u32,
    pub in_title: bool,
    pub idf: f64,
    #[serde(skip)]
    pub hash: u64,
}

/// Statistics of one distinct word of an article.
#[derive(Debug, Clone, Copy)]
struct Term {
    tf: u32,
    /// The word occurs in the title.
    in_title: bool,
    /// Where the word's first occurrence is (in the cleaned title or content), so that the
    /// statistics borrow nothing and their tables can be reused from article to article.
    at: Span,
}

/// A byte range of the cleaned title or content.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// The range is in the title (else in the content). Not `Term::in_title`: after a merge a
    /// term can be in the title while its recorded occurrence is in the content.
    of_title: bool,
    start: u32,
    len: u32,
}

impl Span {
    /// The span of `word`, a slice of `text`.
    fn of(word: &str, text: &str, of_title: bool) -> Span {
        // `word` is a subslice of `text`: the difference of their addresses is its offset.
        let start = (word.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
        Span {
            of_title,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            len: u32::try_from(word.len()).unwrap_or(0),
        }
    }

    /// The word this span points at ("" if it does not fit the texts, which cannot happen).
    fn word<'t>(&self, title: &'t str, content: &'t str) -> &'t str {
        let text = if self.of_title { title } else { content };
        let start = self.start as usize;
        text.get(start..start + self.len as usize)
            .unwrap_or_default()
    }
}

/// Per-thread buffers reused from article to article (allocation was ~8% of fingerprinting
/// time): the cleaned texts, cleaning's working space, the term tables and the weight list.
#[derive(Debug, Default)]
struct Scratch {
    title: String,
    content: String,
    spare: String,
    terms: Terms,
    weighted: Vec<(u64, i64)>,
    /// Every term's weight and place, for the outline's heaviest words.
    heavy: Vec<(f64, Span)>,
    slots: SlotCollector,
}

impl Scratch {
    /// Buffers grown past this (an unusually long article) are dropped after use rather than kept
    /// by the thread for good.
    const KEEP_BYTES: usize = 1 << 20;

    fn release_if_huge(&mut self) {
        let strings = self.title.capacity() + self.content.capacity() + self.spare.capacity();
        let tables = (self.terms.dict.capacity() + self.terms.other.capacity()) * 32
            + self.weighted.capacity() * 16
            + self.heavy.capacity() * 24;
        if strings + tables > Self::KEEP_BYTES {
            *self = Scratch::default();
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's scratch buffers: taken out for the call and put back after, so a
/// nested call (or a thread being torn down) simply gets fresh ones.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut scratch = SCRATCH
        .try_with(|cell| cell.take())
        .ok()
        .flatten()
        .unwrap_or_default();
    let result = f(&mut scratch);
    scratch.release_if_huge();
    let _ = SCRATCH.try_with(|cell| cell.set(Some(scratch)));
    result
}

/// The distinct features of an article.
#[derive(Debug, Default)]
struct Terms {
    dict: FxHashMap<u32, Term>,
    other: FxHashMap<u64, Term>,
}

impl Terms {
    fn len(&self) -> usize {
        self.dict.len() + self.other.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The result of fingerprinting one article.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprinted {
    pub fingerprint: Fingerprint,
    /// Number of distinct features that voted.
    pub features: usize,
    /// Character 4-gram sketch of the cleaned content, for the second check.
    pub sketch: Sketch,
    /// The cleaned content, kept only when it holds almost nothing of the title
    /// ([`headline::off_title`]: page chrome under a headline, or a text about something else):
    /// the decision's page-chrome check reads a candidate's title against it.
    pub off_title_text: Option<String>,
}

/// `text` when it is off `title` ([`headline::off_title`]), for [`Fingerprinted::off_title_text`].
fn off_title_text(title: &str, text: &str) -> Option<String> {
    headline::off_title(title, text).then(|| text.to_owned())
}

/// The article had no word left to fingerprint (only punctuation, emoji, stop words...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("nothing to fingerprint: no words left after cleaning, stop words and punctuation")]
pub struct NoFeatures;

/// Turns title + content into a fingerprint. Immutable after construction and `Sync`: one
/// instance serves every worker thread.
pub struct Fingerprinter {
    cleaner: Cleaner,
    segmenter: Segmenter,
    idf: IdfTable,
    unknown_idf: f64,
    config: FingerprintConfig,
    identity: FingerprintIdentity,
    image_use: ImageUse,
    /// [`Fingerprinter::prepare`] makes outlines (for the extension rule's topic check).
    outlines: bool,
}

impl Fingerprinter {
    /// Builds the fingerprinter from its resource texts (no start-up image).
    pub fn new(config: &FingerprintConfig) -> Result<Fingerprinter, ResourceError> {
        Self::load(config, None)
    }

    /// Builds the fingerprinter, reading its tables from the start-up image in `image_dir` when
    /// there is a valid one for these resources and this program, else building them from the
    /// texts and writing the image there for the next start (see [`image`]). Either way the
    /// fingerprints are the same; [`Fingerprinter::image_use`] tells which happened.
    pub fn load(
        config: &FingerprintConfig,
        image_dir: Option<&Path>,
    ) -> Result<Fingerprinter, ResourceError> {
        let (dict, dict_origin) = read_resource(&config.dict_path, BUILTIN_DICT, "dictionary")?;
        let (idf_text, idf_origin) = read_resource(&config.idf_path, BUILTIN_IDF, "IDF table")?;
        let (stop_text, _) =
            read_resource(&config.stopwords_path, BUILTIN_STOPWORDS, "stop-word list")?;
        if let Some(v) = config.unknown_idf {
            if !v.is_finite() || v < 0.0 {
                return Err(ResourceError::Invalid {
                    what: "configuration",
                    origin: "fingerprint.unknown_idf".into(),
                    message: format!("{v} must be finite and >= 0"),
                });
            }
        }
        if !config.title_weight.is_finite() || config.title_weight <= 0.0 {
            return Err(ResourceError::Invalid {
                what: "configuration",
                origin: "fingerprint.title_weight".into(),
                message: format!("{} must be finite and > 0", config.title_weight),
            });
        }
        let identity = FingerprintIdentity::of(config, &dict, &idf_text, &stop_text);
        let filter = TokenFilter::new(
            parse_stopwords(&stop_text),
            config.keep_single_chars,
            config.keep_numbers,
            config.keep_latin,
        );
        let key = image::key(&serde_json::to_vec(&identity).unwrap_or_default());
        let image_path = image_dir.map(|dir| image::path(dir, key));
        let cached = image_path.as_deref().and_then(|p| image::read(p, key));
        let (tables, image_use) = match (cached, image_path) {
            (Some(tables), Some(path)) => {
                image::touch(&path);
                (tables, ImageUse::Read(path))
            }
            (_, path) => {
                let tables = Self::build_tables(
                    &dict,
                    &dict_origin,
                    &idf_text,
                    idf_origin,
                    &filter,
                    config.unknown_idf,
                )?;
                let image_use = match path {
                    None => ImageUse::Off,
                    Some(path) => match image::write(&path, key, &tables) {
                        Ok(()) => ImageUse::Written(path),
                        Err(e) => ImageUse::NotWritten {
                            path,
                            error: e.to_string(),
                        },
                    },
                };
                (tables, image_use)
            }
        };
        let image::Tables {
            jieba,
            idf,
            lexicon,
        } = tables;
        let unknown_idf = config.unknown_idf.unwrap_or(idf.median());
        Ok(Fingerprinter {
            segmenter: Segmenter::new(
                jieba,
                filter,
                lexicon,
                config.hmm,
                config.pos_filter.clone(),
            ),
            cleaner: Cleaner::with_options(config.strip_boilerplate, config.fold_traditional),
            unknown_idf,
            idf,
            config: config.clone(),
            identity,
            image_use,
            outlines: true,
        })
    }

    /// The tables built from the resource texts.
    fn build_tables(
        dict: &str,
        dict_origin: &str,
        idf_text: &str,
        idf_origin: String,
        filter: &TokenFilter,
        unknown_idf: Option<f64>,
    ) -> Result<image::Tables, ResourceError> {
        let jieba = Jieba::with_dict(&mut dict.as_bytes()).map_err(|e| ResourceError::Invalid {
            what: "dictionary",
            origin: dict_origin.to_owned(),
            message: e.to_string(),
        })?;
        let idf = IdfTable::parse(idf_text).map_err(|message| ResourceError::Invalid {
            what: "IDF table",
            origin: idf_origin,
            message,
        })?;
        let unknown_idf = unknown_idf.unwrap_or(idf.median());
        let lexicon = Lexicon::build(&jieba, dict, filter, |hash| {
            idf.get_hashed(hash).unwrap_or(unknown_idf)
        });
        Ok(image::Tables {
            jieba,
            idf,
            lexicon,
        })
    }

    /// Whether the tables came from a start-up image (and which), or were built and imaged.
    pub fn image_use(&self) -> &ImageUse {
        &self.image_use
    }

    /// The same fingerprinter deciding every token from its string, without jieba's word ids
    /// (the path taken before the lexicon existed). The results are the same, only slower: it is
    /// the reference the fast path is tested against.
    #[doc(hidden)]
    pub fn without_word_ids(mut self) -> Fingerprinter {
        self.segmenter.without_word_ids();
        self
    }

    /// Number of dictionary words the lexicon knows to be features (for tests).
    #[doc(hidden)]
    pub fn lexicon_features(&self) -> usize {
        self.segmenter.lexicon().feature_count()
    }

    /// Whether [`Fingerprinter::prepare`] makes outlines: only a decision rule with the topic check
    /// reads them, and making one costs a copy of the cleaned text per article.
    pub fn with_outlines(mut self, outlines: bool) -> Fingerprinter {
        self.outlines = outlines;
        self
    }

    /// The fingerprint for the decision: with the outline when this fingerprinter makes them
    /// ([`Fingerprinter::with_outlines`], on by default), else with an empty one.
    pub fn prepare(
        &self,
        title: &str,
        content: &str,
    ) -> Result<(Fingerprinted, Outline), NoFeatures> {
        if self.outlines {
            self.fingerprint_with::<true>(title, content)
        } else {
            self.fingerprint_with::<false>(title, content)
        }
    }

    pub fn identity(&self) -> &FingerprintIdentity {
        &self.identity
    }

    pub fn config(&self) -> &FingerprintConfig {
        &self.config
    }

    /// Title and content cut to their caps (`MAX_TITLE_BYTES`, `max_content_bytes`): what every
    /// step after parsing reads, so that no field's size sets the cost of an article.
    fn capped<'t>(&self, title: &'t str, content: &'t str) -> (&'t str, &'t str) {
        (
            truncate_at_char_boundary(title, MAX_TITLE_BYTES),
            truncate_at_char_boundary(content, self.config.max_content_bytes),
        )
    }

    /// Cleaned (capped) title and content.
    pub fn clean(&self, title: &str, content: &str) -> (String, String) {
        let (title, content) = self.capped(title, content);
        (self.cleaner.clean(title), self.cleaner.clean(content))
    }

    /// Term statistics of an article (cleaned title and content), into `terms` (cleared first).
    fn term_stats(&self, title: &str, content: &str, terms: &mut Terms) {
        terms.dict.clear();
        terms.other.clear();
        terms.dict.reserve(content.len() / 16);
        for (text, in_title) in [(title, true), (content, false)] {
            self.segmenter.for_each_word(text, |word, key| {
                let new = || Term {
                    tf: 0,
                    in_title,
                    at: Span::of(word, text, in_title),
                };
                // The weight step reads each word's facts (or IDF slot) once: start loading them
                // at the first occurrence, while segmentation goes on.
                let t = match key {
                    WordKey::Dict(id) => terms.dict.entry(id).or_insert_with(|| {
                        self.segmenter.lexicon().prefetch(id);
                        new()
                    }),
                    WordKey::Other(hash) => terms.other.entry(hash).or_insert_with(|| {
                        self.idf.prefetch(hash);
                        new()
                    }),
                };
                t.tf += 1;
            });
        }
        // A dictionary word found without its id (through the HMM, say) is the same term as
        // when found with it: merge, so that a word never counts as two features.
        let Terms { dict, other } = terms;
        other.retain(|_, term| {
            match self.segmenter.jieba().word_id(term.at.word(title, content)) {
                Some(id) if self.segmenter.lexicon().is_feature(id) == Some(true) => {
                    let t = dict.entry(id).or_insert(Term { tf: 0, ..*term });
                    t.tf += term.tf;
                    // Titles are read first: a term is in the title iff either part is.
                    t.in_title |= term.in_title;
                    false
                }
                _ => true,
            }
        });
    }

    /// Calls `f(hash, idf, weight, term)` for every term.
    #[inline]
    fn for_each_weighted(&self, terms: &Terms, mut f: impl FnMut(u64, f64, f64, &Term)) {
        let weight =
            |idf: f64, term: &Term| tfidf(term.tf, idf, term.in_title, self.config.title_weight);
        for (&id, term) in &terms.dict {
            // Every `Dict` key was checked against the lexicon when it was made.
            let facts = self
                .segmenter
                .lexicon()
                .facts(id)
                .copied()
                .unwrap_or_default();
            f(facts.hash, facts.idf, weight(facts.idf, term), term);
        }
        for (&hash, term) in &terms.other {
            let idf = self.idf.get_hashed(hash).unwrap_or(self.unknown_idf);
            f(hash, idf, weight(idf, term), term);
        }
    }

    /// The event slots of the counted terms (see [`crate::slots`]): dictionary words tagged as
    /// proper names, words the HMM joined that the dictionary lacks (name-shaped ones) and
    /// figures, each with its count.
    fn slots(&self, s: &mut Scratch) -> Slots {
        let mut collector = std::mem::take(&mut s.slots);
        collector.clear();
        self.for_each_slot(s, |kind, hash, _, count| collector.add(kind, hash, count));
        let slots = collector.finish();
        s.slots = collector;
        slots
    }

    /// Calls `f(kind, hash, word, count)` with every slot of the counted terms.
    fn for_each_slot(&self, s: &Scratch, mut f: impl FnMut(SlotKind, u32, &str, u32)) {
        let lexicon = self.segmenter.lexicon();
        for (&id, term) in &s.terms.dict {
            if lexicon.is_entity(id) {
                let hash = lexicon.facts(id).map_or(0, |f| f.hash);
                let word = term.at.word(&s.title, &s.content);
                f(SlotKind::Entity, slot_hash(hash), word, term.tf);
            }
        }
        let jieba = self.segmenter.jieba();
        for (&hash, term) in &s.terms.other {
            let word = term.at.word(&s.title, &s.content);
            if crate::text::filter::classify(word) == crate::text::filter::TokenClass::Number {
                if let Some(figure) = crate::slots::figure(word) {
                    f(
                        SlotKind::Figure,
                        slot_hash(simhash::feature_hash(&figure)),
                        &figure,
                        term.tf,
                    );
                }
                continue;
            }
            // A dictionary word here (the string path, or one the HMM found) is a name by its
            // tag, as the lexicon's bit says on the id path; one the dictionary lacks is taken
            // for a name when it is name-shaped.
            let named = match jieba.word_id(word) {
                Some(id) => {
                    word.chars().nth(1).is_some()
                        && jieba.word_tag(id).is_some_and(crate::slots::is_entity_tag)
                }
                None => crate::slots::is_name_shaped(word),
            };
            if named {
                f(SlotKind::Entity, slot_hash(hash), word, term.tf);
            }
        }
    }

    /// The words of an article's kept slots, by hash (for `compare`, which names them).
    pub fn slot_words(&self, title: &str, content: &str) -> FxHashMap<u32, String> {
        with_scratch(|s| {
            self.clean_and_count(title, content, s);
            let mut words = FxHashMap::default();
            self.for_each_slot(s, |_, hash, word, _| {
                words.entry(hash).or_insert_with(|| word.to_owned());
            });
            words
        })
    }

    /// Cleans title and (capped) content into the scratch buffers, then collects term statistics.
    fn clean_and_count(&self, title: &str, content: &str, s: &mut Scratch) {
        let (title, content) = self.capped(title, content);
        self.cleaner.clean_into(title, &mut s.spare, &mut s.title);
        self.cleaner
            .clean_into(content, &mut s.spare, &mut s.content);
        self.term_stats(&s.title, &s.content, &mut s.terms);
    }

    /// Number of distinct features of an article (cleaning + segmentation + filtering, no weights).
    pub fn feature_count(&self, title: &str, content: &str) -> usize {
        with_scratch(|s| {
            self.clean_and_count(title, content, s);
            s.terms.len()
        })
    }

    /// Fingerprints one article (the hot path: no per-word allocation or string compare, and
    /// buffers reused from the previous article on this thread).
    pub fn fingerprint(&self, title: &str, content: &str) -> Result<Fingerprinted, NoFeatures> {
        self.fingerprint_with::<false>(title, content)
            .map(|(fingerprinted, _)| fingerprinted)
    }

    /// [`Fingerprinter::fingerprint`] plus the article's [`Outline`] (its cleaned content and
    /// heaviest words), which the decision reads for the topic check of an extension.
    pub fn fingerprint_outlined(
        &self,
        title: &str,
        content: &str,
    ) -> Result<(Fingerprinted, Outline), NoFeatures> {
        self.fingerprint_with::<true>(title, content)
    }

    /// The fingerprint, and with `OUTLINE` the outline (else an empty one, no allocation).
    fn fingerprint_with<const OUTLINE: bool>(
        &self,
        title: &str,
        content: &str,
    ) -> Result<(Fingerprinted, Outline), NoFeatures> {
        with_scratch(|s| {
            self.clean_and_count(title, content, s);
            if s.terms.is_empty() {
                return self
                    .by_characters(title, content, s)
                    .map(|(f, _)| (f, Outline::default()))
                    .ok_or(NoFeatures);
            }
            let slots = self.slots(s);
            let Scratch {
                terms,
                weighted,
                content,
                title: clean_title,
                heavy,
                ..
            } = s;
            weighted.clear();
            heavy.clear();
            self.for_each_weighted(terms, |hash, _, weight, term| {
                weighted.push((hash, quantize(weight)));
                if OUTLINE {
                    heavy.push((weight, term.at));
                }
            });
            let mut acc = SimhashAccumulator::default();
            acc.add_all(weighted);
            let outline = if OUTLINE {
                // The heaviest words, ties by word: the terms' table order is not the same from
                // one run to the next. Selected once at the end (a linear pass), not kept sorted
                // while counting.
                let heavier = |a: &(f64, Span), b: &(f64, Span)| {
                    b.0.total_cmp(&a.0).then_with(|| {
                        a.1.word(clean_title, content)
                            .cmp(b.1.word(clean_title, content))
                    })
                };
                if heavy.len() > OUTLINE_TERMS {
                    heavy.select_nth_unstable_by(OUTLINE_TERMS - 1, heavier);
                    heavy.truncate(OUTLINE_TERMS);
                }
                heavy.sort_unstable_by(heavier);
                let words = heavy
                    .iter()
                    .map(|&(weight, at)| (at.word(clean_title, content), weight));
                Outline::new(content.clone(), words)
            } else {
                Outline::default()
            };
            Ok((
                Fingerprinted {
                    fingerprint: acc.finish(),
                    features: terms.len(),
                    sketch: Sketch::of(content).with_slots(slots),
                    off_title_text: off_title_text(title, content),
                },
                outline,
            ))
        })
    }

    /// Fingerprint plus every feature sorted by weight (heaviest first, ties by word).
    pub fn analyze(
        &self,
        title: &str,
        content: &str,
    ) -> Result<(Fingerprinted, Vec<Feature>), NoFeatures> {
        with_scratch(|s| {
            self.clean_and_count(title, content, s);
            if s.terms.is_empty() {
                return self.by_characters(title, content, s).ok_or(NoFeatures);
            }
            let slots = self.slots(s);
            let mut acc = SimhashAccumulator::default();
            let mut features: Vec<Feature> = Vec::with_capacity(s.terms.len());
            self.for_each_weighted(&s.terms, |hash, idf, weight, term| {
                acc.add(hash, quantize(weight));
                features.push(Feature {
                    word: term.at.word(&s.title, &s.content).to_owned(),
                    weight,
                    tf: term.tf,
                    in_title: term.in_title,
                    idf,
                    hash,
                });
            });
            features.sort_by(|a, b| {
                b.weight
                    .total_cmp(&a.weight)
                    .then_with(|| a.word.cmp(&b.word))
            });
            Ok((
                Fingerprinted {
                    fingerprint: acc.finish(),
                    features: features.len(),
                    sketch: Sketch::of(&s.content).with_slots(slots),
                    off_title_text: off_title_text(title, &s.content),
                },
                features,
            ))
        })
    }

    /// The fingerprint of a text that cleaning emptied but that has real characters (letters or
    /// digits), e.g. the one-line alert `【大风蓝色预警信号】`, which cleaning drops as a bracketed
    /// dateline tag: its character bigrams (a lone character itself) are the features, all of the
    /// table's median weight, and its sketch is of the text with only width, case, script and
    /// markup normalised. None when cleaning left words (they were all stop words or one
    /// character: no features, as before) or there is no real character: nothing to fingerprint.
    /// Such texts were refused before, so no fingerprint already indexed changes.
    fn by_characters(
        &self,
        title: &str,
        content: &str,
        s: &Scratch,
    ) -> Option<(Fingerprinted, Vec<Feature>)> {
        if has_word(&s.title) || has_word(&s.content) {
            return None;
        }
        let (title, content) = self.normalized(title, content);
        let mut counts: FxHashMap<String, (u32, bool)> = FxHashMap::default();
        for (text, in_title) in [(&title, true), (&content, false)] {
            let chars: Vec<char> = text
                .chars()
                .filter(|&c| crate::text::clean::is_word_char(c))
                .collect();
            let grams: Vec<String> = if chars.len() == 1 {
                vec![chars[0].to_string()]
            } else {
                chars.windows(2).map(|w| w.iter().collect()).collect()
            };
            for g in grams {
                let e = counts.entry(g).or_insert((0, in_title));
                e.0 += 1;
                e.1 |= in_title;
            }
        }
        if counts.is_empty() {
            return None;
        }
        let mut acc = SimhashAccumulator::default();
        let mut features: Vec<Feature> = counts
            .into_iter()
            .map(|(word, (tf, in_title))| {
                let idf = self.unknown_idf;
                let weight = tfidf(tf, idf, in_title, self.config.title_weight);
                let hash = simhash::feature_hash(&word);
                acc.add(hash, quantize(weight));
                Feature {
                    word,
                    weight,
                    tf,
                    in_title,
                    idf,
                    hash,
                }
            })
            .collect();
        features.sort_by(|a, b| {
            b.weight
                .total_cmp(&a.weight)
                .then_with(|| a.word.cmp(&b.word))
        });
        Some((
            Fingerprinted {
                fingerprint: acc.finish(),
                features: features.len(),
                sketch: characters_sketch(&title, &content),
                off_title_text: off_title_text(&title, &content),
            },
            features,
        ))
    }

    /// Title and (capped) content with only width, case, script and markup normalised: the
    /// text of a fingerprint made from characters.
    fn normalized(&self, title: &str, content: &str) -> (String, String) {
        let (title, content) = self.capped(title, content);
        (
            self.cleaner.normalize_only(title),
            self.cleaner.normalize_only(content),
        )
    }

    /// The content sketch `fingerprint` gives (its slots come from segmenting), for a record
    /// whose fingerprint is already known (a restore).
    pub fn sketch(&self, title: &str, content: &str) -> Sketch {
        if let Ok(f) = self.fingerprint(title, content) {
            return f.sketch;
        }
        // No features: the sketch a refused record would have had.
        with_scratch(|s| {
            let (capped_title, capped) = self.capped(title, content);
            self.cleaner
                .clean_into(capped_title, &mut s.spare, &mut s.title);
            self.cleaner
                .clean_into(capped, &mut s.spare, &mut s.content);
            if has_word(&s.title) || has_word(&s.content) {
                return Sketch::of(&s.content);
            }
            let (title, content) = self.normalized(title, content);
            characters_sketch(&title, &content)
        })
    }

    /// The jieba instance the fingerprinter segments with (the vendored copy, which adds
    /// `cut_with_ids`; the benchmarks' baseline is the crates.io release instead).
    pub fn jieba(&self) -> &Jieba {
        self.segmenter.jieba()
    }
}

/// The 32-bit slot hash of a word's 64-bit feature hash.
fn slot_hash(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// Whether `text` holds a word character.
fn has_word(text: &str) -> bool {
    text.chars().any(crate::text::clean::is_word_char)
}

/// The sketch of a fingerprint made from characters: the content's characters, as for any
/// article; a title-only alert sketches its title.
fn characters_sketch(title: &str, content: &str) -> Sketch {
    Sketch::of(if has_word(content) { content } else { title })
}

/// The longest title read, in bytes (a real headline is under 300); the rest of a longer one is
/// ignored, as content past `max_content_bytes` is.
pub const MAX_TITLE_BYTES: usize = 4096;

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn truncate_at_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots come from the same pass as the fingerprint: dictionary proper names, names the
    /// dictionary lacks, figures (normalised), counted; a sketch of the text alone has none, and
    /// `sketch` (a restore) gives the same slots as `fingerprint`.
    #[test]
    fn slots_are_the_names_and_figures_of_the_segmentation_pass() {
        let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
        let title = "北京市朝阳区法院宣判一起诈骗案";
        let content = "北京市朝阳区人民法院今天公开宣判被告人韩雨桐诈骗一案，韩雨桐被判处有期徒刑\
                       3年，并处罚金20,000元。法院审理查明，2019年韩雨桐以投资为名骗取多名\
                       被害人共计1,200,000元。";
        let f = fp.fingerprint(title, content).unwrap();
        let slots = f.sketch.slots;
        let words = fp.slot_words(title, content);
        let names: Vec<&str> = slots
            .entities()
            .iter()
            .filter_map(|(h, _)| words.get(h).map(String::as_str))
            .collect();
        let figures: Vec<&str> = slots
            .figures()
            .iter()
            .filter_map(|(h, _)| words.get(h).map(String::as_str))
            .collect();
        assert!(
            names.contains(&"韩雨桐"),
            "a name the dictionary lacks: {names:?}"
        );
        assert!(names.contains(&"北京市"), "a dictionary place: {names:?}");
        // jieba cuts a figure at its thousands separator: it counts by its leading group.
        for figure in ["20", "2019", "200"] {
            assert!(figures.contains(&figure), "{figure} in {figures:?}");
        }
        assert!(
            !figures.contains(&"3"),
            "one digit is no figure: {figures:?}"
        );
        assert!(
            !figures.contains(&"0"),
            "nor a separator's zeros: {figures:?}"
        );
        // The defendant is named three times: the heaviest name.
        assert_eq!(
            words.get(&slots.entities()[0].0).map(String::as_str),
            Some("韩雨桐")
        );
        assert_eq!(slots.entities()[0].1, 3);
        assert_eq!(fp.sketch(title, content), f.sketch);
        assert!(Sketch::of(content).slots.is_empty());
        // The bytes carry them (the index and the `newsdedup.sketch` header).
        assert_eq!(Sketch::from_bytes(&f.sketch.to_bytes()), Some(f.sketch));
    }

    /// One hostile record must not stall the decisions behind it: the worst input of each cleaning
    /// step (and of segmentation) at 1 MiB, as content and as title, is fingerprinted in a small,
    /// bounded time. Quadratic steps took a minute here (unclosed `<!--` at 900 KB: 65 s); the
    /// bound is generous so that a loaded CI machine never trips it, and the bound is on the whole
    /// prepare, not a benchmark figure.
    #[test]
    fn the_worst_input_of_every_cleaning_step_is_fingerprinted_in_linear_time() {
        let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
        let mib = 1 << 20;
        let fill = |unit: &str| unit.repeat(mib / unit.len());
        let hostile = [
            ("unclosed comments", fill("<!--")),
            ("unclosed comments between words", fill("<!--新闻")),
            ("unclosed tags", fill("<a")),
            (
                "tags just over the length cap",
                fill(&format!("<a{}", "x".repeat(4100))),
            ),
            ("comment closers", fill("-->")),
            ("entity starts", fill("&#12345678")),
            ("attribute starts", fill("a=\"")),
            ("url starts", fill("http://")),
            ("www starts", fill("www.")),
            ("whitespace", fill(" \u{3000}\t")),
            ("short lines", fill("来源：\n")),
            ("full width", fill("ＡＢＣ１２３")),
            ("traditional", fill("經濟發展")),
            ("one long word", fill("新")),
            ("read more", fill("阅读全文")),
        ];
        for (what, text) in &hostile {
            for (title, content) in [("标题", text.as_str()), (text.as_str(), "正文内容")] {
                let start = std::time::Instant::now();
                let _ = fp.prepare(title, content);
                let _ = fp.sketch(title, content);
                let took = start.elapsed();
                assert!(
                    took < std::time::Duration::from_secs(5),
                    "{what} ({} bytes, in the {}): {took:?}",
                    text.len(),
                    if title.len() > 100 {
                        "title"
                    } else {
                        "content"
                    }
                );
            }
        }
    }

    /// The lexicon's verdict, hash and IDF for every word of the built-in dictionary are what the
    /// string path computes for that word.
    #[test]
    fn prepare_makes_the_outline_only_when_asked_and_the_same_fingerprint_either_way() {
        let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
        let (title, content) = (
            "北湖镇整治河道",
            "北湖镇组织专家开展现场核查，对河道问题逐一整改并公开结果。",
        );
        let (with, outline) = fp.prepare(title, content).unwrap();
        assert_eq!(with, fp.fingerprint(title, content).unwrap());
        let heavy: Vec<&str> = outline.terms().map(|(word, _)| word).collect();
        assert!(
            heavy.contains(&"北湖") && heavy.contains(&"河道"),
            "{heavy:?}"
        );
        // The heaviest first, and no more than the outline keeps.
        let weights: Vec<f64> = outline.terms().map(|(_, w)| w).collect();
        assert!(weights.windows(2).all(|w| w[0] >= w[1]), "{weights:?}");
        assert!(weights.len() <= crate::topic::OUTLINE_TERMS);
        let fp = fp.with_outlines(false);
        let (without, outline) = fp.prepare(title, content).unwrap();
        assert_eq!(without, with);
        assert_eq!(outline, Outline::default());
    }

    #[test]
    fn lexicon_agrees_with_the_string_path_for_every_dictionary_word() {
        let fp = Fingerprinter::new(&FingerprintConfig::default()).unwrap();
        let (mut features, mut words) = (0, 0);
        for word in BUILTIN_DICT
            .lines()
            .filter_map(|l| l.split_whitespace().next())
        {
            words += 1;
            let id = fp
                .jieba()
                .word_id(word)
                .expect("every dictionary word has an id");
            let hash = crate::simhash::feature_hash(word);
            let keep = fp.segmenter.filter().keep(word, hash);
            assert_eq!(fp.segmenter.lexicon().is_feature(id), Some(keep), "{word}");
            if keep {
                features += 1;
                let facts = fp.segmenter.lexicon().facts(id).unwrap();
                assert_eq!(facts.hash, hash, "{word}");
                let idf = fp.idf.get_hashed(hash).unwrap_or(fp.unknown_idf);
                assert_eq!(facts.idf.to_bits(), idf.to_bits(), "{word}");
            }
        }
        assert!(words > 300_000 && features > 100_000, "{words} {features}");
        assert_eq!(fp.lexicon_features(), features);
        // Ids past the tables are left to the string path.
        assert_eq!(fp.segmenter.lexicon().is_feature(u32::MAX), None);
    }
}
