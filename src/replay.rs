//! `newsdedup replay`: a bounded backfill. Reads a range of a topic with its own consumer group
//! (`assign` of every partition in range at its start offset, no rebalancing), decides every
//! record with `run`'s wiring (the same engine, preparer, decision rule and index), produces to
//! `run`'s output topics (or, for a dry run, writes the output records to a JSONL file), commits
//! as `run` does (an offset only once its record is in the index and its output acknowledged),
//! and stops by itself at the end of the range (`kafka::range`) with a summary.

use crate::config::Config;
use crate::kafka::consumer::{Bounds, LoopExit};
use crate::kafka::engine::OutputSink;
use crate::kafka::poll_loop;
use crate::kafka::producer::{Acks, ProducerSink};
use crate::kafka::range::{self, RangeBounds};
use crate::kafka::record::{OutputKind, OutputRecord, Ticket};
use crate::kafka::tracker::OffsetTracker;
use crate::kafka::Health;
use crate::pipeline::SharedCounts;
use crate::runner::RunnerHandle;
use crate::service;
use crate::settings::{ReplayArgs, ReplaySettings};
use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use rdkafka::consumer::Consumer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Plain progress lines (stderr not a terminal) at most this often.
const PROGRESS_LINE_EVERY: Duration = Duration::from_secs(10);

/// Runs a replay. Returns Ok once the whole range is decided, delivered and committed.
pub fn replay(
    args: ReplayArgs,
    given: &HashSet<String>,
    command_line: &HashSet<String>,
    config: Config,
) -> Result<()> {
    let plan = ReplaySettings::resolve(&args, given, command_line, &config, service::process_env())
        .context("invalid settings for `replay`")?;
    let settings = &plan.settings;
    let topic = settings.service.input_topic.clone();
    service::start_logging(settings);
    let runtime = service::io_runtime()?;

    let (fingerprinter, index) = service::open_index(settings)?;
    let health = Arc::new(Health::new(settings.progress_timeout()));
    if plan.serve_metrics {
        service::serve_http(&runtime, settings, &health)?;
    }
    let stop = service::install_signal_handlers(&runtime, settings.shutdown_timeout())?;

    let spans = range::plan(&settings.consumer_properties, &topic, &plan.range)
        .with_context(|| format!("cannot plan the replay of {topic:?}"))?;
    if spans.is_empty() {
        bail!("nothing to replay: no partition of {topic:?} has a record in the given range");
    }
    let mut bounds = RangeBounds::new(&spans, &plan.range);
    let end = if plan.range.to_ms.is_some() {
        "the first record at or after --to-time, else the end it had when the replay started"
    } else {
        "the end it had when the replay started"
    };
    for s in &spans {
        tracing::info!(
            "partition {}: from offset {} to {} (exclusive: {end})",
            s.partition,
            s.start,
            s.end,
        );
    }

    let tracker = Arc::new(Mutex::new(OffsetTracker::new()));
    let abandon = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(Acks::new(tracker.clone(), health.clone()));
    let (producer, sink) = match &plan.output {
        Some(path) => (None, ReplaySink::File(JsonlSink::create(path, acks)?)),
        None => {
            let (producer, sink) =
                service::producer_sink(settings, &runtime, &tracker, &health, &abandon, None)?;
            (Some(producer), ReplaySink::Kafka(sink))
        }
    };
    let decider = settings.components.deduper(index);
    // A replay reads the input topic only: no correction comes through it.
    let mut engine = service::start_engine(
        decider,
        fingerprinter,
        crate::correction::Acceptance::default(),
        settings,
        sink,
        &abandon,
    );
    let counts = engine.counts();
    let consumer = service::create_consumer(settings, &tracker, &engine, &health, &stop)?;
    let mut tpl = TopicPartitionList::new();
    for s in &spans {
        tpl.add_partition_offset(&topic, s.partition, Offset::Offset(s.start))
            .with_context(|| format!("cannot assign {topic} [{}]", s.partition))?;
    }
    consumer
        .assign(&tpl)
        .with_context(|| format!("cannot assign the partitions of {topic:?}"))?;
    service::log_wiring(settings, "replaying");

    let started = Instant::now();
    let progress = ProgressDisplay::start(
        counts.clone(),
        bounds.planned_records(),
        !plan.quiet,
        started,
    );
    let exit = poll_loop::run_bounded(
        &consumer,
        &mut engine,
        &settings.consume_params(),
        &mut bounds,
    );
    let elapsed = started.elapsed();
    progress.finish();

    let committed: BTreeMap<i32, i64> = tracker
        .lock()
        .progress()
        .into_iter()
        .filter_map(|p| Some((p.partition, p.committed?)))
        .collect();
    let exit = service::close(producer, consumer, engine, exit, runtime, None);
    let summary = Summary {
        topic: &topic,
        group: &settings.service.group_id,
        output: plan.output.as_deref(),
        counts: &counts,
        elapsed,
        committed: &committed,
    };
    match exit {
        LoopExit::Fatal { error, .. } => {
            eprintln!("replay: stopped: {}", summary.to_json());
            bail!("the replay stopped after a fatal error: {error}")
        }
        LoopExit::Shutdown(_) if !bounds.complete() => {
            eprintln!("replay: interrupted: {}", summary.to_json());
            let resume: Vec<String> = bounds
                .open()
                .into_iter()
                .filter_map(|p| {
                    let start = committed
                        .get(&p)
                        .copied()
                        .or(bounds.span(p).map(|s| s.start))?;
                    Some(format!("{p}:{start}"))
                })
                .collect();
            bail!(
                "interrupted before the end of the range; to go on where it stopped, run the same command with --from-offset {} (what was decided is in the index: deciding it again gives the same decisions)",
                resume.join(",")
            )
        }
        LoopExit::Shutdown(_) => {
            eprintln!("replay: done: {}", summary.to_json());
            if counts.records() == 0 {
                bail!("nothing to replay: no record of {topic:?} was in the given range");
            }
            Ok(())
        }
    }
}

/// Where the replay's output records go: `run`'s topics, or a JSONL file (dry run).
enum ReplaySink {
    Kafka(ProducerSink),
    File(JsonlSink),
}

impl OutputSink for ReplaySink {
    fn attach(&mut self, engine: &RunnerHandle) {
        match self {
            ReplaySink::Kafka(s) => s.attach(engine),
            ReplaySink::File(s) => s.attach(engine),
        }
    }

    fn send(&mut self, record: OutputRecord, ticket: Ticket) {
        match self {
            ReplaySink::Kafka(s) => s.send(record, ticket),
            ReplaySink::File(s) => s.send(record, ticket),
        }
    }
}

/// The dry run's sink: each output record as one JSON line, as `batch` writes it (the article
/// with its `dedup` member; for an invalid record, `{"dedup":{"decision":"invalid","error":..}}`).
/// A record counts as delivered once its line is written to the file (flushed to the OS).
struct JsonlSink {
    out: BufWriter<File>,
    path: PathBuf,
    acks: Arc<Acks>,
    engine: Option<RunnerHandle>,
}

impl JsonlSink {
    fn create(path: &Path, acks: Arc<Acks>) -> Result<JsonlSink> {
        let file = File::create(path)
            .with_context(|| format!("cannot create the --output file {}", path.display()))?;
        Ok(JsonlSink {
            out: BufWriter::with_capacity(1 << 16, file),
            path: path.to_owned(),
            acks,
            engine: None,
        })
    }

    /// What `batch` writes for the same input: the output record, or the invalid-record line.
    fn line(record: &OutputRecord) -> &[u8] {
        match (&record.kind, &record.invalid_line) {
            (OutputKind::Dlq, Some(line)) => line,
            _ => &record.payload,
        }
    }
}

impl OutputSink for JsonlSink {
    fn attach(&mut self, engine: &RunnerHandle) {
        self.engine = Some(engine.clone());
    }

    fn send(&mut self, record: OutputRecord, ticket: Ticket) {
        let written = self
            .out
            .write_all(Self::line(&record))
            .and_then(|()| self.out.write_all(b"\n"))
            .and_then(|()| self.out.flush());
        match written {
            Ok(()) => self.acks.delivered(record.kind, &ticket),
            // Never acknowledged: nothing from this record on is committed.
            Err(e) => {
                let why = format!(
                    "cannot write to {}: {e}; stopped, nothing after input {}/{} is committed",
                    self.path.display(),
                    ticket.partition,
                    ticket.offset
                );
                match &self.engine {
                    Some(engine) => {
                        engine.fail(why);
                    }
                    None => tracing::error!("{why}"),
                }
            }
        }
    }
}

/// The closing summary line.
struct Summary<'a> {
    topic: &'a str,
    group: &'a str,
    output: Option<&'a Path>,
    counts: &'a SharedCounts,
    elapsed: Duration,
    /// Offsets committed by the replay's group, per partition.
    committed: &'a BTreeMap<i32, i64>,
}

impl Summary<'_> {
    fn to_json(&self) -> serde_json::Value {
        let c = self.counts.snapshot();
        let records = c.records();
        let secs = self.elapsed.as_secs_f64();
        serde_json::json!({
            "topic": self.topic,
            "group": self.group,
            "output": self.output.map(|p| p.display().to_string()),
            "records": records,
            "unique": c.unique,
            "duplicate": c.duplicate,
            "dlq": c.invalid_total(),
            "replayed": c.replayed,
            "seconds": (secs * 1000.0).round() / 1000.0,
            "records_per_sec": (records as f64 / secs.max(1e-9)).round(),
            "committed": self.committed.iter().map(|(p, o)| (p.to_string(), *o)).collect::<BTreeMap<_, _>>(),
        })
    }
}

/// Progress on stderr: a bar on a terminal (records done / total, rate, ETA), else a plain line
/// every [`PROGRESS_LINE_EVERY`]. The total is the planned one, a lower bound when a broker's
/// watermark is below its last record (the bar then grows).
struct ProgressDisplay {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressDisplay {
    fn start(counts: SharedCounts, total: u64, show: bool, started: Instant) -> ProgressDisplay {
        let done = Arc::new(AtomicBool::new(false));
        if !show {
            return ProgressDisplay { done, thread: None };
        }
        let finished = done.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                if std::io::stderr().is_terminal() {
                    progress_bar(&counts, total, &finished, started)
                } else {
                    progress_lines(&counts, total, &finished, started)
                }
            })
            .ok();
        ProgressDisplay { done, thread }
    }

    fn finish(self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread {
            let _ = t.join();
        }
    }
}

fn progress_bar(counts: &SharedCounts, total: u64, finished: &AtomicBool, started: Instant) {
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "replay [{bar:30}] {pos}/{len} records  {msg}  ETA {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let update = || {
        let n = counts.records();
        if n > bar.length().unwrap_or(0) {
            bar.set_length(n);
        }
        bar.set_position(n);
        let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
        bar.set_message(format!("{rate:.0}/s"));
    };
    while !finished.load(Ordering::SeqCst) {
        update();
        std::thread::sleep(Duration::from_millis(200));
    }
    update();
    bar.finish_and_clear();
}

fn progress_lines(counts: &SharedCounts, total: u64, finished: &AtomicBool, started: Instant) {
    let mut progress = crate::progress::Progress::new("replay", Some(PROGRESS_LINE_EVERY));
    while !finished.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        progress.tick(|| {
            let c = counts.snapshot();
            let n = c.records();
            format!(
                "{n} of ~{} records ({:.0}/s){}: {} unique, {} duplicate, {} dlq",
                total.max(n),
                crate::progress::rate(n, started.elapsed()),
                crate::progress::eta(n, total, started.elapsed()),
                c.unique,
                c.duplicate,
                c.invalid_total()
            )
        });
    }
}
