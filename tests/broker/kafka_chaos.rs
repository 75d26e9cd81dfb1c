//! `newsdedup run` while things go wrong under it, records still arriving: the broker cut off
//! several times (a TCP proxy in front of Tansu closes every connection and refuses new ones for
//! seconds), the service killed with SIGKILL several times, a member frozen past its session (its
//! assignment lost to another member while it had done but uncommitted work), and the index's
//! volume filling up.
//!
//! What each test checks is the pipeline's promise: every input record (by its source
//! coordinates) has an output, repeated outputs of a record agree, and the committed offsets reach
//! the end of every partition without ever going backwards.

use crate::common;

use common::kafka::{
    committed, coords_by_seq, ends, metric, produce, produce_paced, start_command, start_service,
    start_with_group_settings, wait_committed, Broker, Input, Output, Reader, Service,
};
use common::proxy::CutProxy;
use common::stream::{check_outputs, corpus_inputs, interleave, malformed};
use common::volume::SmallVolume;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

const OUTPUTS: [(&str, i32); 3] = [
    ("articles.unique", 1),
    ("articles.duplicate", 1),
    ("articles.dlq", 1),
];
const TOPICS: [&str; 4] = [
    "articles.raw:2",
    "articles.unique:1",
    "articles.duplicate:1",
    "articles.dlq:1",
];
/// `malformed` includes an oversized article that needs this limit.
const ARGS: [&str; 4] = [
    "--max-article-bytes",
    "200000",
    "--commit-interval-ms",
    "200",
];

fn stream(n: usize, tag: &str) -> Vec<Input> {
    let (articles, _) = corpus_inputs(0, n, tag);
    let mut inputs = interleave(articles, malformed(tag));
    // Exact replays of earlier records: the same decision again.
    let replays: Vec<Input> = inputs.iter().step_by(53).cloned().collect();
    inputs.extend(replays);
    inputs
}

/// Waits until every produced record has an output and the group's committed offsets equal the
/// ends of the input partitions; then checks every output against its input (repeated outputs
/// of a record included).
fn check_complete(
    bootstrap: &str,
    reader: &mut Reader,
    inputs: &[Input],
    coords: &[(i32, i64)],
    service: &Service,
) {
    let want: HashSet<(i32, i64)> = coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(240), &|| service.log());
    wait_committed(bootstrap, &ends(coords), Duration::from_secs(60), &|| {
        service.log()
    });
    reader.poll_for(Duration::from_millis(500));
    let by_coord: HashMap<(i32, i64), Input> =
        coords.iter().copied().zip(inputs.iter().cloned()).collect();
    let decisions = check_outputs(&by_coord, &reader.got);
    let valid_ids: HashSet<&str> = inputs.iter().filter_map(|i| i.id.as_deref()).collect();
    assert_eq!(decisions.len(), valid_ids.len(), "every valid id decided");
}

fn repeated(outputs: &[Output]) -> usize {
    let mut per_coord: HashMap<(i32, i64), usize> = HashMap::new();
    for o in outputs {
        *per_coord.entry(o.source()).or_default() += 1;
    }
    per_coord.values().filter(|&&n| n > 1).count()
}

/// The broker unreachable three times for 4 s while records arrive (producer, service and reader
/// all go through the cut proxy): the service retries, stays alive, says so on /ready, and in the
/// end every record has an output and the offsets reach the end.
#[test]
fn broker_outages_mid_stream_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let proxy = CutProxy::start();
    let broker = Broker::start_with(dir.path(), &["--advertised", &proxy.addr]);
    proxy.forward_to(&broker.bootstrap);
    broker.create_topics(&TOPICS);

    let inputs = stream(1200, "o");
    let producing = {
        let (addr, inputs) = (proxy.addr.clone(), inputs.clone());
        std::thread::spawn(move || produce_paced(&addr, "articles.raw", &inputs, None, Some(50)))
    };
    let mut service = start_service(
        &proxy.addr,
        &dir.path().join("index"),
        &dir.path().join("service.log"),
        &ARGS,
    );
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    reader.wait_outputs(100, Duration::from_secs(90), &|| service.log());

    let mut not_ready_seen = false;
    for outage in 0..3 {
        let before = reader.got.len();
        proxy.cut();
        let cut_at = Instant::now();
        while cut_at.elapsed() < Duration::from_secs(4) {
            if let Some((503, _)) = service.http("/ready") {
                not_ready_seen = true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        proxy.restore();
        assert!(
            service.wait(Duration::ZERO).is_none(),
            "the service exited during outage {outage}; log:\n{}",
            service.log()
        );
        // Let it recover and make progress before the next outage.
        let restored = Instant::now();
        while reader.got.len() < before + 50 && !producing.is_finished() {
            assert!(
                restored.elapsed() < Duration::from_secs(60),
                "no progress after outage {outage}; log:\n{}",
                service.log()
            );
            reader.poll_for(Duration::from_millis(100));
        }
        eprintln!(
            "outage {outage}: {} outputs before, {} after recovery",
            before,
            reader.got.len()
        );
    }
    let reported = producing.join().expect("producer thread");
    let coords = coords_by_seq(&proxy.addr, "articles.raw", 2, inputs.len());
    let unknown = reported.iter().filter(|c| c.1 < 0).count();
    eprintln!("{unknown} delivery reports without an offset (retried sends)");
    // The outputs as a consumer reading the topics after the outages sees them (a consumer cut
    // off mid-fetch may resume at another offset: librdkafka's own behaviour, not the service's).
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    check_complete(&proxy.addr, &mut reader, &inputs, &coords, &service);
    assert!(
        not_ready_seen,
        "/ready never said 503 while the broker was cut off"
    );
    let (status, body) = service.http("/health").expect("/health");
    assert_eq!(status, 200, "{body}");
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
    eprintln!(
        "{} outputs for {} inputs, {} repeated",
        reader.got.len(),
        coords.len(),
        repeated(&reader.got)
    );
}

/// SIGKILL three times while records arrive, each time once the service has made some
/// progress, then a last run: nothing lost, repeated outputs agree, offsets reach the end.
#[test]
fn repeated_kill_9_while_records_arrive_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&TOPICS);
    let b = broker.bootstrap.clone();

    let inputs = stream(1500, "k");
    let producing = {
        let (b, inputs) = (b.clone(), inputs.clone());
        std::thread::spawn(move || produce_paced(&b, "articles.raw", &inputs, None, Some(60)))
    };
    let index = dir.path().join("index");
    let log = dir.path().join("service.log");
    let mut reader = Reader::new(&b, &OUTPUTS);
    for kill in 0..3 {
        let mut service = start_service(&b, &index, &log, &ARGS);
        let before = reader.got.len();
        // A different moment each time: after 50, 150, 250 more outputs.
        reader.wait_outputs(before + 50 + 100 * kill, Duration::from_secs(90), &|| {
            service.log()
        });
        service.kill9();
        eprintln!("kill -9 #{kill} after {} outputs", reader.got.len());
    }
    let service = start_service(&b, &index, &log, &ARGS);
    let coords = producing.join().expect("producer thread");
    check_complete(&b, &mut reader, &inputs, &coords, &service);
    let n = repeated(&reader.got);
    eprintln!(
        "{} outputs for {} inputs, {n} repeated",
        reader.got.len(),
        coords.len()
    );
}

/// The index volume fills up mid-stream (a tmpfs of a few MiB, for real): the service stops with
/// exit status 1 and the disk-full error, which says what to do, having committed only records
/// whose outputs were published; once the volume is grown, a restart decides the rest: nothing
/// lost, repeated outputs agree, offsets reach the end. Needs root to mount the volume; elsewhere
/// it says so and checks nothing.
#[test]
fn a_full_index_volume_stops_the_service_and_a_restart_after_it_grows_loses_nothing() {
    let volume = match SmallVolume::mount(3) {
        Ok(volume) => volume,
        Err(why) => {
            eprintln!("a_full_index_volume: not checked, no volume of its own ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&TOPICS);
    let b = broker.bootstrap.clone();
    let inputs = stream(5000, "f");
    let coords = produce(&b, "articles.raw", &inputs, None);
    let index = volume.path().join("index");
    let log = dir.path().join("service.log");
    let mut reader = Reader::new(&b, &OUTPUTS);

    let mut service = start_service(&b, &index, &log, &ARGS);
    let status = service
        .wait(Duration::from_secs(120))
        .unwrap_or_else(|| panic!("still running on a full volume; log:\n{}", service.log()));
    let told = service.log();
    assert_eq!(status.code(), Some(1), "log:\n{told}");
    assert!(
        told.contains("is full") && told.contains("free space on that volume"),
        "the log names the full volume and what to do:\n{told}"
    );
    // Whatever was committed was published first.
    reader.poll_for(Duration::from_secs(1));
    let at_failure = committed(&b, "newsdedup", "articles.raw", 2);
    let published: HashSet<(i32, i64)> = reader.got.iter().map(Output::source).collect();
    for &(partition, offset) in &coords {
        if offset < at_failure.get(&partition).copied().unwrap_or(-1) {
            assert!(
                published.contains(&(partition, offset)),
                "offset {offset} of partition {partition} committed ({at_failure:?}) without an output"
            );
        }
    }
    assert_ne!(
        at_failure,
        ends(&coords),
        "the volume filled before the end"
    );
    eprintln!(
        "stopped on a full volume with {} outputs, committed {at_failure:?}",
        reader.got.len()
    );

    volume.resize(256);
    let service = start_service(&b, &index, &log, &ARGS);
    check_complete(&b, &mut reader, &inputs, &coords, &service);
}

/// A member frozen (SIGSTOP) mid-stream past its session, with records done but not committed, loses its
/// partitions to a second member, which processes and commits them to the end. When the first
/// wakes up it must not commit its stale offsets over the second's: sampled every 50 ms, the
/// committed offsets never go backwards.
#[test]
fn a_lost_assignment_never_moves_commits_backwards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    broker.create_topics(&TOPICS);
    let b = broker.bootstrap.clone();
    let (articles, _) = corpus_inputs(0, 900, "l");
    let (early, late) = articles.split_at(600);
    let coords = produce(&b, "articles.raw", early, None);

    // Both members decide while they hold any partition (`--exclusive-grace-ms 0`), each on its
    // own index. The first commits only every 3 s, so it is frozen with work done but not
    // committed.
    let args = |commit_ms: &'static str| {
        vec![
            "--exclusive-grace-ms",
            "0",
            "--commit-interval-ms",
            commit_ms,
            "--commit-every",
            "1000000",
        ]
    };
    let mut reader = Reader::new(&b, &OUTPUTS);
    let mut first = start_service(
        &b,
        &dir.path().join("index-a"),
        &dir.path().join("a.log"),
        &args("3000"),
    );
    // Frozen mid-stream: whatever it has done since its last commit (every 3 s) is stale once
    // the second member has moved past it.
    reader.wait_outputs(200, Duration::from_secs(90), &|| first.log());
    first.signal("-STOP");
    reader.poll_for(Duration::from_millis(300));
    let at_freeze = committed(&b, "newsdedup", "articles.raw", 2);
    eprintln!(
        "first member frozen with committed {at_freeze:?} and {} outputs",
        reader.got.len()
    );

    // More records; the second member takes every partition and commits past the first's work.
    let mut coords = coords;
    coords.extend(produce(&b, "articles.raw", late, None));
    let ends = ends(&coords);
    let mut second = start_service(
        &b,
        &dir.path().join("index-b"),
        &dir.path().join("b.log"),
        &args("200"),
    );
    // The second member commits to the end.
    wait_committed(&b, &ends, Duration::from_secs(90), &|| second.log());

    // The first wakes up: sample the committed offsets while it notices the lost assignment,
    // rejoins and the group settles.
    first.signal("-CONT");
    let mut lowest: BTreeMap<i32, i64> = ends.clone();
    let woke = Instant::now();
    while woke.elapsed() < Duration::from_secs(15) {
        for (p, o) in committed(&b, "newsdedup", "articles.raw", 2) {
            let l = lowest.entry(p).or_insert(o);
            *l = (*l).min(o);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let a_log = first.log();
    for l in a_log
        .lines()
        .filter(|l| l.contains("lost") || l.contains("commit"))
    {
        eprintln!("first member: {l}");
    }
    assert_eq!(
        lowest, ends,
        "committed offsets went backwards after the frozen member woke up; its log:\n{a_log}"
    );
    assert!(
        a_log.contains("was lost"),
        "the first member never noticed its lost assignment; log:\n{a_log}"
    );
    for s in [&mut first, &mut second] {
        let (status, _) = s.terminate(Duration::from_secs(40));
        assert!(status.success(), "exit {status:?}; log:\n{}", s.log());
    }
}

/// Starts a broker behind a cut proxy with the service's topics (2 input partitions).
fn broker_behind_proxy(dir: &std::path::Path) -> (CutProxy, Broker) {
    let proxy = CutProxy::start();
    let broker = Broker::start_with(dir, &["--advertised", &proxy.addr]);
    proxy.forward_to(&broker.bootstrap);
    broker.create_topics(&TOPICS);
    (proxy, broker)
}

/// The only member of its group, cut off from the broker for 20 s, over three times its session
/// (`session.timeout.ms=6000`) and far past its grace period (`--exclusive-grace-ms 3000`): it
/// loses its assignment, waits, rejoins and resumes. No other member was ever in the group, so
/// it never says "another instance", and every record has an output.
#[test]
fn a_lone_member_resumes_after_an_outage_longer_than_its_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proxy, _broker) = broker_behind_proxy(dir.path());
    let inputs = stream(600, "s");
    let producing = {
        let (addr, inputs) = (proxy.addr.clone(), inputs.clone());
        std::thread::spawn(move || produce_paced(&addr, "articles.raw", &inputs, None, Some(20)))
    };
    let args = [&ARGS[..], &["--exclusive-grace-ms", "3000"]].concat();
    let mut service = start_service(
        &proxy.addr,
        &dir.path().join("index"),
        &dir.path().join("service.log"),
        &args,
    );
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    reader.wait_outputs(100, Duration::from_secs(90), &|| service.log());
    proxy.cut();
    std::thread::sleep(Duration::from_secs(20));
    proxy.restore();
    let restored = Instant::now();
    let before = reader.got.len();
    while reader.got.len() < before + 50 && !producing.is_finished() {
        assert!(
            service.wait(Duration::ZERO).is_none(),
            "the service exited after the outage; log:\n{}",
            service.log()
        );
        assert!(
            restored.elapsed() < Duration::from_secs(90),
            "no progress after the outage; log:\n{}",
            service.log()
        );
        reader.poll_for(Duration::from_millis(100));
    }
    eprintln!("outputs again {:?} after the outage", restored.elapsed());
    producing.join().expect("producer thread");
    let coords = coords_by_seq(&proxy.addr, "articles.raw", 2, inputs.len());
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    check_complete(&proxy.addr, &mut reader, &inputs, &coords, &service);
    let log = service.log();
    assert!(
        log.contains("was lost"),
        "the assignment was never lost: {log}"
    );
    assert!(!log.contains("another instance"), "{log}");
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{log}");
}

/// Backpressure pauses fetching: 4 records in flight at most (`--max-in-flight 4`), their outputs
/// held back 1 s by the producer (`linger.ms`); the broker is cut off as a pause starts
/// (`newsdedup_fetch_paused`), before those outputs are sent. The cut outlasts the session: the
/// assignment is lost, the in-flight records are abandoned and the pressure ends while nothing
/// is assigned. When the partitions come back they must be fetched again (librdkafka keeps an
/// application's pause across a rebalance).
#[test]
fn a_backpressure_pause_does_not_outlive_a_rebalance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proxy, _broker) = broker_behind_proxy(dir.path());
    let (articles, _) = corpus_inputs(0, 40, "p");
    let coords = produce(&proxy.addr, "articles.raw", &articles, None);
    let args = [
        &ARGS[..],
        &[
            "--exclusive-grace-ms",
            "0",
            "--max-in-flight",
            "4",
            "-X",
            "linger.ms=1000",
        ],
    ]
    .concat();
    let service = start_service(
        &proxy.addr,
        &dir.path().join("index"),
        &dir.path().join("service.log"),
        &args,
    );
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    reader.wait_outputs(4, Duration::from_secs(90), &|| service.log());
    // Cut at the start of a pause (seen released, then set again): its records' outputs still
    // wait in the producer.
    let paused = || {
        service
            .http("/metrics")
            .map(|(_, m)| metric(&m, "newsdedup_fetch_paused") == 1.0)
    };
    let start = Instant::now();
    let mut released = false;
    loop {
        match paused() {
            Some(false) => released = true,
            Some(true) if released => break,
            _ => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never paused by backpressure; log:\n{}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    proxy.cut();
    std::thread::sleep(Duration::from_secs(15));
    proxy.restore();
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    check_complete(&proxy.addr, &mut reader, &articles, &coords, &service);
    // The pause was on when the assignment was lost: records were in flight.
    let log = service.log();
    let abandoned: usize = log
        .lines()
        .filter(|l| l.contains("was lost"))
        .filter_map(|l| {
            l.split(": ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert!(
        abandoned > 0,
        "no record in flight when the assignment was lost: {log}"
    );
}

/// A member the group never gives a partition (here: `group.protocol=consumer`, to which Tansu
/// assigns nothing) while records wait beyond the group's committed offsets: `/ready` turns 503
/// after a session timeout (at most half the progress timeout) and `/health` after
/// `--progress-timeout-ms`, both saying what it
/// waits for, and the log says it too. A broker outage meanwhile is reported while it lasts,
/// and the broker is reported reachable again once it is, although no record flows.
#[test]
fn a_member_given_no_partition_turns_unready_then_unhealthy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proxy, _broker) = broker_behind_proxy(dir.path());
    let (articles, _) = corpus_inputs(0, 60, "n");
    produce(&proxy.addr, "articles.raw", &articles[..30], None);
    produce(&proxy.addr, "articles.raw", &articles[30..], None);
    // librdkafka refuses the classic protocol's session settings with this protocol.
    let mut service = start_with_group_settings(
        "run",
        &proxy.addr,
        &dir.path().join("index"),
        &dir.path().join("service.log"),
        &["-X", "group.protocol=consumer"],
        &["--progress-timeout-ms", "25000"],
    );
    service.wait_http();
    let health = |s: &Service, path: &str| -> (u16, serde_json::Value) {
        let (code, body) = s.http(path).unwrap_or_else(|| panic!("no {path}"));
        (code, serde_json::from_str(&body).expect("health JSON"))
    };
    // An outage first: reported while it lasts.
    std::thread::sleep(Duration::from_secs(3));
    proxy.cut();
    let cut = Instant::now();
    let mut unreachable_seen = false;
    while cut.elapsed() < Duration::from_secs(6) {
        let (_, body) = health(&service, "/health");
        unreachable_seen |= body["broker"] == "unreachable";
        std::thread::sleep(Duration::from_millis(200));
    }
    proxy.restore();
    assert!(unreachable_seen, "the outage was never reported");

    let start = Instant::now();
    let (mut unready_at, mut unhealthy_at) = (None, None);
    while unhealthy_at.is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "/health still 200 after {:?}: {}\nlog:\n{}",
            start.elapsed(),
            health(&service, "/health").1,
            service.log()
        );
        let (ready, ready_body) = health(&service, "/ready");
        if ready == 503 && unready_at.is_none() && ready_body["broker"] == "up" {
            unready_at = Some(start.elapsed());
            let what = ready_body["waiting_for"].as_str().unwrap_or_default();
            assert!(
                what.contains("holding no partition of articles.raw"),
                "{ready_body}"
            );
        }
        let (live, body) = health(&service, "/health");
        if live == 503 {
            assert_eq!(body["status"], "waiting", "{body}");
            assert_eq!(body["broker"], "up", "{body}");
            assert_eq!(body["assigned_partitions"], 0, "{body}");
            unhealthy_at = Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!("/ready 503 after {unready_at:?}, /health 503 after {unhealthy_at:?}");
    assert!(
        unready_at.is_some(),
        "/ready never said 503 with the broker up"
    );
    assert!(unready_at < unhealthy_at);
    let log = service.log();
    assert!(log.contains("Kafka broker reachable again"), "{log}");
    assert!(
        log.contains("records wait beyond group \"newsdedup\"'s committed offsets"),
        "{log}"
    );
    assert!(log.contains("/health answers 503 (waiting)"), "{log}");
    // Still answering, and stops cleanly.
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());
}

/// The coordinator does not answer OffsetFetch while the service joins its group (the proxy
/// swallows those requests until 5 s after the service said it cannot read them): the partitions
/// stay paused until their committed offsets are read, then resume there, and the member keeps
/// its assignment meanwhile (every wait for the offsets is short). Nothing decided
/// before the restart is read again (with `earliest`, librdkafka alone would start them at their
/// beginning), and every later record is decided once.
#[test]
fn partitions_whose_committed_offsets_cannot_be_read_stay_paused_until_they_can() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proxy, _broker) = broker_behind_proxy(dir.path());
    let (before, _) = corpus_inputs(0, 120, "c1");
    let first_coords = produce(&proxy.addr, "articles.raw", &before, None);
    let index = dir.path().join("index");
    let mut service = start_service(&proxy.addr, &index, &dir.path().join("first.log"), &ARGS);
    wait_committed(
        &proxy.addr,
        &ends(&first_coords),
        Duration::from_secs(120),
        &|| service.log(),
    );
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{}", service.log());

    proxy.swallow(9);
    let mut service = start_service(&proxy.addr, &index, &dir.path().join("second.log"), &ARGS);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !service.log().contains("cannot read the committed offsets") {
        assert!(
            Instant::now() < deadline,
            "the committed offsets were read despite the proxy; log:\n{}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(5));
    proxy.answer_all();
    let (after, _) = corpus_inputs(120, 60, "c2");
    let later_coords = produce(&proxy.addr, "articles.raw", &after, None);
    let mut reader = Reader::new(&proxy.addr, &OUTPUTS);
    let want: HashSet<(i32, i64)> = later_coords.iter().copied().collect();
    reader.wait_covered(&want, Duration::from_secs(120), &|| service.log());
    reader.poll_for(Duration::from_secs(2));
    let log = service.log();
    assert!(
        log.contains("committed offsets of articles.raw read"),
        "{log}"
    );
    // The wait for them never held the poll thread past `max.poll.interval.ms` (10 s here): a
    // 10 s wait in the assign callback had the member leave the group and lose its assignment.
    assert!(
        !log.contains("was lost") && !log.contains("maximum poll interval"),
        "the member left its group while waiting for committed offsets; log:\n{log}"
    );
    assert_eq!(
        repeated(&reader.got),
        0,
        "records decided before the restart were read again; log:\n{log}"
    );
    assert_eq!(reader.got.len(), before.len() + after.len(), "{log}");
    let (status, _) = service.terminate(Duration::from_secs(40));
    assert!(status.success(), "exit {status:?}; log:\n{log}");
}

/// A standby whose requests for the ends of the partitions go unanswered (the proxy drops every
/// ListOffsets) keeps applying what the output topics bring: the ends are asked off its reading
/// and applying. Asked on the reading thread (30 s each), applying stalled for minutes.
#[test]
fn a_standby_applies_while_the_ends_of_its_partitions_cannot_be_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proxy, _broker) = broker_behind_proxy(dir.path());
    let (before, _) = corpus_inputs(0, 80, "e1");
    let first_coords = produce(&proxy.addr, "articles.raw", &before, None);
    let index = dir.path().join("index");
    let service = start_service(&proxy.addr, &index, &dir.path().join("run.log"), &ARGS);
    wait_committed(
        &proxy.addr,
        &ends(&first_coords),
        Duration::from_secs(120),
        &|| service.log(),
    );
    let standby = start_command(
        "standby",
        &proxy.addr,
        &dir.path().join("standby"),
        &dir.path().join("standby.log"),
        &[],
    );
    standby.wait_http();
    let applied = || {
        standby
            .http("/metrics")
            .map(|(_, body)| metric(&body, "newsdedup_standby_records_total"))
            .unwrap_or(0.0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while applied() < before.len() as f64 {
        assert!(Instant::now() < deadline, "standby: {}", standby.log());
        std::thread::sleep(Duration::from_millis(200));
    }

    proxy.swallow(2);
    // Long enough for the standby to ask the ends at least once (every 2 s).
    std::thread::sleep(Duration::from_secs(4));
    let (after, _) = corpus_inputs(80, 60, "e2");
    let later_coords = produce(&proxy.addr, "articles.raw", &after, None);
    wait_committed(
        &proxy.addr,
        &ends(&later_coords),
        Duration::from_secs(120),
        &|| service.log(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while applied() < (before.len() + after.len()) as f64 {
        assert!(
            Instant::now() < deadline,
            "the standby applied {} of {} records within 20 s of their publication while its ListOffsets went unanswered; log:\n{}",
            applied(),
            before.len() + after.len(),
            standby.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    proxy.answer_all();
}
