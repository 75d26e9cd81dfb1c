//! The tests that run `newsdedup` against a real Kafka-protocol broker (Tansu, started by each
//! test with scripts/broker.sh), in one binary: the service, chaos and hardening, retention, TLS, SASL,
//! Prometheus scraping, replay, replicas, the one-writer rule and the audit. Run one module with
//! `cargo test --release --test broker kafka_service::`.

#[path = "../common/mod.rs"]
mod common;

mod audit;
mod corrections;
mod fetch_starvation;
mod kafka_chaos;
mod kafka_hardening;
mod kafka_retention;
mod kafka_sasl;
mod kafka_service;
mod kafka_stop;
mod kafka_tls;
mod prometheus_scrape;
mod replay;
mod replica;
mod single_writer;
