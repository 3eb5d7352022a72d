//! Server addresses as Sentinel reports them.

use std::fmt;
use std::str::FromStr;

/// A server address: a host (IP literal or name, as Sentinel reports it) and a TCP port.
///
/// Text form `host:port`; an IPv6 host is written in brackets, `[::1]:26379`, and parsing
/// accepts both `[::1]:26379` and the unbracketed `::1:26379` (the last colon splits).
///
/// ```
/// use ferrocluster_sentinel::Addr;
/// let a: Addr = "127.0.0.1:26379".parse().unwrap();
/// assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 26379));
/// assert_eq!("[::1]:6379".parse::<Addr>().unwrap().to_string(), "[::1]:6379");
/// assert!("localhost".parse::<Addr>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr {
    /// Host name or IP literal, without brackets.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Addr {
    /// An address from its parts.
    pub fn new(host: impl Into<String>, port: u16) -> Addr {
        Addr {
            host: host.into(),
            port,
        }
    }
}

/// Why a text is not an `ip:port` address. Parsing is pure: nothing changes on error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddrError {
    /// No `:` separating host and port.
    #[error("address {0:?} has no port (expected host:port)")]
    MissingPort(String),
    /// The host part is empty.
    #[error("address {0:?} has an empty host")]
    EmptyHost(String),
    /// The port is not a number in `0..=65535`.
    #[error("address {0:?} has an invalid port")]
    BadPort(String),
}

impl FromStr for Addr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Addr, AddrError> {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| AddrError::MissingPort(s.to_string()))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(AddrError::EmptyHost(s.to_string()));
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| AddrError::BadPort(s.to_string()))?;
        Ok(Addr::new(host, port))
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
