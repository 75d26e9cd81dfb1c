//! A TCP proxy in front of the broker that a test can cut: `cut` closes every open connection
//! and closes each new one at once until `restore`, which is what a client sees of a broker
//! outage or a network partition (connections reset, reconnects failing). The broker advertises
//! the proxy's address (`Broker::start_with(["--advertised", proxy.addr])`), so every client
//! connection after the bootstrap goes through it.

use parking_lot::Mutex;
use std::io::ErrorKind;
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
    pipe(client, s2);
    pipe(server, c2);
}

/// Copies `from` into `to` on its own thread; closes both when either side ends.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}
