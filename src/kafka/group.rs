//! What the broker says about the consumer group: its state and members (DescribeGroups, asked
//! of the group's coordinator), and this client's own member id.
//!
//! rdkafka's `fetch_group_list` finds the group through ListGroups first, which some brokers
//! answer with nothing (Tansu 0.6 lists no group at all): the group is then described with a
//! plain DescribeGroups v0 request ([`describe_plain`]), over PLAINTEXT only. (librdkafka's admin
//! call `rd_kafka_DescribeConsumerGroups` would ask the coordinator directly, but its
//! coordinator path aborts the process on an assertion when connections drop, and Tansu answers
//! its ConsumerGroupDescribe with a group without members.) The rdkafka crate has no wrapper for
//! `rd_kafka_memberid`: that FFI call is kept to this module.

use rdkafka::bindings as rd;
use rdkafka::consumer::{Consumer, ConsumerContext};
use std::ffi::{c_char, c_void, CStr};
use std::time::Duration;

/// One member as the group's coordinator lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub client_id: String,
    pub host: String,
}

impl Member {
    /// `client.id@host (member id)`, or the member id alone when the broker gives neither.
    pub fn describe(&self) -> String {
        let host = self.host.trim_start_matches('/');
        if self.client_id.is_empty() && host.is_empty() {
            format!("member {}", self.id)
        } else {
            format!("{}@{host} (member {})", self.client_id, self.id)
        }
    }
}

/// The group as described once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// `Stable` once a rebalance is over; `PreparingRebalance` / `CompletingRebalance` during
    /// one, `Empty` without members (librdkafka's names).
    pub state: String,
    pub members: Vec<Member>,
    /// False when the members cannot be read (no broker lists the group and it cannot be asked
    /// directly): `members` is then empty, not known to be.
    pub known: bool,
}

impl GroupView {
    /// A group no broker lists, whose members cannot be read.
    pub fn unknown() -> GroupView {
        GroupView {
            state: "Unlisted".into(),
            members: Vec::new(),
            known: false,
        }
    }

    /// No rebalance in progress: every listed member has its assignment.
    pub fn stable(&self) -> bool {
        self.state == "Stable"
    }
}

/// Frees a string librdkafka allocated.
struct RdString {
    rk: *mut rd::rd_kafka_t,
    ptr: *mut c_char,
}

impl Drop for RdString {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by librdkafka for `rk` and is freed once, here.
        unsafe { rd::rd_kafka_mem_free(self.rk, self.ptr.cast::<c_void>()) }
    }
}

/// This client's member id in its group (None before its first join, or after leaving).
pub fn member_id<C: ConsumerContext>(consumer: &impl Consumer<C>) -> Option<String> {
    let rk = consumer.client().native_ptr();
    // SAFETY: `rk` is the live handle of `consumer`, borrowed for the call; the returned string
    // is owned by us and freed by `RdString`.
    let ptr = unsafe { rd::rd_kafka_memberid(rk) };
    if ptr.is_null() {
        return None;
    }
    let owned = RdString { rk, ptr };
    // SAFETY: a non-null result is a NUL-terminated string.
    let id = unsafe { CStr::from_ptr(owned.ptr) }
        .to_string_lossy()
        .into_owned();
    (!id.is_empty()).then_some(id)
}

/// The group as the brokers' ListGroups and its coordinator's DescribeGroups give it (rdkafka's
/// `fetch_group_list`). Ok(None) when no broker lists the group: on Apache Kafka, a group with no
/// member and no committed offset; on a broker that lists no group at all (Tansu 0.6), unknown.
pub fn describe<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    group: &str,
    timeout: Duration,
) -> Result<Option<GroupView>, String> {
    let list = consumer
        .fetch_group_list(Some(group), timeout)
        .map_err(|e| e.to_string())?;
    let Some(g) = list.groups().iter().find(|g| g.name() == group) else {
        return Ok(None);
    };
    Ok(Some(GroupView {
        state: g.state().to_owned(),
        members: g
            .members()
            .iter()
            .map(|m| Member {
                id: m.id().to_owned(),
                client_id: m.client_id().to_owned(),
                host: m.client_host().to_owned(),
            })
            .collect(),
        known: true,
    }))
}

/// DescribeGroups v0 over a plain connection: FindCoordinator v0 at the first answering
/// bootstrap server, then DescribeGroups v0 at the coordinator. For brokers that list no group
/// (ListGroups), with `security.protocol=plaintext` only (the caller checks).
pub fn describe_plain(
    bootstrap: &str,
    group: &str,
    timeout: Duration,
) -> Result<GroupView, String> {
    let mut last = String::from("no bootstrap server");
    for server in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let server = server
            .trim_start_matches("PLAINTEXT://")
            .trim_start_matches("plaintext://");
        match find_coordinator(server, group, timeout) {
            Ok(coordinator) => return describe_at(&coordinator, group, timeout),
            Err(e) => last = format!("{server}: {e}"),
        }
    }
    Err(last)
}

const FIND_COORDINATOR: i16 = 10;
const DESCRIBE_GROUPS: i16 = 15;
/// Largest answer read (a group of thousands of members fits easily).
const MAX_ANSWER: usize = 4 << 20;

fn find_coordinator(server: &str, group: &str, timeout: Duration) -> Result<String, String> {
    let mut body = Vec::new();
    put_str(&mut body, group)?;
    let answer = request(server, FIND_COORDINATOR, &body, timeout)?;
    let mut r = Reader(&answer);
    let code = r.i16()?;
    let _node = r.i32()?;
    let host = r.string()?;
    let port = r.i32()?;
    if code != 0 {
        return Err(format!("FindCoordinator error code {code}"));
    }
    Ok(format!("{host}:{port}"))
}

fn describe_at(coordinator: &str, group: &str, timeout: Duration) -> Result<GroupView, String> {
    let mut body = 1i32.to_be_bytes().to_vec();
    put_str(&mut body, group)?;
    let answer = request(coordinator, DESCRIBE_GROUPS, &body, timeout)?;
    let mut r = Reader(&answer);
    let groups = r.i32()?;
    for _ in 0..groups.max(0) {
        let code = r.i16()?;
        let id = r.string()?;
        let state = r.string()?;
        let _protocol_type = r.string()?;
        let _protocol = r.string()?;
        let n = r.i32()?;
        let mut members = Vec::new();
        for _ in 0..n.max(0) {
            let member_id = r.string()?;
            let client_id = r.string()?;
            let host = r.string()?;
            r.bytes()?;
            r.bytes()?;
            members.push(Member {
                id: member_id,
                client_id,
                host,
            });
        }
        if id != group {
            continue;
        }
        if code != 0 {
            return Err(format!("DescribeGroups error code {code}"));
        }
        return Ok(GroupView {
            state,
            members,
            known: true,
        });
    }
    Err("the coordinator described no group".into())
}

fn put_str(buf: &mut Vec<u8>, s: &str) -> Result<(), String> {
    let len = i16::try_from(s.len()).map_err(|_| "string too long".to_owned())?;
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
    Ok(())
}

/// One request (header v1, client id `newsdedup`) and its answer after the correlation id.
fn request(server: &str, api: i16, body: &[u8], timeout: Duration) -> Result<Vec<u8>, String> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let addr = server
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {server}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {server}"))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let correlation = 0x6e64_i32;
    let mut msg = Vec::with_capacity(body.len() + 32);
    msg.extend_from_slice(&api.to_be_bytes());
    msg.extend_from_slice(&0i16.to_be_bytes());
    msg.extend_from_slice(&correlation.to_be_bytes());
    put_str(&mut msg, "newsdedup")?;
    msg.extend_from_slice(body);
    let len = i32::try_from(msg.len()).map_err(|_| "request too long".to_owned())?;
    s.write_all(&len.to_be_bytes())
        .and_then(|()| s.write_all(&msg))
        .map_err(|e| format!("{server}: {e}"))?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .map_err(|e| format!("{server}: {e}"))?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|l| (4..=MAX_ANSWER).contains(l))
        .ok_or_else(|| format!("{server}: answer of unexpected size"))?;
    let mut answer = vec![0u8; len];
    s.read_exact(&mut answer)
        .map_err(|e| format!("{server}: {e}"))?;
    let mut r = Reader(&answer);
    if r.i32()? != correlation {
        return Err(format!("{server}: answer to another request"));
    }
    Ok(answer[4..].to_vec())
}

/// Reads the protocol's big-endian fields, failing (never panicking) on a short answer.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("answer cut short".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.i16()?;
        let Ok(n) = usize::try_from(n) else {
            return Ok(String::new());
        };
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    fn bytes(&mut self) -> Result<(), String> {
        let n = self.i32()?;
        if let Ok(n) = usize::try_from(n) {
            self.take(n)?;
        }
        Ok(())
    }
}
