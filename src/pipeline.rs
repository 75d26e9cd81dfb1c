//! The two stages every input goes through, shared by `batch` and the Kafka consumer:
//! `prepare` (parse + validate + fingerprint: pure, parallel, could run on another machine) and
//! `Decider::decide` (index lookup + insert: serial, single writer).

use crate::article::{Article, InvalidArticle, InvalidReason, ReadRules};
use crate::dedup::{Decision, DecisionInput, Deduper};
use crate::error::IndexError;
use crate::fingerprint::{Fingerprinted, Fingerprinter};
use crate::index::ArticleStore;
use crate::output;
use crate::topic::Outline;

/// What the decision stage needs of a valid article (the record itself is not kept).
#[derive(Debug, Clone, PartialEq)]
pub struct ArticleRef {
    pub id: String,
    pub url: Option<String>,
    /// "" when the article has no title.
    pub title: String,
    /// `published_at` read as a time (Unix ms).
    pub published_ms: Option<i64>,
    /// The timestamp of the record that carried the article (Kafka), if any: its event time
    /// when it has no readable `published_at`. Set by the edge ([`Prepared::set_record_time`]).
    pub record_time_ms: Option<i64>,
}

/// Result of the parallel stage.
#[derive(Debug)]
// Nearly every record is valid: boxing the large variant would only add an allocation per record.
#[allow(clippy::large_enum_variant)]
pub enum Prepared {
    Valid {
        article: ArticleRef,
        fingerprint: Fingerprinted,
        /// The cleaned content and heaviest words, for the topic check of an extension.
        outline: Outline,
        /// The article's output record so far (`output::open_record`), rendered here because
        /// this stage runs in parallel and the decision stage does not.
        open_record: Vec<u8>,
    },
    Invalid(InvalidArticle),
}

impl Prepared {
    /// Records the timestamp of the record that carried the article (Kafka's record timestamp).
    pub fn set_record_time(&mut self, record_time_ms: Option<i64>) {
        if let Prepared::Valid { article, .. } = self {
            article.record_time_ms = record_time_ms;
        }
    }
}

/// Parses, validates and fingerprints one raw record.
pub fn prepare(raw: &[u8], fingerprinter: &Fingerprinter, rules: &ReadRules) -> Prepared {
    let article = match Article::parse(raw, rules.max_bytes) {
        Ok(a) => a,
        Err(e) => return Prepared::Invalid(e),
    };
    let open_record = match crate::output::open_record(&article) {
        Ok(open) => open,
        Err(e) => {
            return Prepared::Invalid(InvalidArticle {
                reason: InvalidReason::BadJson,
                message: format!("the article cannot be written back as JSON: {e}"),
                id: Some(article.id().to_owned()),
            })
        }
    };
    match fingerprinter.fingerprint_outlined(article.title(), article.content()) {
        Ok((fingerprint, outline)) => Prepared::Valid {
            article: ArticleRef {
                id: article.id().to_owned(),
                url: article.url().map(str::to_owned),
                title: article.title().to_owned(),
                published_ms: article.published_ms(rules.published_at_offset),
                record_time_ms: None,
            },
            fingerprint,
            outline,
            open_record,
        },
        Err(e) => Prepared::Invalid(InvalidArticle {
            reason: InvalidReason::NoFeatures,
            message: e.to_string(),
            id: Some(article.id().to_owned()),
        }),
    }
}

/// Result of the serial stage: the output record (one JSON object, no newline) and what happened.
#[derive(Debug)]
// One per record, moved once from the decision to the output: boxing the decision would cost an
// allocation per record for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Decided {
        /// The article id (the output record's key).
        id: String,
        record: Vec<u8>,
        decision: Decision,
    },
    Invalid {
        record: Vec<u8>,
        error: InvalidArticle,
    },
}

impl Outcome {
    pub fn record(&self) -> &[u8] {
        match self {
            Outcome::Decided { record, .. } | Outcome::Invalid { record, .. } => record,
        }
    }
}

/// Decides a prepared article. `line` (1-based) is included in invalid records when known.
pub fn decide<S: ArticleStore>(
    deduper: &mut Deduper<S>,
    prepared: Prepared,
    line: Option<u64>,
    now_ms: u64,
) -> Result<Outcome, IndexError> {
    match prepared {
        Prepared::Invalid(error) => Ok(Outcome::Invalid {
            record: output::invalid_record(line, error.id.as_deref(), &error.to_string())
                .to_string()
                .into_bytes(),
            error,
        }),
        Prepared::Valid {
            article,
            fingerprint,
            outline,
            open_record,
        } => {
            let input = DecisionInput {
                id: &article.id,
                url: article.url.as_deref(),
                title: (!article.title.is_empty()).then_some(article.title.as_str()),
                fingerprint: fingerprint.fingerprint,
                sketch: Some(&fingerprint.sketch),
                outline: Some(&outline),
                published_ms: article.published_ms,
                record_time_ms: article.record_time_ms,
            };
            let decision = deduper.decide(&input, now_ms)?;
            Ok(Outcome::Decided {
                id: article.id,
                record: output::close_record(open_record, &decision),
                decision,
            })
        }
    }
}
