//! Announced values (hostname, human nodename, IP addresses) are a trust boundary: they arrive
//! from configuration, CLUSTER commands and gossip extensions of other nodes, and end up in
//! nodes.conf lines and command replies. Everything here validates them so that no value can
//! carry a separator (space, comma, `=`, newline, quote) into a nodes.conf line.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Hostnames must be shorter than this many bytes (`NET_HOST_STR_LEN` = 256, facts sheet §1).
pub const HOSTNAME_MAX_LEN: usize = 255;

/// Upper bound for a human nodename, in bytes. Valkey sets none beyond the ping-extension size;
/// we keep every extension below 64 KiB (§22 item 2), so the text must fit in one.
pub const NODENAME_MAX_LEN: usize = 65_000;

/// Why an announced value was refused. Nothing is stored when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnnounceError {
    /// Empty text where a value is required (use `None` for "not set").
    #[error("empty {0}")]
    Empty(&'static str),
    /// Longer than allowed.
    #[error("{what} is {len} bytes, the limit is {max}")]
    TooLong {
        /// Which value.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The largest accepted length.
        max: usize,
    },
    /// A byte the value may not contain.
    #[error("invalid character {byte:#04x} at byte {pos} in {what}")]
    Character {
        /// Which value.
        what: &'static str,
        /// Byte position of the first offending byte.
        pos: usize,
        /// The offending byte.
        byte: u8,
    },
    /// Not an IP address of the expected family.
    #[error("invalid {what} address {text:?}")]
    Ip {
        /// Which value (`ip`, `client-ipv4`, `client-ipv6`).
        what: &'static str,
        /// The text given (escaped when printed).
        text: String,
    },
}

/// Checks a hostname: only `A-Z a-z 0-9 - .`, length below 256 bytes, not empty (facts sheet
/// §1, `cluster-announce-hostname`; the same rule Valkey applies to the HOSTNAME extension).
///
/// # Errors
/// [`AnnounceError`] naming the first problem.
pub fn validate_hostname(text: &str) -> Result<(), AnnounceError> {
    const WHAT: &str = "hostname";
    if text.is_empty() {
        return Err(AnnounceError::Empty(WHAT));
    }
    if text.len() > HOSTNAME_MAX_LEN {
        return Err(AnnounceError::TooLong {
            what: WHAT,
            len: text.len(),
            max: HOSTNAME_MAX_LEN,
        });
    }
    if let Some((pos, byte)) = text
        .bytes()
        .enumerate()
        .find(|(_, b)| !(b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.'))
    {
        return Err(AnnounceError::Character {
            what: WHAT,
            pos,
            byte,
        });
    }
    Ok(())
}

/// Whether a byte is "aux-valid" as nodes.conf aux keys and values require (§18.2): an
/// alphanumeric or any byte not in ``!#$%&()*+;<>?@[]^{|}~``. We are stricter than Valkey:
/// whitespace and control bytes (lines are split on whitespace), `,` and `=` (aux separators),
/// quotes and backslash (the loader splits with shell-like quoting) are refused too. `:` is
/// allowed (V8 allows it for IPv6). Bytes >= 0x80 (UTF-8) are allowed.
pub fn is_aux_valid_byte(b: u8) -> bool {
    if b.is_ascii_alphanumeric() || b >= 0x80 {
        return true;
    }
    if b.is_ascii_control() || b == b' ' {
        return false;
    }
    !b"!#$%&()*+;<>?@[]^{|}~,=\"'\\".contains(&b)
}

/// Checks a human nodename (`cluster-announce-human-nodename`, the HUMAN_NODENAME extension,
/// the `nodename=` aux field): non-empty, at most [`NODENAME_MAX_LEN`] bytes, every byte
/// aux-valid ([`is_aux_valid_byte`], §18.2).
///
/// # Errors
/// [`AnnounceError`] naming the first problem.
pub fn validate_nodename(text: &str) -> Result<(), AnnounceError> {
    const WHAT: &str = "human nodename";
    if text.is_empty() {
        return Err(AnnounceError::Empty(WHAT));
    }
    if text.len() > NODENAME_MAX_LEN {
        return Err(AnnounceError::TooLong {
            what: WHAT,
            len: text.len(),
            max: NODENAME_MAX_LEN,
        });
    }
    if let Some((pos, byte)) = text
        .bytes()
        .enumerate()
        .find(|(_, b)| !is_aux_valid_byte(*b))
    {
        return Err(AnnounceError::Character {
            what: WHAT,
            pos,
            byte,
        });
    }
    Ok(())
}

/// Parses an IP address (IPv4 dotted quad or IPv6 text, no zone, no brackets, no spaces or
/// control bytes), as nodes.conf, `CLUSTER MEET` and the bus `myip` field carry it.
///
/// # Errors
/// [`AnnounceError::Ip`] when the text is not an address.
pub fn parse_ip(text: &str) -> Result<IpAddr, AnnounceError> {
    text.parse::<IpAddr>().map_err(|_| AnnounceError::Ip {
        what: "ip",
        text: text.to_owned(),
    })
}

/// Parses the `client-ipv4` value (§18.2: an IPv4 address).
///
/// # Errors
/// [`AnnounceError::Ip`] for anything but an IPv4 address.
pub fn parse_client_ipv4(text: &str) -> Result<Ipv4Addr, AnnounceError> {
    text.parse::<Ipv4Addr>().map_err(|_| AnnounceError::Ip {
        what: "client-ipv4",
        text: text.to_owned(),
    })
}

/// Parses the `client-ipv6` value (§18.2: an IPv6 address).
///
/// # Errors
/// [`AnnounceError::Ip`] for anything but an IPv6 address.
pub fn parse_client_ipv6(text: &str) -> Result<Ipv6Addr, AnnounceError> {
    text.parse::<Ipv6Addr>().map_err(|_| AnnounceError::Ip {
        what: "client-ipv6",
        text: text.to_owned(),
    })
}

/// A validated hostname ([`validate_hostname`]); absent hostnames are `Option::None`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hostname(String);

impl Hostname {
    /// Validates and wraps a hostname.
    ///
    /// # Errors
    /// As [`validate_hostname`].
    pub fn new(text: &str) -> Result<Hostname, AnnounceError> {
        validate_hostname(text)?;
        Ok(Hostname(text.to_owned()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Hostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated human nodename ([`validate_nodename`]); absent ones are `Option::None`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HumanNodename(String);

impl HumanNodename {
    /// Validates and wraps a human nodename.
    ///
    /// # Errors
    /// As [`validate_nodename`].
    pub fn new(text: &str) -> Result<HumanNodename, AnnounceError> {
        validate_nodename(text)?;
        Ok(HumanNodename(text.to_owned()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HumanNodename {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames() {
        assert!(validate_hostname("node-22001.example").is_ok());
        assert!(validate_hostname(&"a".repeat(255)).is_ok());
        assert_eq!(
            validate_hostname(&"a".repeat(256)),
            Err(AnnounceError::TooLong {
                what: "hostname",
                len: 256,
                max: 255
            })
        );
        for bad in ["a b", "a,b", "a\nb", "a_b", "a:b", "a=b", "ü"] {
            assert!(
                matches!(validate_hostname(bad), Err(AnnounceError::Character { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(validate_hostname(""), Err(AnnounceError::Empty("hostname")));
    }

    #[test]
    fn nodenames_follow_aux_rule() {
        assert!(validate_nodename("n22001").is_ok());
        assert!(validate_nodename("node:1/eu-west_a.b").is_ok());
        // §18.2 forbidden set, plus our separators.
        for c in "!#$%&()*+;<>?@[]^{|}~,= \t\r\n\"'\\\0\x7f".chars() {
            let text = format!("a{c}b");
            assert_eq!(
                validate_nodename(&text),
                Err(AnnounceError::Character {
                    what: "human nodename",
                    pos: 1,
                    byte: c as u8
                }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn ips() {
        assert_eq!(parse_ip("127.0.0.1").unwrap().to_string(), "127.0.0.1");
        assert_eq!(parse_ip("::1").unwrap().to_string(), "::1");
        for bad in [
            "127.0.0.1 ",
            "127.0.0.1\n",
            "1.2.3.4,5",
            "",
            "host",
            "[::1]",
            "fe80::1%eth0",
        ] {
            assert!(parse_ip(bad).is_err(), "{bad:?}");
        }
        assert!(parse_client_ipv4("::1").is_err());
        assert!(parse_client_ipv6("1.2.3.4").is_err());
    }
}
