//! `newsdedup run` (and `standby`): wires the index, the engine, the Kafka clients, the metrics
//! endpoint and the signal handlers together, and runs until SIGINT/SIGTERM (a stop within
//! `--shutdown-timeout-ms`: exit 0 when everything decided was committed, 75 when work was left
//! for the next start) or a fatal error (exit non-zero).

use crate::config::Config;
use crate::correction::Acceptance;
use crate::fingerprint::{Fingerprinter, ImageUse};
use crate::index::RocksIndex;
use crate::kafka::consumer::{self, ConsumeParams, ConsumerCtx, LoopExit, Shared};
use crate::kafka::corrections::{Corrections, CorrectionsParams};
use crate::kafka::engine::{Engine, LocalPreparer, OutputSink};
use crate::kafka::poll_loop;
use crate::kafka::producer::{self, Acks, OutputProducer, ProducerSink};
use crate::kafka::record;
use crate::kafka::stop::{self, IncompleteStop, Phase, StopReport, StopRequest};
use crate::kafka::tracker::OffsetTracker;
use crate::kafka::watch::{Watch, WatchConfig};
use crate::kafka::{Health, ServiceClientContext, State};
use crate::pipeline::DecisionStage;
use crate::signing::SigningKeys;
use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use rdkafka::consumer::Consumer;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::replica::{self, StandbyStatus, TopicSource};
use crate::settings::{RunArgs, Settings};
use std::collections::HashSet;

/// The variable of the log filter (`info`, `newsdedup=debug`, ...; else `RUST_LOG`, else `info`).
pub const LOG_ENV: &str = "NEWSDEDUP_LOG";

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_ENV)
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// Runs the service. Returns Ok after a clean SIGINT/SIGTERM shutdown.
pub fn run(args: RunArgs, given: &HashSet<String>, config: Config) -> Result<()> {
    let settings = Settings::resolve(&args, given, &config, process_env())
        .context("invalid settings for `run`")?;
    start_logging(&settings);
    let correction_acceptance = Acceptance {
        keys: SigningKeys::load(&settings.components.corrections)
            .context("invalid [corrections] keys")?,
        audience: settings.service.group_id.clone(),
    };
    let runtime = io_runtime()?;

    RocksIndex::lower_background_priority()
        .context("cannot lower the index's background priority")?;
    // The index first: a second process on the same directory fails here, before touching Kafka.
    let (fingerprinter, mut index) = open_index(&settings)?;
    let health = Arc::new(Health::new(settings.progress_timeout()));
    serve_http(&runtime, &settings, &health)?;
    let stop = install_signal_handlers(&runtime, settings.shutdown_timeout())?;
    take_over(&settings, &fingerprinter, &mut index)?;
    let decided_before = crate::index::ArticleStore::counts(&index).articles > 0;
    let params = ConsumeParams {
        decided_before,
        ..settings.consume_params()
    };
    let corrections_position = index.corrections_position(&settings.service.corrections_topic);

    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    // Set when in-flight work is abandoned (shutdown timeout): the sink then stops retrying.
    let abandon = Arc::new(AtomicBool::new(false));
    let (correction_acks, acknowledged) = crossbeam_channel::unbounded();
    let (producer, sink) = producer_sink(
        &settings,
        &runtime,
        &tracker,
        &health,
        &abandon,
        Some(correction_acks),
    )?;
    // One of several members, each with its own index: its corrections position is its index's.
    let member = match settings.exclusive_grace() {
        Some(_) => None,
        None => Some(index.instance_id().context("cannot read the index's id")?),
    };
    let mut engine = start_engine(
        settings.components.deduper(index),
        fingerprinter,
        correction_acceptance.clone(),
        &settings,
        sink,
        &abandon,
    );
    let consumer = create_consumer(&settings, &tracker, &engine, &health, &stop)?;
    consumer
        .subscribe(&[&settings.service.input_topic])
        .with_context(|| format!("cannot subscribe to {}", settings.service.input_topic))?;
    log_wiring(&settings, "consuming");
    let corrections = match engine.submitter() {
        Some(jobs) => Some(Corrections::spawn(
            CorrectionsParams {
                topic: settings.service.corrections_topic.clone(),
                properties: settings.consumer_properties.clone(),
                service_group: settings.service.group_id.clone(),
                member,
                index_holds_articles: decided_before,
                acceptance: correction_acceptance,
            },
            corrections_position,
            jobs,
            acknowledged,
            consumer.context().shared.clone(),
        )?),
        None => None,
    };

    // Observes the group for the one-active-instance rule and for a member left without work.
    let watch = Watch::spawn(
        consumer.clone(),
        consumer.context().shared.clone(),
        WatchConfig {
            group: settings.service.group_id.clone(),
            earliest: settings.starts_at_earliest(),
            plain_bootstrap: settings.plaintext_bootstrap(),
        },
    );
    let exit = poll_loop::run_loop(&consumer, &mut engine, &params);

    if let Some(corrections) = corrections {
        // Before the engine closes: the loop may hold a sender of its queue.
        corrections.close();
    }
    let exit = close(Some(producer), consumer, engine, exit, runtime, Some(watch));
    match exit {
        LoopExit::Shutdown(report) => {
            health.set_state(State::Stopped);
            if report.clean() {
                Ok(())
            } else {
                Err(IncompleteStop(report.summary()).into())
            }
        }
        LoopExit::Fatal { error, .. } => {
            bail!("the service stopped after a fatal error: {error}")
        }
    }
}

/// The output topics as a standby reads them, with the consumer's connection properties.
fn output_topics(settings: &Settings) -> TopicSource {
    TopicSource {
        properties: settings.consumer_properties.clone(),
        topics: vec![
            settings.service.unique_topic.clone(),
            settings.service.duplicate_topic.clone(),
        ],
        corrections_topic: Some(settings.service.corrections_topic.clone()),
    }
}

/// On a directory a standby kept (it holds output-topic positions): reads the output topics to
/// their end first, so that every record whose input offset the failed instance committed is in
/// the index (its output was acknowledged before the commit), then forgets the positions: from
/// here on the index is this instance's.
fn take_over(
    settings: &Settings,
    fingerprinter: &Fingerprinter,
    index: &mut RocksIndex,
) -> Result<()> {
    if index.positions()?.is_empty() {
        return Ok(());
    }
    tracing::info!(
        "{} was kept by a standby: catching up with {} and {} before joining group {}",
        settings.service.index_dir.display(),
        settings.service.unique_topic,
        settings.service.duplicate_topic,
        settings.service.group_id
    );
    let summary = replica::rebuild_from_topics(
        index,
        fingerprinter,
        &output_topics(settings),
        (&settings.components).into(),
        Some(Duration::from_secs(5)),
        "takeover",
    )
    .context("cannot catch up with the output topics before taking over")?;
    index.clear_positions()?;
    let corrections = &settings.service.corrections_topic;
    let member = match settings.exclusive_grace() {
        Some(_) => None,
        None => Some(index.instance_id()?),
    };
    let group = crate::kafka::corrections::group_id(&settings.service.group_id, member.as_deref());
    match crate::kafka::corrections::advance_to_group(
        &settings.consumer_properties,
        &group,
        corrections,
        &index.corrections_position(corrections),
    ) {
        Ok(moved) if moved.is_empty() => {}
        Ok(moved) => tracing::info!(
            "takeover: corrections position moved to group {group}'s {moved:?} (corrections refused there leave no output record)"
        ),
        // Only refusals read again, and refused again.
        Err(e) => tracing::warn!(
            "takeover: cannot read group {group}'s position in {corrections}: {e:#}; corrections refused by the failed instance are read again and refused again"
        ),
    }
    tracing::info!(
        "takeover: caught up in {:.1}s ({} records read, {} articles added, {} replaced); joining the group",
        summary.elapsed.as_secs_f64(),
        summary.records,
        summary.inserted,
        summary.replaced
    );
    Ok(())
}

/// Runs a standby: follows the output topics into its own index until SIGINT/SIGTERM, serving
/// its lag on /metrics and /ready (200 once caught up and at most `max_ready_lag` records
/// behind). `newsdedup run` with the same settings on its directory takes over.
pub fn standby(
    args: RunArgs,
    given: &HashSet<String>,
    config: Config,
    max_ready_lag: u64,
) -> Result<()> {
    let settings = Settings::resolve(&args, given, &config, process_env())
        .context("invalid settings for `standby`")?;
    start_logging(&settings);
    let runtime = io_runtime()?;
    // The standby often shares a machine with the service it follows: its flushes wait too.
    RocksIndex::lower_background_priority()
        .context("cannot lower the index's background priority")?;
    let (fingerprinter, mut index) = open_index(&settings)?;
    let status = Arc::new(StandbyStatus::default());
    let (s1, s2) = (status.clone(), status.clone());
    serve_endpoints(
        &runtime,
        &settings,
        Arc::new(move |_| {
            let failed = s1.failed.load(Ordering::SeqCst);
            let body = serde_json::json!({
                "status": if failed { "failed" } else { "ok" },
                "state": "standby",
                "lag_records": s1.lag.load(Ordering::Relaxed),
                "detail": if failed { "see the log" } else { "following the output topics" },
            });
            (if failed { 503 } else { 200 }, body.to_string())
        }),
        Arc::new(move |_| {
            let lag = s2.lag.load(Ordering::Relaxed);
            let (status, why) = if !s2.caught_up_once.load(Ordering::SeqCst) {
                ("catching_up", format!("catching up: {lag} records behind"))
            } else if lag > max_ready_lag {
                (
                    "behind",
                    format!("behind: {lag} records (more than {max_ready_lag})"),
                )
            } else {
                ("ready", format!("caught up: {lag} records behind"))
            };
            let body = serde_json::json!({
                "status": status,
                "state": "standby",
                "lag_records": lag,
                "max_ready_lag": max_ready_lag,
                "detail": why,
            });
            (if status == "ready" { 200 } else { 503 }, body.to_string())
        }),
    )?;
    let stop = install_signal_handlers(&runtime, settings.shutdown_timeout())?;
    let result = replica::follow(
        &mut index,
        &fingerprinter,
        &output_topics(&settings),
        (&settings.components).into(),
        stop.flag(),
        &status,
        Duration::from_secs(2),
    );
    drop(index);
    runtime.shutdown_timeout(Duration::from_secs(2));
    let summary = result.context("the standby stopped")?;
    tracing::info!(
        "standby stopped cleanly: {} records read, {} articles added, {} replaced",
        summary.records,
        summary.inserted,
        summary.replaced
    );
    Ok(())
}

/// The process environment, for the `NEWSDEDUP_KAFKA_*` variables of [`Settings::resolve`].
pub fn process_env() -> impl Iterator<Item = (String, String)> {
    // vars_os: a non-UTF-8 variable elsewhere in the environment must not panic here.
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
}

/// Starts logging (stderr, `NEWSDEDUP_LOG`) and logs the settings' warnings.
pub(crate) fn start_logging(settings: &Settings) {
    init_logging();
    for w in &settings.components.warnings {
        tracing::warn!("{w}");
    }
}

/// The runtime of the producer's deliveries, the HTTP endpoint and the signal handlers.
pub(crate) fn io_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("newsdedup-io")
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")
}

/// The Kafka producer and the sink on it, which marks input offsets done in `tracker` once
/// their output is acknowledged.
pub(crate) fn producer_sink(
    settings: &Settings,
    runtime: &tokio::runtime::Runtime,
    tracker: &Arc<Mutex<OffsetTracker>>,
    health: &Arc<Health>,
    abandon: &Arc<AtomicBool>,
    corrections: Option<crossbeam_channel::Sender<(i32, i64, record::OutputKind)>>,
) -> Result<(OutputProducer, ProducerSink)> {
    let producer = producer::create_producer(
        &settings.producer_properties,
        ServiceClientContext {
            client: "producer",
            health: health.clone(),
        },
    )
    .context("cannot create the Kafka producer (check -X properties)")?;
    let sink = ProducerSink::new(
        producer.clone(),
        settings.topics(),
        runtime.handle().clone(),
        Arc::new(match corrections {
            Some(tx) => Acks::new(tracker.clone(), health.clone()).with_corrections(tx),
            None => Acks::new(tracker.clone(), health.clone()),
        }),
        abandon.clone(),
        settings.max_retry(),
    );
    Ok((producer, sink))
}

/// Starts the engine: `decider` on the decision thread, the fingerprint stage on
/// `settings.components.threads` workers, outputs to `sink`.
pub(crate) fn start_engine<D: DecisionStage + 'static, K: OutputSink>(
    decider: D,
    fingerprinter: Fingerprinter,
    correction_acceptance: Acceptance,
    settings: &Settings,
    sink: K,
    abandon: &Arc<AtomicBool>,
) -> Engine {
    let preparer = Arc::new(LocalPreparer {
        fingerprinter,
        read_rules: settings
            .components
            .read_rules(settings.service.max_article_bytes),
        max_output_bytes: settings.max_output_bytes(),
        correction_acceptance,
    });
    Engine::start(
        decider,
        preparer,
        sink,
        settings.components.threads,
        abandon.clone(),
    )
}

/// The rest of the stop after the consumer loop (which drained and committed), each phase by
/// its deadline in the stop's budget: leave the consumer group (the group watch ended first),
/// close the engine (final WAL sync, RocksDB closed), stop the runtime, destroy the Kafka
/// clients. Logs the summary line and returns `exit` with the stop's report completed.
pub(crate) fn close(
    producer: Option<OutputProducer>,
    consumer: Arc<consumer::InputConsumer>,
    engine: Engine,
    mut exit: LoopExit,
    runtime: tokio::runtime::Runtime,
    watch: Option<Watch>,
) -> LoopExit {
    let budget = exit.stop().budget;
    let leave_until = budget.deadline(Phase::Leave);
    // The watch only observes; one stuck in a request to a broker that does not answer is
    // left to end with the process.
    if let Some(watch) = watch {
        watch.stop_by(leave_until);
    }
    let left = leave_group(consumer, leave_until);
    exit.stop_mut().left_group = Some(left);
    if !left {
        tracing::warn!(
            "stop: {} cut short after {:.1}s: the consumer did not close in time (no answer from the group coordinator); the group gives this member's partitions to another member after session.timeout.ms",
            Phase::Leave.as_str(),
            budget.elapsed().as_secs_f64()
        );
    }

    if exit.stop().abandoned > 0 {
        engine.handle().abandon();
    }
    engine.shutdown();
    runtime.shutdown_timeout(Duration::from_secs(2).min(budget.left(Phase::Close)));
    // Destroying the producer waits for its threads (and purges what it still holds).
    let destroyed = stop::finish_by("producer-close", budget.deadline(Phase::Close), move || {
        drop(producer);
    });
    if destroyed.is_none() {
        tracing::warn!(
            "stop: {} cut short after {:.1}s: the Kafka producer did not close in time",
            Phase::Close.as_str(),
            budget.elapsed().as_secs_f64()
        );
    }
    log_summary(&exit);
    exit
}

/// Leaves the consumer group (revoke callback, LeaveGroup) and destroys the consumer, by
/// `deadline`; false if that is not done by then. rdkafka's drop closes the consumer and waits
/// for the close without bound, so it runs on a thread of its own.
fn leave_group(consumer: Arc<consumer::InputConsumer>, deadline: Instant) -> bool {
    match Arc::try_unwrap(consumer) {
        Ok(consumer) => stop::finish_by("leave-group", deadline, move || drop(consumer)).is_some(),
        Err(consumer) => {
            // A thread stuck in a request to a broker that does not answer (a commit, the
            // group watch) still holds it: close it from here, and never destroy it (the
            // process ends soon).
            let closed = close_by(&consumer, deadline);
            std::mem::forget(consumer);
            closed
        }
    }
}

/// Closes the consumer (leaving its group), serving the close's callbacks, until `deadline`.
fn close_by(consumer: &consumer::InputConsumer, deadline: Instant) -> bool {
    if let Err(e) = consumer.close_queue() {
        // No group to leave, or nothing a close could do.
        tracing::debug!("closing the consumer: {e}");
        return true;
    }
    while !consumer.closed() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = consumer.poll(left.min(Duration::from_millis(100)));
    }
    true
}

fn log_summary(exit: &LoopExit) {
    let report: &StopReport = exit.stop();
    let over = report
        .budget
        .elapsed()
        .saturating_sub(report.budget.limit());
    if !over.is_zero() {
        tracing::warn!(
            "stop: closing ran {:.1}s past --shutdown-timeout-ms (closing the index cannot be cut short)",
            over.as_secs_f64()
        );
    }
    match exit {
        LoopExit::Fatal { .. } => tracing::warn!("{}", report.fatal_summary()),
        LoopExit::Shutdown(_) if report.clean() => tracing::info!("{}", report.summary()),
        LoopExit::Shutdown(_) => tracing::warn!("{}", report.summary()),
    }
}

/// Loads the fingerprint resources and opens (and locks) the index.
pub(crate) fn open_index(settings: &Settings) -> Result<(Fingerprinter, RocksIndex)> {
    let components = &settings.components;
    let dir = &settings.service.index_dir;
    let (fingerprinter, index) = components.open(dir)?;
    match fingerprinter.image_use() {
        ImageUse::Read(path) => tracing::info!("fingerprint tables read from {}", path.display()),
        ImageUse::Written(path) => tracing::info!(
            "fingerprint tables built; start-up image written to {}",
            path.display()
        ),
        ImageUse::NotWritten { path, error } => tracing::warn!(
            "cannot write the start-up image {}: {error} (each start builds the tables again: set [image] dir to a writable directory, or enabled = false)",
            path.display()
        ),
        ImageUse::Off => {}
    }
    let counts = crate::index::ArticleStore::counts(&index);
    tracing::info!(
        "index {} open: {} articles ({} unique); fingerprint identity {}; retention {}",
        dir.display(),
        counts.articles,
        counts.unique,
        fingerprinter.identity().digest(),
        components
            .index
            .retention
            .map_or_else(|| "none (keep for ever)".to_owned(), |r| r.to_string())
    );
    Ok((fingerprinter, index))
}

/// Installs the metrics recorder and serves /metrics, /health and /ready of `health`.
pub(crate) fn serve_http(
    runtime: &tokio::runtime::Runtime,
    settings: &Settings,
    health: &Arc<Health>,
) -> Result<()> {
    let (h1, h2) = (health.clone(), health.clone());
    serve_endpoints(
        runtime,
        settings,
        Arc::new(move |asker| h1.liveness(asker)),
        Arc::new(move |asker| h2.readiness(asker)),
    )?;
    // Before any Kafka client exists: 0 until a broker has answered (`Health::broker_ok`).
    metrics::gauge!(crate::metrics::BROKER_UP).set(if health.broker_is_up() { 1.0 } else { 0.0 });
    Ok(())
}

/// Installs the metrics recorder and serves /metrics, and /health and /ready as `health` and
/// `ready` answer them.
fn serve_endpoints(
    runtime: &tokio::runtime::Runtime,
    settings: &Settings,
    health: crate::metrics::HealthFn,
    ready: crate::metrics::HealthFn,
) -> Result<()> {
    let prometheus = crate::metrics::install()?;
    let listener = runtime.block_on(crate::metrics::bind(settings.metrics_addr))?;
    let local_addr = listener.local_addr().unwrap_or(settings.metrics_addr);
    runtime.spawn(crate::metrics::serve(listener, prometheus, health, ready));
    tracing::info!("metrics on http://{local_addr}/metrics, health on /health and /ready");
    Ok(())
}

/// SIGTERM / SIGINT: the first requests the stop (its budget, `shutdown_timeout`, counts from
/// then); another one at least a second later exits at once (status 130), while one within a
/// second of the first is taken for the same signal delivered twice and ignored. A watchdog ends
/// the process if the stop outlives its budget by [`stop::WATCHDOG_MARGIN`] (a phase that cannot
/// be cut short hangs).
pub(crate) fn install_signal_handlers(
    runtime: &tokio::runtime::Runtime,
    shutdown_timeout: Duration,
) -> Result<Arc<StopRequest>> {
    let stop = Arc::new(StopRequest::new(shutdown_timeout));
    let request = stop.clone();
    let watchdog = shutdown_timeout + stop::WATCHDOG_MARGIN;
    let signals = runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    });
    let (mut term, mut int) = signals.context("cannot install signal handlers")?;
    runtime.spawn(async move {
        let mut first: Option<Instant> = None;
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            match first {
                None => {
                    first = Some(Instant::now());
                    request.request();
                    tracing::info!("{name} received: stopping within {:.1}s (--shutdown-timeout-ms): fetch paused, in-flight records finished, offsets committed, group left, index closed; send it again (a second or more later) to exit at once", shutdown_timeout.as_secs_f64());
                    // Last resort, beyond the budget: every phase but closing the index is cut
                    // short at its deadline.
                    std::thread::spawn(move || {
                        std::thread::sleep(watchdog);
                        eprintln!("newsdedup: error: shutdown did not finish within {watchdog:?}; exiting without closing cleanly (nothing is lost: uncommitted records are processed again on restart)");
                        std::process::exit(1);
                    });
                }
                // A wrapper (timeout, a shell's process group) may deliver the same signal twice.
                Some(t) if t.elapsed() < Duration::from_secs(1) => {}
                Some(_) => {
                    tracing::warn!("second {name}: exiting now without draining (nothing is lost: uncommitted records are processed again on restart)");
                    std::process::exit(130);
                }
            }
        }
    });
    Ok(stop)
}

/// Creates the input consumer: its callbacks wired to the tracker and the engine (with
/// `subscribe`, the rebalance callbacks; with `assign`, none run).
pub(crate) fn create_consumer(
    settings: &Settings,
    tracker: &Arc<Mutex<OffsetTracker>>,
    engine: &Engine,
    health: &Arc<Health>,
    stop: &Arc<StopRequest>,
) -> Result<Arc<consumer::InputConsumer>> {
    let shared = Arc::new(Shared::new(
        settings.service.input_topic.clone(),
        tracker.clone(),
        engine.handle().clone(),
        health.clone(),
        settings.rebalance_timeout(),
        settings.offset_reset(),
        stop.clone(),
    ));
    let consumer = consumer::create_consumer(
        &settings.consumer_properties,
        ConsumerCtx {
            client: ServiceClientContext {
                client: "consumer",
                health: health.clone(),
            },
            shared,
        },
    )
    .context("cannot create the Kafka consumer (check -X properties)")?;
    Ok(Arc::new(consumer))
}

/// Logs where records come from and go to; `what` is `consuming` or `replaying`.
pub(crate) fn log_wiring(settings: &Settings, what: &str) {
    let s = &settings.service;
    tracing::info!(
        "{what} {} as group {} from {}; outputs: {} / {} / {}; {} fingerprint threads",
        s.input_topic,
        s.group_id,
        s.brokers,
        s.unique_topic,
        s.duplicate_topic,
        s.dlq_topic,
        s.threads
    );
}
