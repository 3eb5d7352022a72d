//! Blocking std sockets, one reader thread per connection, events on one channel.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use ferrocluster_sentinel::{Addr, ConnId, Value};

use crate::resp;

/// Which side owns a connection: the resolver, or the tool's own data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// A connection the resolver asked for.
    Engine(ConnId),
    /// The tool's data connection to the resolved primary (a one-connection "pool").
    Data(u64),
}

/// What a connection thread reports.
#[derive(Debug)]
pub enum Event {
    /// Connected; the stream is the writing half.
    Connected(Key, TcpStream),
    /// Could not connect.
    ConnectFailed(Key, String),
    /// One decoded reply.
    Reply(Key, Value),
    /// Closed by the peer, a socket error, or our own shutdown.
    Closed(Key, String),
}

/// The open connections' writing halves and the event channel.
pub struct Net {
    tx: Sender<Event>,
    rx: Receiver<Event>,
    writers: HashMap<Key, TcpStream>,
}

impl Net {
    /// An empty set of connections.
    pub fn new() -> Net {
        let (tx, rx) = crossbeam_channel::unbounded();
        Net {
            tx,
            rx,
            writers: HashMap::new(),
        }
    }

    /// The event channel.
    pub fn events(&self) -> &Receiver<Event> {
        &self.rx
    }

    /// Starts connecting in a thread; the outcome arrives as an event.
    pub fn connect(&self, key: Key, addr: Addr, timeout: Duration) {
        let tx = self.tx.clone();
        std::thread::spawn(move || run_conn(key, addr, timeout, tx));
    }

    /// Records the writing half of a connected stream.
    pub fn add(&mut self, key: Key, stream: TcpStream) {
        self.writers.insert(key, stream);
    }

    /// Writes one RESP command.
    ///
    /// # Errors
    /// The connection is unknown or the write failed.
    pub fn send(&mut self, key: Key, argv: &[Vec<u8>]) -> Result<(), String> {
        let s = self.writers.get_mut(&key).ok_or("not connected")?;
        s.write_all(&resp::encode_command(argv))
            .map_err(|e| e.to_string())
    }

    /// Shuts the connection down (its reader thread then ends).
    pub fn close(&mut self, key: Key) {
        if let Some(s) = self.writers.remove(&key) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn run_conn(key: Key, addr: Addr, timeout: Duration, tx: Sender<Event>) {
    let stream = match connect(&addr, timeout) {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Event::ConnectFailed(key, e));
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let mut reader = match stream.try_clone() {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Event::ConnectFailed(key, e.to_string()));
            return;
        }
    };
    if tx.send(Event::Connected(key, stream)).is_err() {
        return;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let why = loop {
        match reader.read(&mut chunk) {
            Ok(0) => break "closed by peer".to_string(),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                match resp::decode_all(&mut buf) {
                    Ok(values) => {
                        for v in values {
                            if tx.send(Event::Reply(key, v)).is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = reader.shutdown(Shutdown::Both);
                        break e;
                    }
                }
            }
            Err(e) => break e.to_string(),
        }
    };
    let _ = tx.send(Event::Closed(key, why));
}

fn connect(addr: &Addr, timeout: Duration) -> Result<TcpStream, String> {
    let mut last = format!("{addr}: no address");
    let targets = (addr.host.as_str(), addr.port)
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?;
    for sa in targets {
        match TcpStream::connect_timeout(&sa, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}
