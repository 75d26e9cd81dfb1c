//! The tests that need no broker, in one binary (RocksDB and librdkafka are linked once): the
//! layers, the command line end to end, the decision core, the index, the engine without Kafka,
//! a bounded fuzz of hostile records, quality floors, retention, the vendored jieba-rs and what the container image relies on. Run one module with
//! `cargo test --release --test core cli_batch::`.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod cli_batch;
mod container;
mod corrections;
mod dedup_core;
mod docs_match_code;
mod hostile_records;
mod index_equivalence;
mod kafka_engine;
mod quality_regression;
mod retention;
mod vendored_jieba;
