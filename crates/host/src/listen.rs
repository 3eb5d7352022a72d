//! Listening sockets as Valkey makes them: the `bind` list (`bind 127.0.0.1 -::1`), one
//! socket per address, for the client port and the cluster bus port alike (Valkey
//! `listenToPort`, `clusterInit`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};

/// Most `bind` addresses (Valkey `CONFIG_BINDADDR_MAX`).
pub const BIND_MAX: usize = 16;

/// The listen backlog (Valkey's `tcp-backlog` default, 511).
pub const BACKLOG: i32 = 511;

/// One `bind` address, as redis-server 7.0 and Valkey read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAddr {
    /// The address as written, without the `-`: an IPv4 or IPv6 literal (no brackets), `*`
    /// (every IPv4 address), `::*` (every IPv6 address) or a host name (its first IPv4
    /// address).
    pub addr: String,
    /// Written with a leading `-`: a failure to bind it because the address or its family is
    /// not available here is skipped, not fatal.
    pub optional: bool,
}

impl fmt::Display for BindAddr {
    /// The config-file word: `-` before an optional address.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.optional {
            f.write_str("-")?;
        }
        f.write_str(&self.addr)
    }
}

/// Parses a `bind` list (`127.0.0.1 -::1`, `* -::*`, ...).
///
/// # Errors
/// An empty list, an empty word, or more than [`BIND_MAX`] addresses (Valkey's
/// `Too many bind addresses specified.`).
pub fn parse_bind(words: &[&str]) -> Result<Vec<BindAddr>, String> {
    if words.is_empty() {
        return Err("wrong number of arguments".into());
    }
    if words.len() > BIND_MAX {
        return Err("Too many bind addresses specified.".into());
    }
    words
        .iter()
        .map(|w| {
            let (optional, addr) = match w.strip_prefix('-') {
                Some(a) => (true, a),
                None => (false, *w),
            };
            if addr.is_empty() {
                return Err(format!("bad bind address '{w}'"));
            }
            Ok(BindAddr {
                addr: addr.to_string(),
                optional,
            })
        })
        .collect()
}

impl BindAddr {
    /// A required address (no `-`).
    pub fn required(addr: impl Into<String>) -> BindAddr {
        BindAddr {
            addr: addr.into(),
            optional: false,
        }
    }

    /// The socket address to listen on at `port`: `*` is `0.0.0.0`, `::*` is `::`, a text
    /// with a `:` an IPv6 literal, anything else an IPv4 literal or a host name resolved to
    /// its first IPv4 address (Valkey's `anetTcpServer` / `anetTcp6Server`).
    ///
    /// # Errors
    /// The text as Valkey prints it when the address does not resolve (`Name or service not
    /// known`).
    pub fn socket_addr(&self, port: u16) -> Result<SocketAddr, String> {
        match self.addr.as_str() {
            "*" => return Ok(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port)),
            "::*" => return Ok(SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port)),
            _ => {}
        }
        let unknown = || "Name or service not known".to_string();
        if self.addr.contains(':') {
            return self
                .addr
                .parse::<Ipv6Addr>()
                .map(|ip| SocketAddr::new(IpAddr::V6(ip), port))
                .map_err(|_| unknown());
        }
        if let Ok(ip) = self.addr.parse::<Ipv4Addr>() {
            return Ok(SocketAddr::new(IpAddr::V4(ip), port));
        }
        (self.addr.as_str(), port)
            .to_socket_addrs()
            .map_err(|_| unknown())?
            .find(SocketAddr::is_ipv4)
            .ok_or_else(unknown)
    }
}

/// One listening socket as Valkey makes it (`anetTcpServer`, `anetTcp6Server`):
/// `SO_REUSEADDR`, IPv6 sockets `IPV6_V6ONLY` (so `*` and `::*` can share a port), backlog
/// [`BACKLOG`], close-on-exec. Blocking; the bus driver makes its own non-blocking.
///
/// # Errors
/// The socket, option, bind or listen error.
pub fn listen_one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
    let family = if addr.is_ipv6() {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    let fd = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, BACKLOG)?;
    Ok(TcpListener::from(fd))
}

/// Whether a failed bind of an optional (`-`) address is skipped (Valkey `listenToPort`: the
/// address or its protocol family is not available here).
fn skippable(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let Some(code) = e.raw_os_error() else {
        return false;
    };
    [
        Errno::ADDRNOTAVAIL,
        Errno::AFNOSUPPORT,
        Errno::PROTONOSUPPORT,
        Errno::SOCKTNOSUPPORT,
        Errno::PFNOSUPPORT,
        Errno::NOPROTOOPT,
    ]
    .iter()
    .any(|e| e.raw_os_error() == code)
}

/// How many times [`bind_with_retry`] tries (100 ms apart: 5 s in all).
const BIND_TRIES: u32 = 50;

/// Binds, retrying for up to 5 s (50 tries 100 ms apart) while the port is in use. Ports in
/// the kernel's ephemeral range (the default bus port, port + 10000, often is) can be held
/// for a moment by the local end of an outgoing connection.
///
/// # Errors
/// The last error of `bind`.
pub fn bind_with_retry<T>(mut bind: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut tries = 1;
    loop {
        match bind() {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < BIND_TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Binds every address of a `bind` list at `port` (Valkey `listenToPort`; the client port
/// and the bus port alike). An address in use is retried for 5 s ([`bind_with_retry`]). An
/// optional (`-`) address that is not available is skipped with a warning; any other failure
/// stops the start with Valkey's words. At least one socket must listen.
///
/// # Errors
/// `Could not create server TCP listening socket <addr>:<port>: <reason>`, or `Configured to
/// not listen anywhere, exiting.` when every address was skipped.
pub fn listen_all(list: &[BindAddr], port: u16) -> Result<Vec<TcpListener>, String> {
    let mut out = Vec::new();
    for b in list {
        let fail = |reason: String| {
            format!(
                "Could not create server TCP listening socket {}:{port}: {reason}",
                b.addr
            )
        };
        let addr = b.socket_addr(port).map_err(fail)?;
        match bind_with_retry(|| listen_one(addr)) {
            Ok(l) => out.push(l),
            Err(e) if b.optional && skippable(&e) => {
                tracing::warn!(
                    "Could not create server TCP listening socket {}:{port}: {e} (optional, skipped)",
                    b.addr
                );
            }
            Err(e) => return Err(fail(format!("bind: {e}"))),
        }
    }
    if out.is_empty() {
        return Err("Configured to not listen anywhere, exiting.".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_words_and_their_addresses() {
        let l = parse_bind(&["127.0.0.1", "-::1", "*", "::*"]).unwrap();
        assert_eq!(
            l[1],
            BindAddr {
                addr: "::1".into(),
                optional: true
            }
        );
        assert_eq!(l[1].to_string(), "-::1");
        let at = |b: &BindAddr| b.socket_addr(7000).unwrap().to_string();
        assert_eq!(at(&l[0]), "127.0.0.1:7000");
        assert_eq!(at(&l[1]), "[::1]:7000");
        assert_eq!(at(&l[2]), "0.0.0.0:7000");
        assert_eq!(at(&l[3]), "[::]:7000");
        assert_eq!(
            BindAddr::required("::zz").socket_addr(1).unwrap_err(),
            "Name or service not known"
        );
        assert!(parse_bind(&[]).is_err());
        assert!(parse_bind(&["-"]).is_err());
        assert_eq!(
            parse_bind(&["1.1.1.1"; 17]).unwrap_err(),
            "Too many bind addresses specified."
        );
    }

    #[test]
    fn optional_unavailable_address_is_skipped_required_is_fatal() {
        // 192.0.2.1 (TEST-NET-1) is assigned to no interface here.
        let list = [BindAddr {
            addr: "192.0.2.1".into(),
            optional: true,
        }];
        assert_eq!(
            listen_all(&list, 0).unwrap_err(),
            "Configured to not listen anywhere, exiting."
        );
        let list = [BindAddr::required("192.0.2.1")];
        let e = listen_all(&list, 0).unwrap_err();
        assert!(
            e.starts_with("Could not create server TCP listening socket 192.0.2.1:0: bind: "),
            "{e}"
        );
    }
}
