//! Fuzz target: the TLS-wrapped RESP path — `ferrocluster_host::tls::TlsStream` (the wrapper
//! every TLS port reads through) over an in-memory non-blocking pipe, feeding the server's
//! RESP parser (`examples/server/src/resp.rs`, included by path).
//!
//! Input: mode byte, seed byte, then the payload.
//! * mode bit 0 = 0, honest: a client session writes the payload in pieces (sizes from the
//!   seed) through a handshake with the server session; the server reads with varying buffer
//!   sizes. Properties: the server's plaintext is the payload byte for byte; parsing it
//!   request by request gives the same requests as parsing the whole payload at once.
//! * mode bit 0 = 1, hostile: the payload is raw bytes on the wire — before any handshake
//!   (bit 1 = 0: a garbage ClientHello) or after an honest handshake (bit 1 = 1: forged
//!   records). Properties: no panic; reads end in an error or `WouldBlock`, never in
//!   plaintext the client did not send (forged records cannot authenticate).
#![no_main]

#[allow(dead_code)]
#[path = "../../examples/server/src/resp.rs"]
mod resp;

use ferrocluster_host::tls::rustls::{ClientConnection, Connection, ServerConnection};
use ferrocluster_host::tls::{rustls, TlsConfigs, TlsSettings, TlsStream};
use libfuzzer_sys::fuzz_target;
use resp::{parse_request, Limits, Parsed};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

/// One direction of an in-memory socket: `WouldBlock` when empty.
#[derive(Clone, Default)]
struct Pipe(Rc<RefCell<VecDeque<u8>>>);

/// A socket end: reads from `rx`, writes to `tx`.
struct End {
    rx: Pipe,
    tx: Pipe,
}

impl Read for End {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut q = self.rx.0.borrow_mut();
        if q.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(q.len());
        for (b, v) in buf.iter_mut().zip(q.drain(..n)) {
            *b = v;
        }
        Ok(n)
    }
}

impl Write for End {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tx.0.borrow_mut().extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn configs() -> &'static TlsConfigs {
    static C: OnceLock<TlsConfigs> = OnceLock::new();
    C.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fc-fuzz-tls-{}", std::process::id()));
        ferrocluster_testkit::certs::TestCa::new(&dir, "fuzz").node("n");
        let s = TlsSettings {
            cert_file: Some(dir.join("n.crt")),
            key_file: Some(dir.join("n.key")),
            ca_cert_file: Some(dir.join("ca.crt")),
            ..TlsSettings::default()
        };
        TlsConfigs::load(&s).unwrap()
    })
}

fn pair() -> (TlsStream<End>, TlsStream<End>, Pipe) {
    let c = configs();
    let (a, b) = (Pipe::default(), Pipe::default());
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let cc = ClientConnection::new(
        Arc::clone(&c.client),
        rustls::pki_types::ServerName::IpAddress(ip.into()),
    )
    .unwrap();
    let sc = ServerConnection::new(Arc::clone(&c.server)).unwrap();
    let client = TlsStream::new(
        End {
            rx: b.clone(),
            tx: a.clone(),
        },
        Connection::Client(cc),
    );
    let server = TlsStream::new(
        End {
            rx: a.clone(),
            tx: b,
        },
        Connection::Server(sc),
    );
    (client, server, a)
}

/// Every request of `stream`, parsed from the start as the I/O thread does.
fn requests(stream: &[u8]) -> Vec<Result<Vec<Vec<u8>>, String>> {
    let limits = Limits {
        max_bulk_len: 1 << 20,
        unauthenticated: false,
    };
    let (mut args, mut words) = (Vec::new(), Vec::new());
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < stream.len() {
        let buf = &stream[pos..];
        match parse_request(buf, &mut args, &mut words, limits) {
            Parsed::Command { consumed, inline } => {
                let from: &[u8] = if inline { &words } else { buf };
                out.push(Ok(args.iter().map(|r| from[r.clone()].to_vec()).collect()));
                pos += consumed;
            }
            Parsed::Incomplete { .. } => break,
            Parsed::Error(e) => {
                out.push(Err(format!("{e:?}")));
                break;
            }
        }
    }
    out
}

/// Reads what the server has, with buffer sizes from `seed`, until it would block.
fn drain(server: &mut TlsStream<End>, seed: &mut u32, got: &mut Vec<u8>) -> Result<(), ()> {
    loop {
        *seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let mut buf = vec![0u8; 1 + (*seed >> 16) as usize % 8192];
        match server.read(&mut buf) {
            Ok(0) => return Err(()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(_) => return Err(()),
        }
        let _ = server.flush_pending();
    }
}

fn handshake(client: &mut TlsStream<End>, server: &mut TlsStream<End>) {
    let mut sink = [0u8; 64];
    for _ in 0..16 {
        let _ = client.flush_pending();
        let _ = client.write(b"");
        let _ = server.read(&mut sink);
        let _ = server.flush_pending();
        let _ = client.read(&mut sink);
        let _ = client.flush_pending();
        if !client.is_handshaking() && !server.is_handshaking() {
            return;
        }
    }
    panic!("honest handshake did not finish");
}

fuzz_target!(|data: &[u8]| {
    let [mode, seed, payload @ ..] = data else {
        return;
    };
    let mut seed = u32::from(*seed) | 1;
    let (mut client, mut server, wire) = pair();
    let mut got = Vec::new();
    if mode & 1 == 0 {
        handshake(&mut client, &mut server);
        let mut sent = 0;
        while sent < payload.len() {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let n = (1 + (seed >> 16) as usize % 4096).min(payload.len() - sent);
            let took = client
                .write(&payload[sent..sent + n])
                .expect("client write");
            sent += took;
            client.flush_pending().expect("client flush");
            drain(&mut server, &mut seed, &mut got).expect("honest records read");
        }
        drain(&mut server, &mut seed, &mut got).expect("honest records read");
        assert_eq!(got, payload, "plaintext differs from what the client sent");
        assert_eq!(requests(&got), requests(payload));
    } else {
        if mode & 2 != 0 {
            handshake(&mut client, &mut server);
        }
        wire.0.borrow_mut().extend(payload);
        let _ = drain(&mut server, &mut seed, &mut got);
        assert!(got.is_empty(), "forged records produced plaintext");
        let _ = requests(&got);
    }
});
