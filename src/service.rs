//! `newsdedup run`: wires the index, the engine, the Kafka clients, the metrics endpoint and the
//! signal handlers together, and runs until SIGINT/SIGTERM (exit 0 after draining) or a fatal
//! error (exit non-zero).

use crate::config::{Config, DedupConfig};
use crate::dedup::Deduper;
use crate::fingerprint::Fingerprinter;
use crate::index::RocksIndex;
use crate::kafka::consumer::{self, ConsumerCtx, LoopExit, Shared};
use crate::kafka::engine::{Engine, LocalPreparer};
use crate::kafka::producer::{self, Acks, ProducerSink};
use crate::kafka::tracker::OffsetTracker;
use crate::kafka::{Health, ServiceClientContext, State};
use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use rdkafka::consumer::Consumer;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::settings::{RunArgs, Settings};
use std::collections::HashSet;

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NEWSDEDUP_LOG")
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
    // vars_os: a non-UTF-8 variable elsewhere in the environment must not panic here.
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let settings =
        Settings::resolve(&args, given, &config, env).context("invalid settings for `run`")?;
    init_logging();
    for w in &settings.warnings {
        tracing::warn!("{w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("newsdedup-io")
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;

    // The index first: a second process on the same directory fails here, before touching Kafka.
    let (fingerprinter, index) = open_index(&settings, &config)?;
    let health = Arc::new(Health::new(settings.progress_timeout()));
    serve_http(&runtime, &settings, &health)?;
    let stop = install_signal_handlers(&runtime, settings.shutdown_timeout())?;

    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let producer = producer::create_producer(
        &settings.producer_properties,
        ServiceClientContext {
            client: "producer",
            health: health.clone(),
        },
    )
    .context("cannot create the Kafka producer (check -X properties)")?;
    // Same decision rule as `batch`: [dedup] with the threshold overridden by --threshold.
    let deduper = Deduper::with_config(
        index,
        DedupConfig {
            threshold: settings.threshold,
            ..config.dedup.clone()
        },
    );
    let preparer = Arc::new(LocalPreparer {
        fingerprinter,
        max_article_bytes: settings.service.max_article_bytes,
        max_output_bytes: settings.max_output_bytes(),
    });
    // Set when in-flight work is abandoned (shutdown timeout): the sink then stops retrying.
    let abandon = Arc::new(AtomicBool::new(false));
    let sink = ProducerSink::new(
        producer.clone(),
        settings.topics(),
        runtime.handle().clone(),
        Arc::new(Acks::new(tracker.clone(), health.clone())),
        abandon.clone(),
        settings.max_retry(),
    );
    let mut engine = Engine::start(
        deduper,
        preparer,
        sink,
        settings.service.threads,
        abandon.clone(),
    );
    let consumer = subscribe(&settings, &tracker, &engine, &health)?;

    let exit = consumer::run_loop(&consumer, &mut engine, &settings, &stop);

    // Shutdown: outputs flushed, consumer closed (its revoke callback commits once more), then
    // the engine (final WAL sync, RocksDB closed).
    let started = Instant::now();
    if let Err(e) = producer::flush(&producer, Duration::from_secs(10)) {
        tracing::warn!("producer flush: {e}");
    }
    drop(consumer);
    if matches!(exit, LoopExit::Shutdown { abandoned } if abandoned > 0) {
        engine.handle().abandon();
    }
    engine.shutdown();
    drop(producer);
    runtime.shutdown_timeout(Duration::from_secs(2));
    tracing::info!("closed in {:?}", started.elapsed());
    match exit {
        LoopExit::Shutdown { .. } => {
            health.set_state(State::Stopped);
            tracing::info!("stopped cleanly");
            Ok(())
        }
        LoopExit::Fatal(f) => bail!("the service stopped after a fatal error: {f}"),
    }
}

/// Loads the fingerprint resources and opens (and locks) the index.
fn open_index(settings: &Settings, config: &Config) -> Result<(Fingerprinter, RocksIndex)> {
    let fingerprinter =
        Fingerprinter::new(&config.fingerprint).context("cannot load the fingerprint resources")?;
    let dir = &settings.service.index_dir;
    let index_config = crate::index::IndexConfig {
        retention: settings.retention,
        ..config.index.clone()
    };
    let index = RocksIndex::open(dir, fingerprinter.identity(), &index_config)
        .with_context(|| format!("cannot open the index in {}", dir.display()))?;
    let counts = crate::index::ArticleStore::counts(&index);
    tracing::info!(
        "index {} open: {} articles ({} unique); fingerprint identity {}; retention {}",
        dir.display(),
        counts.articles,
        counts.unique,
        fingerprinter.identity().digest(),
        settings
            .retention
            .map_or_else(|| "none (keep for ever)".to_owned(), |r| r.to_string())
    );
    Ok((fingerprinter, index))
}

/// Installs the metrics recorder and serves /metrics, /health and /ready.
fn serve_http(
    runtime: &tokio::runtime::Runtime,
    settings: &Settings,
    health: &Arc<Health>,
) -> Result<()> {
    let prometheus = crate::metrics::install()?;
    let listener = runtime.block_on(crate::metrics::bind(settings.metrics_addr))?;
    let local_addr = listener.local_addr().unwrap_or(settings.metrics_addr);
    let (h1, h2) = (health.clone(), health.clone());
    runtime.spawn(crate::metrics::serve(
        listener,
        prometheus,
        Arc::new(move || h1.liveness()),
        Arc::new(move || h2.readiness()),
    ));
    tracing::info!("metrics on http://{local_addr}/metrics, health on /health and /ready");
    Ok(())
}

/// SIGTERM / SIGINT: the first sets the returned flag (stop fetching, drain, commit); a second
/// one exits at once. A watchdog ends the process if draining outlives `shutdown_timeout` by far.
fn install_signal_handlers(
    runtime: &tokio::runtime::Runtime,
    shutdown_timeout: Duration,
) -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let watchdog = shutdown_timeout + Duration::from_secs(30);
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
                    tracing::info!("{name} received: stopping (fetch paused, draining in-flight work, then commit); send it again to exit at once");
                    flag.store(true, Ordering::SeqCst);
                    // Last resort, so that the process always ends: drain, flush, commit and
                    // close normally take far less.
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

/// Creates the consumer (its rebalance callback wired to the tracker and the engine) and
/// subscribes to the input topic.
fn subscribe(
    settings: &Settings,
    tracker: &Arc<Mutex<OffsetTracker>>,
    engine: &Engine,
    health: &Arc<Health>,
) -> Result<Arc<consumer::InputConsumer>> {
    let s = &settings.service;
    let shared = Arc::new(Shared::new(
        s.input_topic.clone(),
        tracker.clone(),
        engine.handle().clone(),
        health.clone(),
        settings.rebalance_timeout(),
    ));
    let consumer = Arc::new(
        consumer::create_consumer(
            &settings.consumer_properties,
            ConsumerCtx {
                client: ServiceClientContext {
                    client: "consumer",
                    health: health.clone(),
                },
                shared,
            },
        )
        .context("cannot create the Kafka consumer (check -X properties)")?,
    );
    consumer
        .subscribe(&[&s.input_topic])
        .with_context(|| format!("cannot subscribe to {}", s.input_topic))?;
    tracing::info!(
        "consuming {} as group {} from {}; outputs: {} / {} / {}; {} fingerprint threads",
        s.input_topic,
        s.group_id,
        s.brokers,
        s.unique_topic,
        s.duplicate_topic,
        s.dlq_topic,
        s.threads
    );
    Ok(consumer)
}
