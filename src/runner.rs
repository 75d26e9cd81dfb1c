//! The one ordered runner every command uses (`batch`, `fingerprint`, `index rebuild`, the
//! standby, `run`, `replay`): a **source** yields items in order, a pool of workers **prepares**
//! them in any order, one thread puts them back in source order and **applies** them (the single
//! writer), and a **sink** receives the results in that order.
//!
//! ```text
//! source ─► prepare (N workers, any order) ─► reorder ─► apply (1 thread) ─► [sync] ─► sink
//! ```
//!
//! * **Credit window** ([`Options::window`]): the source takes a credit per item and the sink's
//!   acceptance returns it, so at most `window` items are in flight whatever the input. A
//!   source with its own backpressure (Kafka pauses partitions by bytes in flight) runs without.
//! * **Group commit** ([`Durability::EachGroup`]): the apply thread applies every item that is
//!   ready, makes the group durable with one `sync`, and only then hands its results to the
//!   sink, so nothing is published that a crash could take back. With the stage's
//!   [`SyncHandle`] a publisher thread does the sync and the hand-over while the next group is
//!   applied. [`Durability::AtEnd`] syncs once, when the source is exhausted (file outputs, which
//!   a re-run rewrites).
//! * **Failures**: the first error of the stage or the sink, or [`RunnerHandle::fail`] from any
//!   thread, halts the run: nothing after it is applied or handed to the sink, the source stops
//!   being read, and [`run`] returns the error once the items already taken are drained. A
//!   position is done once the sink accepted its result; a source that must learn it (Kafka's
//!   offsets) learns it from the sink's acknowledgements, so what was never handed over is read
//!   again by the next run.
//! * **Control** from other threads ([`RunnerHandle::sync`], [`RunnerHandle::withdraw`]) is
//!   served by the apply thread between two groups, so the stage keeps a single writer.

use crate::error::IndexError;
use crate::index::{IndexWrite, SyncHandle};
use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Yields the items of a run in order; `Ok(None)` ends the run.
pub trait Source: Send {
    type Item: Send;
    fn next(&mut self) -> io::Result<Option<Self::Item>>;
}

impl<I: Send, F: FnMut() -> io::Result<Option<I>> + Send> Source for F {
    type Item = I;
    fn next(&mut self) -> io::Result<Option<I>> {
        self()
    }
}

/// The parallel stage: pure work on one item (parse, validate, fingerprint). It may take what it
/// no longer needs out of the item (the apply stage gets the item back).
pub trait Prepare<I>: Sync {
    type Prepared: Send;
    fn prepare(&self, item: &mut I) -> Self::Prepared;
}

impl<I, P: Send, F: Fn(&mut I) -> P + Sync> Prepare<I> for F {
    type Prepared = P;
    fn prepare(&self, item: &mut I) -> P {
        self(item)
    }
}

/// The serial stage, one writer: applies prepared items in source order.
pub trait Stage<I, P> {
    type Output: Send;
    type Error: std::fmt::Display + From<IndexError> + Send;
    fn apply(&mut self, item: I, prepared: P) -> Result<Self::Output, Self::Error>;
    /// Makes everything applied so far durable.
    fn sync(&self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// A handle that does `sync` from another thread, if the stage has one.
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
    /// Undoes what applying the item of `id` wrote (`write`: its output can never be delivered),
    /// durably; true if the index changed. Stages that index nothing have nothing to undo.
    fn undo(&mut self, _id: &str, _write: &IndexWrite) -> Result<bool, Self::Error> {
        Ok(false)
    }
    /// Whether the index holds an article `id`. Stages that index nothing hold none.
    fn holds(&self, _id: &str) -> Result<bool, Self::Error> {
        Ok(false)
    }
}

/// A stage that only maps (nothing to store, nothing to sync): `fingerprint`'s.
pub struct Map<F>(pub F);

impl<I, P, O: Send, F: FnMut(I, P) -> O> Stage<I, P> for Map<F> {
    type Output = O;
    type Error = IndexError;
    fn apply(&mut self, item: I, prepared: P) -> Result<O, IndexError> {
        Ok((self.0)(item, prepared))
    }
}

/// Receives the results in source order. An error halts the run.
pub trait Sink<O>: Send {
    fn send(&mut self, output: O) -> io::Result<()>;
}

impl<O, F: FnMut(O) -> io::Result<()> + Send> Sink<O> for F {
    fn send(&mut self, output: O) -> io::Result<()> {
        self(output)
    }
}

/// When applied work is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before each group's results reach the sink (outputs others read and commit on).
    EachGroup,
    /// Once, after the last item (outputs a re-run rewrites).
    AtEnd,
}

/// Observes the runner's own work (the service exports it as metrics).
pub trait Observer: Send + Sync {
    /// A group of `size` results was applied and is about to be published.
    fn group(&self, _size: usize) {}
    /// A sync took `secs`.
    fn synced(&self, _secs: f64) {}
}

impl Observer for () {}

/// How a run is configured.
#[derive(Clone)]
pub struct Options {
    /// Prepare workers (at least 1).
    pub threads: usize,
    /// Items in flight at most (taken from the source and not yet accepted by the sink); None:
    /// the source bounds itself.
    pub window: Option<usize>,
    pub durability: Durability,
    /// Keep taking items (and dropping them) after a failure until the source ends, serving
    /// control requests meanwhile: a service whose committer still syncs and commits what was
    /// done before the failure. Otherwise the source stops being read at once.
    pub read_after_failure: bool,
    pub observer: Arc<dyn Observer>,
}

impl Options {
    /// A file run: `threads` workers, 64 items in flight per worker, synced at the end.
    pub fn file(threads: usize) -> Options {
        Options {
            threads,
            window: Some(threads.max(1) * 64),
            durability: Durability::AtEnd,
            read_after_failure: false,
            observer: Arc::new(()),
        }
    }
}

/// Longest wait of a control request while no item arrives.
const CONTROL_EVERY: Duration = Duration::from_millis(5);

/// Most items applied before one sync publishes them (bounds the latency a group adds).
const GROUP_MAX: usize = 1024;

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E: std::fmt::Display> {
    #[error("{0}")]
    Stage(E),
    #[error("cannot write the output: {0}")]
    Sink(io::Error),
    #[error("cannot read the input: {0}")]
    Source(io::Error),
    #[error("{0}")]
    Failed(String),
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ControlError {
    #[error("the decision stage failed: {0}")]
    Failed(String),
    #[error("the decision stage has stopped")]
    Stopped,
    #[error("the decision stage did not answer a sync request within {0:?}")]
    Timeout(Duration),
}

/// A request served by the apply thread.
pub enum Control {
    Sync(Sender<Result<(), String>>),
    /// Undo what the decision of an article wrote: (id, the write).
    Undo(String, IndexWrite, Sender<Result<bool, String>>),
    /// Whether the index holds an article.
    Holds(String, Sender<Result<bool, String>>),
}

/// The receiving end of [`RunnerHandle`]'s requests, given to [`run`].
pub struct Controls(Receiver<Control>);

/// Cloneable access to a run from other threads: durability requests and the failure state.
#[derive(Clone)]
pub struct RunnerHandle {
    control: Sender<Control>,
    failure: Arc<Mutex<Option<String>>>,
    abandon: Arc<AtomicBool>,
    /// The stage's own sync, done on the caller's thread; emptied by [`RunnerHandle::close`] so
    /// that no clone of a handle keeps the index open past the end of the run.
    sync_handle: Option<Arc<Mutex<Option<SyncHandle>>>>,
    /// Set when nothing more may be published (a failed sync, an output that can never be
    /// delivered, a panicked thread).
    halted: Arc<AtomicBool>,
    /// Set with any failure, also the stage's own error (after which what was applied before it
    /// is still published).
    failed: Arc<AtomicBool>,
    observer: Arc<dyn Observer>,
}

impl RunnerHandle {
    /// A handle for a run of a stage whose sync handle is `sync_handle`, and its controls.
    pub fn new(
        sync_handle: Option<SyncHandle>,
        abandon: Arc<AtomicBool>,
        observer: Arc<dyn Observer>,
    ) -> (RunnerHandle, Controls) {
        let (control, rx) = unbounded();
        let handle = RunnerHandle {
            control,
            failure: Arc::new(Mutex::new(None)),
            abandon,
            sync_handle: sync_handle.map(|h| Arc::new(Mutex::new(Some(h)))),
            halted: Arc::new(AtomicBool::new(false)),
            failed: Arc::new(AtomicBool::new(false)),
            observer,
        };
        (handle, Controls(rx))
    }

    /// Makes everything applied so far durable, and waits: on this thread when the stage has a
    /// sync handle (`timeout` does not apply: an fsync cannot be interrupted), else by asking the
    /// apply thread (waiting at most `timeout`). A failed sync halts the run.
    pub fn sync(&self, timeout: Duration) -> Result<(), ControlError> {
        if let Some(slot) = &self.sync_handle {
            // Held during the fsync, so that `close` waits for it before the index closes.
            let guard = lock(slot);
            let Some(handle) = guard.as_ref() else {
                return Err(self.stopped());
            };
            let start = Instant::now();
            let result = handle.sync();
            self.observer.synced(start.elapsed().as_secs_f64());
            return result.map_err(|e| {
                ControlError::Failed(
                    self.fail(format!("cannot sync the index: {e}; stopped deciding")),
                )
            });
        }
        let (tx, rx) = bounded(1);
        self.control
            .send(Control::Sync(tx))
            .map_err(|_| self.stopped())?;
        answer(rx, timeout, || self.stopped())
    }

    /// Undoes what the decision of `id` wrote (`write`), durably, because its output can never
    /// reach its destination. Waits at most `timeout` for the apply thread.
    pub fn undo(
        &self,
        id: &str,
        write: IndexWrite,
        timeout: Duration,
    ) -> Result<bool, ControlError> {
        let (tx, rx) = bounded(1);
        self.control
            .send(Control::Undo(id.to_owned(), write, tx))
            .map_err(|_| self.stopped())?;
        answer(rx, timeout, || self.stopped())
    }

    /// Whether the index holds an article `id` (asked on the apply thread, between two items).
    /// Waits at most `timeout`.
    pub fn holds(&self, id: &str, timeout: Duration) -> Result<bool, ControlError> {
        let (tx, rx) = bounded(1);
        self.control
            .send(Control::Holds(id.to_owned(), tx))
            .map_err(|_| self.stopped())?;
        answer(rx, timeout, || self.stopped())
    }

    fn stopped(&self) -> ControlError {
        match self.failure() {
            Some(f) => ControlError::Failed(f),
            None => ControlError::Stopped,
        }
    }

    /// True once the run was halted.
    pub fn is_halted(&self) -> bool {
        self.halted.load(Ordering::SeqCst)
    }

    /// The reason the run was halted, if it was.
    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Halts the run for good: nothing more is applied or handed to the sink. Returns the
    /// failure kept (the first one, if several threads fail).
    pub fn fail(&self, why: String) -> String {
        self.halted.store(true, Ordering::SeqCst);
        self.record_failure(why)
    }

    /// Records a failure of the stage: nothing more is applied, what was applied before it is
    /// still published.
    fn record_failure(&self, why: String) -> String {
        self.failed.store(true, Ordering::SeqCst);
        let mut failure = lock(&self.failure);
        if failure.is_none() {
            tracing::error!("{why}");
        }
        failure.get_or_insert(why).clone()
    }

    /// A guard that fails the run if the thread holding it panics, so a panic anywhere stops the
    /// service visibly instead of leaving an item forever in flight.
    pub fn fail_on_panic(&self, thread: &'static str) -> FailOnPanic {
        FailOnPanic {
            handle: self.clone(),
            thread,
        }
    }

    /// Drops every item not yet handed to the sink (on shutdown timeout): they are never
    /// acknowledged, so a source with positions reads them again later.
    pub fn abandon(&self) {
        self.abandon.store(true, Ordering::SeqCst);
    }

    /// Gives up the stage's sync handle (waiting for a sync in progress), so that the index can
    /// close; later `sync` calls report the run as stopped.
    pub fn close(&self) {
        if let Some(slot) = &self.sync_handle {
            lock(slot).take();
        }
    }

    fn stopping(&self) -> bool {
        self.halted.load(Ordering::Relaxed) || self.abandon.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn answer<T>(
    rx: Receiver<Result<T, String>>,
    timeout: Duration,
    stopped: impl FnOnce() -> ControlError,
) -> Result<T, ControlError> {
    match rx.recv_timeout(timeout) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(ControlError::Failed(e)),
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(ControlError::Timeout(timeout)),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(stopped()),
    }
}

/// See [`RunnerHandle::fail_on_panic`].
pub struct FailOnPanic {
    handle: RunnerHandle,
    thread: &'static str,
}

impl Drop for FailOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.handle.fail(format!(
                "the {} thread panicked (see the panic message above); stopped deciding: offsets are committed only up to the last record delivered before it",
                self.thread
            ));
        }
    }
}

/// Runs `source` to its end (or to the first failure) with a handle of its own. See [`run`].
pub fn run_to_end<Src, P, S, K>(
    source: Src,
    preparer: &P,
    stage: &mut S,
    sink: K,
    options: &Options,
) -> Result<u64, RunError<S::Error>>
where
    Src: Source,
    P: Prepare<Src::Item>,
    S: Stage<Src::Item, P::Prepared>,
    K: Sink<S::Output>,
{
    let (handle, controls) = RunnerHandle::new(
        stage.sync_handle(),
        Arc::new(AtomicBool::new(false)),
        options.observer.clone(),
    );
    let result = run(source, preparer, stage, sink, &handle, controls, options);
    handle.close();
    result
}

/// Runs `source` through `preparer`, `stage` and `sink` (see the module docs) on the calling
/// thread (the apply thread) and scoped workers. Returns how many items were read.
pub fn run<Src, P, S, K>(
    mut source: Src,
    preparer: &P,
    stage: &mut S,
    sink: K,
    handle: &RunnerHandle,
    controls: Controls,
    options: &Options,
) -> Result<u64, RunError<S::Error>>
where
    Src: Source,
    P: Prepare<Src::Item>,
    S: Stage<Src::Item, P::Prepared>,
    K: Sink<S::Output>,
{
    let threads = options.threads.max(1);
    let window = options.window.map(|w| w.max(threads * 2));
    // Room for the whole window: workers never wait for the reader while credits are left.
    let (jobs_tx, jobs_rx) = bounded::<(u64, Src::Item)>(window.unwrap_or(threads * 64));
    let (ready_tx, ready_rx) = unbounded::<(u64, Src::Item, P::Prepared)>();
    let credits = window.map(|window| {
        let (tx, rx) = bounded::<()>(window);
        for _ in 0..window {
            let _ = tx.send(());
        }
        (tx, rx)
    });
    let credit_back = credits.as_ref().map(|(tx, _)| tx.clone());
    let credit_take = credits.map(|(_, rx)| rx);
    std::thread::scope(|scope| {
        let reader = {
            let handle = handle.clone();
            let read_after_failure = options.read_after_failure;
            let guard = handle.fail_on_panic("read");
            scope.spawn(move || -> io::Result<u64> {
                let _guard = guard;
                let mut n = 0u64;
                loop {
                    if handle.abandon.load(Ordering::Relaxed)
                        || (!read_after_failure && handle.failed.load(Ordering::Relaxed))
                    {
                        break;
                    }
                    if let Some(credits) = &credit_take {
                        if credits.recv().is_err() {
                            break;
                        }
                    }
                    match source.next()? {
                        None => break,
                        Some(item) => {
                            if jobs_tx.send((n, item)).is_err() {
                                break;
                            }
                            n += 1;
                        }
                    }
                }
                Ok(n)
            })
        };
        for i in 0..threads {
            let jobs = jobs_rx.clone();
            let ready = ready_tx.clone();
            let guard = handle.fail_on_panic("prepare");
            let abandon = handle.abandon.clone();
            std::thread::Builder::new()
                .name(format!("prepare-{i}"))
                .spawn_scoped(scope, move || {
                    let _guard = guard;
                    for (seq, mut item) in jobs {
                        if abandon.load(Ordering::Relaxed) {
                            // Dropped unprepared: the apply thread applies nothing after it,
                            // and the reader stops taking items (no credit is waited for).
                            continue;
                        }
                        let prepared = preparer.prepare(&mut item);
                        if ready.send((seq, item, prepared)).is_err() {
                            break;
                        }
                    }
                })
                .expect("cannot spawn a prepare thread");
        }
        drop(jobs_rx);
        drop(ready_tx);
        let mut publisher = Publisher::start(scope, sink, options, stage.sync_handle(), handle);
        let applied = apply_loop(
            stage,
            &mut publisher,
            ready_rx,
            controls,
            handle,
            credit_back.as_ref(),
            options,
        );
        drop(credit_back);
        let published = publisher.finish();
        let synced = stage.sync();
        let read = reader
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the reader thread panicked")));
        applied.map_err(RunError::Stage)?;
        published.map_err(RunError::Sink)?;
        synced.map_err(RunError::Stage)?;
        if let Some(failure) = handle.failure() {
            return Err(RunError::Failed(failure));
        }
        read.map_err(RunError::Source)
    })
}

/// Where an applied group goes: made durable (with [`Durability::EachGroup`]), then handed to
/// the sink. With a sync handle a publisher thread does both, so the apply thread goes on with
/// the next group during the fsync.
enum Publisher<'s, O, K> {
    Inline {
        sink: K,
        error: Option<io::Error>,
    },
    Thread {
        groups: Sender<Vec<O>>,
        thread: std::thread::ScopedJoinHandle<'s, Option<io::Error>>,
    },
}

impl<'s, O: Send, K: Sink<O>> Publisher<'s, O, K> {
    fn start<'e>(
        scope: &'s std::thread::Scope<'s, 'e>,
        mut sink: K,
        options: &Options,
        sync: Option<SyncHandle>,
        handle: &RunnerHandle,
    ) -> Self
    where
        K: 's,
        O: 's,
    {
        let sync = match (options.durability, sync) {
            (Durability::EachGroup, Some(sync)) => sync,
            _ => return Publisher::Inline { sink, error: None },
        };
        // A few groups in flight: the apply thread waits once the fsyncs fall behind.
        let (groups, rx) = bounded::<Vec<O>>(4);
        let handle = handle.clone();
        let guard = handle.fail_on_panic("publish");
        let thread = std::thread::Builder::new()
            .name("publish".into())
            .spawn_scoped(scope, move || {
                let _guard = guard;
                for group in rx {
                    if handle.is_halted() {
                        continue;
                    }
                    let start = Instant::now();
                    let synced = sync.sync();
                    handle.observer.synced(start.elapsed().as_secs_f64());
                    if let Err(e) = synced {
                        // Nothing of the group is published: its work may not be durable.
                        handle.fail(format!("cannot sync the index: {e}; stopped deciding"));
                        continue;
                    }
                    for output in group {
                        if let Err(e) = sink.send(output) {
                            handle.fail(format!("cannot write the output: {e}; stopped"));
                            return Some(e);
                        }
                    }
                }
                None
            })
            .expect("cannot spawn the publisher thread");
        Publisher::Thread { groups, thread }
    }

    /// Publishes an applied group (durable first when each group is). Returns false once the
    /// run must stop.
    fn publish<I, P, S: Stage<I, P, Output = O>>(
        &mut self,
        stage: &S,
        group: Vec<O>,
        options: &Options,
        handle: &RunnerHandle,
        credit_back: Option<&Sender<()>>,
    ) -> Result<(), S::Error> {
        let size = group.len();
        match self {
            Publisher::Inline { sink, error } => {
                if options.durability == Durability::EachGroup {
                    let start = Instant::now();
                    let synced = stage.sync();
                    options.observer.synced(start.elapsed().as_secs_f64());
                    synced?;
                }
                for output in group {
                    if error.is_none() {
                        if let Err(e) = sink.send(output) {
                            handle.fail(format!("cannot write the output: {e}; stopped"));
                            *error = Some(e);
                        }
                    }
                }
            }
            Publisher::Thread { groups, .. } => {
                // Only fails if the publisher is gone (it panicked: the run is failed).
                let _ = groups.send(group);
            }
        }
        if let Some(credits) = credit_back {
            for _ in 0..size {
                let _ = credits.try_send(());
            }
        }
        Ok(())
    }

    /// Hands one output to the sink at once (results that need no sync first).
    fn send_now(&mut self, output: O, handle: &RunnerHandle, credit_back: Option<&Sender<()>>) {
        match self {
            Publisher::Inline { sink, error } => {
                if error.is_none() {
                    if let Err(e) = sink.send(output) {
                        handle.fail(format!("cannot write the output: {e}; stopped"));
                        *error = Some(e);
                    }
                }
            }
            Publisher::Thread { groups, .. } => {
                let _ = groups.send(vec![output]);
            }
        }
        if let Some(credits) = credit_back {
            let _ = credits.try_send(());
        }
    }

    /// Waits until every group handed over is published; the sink's error, if any.
    fn finish(self) -> io::Result<()> {
        let error = match self {
            Publisher::Inline { error, .. } => error,
            Publisher::Thread { groups, thread } => {
                drop(groups);
                thread.join().unwrap_or(None)
            }
        };
        error.map_or(Ok(()), Err)
    }
}

/// The apply thread: reorders, applies, publishes groups, serves control requests. Returns the
/// stage's first error.
fn apply_loop<I, P, S, K>(
    stage: &mut S,
    publisher: &mut Publisher<'_, S::Output, K>,
    ready_rx: Receiver<(u64, I, P)>,
    controls: Controls,
    handle: &RunnerHandle,
    credit_back: Option<&Sender<()>>,
    options: &Options,
) -> Result<(), S::Error>
where
    S: Stage<I, P>,
    K: Sink<S::Output>,
{
    let control_rx = controls.0;
    let mut pending: BTreeMap<u64, (I, P)> = BTreeMap::new();
    let mut next = 0u64;
    let mut first_error: Option<S::Error> = None;
    loop {
        // Control requests are rare (the service syncs through the stage's handle): they are
        // served between two waits for items, so the wait itself is a plain receive, which
        // spins briefly before it sleeps (a select over both channels sleeps at once: ten
        // times the context switches).
        while let Ok(c) = control_rx.try_recv() {
            serve(stage, c, handle, options);
        }
        match ready_rx.recv_timeout(CONTROL_EVERY) {
            Ok((seq, item, prepared)) => {
                pending.insert(seq, (item, prepared));
                // Group commit: apply every item that is ready, then publish them together.
                while pending.len() < GROUP_MAX {
                    match ready_rx.try_recv() {
                        Ok((seq, item, prepared)) => {
                            pending.insert(seq, (item, prepared));
                        }
                        Err(_) => break,
                    }
                }
                let mut group = Vec::new();
                let mut skipped = 0usize;
                while let Some((item, prepared)) = pending.remove(&next) {
                    next += 1;
                    if first_error.is_some() || handle.stopping() {
                        skipped += 1;
                        continue;
                    }
                    match stage.apply(item, prepared) {
                        // Nothing to make durable first: straight to the sink, so the
                        // item's credit comes back at once and the workers never starve.
                        Ok(out) if options.durability == Durability::AtEnd => {
                            publisher.send_now(out, handle, credit_back);
                        }
                        Ok(out) => group.push(out),
                        Err(e) => {
                            handle.record_failure(format!(
                                "{e}; stopped deciding: nothing after it is published or committed"
                            ));
                            first_error = Some(e);
                            skipped += 1;
                        }
                    }
                }
                if let Some(credits) = credit_back {
                    for _ in 0..skipped {
                        let _ = credits.try_send(());
                    }
                }
                if !group.is_empty() {
                    options.observer.group(group.len());
                    if let Err(e) = publisher.publish(stage, group, options, handle, credit_back) {
                        handle.fail(format!("cannot sync the index: {e}; stopped deciding"));
                        first_error.get_or_insert(e);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Serves one control request on the apply thread.
fn serve<I, P, S: Stage<I, P>>(
    stage: &mut S,
    control: Control,
    handle: &RunnerHandle,
    options: &Options,
) {
    match control {
        Control::Sync(reply) => {
            let start = Instant::now();
            let result = stage.sync().map_err(|e| e.to_string());
            options.observer.synced(start.elapsed().as_secs_f64());
            if let Err(e) = &result {
                handle.fail(format!("cannot sync the index: {e}; stopped deciding"));
            }
            let _ = reply.send(result);
        }
        Control::Undo(id, write, reply) => {
            let result = stage.undo(&id, &write).map_err(|e| e.to_string());
            match &result {
                Ok(true) => tracing::warn!(
                    "{}: its output was refused by the broker and went to the DLQ",
                    undone(&id, &write)
                ),
                Ok(false) => {}
                Err(e) => {
                    handle.fail(format!(
                        "cannot undo the decision of article {id:?} in the index: {e}; stopped deciding"
                    ));
                }
            }
            let _ = reply.send(result);
        }
        Control::Holds(id, reply) => {
            let _ = reply.send(stage.holds(&id).map_err(|e| e.to_string()));
        }
    }
}

/// What undoing `write` did to article `id`, for the log.
fn undone(id: &str, write: &IndexWrite) -> String {
    match write {
        IndexWrite::Inserted { .. } => format!("withdrew article {id:?} from the index"),
        IndexWrite::Revised { previous, .. } => format!(
            "put version {} of article {id:?} back in the index in place of its revision",
            previous.fingerprint
        ),
        IndexWrite::Remembered { fingerprint } => {
            format!("forgot the older version {fingerprint} of article {id:?}")
        }
        IndexWrite::Corrected { at_ms, .. } => format!(
            "undid the correction of article {id:?} made {}; the article keeps its earlier decision",
            crate::time::format_rfc3339(*at_ms)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::{read_line_limited, Line};

    /// Appends what it applies; fails at item `fail_at`.
    struct Collect {
        seen: Vec<u64>,
        fail_at: Option<u64>,
    }

    impl Stage<u64, u64> for Collect {
        type Output = u64;
        type Error = IndexError;
        fn apply(&mut self, item: u64, prepared: u64) -> Result<u64, IndexError> {
            assert_eq!(prepared, item * 2);
            if Some(item) == self.fail_at {
                return Err(IndexError::Io {
                    dir: "/test".into(),
                    error: io::Error::other("planted"),
                });
            }
            self.seen.push(item);
            Ok(item)
        }
    }

    fn numbers(n: u64) -> impl FnMut() -> io::Result<Option<u64>> + Send {
        let mut i = 0;
        move || {
            i += 1;
            Ok((i <= n).then_some(i - 1))
        }
    }

    /// Runs `n` numbers through a `Collect` stage failing at `fail_at`: the result, what the
    /// sink received and what the stage applied.
    fn collect(
        n: u64,
        fail_at: Option<u64>,
        threads: usize,
    ) -> (Result<u64, RunError<IndexError>>, Vec<u64>, Vec<u64>) {
        let mut stage = Collect {
            seen: Vec::new(),
            fail_at,
        };
        let mut out = Vec::new();
        let result = run_to_end(
            numbers(n),
            &|i: &mut u64| *i * 2,
            &mut stage,
            |o: u64| {
                out.push(o);
                Ok(())
            },
            &Options::file(threads),
        );
        (result, out, stage.seen)
    }

    #[test]
    fn results_reach_the_sink_in_source_order_with_many_workers() {
        let (read, out, seen) = collect(5000, None, 4);
        assert_eq!(read.expect("run"), 5000);
        assert_eq!(out, (0..5000).collect::<Vec<_>>());
        assert_eq!(seen, out);
    }

    #[test]
    fn a_stage_error_stops_the_run_and_nothing_after_it_is_published() {
        let (result, out, _) = collect(100_000, Some(100), 2);
        assert!(matches!(result, Err(RunError::Stage(_))), "{result:?}");
        assert_eq!(out, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_sink_error_stops_reading_the_source() {
        let mut stage = Collect {
            seen: Vec::new(),
            fail_at: None,
        };
        let read = std::sync::atomic::AtomicU64::new(0);
        let mut n = 0u64;
        let result = run_to_end(
            || {
                read.fetch_add(1, Ordering::Relaxed);
                n += 1;
                Ok(Some(n))
            },
            &|i: &mut u64| *i * 2,
            &mut stage,
            |o: u64| {
                if o == 10 {
                    Err(io::Error::other("disk full"))
                } else {
                    Ok(())
                }
            },
            &Options::file(2),
        );
        assert!(matches!(result, Err(RunError::Sink(_))), "{result:?}");
        // The window bounds what was read past the failure.
        assert!(read.load(Ordering::Relaxed) < 1000);
    }

    #[test]
    fn lines_are_read_with_the_limit() {
        let input: String = (0..100).map(|i| format!("{i}\n")).collect();
        let mut reader = input.as_bytes();
        let mut stage = Collect {
            seen: Vec::new(),
            fail_at: None,
        };
        let read = run_to_end(
            || {
                Ok(read_line_limited(&mut reader, 10)?.map(|l| match l {
                    Line::Bytes(b) => String::from_utf8_lossy(&b).parse::<u64>().unwrap_or(0),
                    Line::TooLong(_) => u64::MAX,
                }))
            },
            &|i: &mut u64| *i * 2,
            &mut stage,
            |_: u64| Ok(()),
            &Options::file(3),
        )
        .expect("run");
        assert_eq!(read, 100);
        assert_eq!(stage.seen, (0..100).collect::<Vec<_>>());
    }
}
