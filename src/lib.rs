//! newsdedup: near-duplicate detection for a news ingestion pipeline.
//!
//! The core is pure and broker-free: [`article`] (validate input) -> [`fingerprint`] (clean, segment,
//! weigh, simhash) -> [`dedup`] (lookup + decision + insert against an [`index::ArticleStore`]).
//! RocksDB ([`index::RocksIndex`]) and Kafka sit at the edges.

pub mod article;
pub mod audit;
pub mod batch;
pub mod compare;
pub mod components;
pub mod config;
pub mod correct;
pub mod correction;
pub mod dedup;
pub mod error;
pub mod fingerprint;
pub mod headline;
pub mod index;
pub mod kafka;
pub mod lines;
pub mod metrics;
pub mod output;
pub mod pipeline;
pub mod progress;
pub mod replay;
pub mod replica;
pub mod restore;
pub mod runner;
pub mod segments;
pub mod service;
pub mod settings;
pub mod signing;
pub mod simhash;
pub mod sketch;
pub mod slots;
pub mod text;
pub mod time;
pub mod topic;
