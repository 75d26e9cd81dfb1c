//! The two stages every input goes through, shared by `batch` and the Kafka consumer:
//! `prepare` (parse + validate + fingerprint: pure, parallel, could run on another machine) and
//! `Decider::decide` (index lookup + insert: serial, single writer).

use crate::article::{Article, InvalidArticle, InvalidReason};
use crate::dedup::{self, Decision, DecisionInput, Deduper};
use crate::error::IndexError;
use crate::fingerprint::{Fingerprinted, Fingerprinter};
use crate::index::ArticleStore;
use serde_json::Value;

/// Result of the parallel stage.
#[derive(Debug)]
pub enum Prepared {
    Valid {
        article: Article,
        fingerprint: Fingerprinted,
    },
    Invalid(InvalidArticle),
}

/// Parses, validates and fingerprints one raw record.
pub fn prepare(raw: &[u8], fingerprinter: &Fingerprinter, max_bytes: usize) -> Prepared {
    let article = match Article::parse(raw, max_bytes) {
        Ok(a) => a,
        Err(e) => return Prepared::Invalid(e),
    };
    match fingerprinter.fingerprint(article.title(), article.content()) {
        Ok(fingerprint) => Prepared::Valid {
            article,
            fingerprint,
        },
        Err(e) => Prepared::Invalid(InvalidArticle {
            reason: InvalidReason::NoFeatures,
            message: e.to_string(),
            id: Some(article.id().to_owned()),
        }),
    }
}

/// Result of the serial stage: the output record and what happened.
#[derive(Debug)]
pub enum Outcome {
    Decided {
        record: Value,
        decision: Decision,
    },
    Invalid {
        record: Value,
        error: InvalidArticle,
    },
}

impl Outcome {
    pub fn record(&self) -> &Value {
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
            record: dedup::invalid_record(line, error.id.as_deref(), &error.to_string()),
            error,
        }),
        Prepared::Valid {
            article,
            fingerprint,
        } => {
            let title = article.title();
            let input = DecisionInput {
                id: article.id(),
                url: article.url(),
                title: (!title.is_empty()).then_some(title),
                fingerprint: fingerprint.fingerprint,
                sketch: Some(&fingerprint.sketch),
            };
            let decision = deduper.decide(&input, now_ms)?;
            Ok(Outcome::Decided {
                record: dedup::annotate(article.into_fields(), &decision),
                decision,
            })
        }
    }
}
