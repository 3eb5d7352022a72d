//! TLS for every port, with rustls (the `ring` provider: no OpenSSL, no C build beyond ring's
//! own): Valkey 9.1's `tls-*` directives read into a server and a client configuration
//! ([`TlsSettings`] → [`TlsConfigs`]), a swappable holder so `CONFIG SET tls-*` applies to new
//! connections without a restart ([`TlsReloader`]), and a non-blocking stream over a mio
//! [`TcpStream`] that every connection kind (client port, cluster bus, replication) reads and
//! writes through ([`Stream`]).
//!
//! # What Valkey does and what this follows (Valkey `src/tls.c`)
//! * One certificate and key (`tls-cert-file`, `tls-key-file`) serve both sides: accepted
//!   connections present it, and so do outgoing ones (bus links, a replica's link to its
//!   primary) — Valkey's `tls-client-cert-file` / `tls-client-key-file` override the latter.
//! * The peer is verified against `tls-ca-cert-file` and / or `tls-ca-cert-dir`. Accepted
//!   connections ask for a client certificate per `tls-auth-clients` (`yes`: required, `optional`:
//!   checked when sent, `no`: not asked for). Outgoing connections check the server's chain
//!   against the CA but **not its host name**: Valkey sets no `SSL_set1_host` on cluster bus or
//!   replication links, and nodes are addressed by IP. [`ChainOnlyVerifier`] does that.
//! * `tls-protocols` (`TLSv1.2 TLSv1.3` by default; rustls has no TLSv1 / TLSv1.1, so naming
//!   them is refused), `tls-ciphersuites` (TLS 1.3, OpenSSL names joined by `:`) and
//!   `tls-ciphers` (TLS 1.2, OpenSSL names joined by `:`, `DEFAULT` / `HIGH` for all that rustls
//!   has) select the rustls suites; an unknown name is an error naming it.
//! * `tls-session-caching yes` keeps `tls-session-cache-size` sessions for resumption
//!   (`no`: none). rustls' cache evicts by size only: `tls-session-cache-timeout` is
//!   validated and reported but does not expire sessions by age (a documented difference).
//! * `tls-ca-cert-dir`: every regular file of the directory that holds PEM certificates is
//!   read (OpenSSL looks certificates up by hashed name; the set of trusted CAs is the same
//!   when the directory was made with `c_rehash`/`openssl rehash`).

use mio::net::TcpStream;
/// The rustls crate these types come from (for a host that builds sessions itself).
pub use rustls;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{
    ClientConfig, ClientConnection, Connection, DigitallySignedStruct, RootCertStore, ServerConfig,
    ServerConnection, SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};
use std::io::{self, ErrorKind, Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// `tls-auth-clients`: whether accepted connections must present a certificate of the CA
/// (Valkey `TLS_CLIENT_AUTH_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthClients {
    /// `yes` (the default): a connection without a certificate of the CA fails the handshake.
    #[default]
    Yes,
    /// `no`: no certificate is asked for.
    No,
    /// `optional`: asked for; one that is sent must verify, none at all is accepted.
    Optional,
}

impl AuthClients {
    /// Parses the directive's word (`yes`, `no`, `optional`, any case).
    ///
    /// # Errors
    /// Another word: `argument must be 'yes', 'no' or 'optional'`.
    pub fn parse(word: &str) -> Result<AuthClients, String> {
        match word.to_ascii_lowercase().as_str() {
            "yes" => Ok(AuthClients::Yes),
            "no" => Ok(AuthClients::No),
            "optional" => Ok(AuthClients::Optional),
            _ => Err("argument must be 'yes', 'no' or 'optional'".into()),
        }
    }

    /// The directive's word (CONFIG GET, CONFIG REWRITE).
    pub fn as_str(self) -> &'static str {
        match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
    }
}

/// Valkey's default `tls-session-cache-size` (entries).
pub const DEFAULT_SESSION_CACHE_SIZE: usize = 20 * 1024;

/// Valkey's default `tls-session-cache-timeout` (seconds).
pub const DEFAULT_SESSION_CACHE_TIMEOUT: u64 = 300;

/// The `tls-*` directives that make the TLS configurations (Valkey 9.1 names; the ports and
/// `tls-cluster` / `tls-replication` are the host's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls-cert-file`: PEM certificate chain presented on accepted connections (and on
    /// outgoing ones unless `client_cert_file` is set).
    pub cert_file: Option<PathBuf>,
    /// `tls-key-file`: its PEM private key (PKCS#8, PKCS#1 or SEC1; not encrypted).
    pub key_file: Option<PathBuf>,
    /// `tls-client-cert-file`: the chain presented on outgoing connections, if not the above.
    pub client_cert_file: Option<PathBuf>,
    /// `tls-client-key-file`: its key.
    pub client_key_file: Option<PathBuf>,
    /// `tls-ca-cert-file`: PEM CA certificates peers are verified against.
    pub ca_cert_file: Option<PathBuf>,
    /// `tls-ca-cert-dir`: a directory of PEM CA certificates (see the module docs).
    pub ca_cert_dir: Option<PathBuf>,
    /// `tls-auth-clients`.
    pub auth_clients: AuthClients,
    /// `tls-protocols`, as written (`""` = Valkey's default, TLS 1.2 and 1.3).
    pub protocols: String,
    /// `tls-ciphersuites` (TLS 1.3), as written (`""` = every suite rustls has).
    pub ciphersuites: String,
    /// `tls-ciphers` (TLS 1.2), as written (`""` = every suite rustls has).
    pub ciphers: String,
    /// `tls-session-caching`.
    pub session_caching: bool,
    /// `tls-session-cache-size`, entries.
    pub session_cache_size: usize,
    /// `tls-session-cache-timeout`, seconds (see the module docs).
    pub session_cache_timeout: u64,
}

impl Default for TlsSettings {
    /// Valkey 9.1's defaults: no files, `tls-auth-clients yes`, caching on, 20480 sessions,
    /// 300 s.
    fn default() -> TlsSettings {
        TlsSettings {
            cert_file: None,
            key_file: None,
            client_cert_file: None,
            client_key_file: None,
            ca_cert_file: None,
            ca_cert_dir: None,
            auth_clients: AuthClients::Yes,
            protocols: String::new(),
            ciphersuites: String::new(),
            ciphers: String::new(),
            session_caching: true,
            session_cache_size: DEFAULT_SESSION_CACHE_SIZE,
            session_cache_timeout: DEFAULT_SESSION_CACHE_TIMEOUT,
        }
    }
}

/// Parses `tls-protocols` (Valkey `parseProtocolsConfig`: words separated by spaces, any
/// case). Empty: TLS 1.2 and 1.3, Valkey's default.
///
/// # Errors
/// An unknown word (Valkey's text), or `TLSv1` / `TLSv1.1`, which rustls does not implement.
pub fn parse_protocols(text: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut out = Vec::new();
    for w in text.split_ascii_whitespace() {
        let v = match w.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "tls-protocols: {w} is not supported (rustls implements TLSv1.2 and TLSv1.3)"
                ))
            }
            _ => {
                return Err(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1', \
                     'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."
                        .into(),
                )
            }
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        out = vec![&rustls::version::TLS12, &rustls::version::TLS13];
    }
    Ok(out)
}

/// The OpenSSL name of a rustls (`ring`) suite, as `tls-ciphersuites` / `tls-ciphers` write it.
fn openssl_name(s: SupportedCipherSuite) -> &'static str {
    use rustls::CipherSuite as C;
    match s.suite() {
        C::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        C::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        C::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        _ => "",
    }
}

/// Picks the suites of one protocol version from `all` by a `:`-separated list of OpenSSL
/// names (empty, `DEFAULT`, `HIGH` or `ALL`: every one), in the list's order.
fn pick_suites(
    all: &[SupportedCipherSuite],
    text: &str,
    tls13: bool,
    directive: &str,
) -> Result<Vec<SupportedCipherSuite>, String> {
    let of_version: Vec<SupportedCipherSuite> = all
        .iter()
        .copied()
        .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)) == tls13)
        .collect();
    let mut out = Vec::new();
    for w in text.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        if ["DEFAULT", "HIGH", "ALL"].contains(&w) {
            for s in &of_version {
                if !out.contains(s) {
                    out.push(*s);
                }
            }
            continue;
        }
        let Some(s) = of_version.iter().find(|s| openssl_name(**s) == w) else {
            let known: Vec<&str> = of_version.iter().map(|s| openssl_name(*s)).collect();
            return Err(format!(
                "{directive}: unknown cipher '{w}' (known: {})",
                known.join(":")
            ));
        };
        if !out.contains(s) {
            out.push(*s);
        }
    }
    if text.split([':', ',', ' ']).all(str::is_empty) {
        out = of_version;
    }
    Ok(out)
}

/// The `ring` provider narrowed to the suites `tls-ciphersuites` and `tls-ciphers` name.
///
/// # Errors
/// An unknown suite name.
pub fn provider(settings: &TlsSettings) -> Result<CryptoProvider, String> {
    // rustls 0.23.4x deprecates `ring`'s provider for lacking post-quantum key exchange; it is
    // kept because `aws-lc-rs`, the other provider, needs cmake and a C toolchain to build.
    // Valkey 9.1 offers the key exchanges of the OpenSSL it links (X25519, P-256, P-384 on
    // Debian's 3.0): the same set.
    #[allow(deprecated)]
    let base = rustls::crypto::ring::default_provider();
    let mut suites = pick_suites(
        &base.cipher_suites,
        &settings.ciphersuites,
        true,
        "tls-ciphersuites",
    )?;
    suites.extend(pick_suites(
        &base.cipher_suites,
        &settings.ciphers,
        false,
        "tls-ciphers",
    )?);
    Ok(CryptoProvider {
        cipher_suites: suites,
        ..base
    })
}

/// Reads a PEM certificate chain (Valkey's `Failed to load certificate: <file>: <reason>`).
///
/// # Errors
/// The file cannot be read, or holds no certificate.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let fail = |why: String| format!("Failed to load certificate: {}: {why}", path.display());
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| fail(e.to_string()))?;
    if certs.is_empty() {
        return Err(fail("no PEM certificate in the file".into()));
    }
    Ok(certs)
}

/// Reads a PEM private key (Valkey's `Failed to load private key: <file>: <reason>`).
///
/// # Errors
/// The file cannot be read, or holds no (unencrypted) key.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: String| format!("Failed to load private key: {}: {why}", path.display());
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| fail(e.to_string()))
}

/// The trusted CAs of `tls-ca-cert-file` and `tls-ca-cert-dir` (module docs).
///
/// # Errors
/// A file that cannot be read or parsed, a CA rustls refuses, or neither directive set
/// (Valkey: `Either tls-ca-cert-file or tls-ca-cert-dir must be specified when
/// tls-cluster, tls-replication or tls-auth-clients are enabled!`).
pub fn load_roots(settings: &TlsSettings) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let mut add = |certs: Vec<CertificateDer<'static>>, from: &Path| -> Result<(), String> {
        for c in certs {
            roots.add(c).map_err(|e| {
                format!(
                    "Failed to configure CA certificate(s) file/directory: {}: {e}",
                    from.display()
                )
            })?;
        }
        Ok(())
    };
    if let Some(f) = &settings.ca_cert_file {
        add(load_certs(f)?, f)?;
    }
    if let Some(d) = &settings.ca_cert_dir {
        let rd = std::fs::read_dir(d).map_err(|e| {
            format!(
                "Failed to configure CA certificate(s) file/directory: {}: {e}",
                d.display()
            )
        })?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for f in files {
            // Files without a PEM certificate (an index, a CRL) are not CAs: skipped.
            if let Ok(certs) = load_certs(&f) {
                add(certs, &f)?;
            }
        }
    }
    if settings.ca_cert_file.is_none() && settings.ca_cert_dir.is_none() {
        return Err(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
                    tls-cluster, tls-replication or tls-auth-clients are enabled!"
                .into(),
        );
    }
    if roots.is_empty() {
        return Err("Failed to configure CA certificate(s) file/directory: no certificate".into());
    }
    Ok(roots)
}

/// Verifies a server's certificate chain against the CA and nothing else: no host name (see
/// the module docs; Valkey checks none on bus and replication links). The signature checks of
/// the handshake are rustls' own.
#[derive(Debug)]
pub struct ChainOnlyVerifier {
    roots: Arc<RootCertStore>,
    algs: WebPkiSupportedAlgorithms,
}

impl ChainOnlyVerifier {
    /// A verifier over `roots` with the signature algorithms of `provider`.
    pub fn new(roots: Arc<RootCertStore>, provider: &CryptoProvider) -> ChainOnlyVerifier {
        ChainOnlyVerifier {
            roots,
            algs: provider.signature_verification_algorithms,
        }
    }
}

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// The two rustls configurations of a node, made from [`TlsSettings`] at start and again on
/// every `CONFIG SET tls-*` ([`TlsReloader`]).
#[derive(Debug, Clone)]
pub struct TlsConfigs {
    /// For accepted connections (client port, bus, a primary's replica links).
    pub server: Arc<ServerConfig>,
    /// For outgoing connections (bus links, a replica's link to its primary, migrations).
    pub client: Arc<ClientConfig>,
}

impl TlsConfigs {
    /// Loads the files and builds both configurations (Valkey `tlsConfigure`).
    ///
    /// # Errors
    /// A missing `tls-cert-file` / `tls-key-file` (Valkey's texts), a file that does not
    /// load, a key that does not match its certificate, an unknown protocol or suite, or no
    /// CA (which both sides need here: outgoing links always verify the peer).
    pub fn load(settings: &TlsSettings) -> Result<TlsConfigs, String> {
        let cert_file = settings
            .cert_file
            .as_deref()
            .ok_or("No tls-cert-file configured!")?;
        let key_file = settings
            .key_file
            .as_deref()
            .ok_or("No tls-key-file configured!")?;
        let provider = Arc::new(provider(settings)?);
        let versions = parse_protocols(&settings.protocols)?;
        let roots = Arc::new(load_roots(settings)?);
        if !versions
            .iter()
            .any(|v| provider.cipher_suites.iter().any(|s| s.version() == *v))
        {
            return Err("tls-ciphers / tls-ciphersuites leave no suite for tls-protocols".into());
        }

        let client_auth = match settings.auth_clients {
            AuthClients::No => WebPkiClientVerifier::no_client_auth(),
            mode => {
                let b = WebPkiClientVerifier::builder_with_provider(
                    Arc::clone(&roots),
                    Arc::clone(&provider),
                );
                let b = if mode == AuthClients::Optional {
                    b.allow_unauthenticated()
                } else {
                    b
                };
                b.build().map_err(|e| format!("tls-ca-cert-file: {e}"))?
            }
        };
        let mut server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)
            .map_err(|e| format!("tls-protocols: {e}"))?
            .with_client_cert_verifier(client_auth)
            .with_single_cert(load_certs(cert_file)?, load_key(key_file)?)
            .map_err(|e| format!("Failed to load private key: {}: {e}", key_file.display()))?;
        server.session_storage = if settings.session_caching && settings.session_cache_size > 0 {
            rustls::server::ServerSessionMemoryCache::new(settings.session_cache_size)
        } else {
            Arc::new(rustls::server::NoServerSessionStorage {})
        };
        if !settings.session_caching {
            server.send_tls13_tickets = 0;
        }

        let (ccert, ckey) = match (&settings.client_cert_file, &settings.client_key_file) {
            (Some(c), Some(k)) => (c.as_path(), k.as_path()),
            (None, None) => (cert_file, key_file),
            _ => return Err("tls-client-cert-file and tls-client-key-file go together".into()),
        };
        let verifier = Arc::new(ChainOnlyVerifier::new(Arc::clone(&roots), &provider));
        let client = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)
            .map_err(|e| format!("tls-protocols: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(load_certs(ccert)?, load_key(ckey)?)
            .map_err(|e| format!("Failed to load private key: {}: {e}", ckey.display()))?;
        Ok(TlsConfigs {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// A server-side session for a connection just accepted.
    ///
    /// # Errors
    /// rustls refused to start one (not expected with a loaded configuration).
    pub fn accept(&self, sock: TcpStream) -> io::Result<Stream> {
        let conn = ServerConnection::new(Arc::clone(&self.server)).map_err(io::Error::other)?;
        Ok(Stream::tls(sock, Connection::Server(conn)))
    }

    /// A client-side session for an outgoing connection to `ip` (the name sent is the IP; it
    /// is not checked, see [`ChainOnlyVerifier`]).
    ///
    /// # Errors
    /// rustls refused to start one (not expected with a loaded configuration).
    pub fn connect(&self, sock: TcpStream, ip: IpAddr) -> io::Result<Stream> {
        let name = ServerName::IpAddress(ip.into());
        let conn =
            ClientConnection::new(Arc::clone(&self.client), name).map_err(io::Error::other)?;
        Ok(Stream::tls(sock, Connection::Client(conn)))
    }
}

/// The configurations in force, swapped whole by `CONFIG SET tls-*`: connections made after
/// [`TlsReloader::replace`] use the new files, those open keep their session (Valkey
/// `tlsConfigure` on a config change). Cheap to clone; shared by every thread that makes
/// connections.
#[derive(Debug, Clone)]
pub struct TlsReloader {
    current: Arc<RwLock<Arc<TlsConfigs>>>,
}

impl TlsReloader {
    /// A holder of `configs`.
    pub fn new(configs: TlsConfigs) -> TlsReloader {
        TlsReloader {
            current: Arc::new(RwLock::new(Arc::new(configs))),
        }
    }

    /// The configurations for a new connection.
    pub fn current(&self) -> Arc<TlsConfigs> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Loads `settings` and, when they load, puts them in force; on an error the old ones stay
    /// (CONFIG SET answers the error, as Valkey's `applyTlsCfg`).
    ///
    /// # Errors
    /// [`TlsConfigs::load`]'s.
    pub fn replace(&self, settings: &TlsSettings) -> Result<(), String> {
        let new = Arc::new(TlsConfigs::load(settings)?);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }
}

/// A TLS session over a non-blocking socket: bytes read are TLS records from the socket,
/// decrypted; bytes written are encrypted into records and written as far as the socket
/// takes them.
///
/// Generic over the socket (`S`, a non-blocking `Read + Write`: a mio [`TcpStream`] in the
/// servers, an in-memory pipe in the fuzz target).
#[derive(Debug)]
pub struct TlsStream<S = TcpStream> {
    sock: S,
    conn: Connection,
    /// The socket reached end of file.
    eof: bool,
}

impl<S: Read + Write> TlsStream<S> {
    /// A session `conn` (client or server side) over `sock`.
    pub fn new(sock: S, conn: Connection) -> TlsStream<S> {
        TlsStream {
            sock,
            conn,
            eof: false,
        }
    }

    /// Whether the handshake is still in progress.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Whether encrypted bytes wait for the socket.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes waiting records until done or the socket would block.
    ///
    /// # Errors
    /// The socket's error (not `WouldBlock`).
    pub fn flush_pending(&mut self) -> io::Result<()> {
        self.push_records()
    }

    /// The socket underneath.
    pub fn socket_mut(&mut self) -> &mut S {
        &mut self.sock
    }
}

/// A connection of any kind: plain TCP or TLS. `Read` / `Write` behave as a non-blocking
/// socket's (`WouldBlock` when nothing can be done now), so a connection's code is the same
/// for both; after a write, [`Stream::wants_write`] tells whether TLS records still wait for
/// the socket (wait for WRITABLE and call [`Stream::flush_pending`]).
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS.
    Tls(Box<TlsStream>),
}

impl Stream {
    fn tls(sock: TcpStream, conn: Connection) -> Stream {
        Stream::Tls(Box::new(TlsStream::new(sock, conn)))
    }

    /// The socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }

    /// Whether this is a TLS connection.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// Whether the TLS handshake is still in progress (false for plain TCP).
    pub fn is_handshaking(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.conn.is_handshaking(),
        }
    }

    /// Whether encrypted bytes wait for the socket (always false for plain TCP).
    pub fn wants_write(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Writes waiting TLS records until done or the socket would block (no-op for plain).
    ///
    /// # Errors
    /// The socket's error (not `WouldBlock`).
    pub fn flush_pending(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.push_records(),
        }
    }

    /// The peer's certificate chain once the handshake is done (TLS only).
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => t.conn.peer_certificates(),
        }
    }
}

impl<S: Read + Write> TlsStream<S> {
    /// `write_tls` until nothing is left or the socket would block.
    fn push_records(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads records from the socket until it would block, its end, or plaintext is ready.
    /// `Ok(false)`: the socket would block. A TLS error (a bad certificate, a bad record) is
    /// `InvalidData` with rustls' words, after the alert was sent.
    fn pull_records(&mut self) -> io::Result<bool> {
        loop {
            if self.eof {
                return Ok(true);
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(true);
                }
                Ok(_) => {
                    let state = self.conn.process_new_packets();
                    // Handshake messages and alerts go out at once, error or not.
                    let pushed = self.push_records();
                    let state = state.map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
                    pushed?;
                    if state.plaintext_bytes_to_read() > 0 || state.peer_has_closed() {
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl<S: Read + Write> Read for TlsStream<S> {
    /// Fills `buf` with plaintext as far as there is some; `Ok(0)` at the end (the peer's
    /// `close_notify`, or its close without one: `UnexpectedEof`), `WouldBlock` when nothing
    /// is ready. Returning less than `buf.len()` means the socket is drained (edge-triggered
    /// readiness stays correct).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut n = 0;
        loop {
            match self.conn.reader().read(&mut buf[n..]) {
                Ok(0) => return Ok(n),
                Ok(k) => {
                    n += k;
                    if n == buf.len() {
                        return Ok(n);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
            }
            match self.pull_records() {
                Ok(true) => {}
                Ok(false) if n > 0 => return Ok(n),
                Ok(false) => return Err(ErrorKind::WouldBlock.into()),
                Err(e) if n > 0 => {
                    // Reported on the next read, which finds the session broken again.
                    tracing::debug!("TLS read error after {n} bytes: {e}");
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl<S: Read + Write> Write for TlsStream<S> {
    /// Takes as much of `buf` as rustls buffers (64 KiB of unsent records at most) and
    /// writes records as far as the socket takes them; `WouldBlock` when nothing was taken.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.push_records()?;
        if n == 0 && !buf.is_empty() {
            // The buffer was full: what push_records freed takes more now, if any.
            let m = self.conn.writer().write(buf)?;
            self.push_records()?;
            if m == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            return Ok(m);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push_records()
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

impl mio::event::Source for Stream {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.register(registry, token, interests),
            Stream::Tls(t) => t.sock.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.reregister(registry, token, interests),
            Stream::Tls(t) => t.sock.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.deregister(registry),
            Stream::Tls(t) => t.sock.deregister(registry),
        }
    }
}

/// A client TLS session over a blocking socket shared by a reader thread and writers (a
/// replica's link to its primary, where one thread reads the stream and others send ACKs):
/// the handshake is done at [`BlockingTls::connect`]; [`BlockingTls::read`] waits for socket
/// bytes without holding the session, then decrypts them under its lock; writes encrypt and
/// send under the lock.
#[derive(Debug)]
pub struct BlockingTls {
    conn: std::sync::Mutex<ClientConnection>,
    /// The write half (a clone of the socket).
    sock: std::sync::Mutex<std::net::TcpStream>,
}

impl BlockingTls {
    /// Runs the handshake on `sock` (blocking, within the socket's timeouts) as a client of
    /// the peer at `ip`, and returns the session and the socket to read from.
    ///
    /// # Errors
    /// The socket's errors, or the handshake's (`InvalidData` with rustls' words: a
    /// certificate of another CA, a protocol mismatch).
    pub fn connect(
        configs: &TlsConfigs,
        mut sock: std::net::TcpStream,
        ip: IpAddr,
    ) -> io::Result<(BlockingTls, std::net::TcpStream)> {
        let mut conn = ClientConnection::new(
            Arc::clone(&configs.client),
            ServerName::IpAddress(ip.into()),
        )
        .map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)
                .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
        }
        let writer = sock.try_clone()?;
        Ok((
            BlockingTls {
                conn: std::sync::Mutex::new(conn),
                sock: std::sync::Mutex::new(writer),
            },
            sock,
        ))
    }

    /// Waits for bytes on `reader` (the socket [`BlockingTls::connect`] returned) and appends
    /// the plaintext they carry to `out`; returns how many bytes it appended, at least one,
    /// or `Ok(0)` at the end of the stream.
    ///
    /// # Errors
    /// The socket's errors, or a bad record (`InvalidData`).
    pub fn read(&self, reader: &mut std::net::TcpStream, out: &mut Vec<u8>) -> io::Result<usize> {
        let start = out.len();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                return Ok(0);
            }
            let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                if conn.read_tls(&mut rest)? == 0 {
                    // Nothing more is taken after the peer's close_notify: the rest is
                    // ignored, the stream ends.
                    return Ok(out.len() - start);
                }
                let state = conn
                    .process_new_packets()
                    .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
                let mut want = state.plaintext_bytes_to_read();
                while want > 0 {
                    let at = out.len();
                    out.resize(at + want, 0);
                    let got = conn.reader().read(&mut out[at..])?;
                    out.truncate(at + got);
                    want -= got.min(want);
                    if got == 0 {
                        break;
                    }
                }
                if state.peer_has_closed() && out.len() == start {
                    return Ok(0);
                }
            }
            if conn.wants_write() {
                let mut w = self.sock.lock().unwrap_or_else(|p| p.into_inner());
                while conn.wants_write() {
                    conn.write_tls(&mut *w)?;
                }
            }
            if out.len() > start {
                return Ok(out.len() - start);
            }
        }
    }

    /// Encrypts and sends `bytes` (blocking, within the socket's write timeout), in pieces
    /// of what rustls buffers (64 KiB of unsent records at most), each sent before the next
    /// is taken: a send of any size goes through.
    ///
    /// # Errors
    /// The socket's errors.
    pub fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut w = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = conn.writer().write(rest)?;
            rest = &rest[n..];
            if n == 0 && !conn.wants_write() {
                return Err(ErrorKind::WriteZero.into());
            }
            while conn.wants_write() {
                conn.write_tls(&mut *w)?;
            }
        }
        Ok(())
    }

    /// Shuts the socket down both ways (the reader thread sees the end).
    pub fn shutdown(&self) {
        let w = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocluster_testkit::certs::TestCa;

    /// A CA and a node certificate it signed, written to `dir` as ca.crt, node.crt, node.key.
    fn make_certs(dir: &Path, name: &str) {
        TestCa::new(dir, name).node("node");
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fc-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn settings(dir: &Path) -> TlsSettings {
        TlsSettings {
            cert_file: Some(dir.join("node.crt")),
            key_file: Some(dir.join("node.key")),
            ca_cert_file: Some(dir.join("ca.crt")),
            ..TlsSettings::default()
        }
    }

    /// A connected pair of non-blocking mio sockets on loopback.
    fn pair() -> (TcpStream, TcpStream) {
        // Port 0, the kernel's pick: the listener stays open until it accepted its connection.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.set_nonblocking(true).unwrap();
        s.set_nonblocking(true).unwrap();
        (TcpStream::from_std(c), TcpStream::from_std(s))
    }

    /// Runs both ends without a poll (non-blocking) until `client` has sent `msg` and
    /// `server` read it all; returns what the server read, or the first error. `TimedOut`
    /// only after `ferrocluster_testkit::HANG` (a bound on a hang, never a measure of speed).
    #[allow(clippy::disallowed_methods)] // a test's bound on a hang reads the clock
    fn exchange(client: &mut Stream, server: &mut Stream, msg: &[u8]) -> io::Result<Vec<u8>> {
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let end = std::time::Instant::now() + ferrocluster_testkit::HANG;
        while std::time::Instant::now() < end {
            if sent < msg.len() {
                match client.write(&msg[sent..]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            client.flush_pending()?;
            // The client reads too: handshake replies and the server's alert arrive there.
            match client.read(&mut buf) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match server.read(&mut buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            server.flush_pending()?;
            if got.len() == msg.len() {
                return Ok(got);
            }
            std::thread::yield_now();
        }
        Err(ErrorKind::TimedOut.into())
    }

    #[test]
    fn mutual_tls_round_trip_with_a_large_payload() {
        let d = tmpdir("rt");
        make_certs(&d, "one");
        let cfg = TlsConfigs::load(&settings(&d)).unwrap();
        let (c, s) = pair();
        let mut client = cfg.connect(c, "127.0.0.1".parse().unwrap()).unwrap();
        let mut server = cfg.accept(s).unwrap();
        assert!(client.is_handshaking());
        // Larger than rustls' 64 KiB buffers: the writes must take it in pieces.
        let msg: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let got = exchange(&mut client, &mut server, &msg).unwrap();
        assert_eq!(got, msg);
        assert!(!server.is_handshaking());
        // The server saw the client's certificate (tls-auth-clients yes).
        let peer = server.peer_certificates().unwrap();
        assert_eq!(
            peer[0].as_ref(),
            load_certs(&d.join("node.crt")).unwrap()[0].as_ref()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// `BlockingTls::write_all` of more than rustls buffers (64 KiB) in one call goes through
    /// whole (a slot snapshot's send; it failed with `WriteZero` once the buffer was full).
    #[test]
    #[allow(clippy::disallowed_methods)] // the peer runs in a thread of the test
    fn blocking_write_all_sends_more_than_rustls_buffers() {
        let d = tmpdir("blocking");
        make_certs(&d, "b");
        let cfg = TlsConfigs::load(&settings(&d)).unwrap();
        // Port 0, the kernel's pick: the listener stays open until it accepted its connection.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let msg: Vec<u8> = (0..1_000_000u32).map(|i| (i % 249) as u8).collect();
        let server_cfg = Arc::clone(&cfg.server);
        let len = msg.len();
        let server = std::thread::spawn(move || {
            let (mut sock, _) = l.accept().unwrap();
            sock.set_read_timeout(Some(ferrocluster_testkit::HANG))
                .unwrap();
            let mut conn = rustls::ServerConnection::new(server_cfg).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 16 * 1024];
            while got.len() < len {
                conn.complete_io(&mut sock).unwrap();
                loop {
                    match conn.reader().read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            got
        });
        let sock = std::net::TcpStream::connect(addr).unwrap();
        sock.set_write_timeout(Some(ferrocluster_testkit::HANG))
            .unwrap();
        sock.set_read_timeout(Some(ferrocluster_testkit::HANG))
            .unwrap();
        let (tls, _reader) = BlockingTls::connect(&cfg, sock, addr.ip()).unwrap();
        tls.write_all(&msg).unwrap();
        assert_eq!(server.join().unwrap(), msg);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_peer_of_another_ca_fails_the_handshake_both_ways() {
        let a = tmpdir("ca-a");
        let b = tmpdir("ca-b");
        make_certs(&a, "a");
        make_certs(&b, "b");
        let ca = TlsConfigs::load(&settings(&a)).unwrap();
        let cb = TlsConfigs::load(&settings(&b)).unwrap();
        // b connects to a: a refuses b's client certificate (or b refuses a's: either way no
        // byte of b's message reaches a).
        let (c, s) = pair();
        let mut client = cb.connect(c, "127.0.0.1".parse().unwrap()).unwrap();
        let mut server = ca.accept(s).unwrap();
        let e = exchange(&mut client, &mut server, b"PING\r\n").unwrap_err();
        assert!(
            e.kind() == ErrorKind::InvalidData || e.kind() == ErrorKind::UnexpectedEof,
            "{e:?}"
        );
        assert!(
            e.to_string().contains("certificate") || e.kind() == ErrorKind::UnexpectedEof,
            "{e}"
        );
        // With tls-auth-clients no, a's server accepts b's client only if b trusts a: it does
        // not, so b fails on a's certificate (UnknownIssuer).
        let mut s2 = settings(&a);
        s2.auth_clients = AuthClients::No;
        let ca_no = TlsConfigs::load(&s2).unwrap();
        let (c, s) = pair();
        let mut client = cb.connect(c, "127.0.0.1".parse().unwrap()).unwrap();
        let mut server = ca_no.accept(s).unwrap();
        let e = exchange(&mut client, &mut server, b"PING\r\n").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("UnknownIssuer") || text.contains("certificate"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
    }

    #[test]
    fn optional_client_auth_accepts_no_certificate_required_refuses_it() {
        let d = tmpdir("opt");
        make_certs(&d, "o");
        let roots = Arc::new(load_roots(&settings(&d)).unwrap());
        #[allow(deprecated)] // see `provider`
        let prov = Arc::new(rustls::crypto::ring::default_provider());
        // A client that presents no certificate.
        let anon = Arc::new(
            ClientConfig::builder_with_provider(Arc::clone(&prov))
                .with_safe_default_protocol_versions()
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier::new(roots, &prov)))
                .with_no_client_auth(),
        );
        let anon_conn = |sock: TcpStream| {
            let c = ClientConnection::new(
                Arc::clone(&anon),
                ServerName::IpAddress("127.0.0.1".parse::<IpAddr>().unwrap().into()),
            )
            .unwrap();
            Stream::tls(sock, Connection::Client(c))
        };
        let mut opt = settings(&d);
        opt.auth_clients = AuthClients::Optional;
        let cfg = TlsConfigs::load(&opt).unwrap();
        let (c, s) = pair();
        let got = exchange(&mut anon_conn(c), &mut cfg.accept(s).unwrap(), b"PING\r\n").unwrap();
        assert_eq!(got, b"PING\r\n");
        let cfg = TlsConfigs::load(&settings(&d)).unwrap();
        let (c, s) = pair();
        let e = exchange(&mut anon_conn(c), &mut cfg.accept(s).unwrap(), b"PING\r\n").unwrap_err();
        assert!(
            e.to_string().contains("certificate") || e.kind() == ErrorKind::UnexpectedEof,
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn directives_parse_and_refuse_unknown_names() {
        assert_eq!(parse_protocols("").unwrap().len(), 2);
        let v = parse_protocols("TLSv1.3").unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_3);
        assert!(parse_protocols("tlsv1.2 TLSV1.3").is_ok());
        assert!(parse_protocols("TLSv1.1")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_protocols("SSLv3")
            .unwrap_err()
            .starts_with("Invalid tls-protocols"));
        assert_eq!(
            AuthClients::parse("OPTIONAL").unwrap(),
            AuthClients::Optional
        );
        assert!(AuthClients::parse("maybe").is_err());

        let mut s = TlsSettings {
            ciphersuites: "TLS_AES_256_GCM_SHA384".into(),
            ciphers: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256".into(),
            ..TlsSettings::default()
        };
        let p = provider(&s).unwrap();
        let names: Vec<&str> = p.cipher_suites.iter().map(|c| openssl_name(*c)).collect();
        assert_eq!(
            names,
            [
                "TLS_AES_256_GCM_SHA384",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-AES128-GCM-SHA256"
            ]
        );
        s.ciphersuites = "TLS_AES_999".into();
        assert!(provider(&s)
            .unwrap_err()
            .contains("unknown cipher 'TLS_AES_999'"));
        s.ciphersuites = String::new();
        s.ciphers = "DEFAULT".into();
        assert_eq!(provider(&s).unwrap().cipher_suites.len(), 9);
        // A TLS 1.2 name among the 1.3 suites is unknown there.
        s.ciphersuites = "ECDHE-RSA-AES128-GCM-SHA256".into();
        assert!(provider(&s).is_err());
    }

    #[test]
    fn missing_or_bad_files_are_errors_and_reload_keeps_the_old_config() {
        let d = tmpdir("files");
        make_certs(&d, "f");
        let mut s = settings(&d);
        s.cert_file = None;
        assert_eq!(
            TlsConfigs::load(&s).unwrap_err(),
            "No tls-cert-file configured!"
        );
        let mut s = settings(&d);
        s.ca_cert_file = None;
        assert!(TlsConfigs::load(&s)
            .unwrap_err()
            .starts_with("Either tls-ca-cert-file"));
        // A CA directory works as the file does.
        s.ca_cert_dir = Some(d.clone());
        assert!(TlsConfigs::load(&s).is_ok());
        let mut s = settings(&d);
        s.key_file = Some(d.join("ca.crt"));
        assert!(TlsConfigs::load(&s)
            .unwrap_err()
            .starts_with("Failed to load private key: "));
        let mut s = settings(&d);
        s.cert_file = Some(d.join("nope.crt"));
        assert!(TlsConfigs::load(&s)
            .unwrap_err()
            .starts_with("Failed to load certificate: "));

        let r = TlsReloader::new(TlsConfigs::load(&settings(&d)).unwrap());
        let before = r.current();
        assert!(r.replace(&s).is_err());
        assert!(Arc::ptr_eq(&before, &r.current()));
        // New files from another CA take over for new connections.
        let d2 = tmpdir("files2");
        make_certs(&d2, "g");
        r.replace(&settings(&d2)).unwrap();
        assert!(!Arc::ptr_eq(&before, &r.current()));
        let (c, sk) = pair();
        let mut client = before.connect(c, "127.0.0.1".parse().unwrap()).unwrap();
        let mut server = r.current().accept(sk).unwrap();
        assert!(exchange(&mut client, &mut server, b"x").is_err());
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&d2);
    }
}
