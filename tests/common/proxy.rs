//! A TCP proxy in front of the broker that a test can cut: `cut` closes every open connection
//! and closes each new one at once until `restore`, which is what a client sees of a broker
//! outage or a network partition (connections reset, reconnects failing). The broker advertises
//! the proxy's address (`Broker::start_with(["--advertised", proxy.addr])`), so every client
//! connection after the bootstrap goes through it.

use parking_lot::Mutex;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Default)]
struct State {
    upstream: Mutex<Option<String>>,
    cut: AtomicBool,
    stop: AtomicBool,
    /// The API key whose requests are dropped (`swallow`), if any.
    swallowed: Mutex<Option<i16>>,
    /// Both ends of every open connection (closed by `cut`).
    open: Mutex<Vec<TcpStream>>,
}

pub struct CutProxy {
    /// "127.0.0.1:PORT".
    pub addr: String,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl CutProxy {
    /// Listens now (so the address can be advertised before the broker starts); forwards once
    /// `forward_to` names the upstream.
    pub fn start() -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy listen");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        listener.set_nonblocking(true).expect("nonblocking");
        let state = Arc::new(State::default());
        let s = Arc::clone(&state);
        let accept = std::thread::Builder::new()
            .name("cut-proxy".into())
            .spawn(move || accept_loop(&listener, &s))
            .expect("proxy thread");
        CutProxy {
            addr,
            state,
            accept: Some(accept),
        }
    }

    pub fn forward_to(&self, upstream: &str) {
        *self.state.upstream.lock() = Some(upstream.to_owned());
    }

    /// Closes every open connection; new ones are closed at once until `restore`.
    pub fn cut(&self) {
        self.state.cut.store(true, Ordering::SeqCst);
        for s in self.state.open.lock().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.state.cut.store(false, Ordering::SeqCst);
    }

    /// Drops every request of the Kafka API `api_key` (e.g. 9, OffsetFetch) from now on, until
    /// `answer_all`: the client's request times out unanswered.
    pub fn swallow(&self, api_key: i16) {
        *self.state.swallowed.lock() = Some(api_key);
    }

    pub fn answer_all(&self) {
        *self.state.swallowed.lock() = None;
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.cut();
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    while !state.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let upstream = state.upstream.lock().clone();
                match upstream {
                    Some(up) if !state.cut.load(Ordering::SeqCst) => connect(client, &up, state),
                    // Cut (or not forwarding yet): the connection is dropped, i.e. closed.
                    _ => drop(client),
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn connect(client: TcpStream, upstream: &str, state: &Arc<State>) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = client.set_nonblocking(false);
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
        client.try_clone(),
        server.try_clone(),
        client.try_clone(),
        server.try_clone(),
    ) else {
        return;
    };
    state.open.lock().extend([c3, s3]);
    pipe_requests(client, s2, Arc::clone(state));
    pipe(server, c2);
}

/// Copies the client's requests (Kafka frames: a 4-byte length, then the API key first) to the
/// server on its own thread, dropping those of the swallowed API; closes both when either side
/// ends.
fn pipe_requests(mut from: TcpStream, mut to: TcpStream, state: Arc<State>) {
    std::thread::spawn(move || {
        let mut len = [0u8; 4];
        while from.read_exact(&mut len).is_ok() {
            let mut frame = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap_or(0)];
            if from.read_exact(&mut frame).is_err() {
                break;
            }
            let api = frame.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]]));
            if api.is_some() && api == *state.swallowed.lock() {
                continue;
            }
            if to
                .write_all(&len)
                .and_then(|()| to.write_all(&frame))
                .is_err()
            {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// Copies `from` into `to` on its own thread; closes both when either side ends.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}
