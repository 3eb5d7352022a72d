//! `RESTORE` / `RESTORE-ASKING` on the receiving node: the argument and payload checks in
//! Valkey's order with its error texts (Valkey `restoreCommand`, `verifyDumpPayload`; the
//! replies of valkey-server 9.1.2 and redis-server 7.0.15 to every case are captured in
//! `tests/vectors/migrate/restore-*.json`, which the two agree on byte for byte).

use crate::error::CommandError;
use crate::resp::parse_i64;
use ferrocluster_rdb::dump::{self, DumpError};
use ferrocluster_rdb::RdbValue;
use ferrocluster_topology::Reply;

/// Why a RESTORE was refused, with the server's reply text ([`RestoreError::to_reply`]).
/// Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// A generic refusal: [`CommandError::WrongArity`] (`restore` / `restore-asking` with
    /// fewer than 4 arguments), [`CommandError::Syntax`] (an unknown option,
    /// `IDLETIME`/`FREQ` without a value, or both), [`CommandError::NotAnInteger`] (the TTL,
    /// IDLETIME or FREQ value).
    #[error(transparent)]
    Command(#[from] CommandError),
    /// `ERR Invalid IDLETIME value, must be >= 0`.
    #[error("ERR Invalid IDLETIME value, must be >= 0")]
    IdleTimeNegative,
    /// `ERR Invalid FREQ value, must be >= 0 and <= 255`.
    #[error("ERR Invalid FREQ value, must be >= 0 and <= 255")]
    FreqRange,
    /// `BUSYKEY Target key name already exists.` (the key exists and no `REPLACE`).
    #[error("BUSYKEY Target key name already exists.")]
    BusyKey,
    /// `ERR Invalid TTL value, must be >= 0`.
    #[error("ERR Invalid TTL value, must be >= 0")]
    TtlNegative,
    /// `ERR DUMP payload version or checksum are wrong` (shorter than the footer, a version
    /// the server does not read, a CRC-64 mismatch).
    #[error("ERR DUMP payload version or checksum are wrong")]
    BadPayload(DumpError),
    /// `ERR Bad data format`: the footer is right and the object is not (or the host does not
    /// store its kind).
    #[error("ERR Bad data format")]
    BadData(DumpError),
}

impl RestoreError {
    /// The error reply.
    pub fn to_reply(&self) -> Reply {
        Reply::Error(self.to_string())
    }
}

/// A RESTORE that passed every check: what the host stores.
#[derive(Debug, Clone, PartialEq)]
pub enum Restore<V> {
    /// Store `value` under `key` (replacing the old value when `replace`), expiring at
    /// `expire_at_ms` (absolute Unix ms), with the LRU idle time or LFU frequency asked for.
    Store {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: V,
        /// The expiry, absolute Unix ms (`None`: none; a relative TTL was added to `now`).
        expire_at_ms: Option<i64>,
        /// `REPLACE` was given: an existing key is overwritten.
        replace: bool,
        /// `IDLETIME <seconds>`.
        idle_secs: Option<i64>,
        /// `FREQ <0..=255>`.
        freq: Option<u8>,
    },
    /// The expiry is already past (Valkey `checkAlreadyExpired`): nothing is stored; with
    /// `replace` an existing key is deleted (and the deletion propagated). The reply is `+OK`.
    Expired {
        /// The key.
        key: Vec<u8>,
        /// `REPLACE` was given.
        replace: bool,
    },
}

/// Checks `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ
/// frequency]` (or `RESTORE-ASKING`, the same command with an ASK redirection's routing) and
/// decodes the payload into a host value, in Valkey's order: the options, then `BUSYKEY`
/// (asking `exists(key)` only without `REPLACE`), then the TTL, then the payload's footer, then
/// its object. `now_ms` is the command's time (Unix ms) for a relative TTL. `drop_expired`:
/// an expiry already past makes it [`Restore::Expired`] (Valkey `checkAlreadyExpired`: true
/// on a primary that is not loading; a replica or a loader stores the key as given and lets
/// its primary's deletion come). On success the reply is `+OK`.
///
/// Stricter than Valkey in one place: Valkey reads the object from the whole payload, footer
/// included, so a payload whose object ends early or reaches into the footer is accepted
/// (captured: `object-into-footer`, `trailing-bytes`); we refuse it with `Bad data format`.
/// No server writes such a payload.
///
/// # Errors
/// [`RestoreError`] with the server's text; nothing to change.
pub fn restore<V: RdbValue, A: AsRef<[u8]>>(
    argv: &[A],
    exists: impl FnOnce(&[u8]) -> bool,
    now_ms: i64,
    drop_expired: bool,
) -> Result<Restore<V>, RestoreError> {
    let name = if argv
        .first()
        .is_some_and(|a| a.as_ref().eq_ignore_ascii_case(b"restore-asking"))
    {
        "restore-asking"
    } else {
        "restore"
    };
    if argv.len() < 4 {
        return Err(CommandError::WrongArity(name).into());
    }
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < argv.len() {
        let a = argv[j].as_ref();
        let more = argv.len() - j - 1;
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if a.eq_ignore_ascii_case(b"idletime") && more >= 1 && freq.is_none() {
            let v = parse_i64(argv[j + 1].as_ref()).ok_or(CommandError::NotAnInteger)?;
            if v < 0 {
                return Err(RestoreError::IdleTimeNegative);
            }
            idle = Some(v);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"freq") && more >= 1 && idle.is_none() {
            let v = parse_i64(argv[j + 1].as_ref()).ok_or(CommandError::NotAnInteger)?;
            if !(0..=255).contains(&v) {
                return Err(RestoreError::FreqRange);
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CommandError::Syntax.into());
        }
        j += 1;
    }
    let key = argv[1].as_ref();
    if !replace && exists(key) {
        return Err(RestoreError::BusyKey);
    }
    let ttl = parse_i64(argv[2].as_ref()).ok_or(CommandError::NotAnInteger)?;
    if ttl < 0 {
        return Err(RestoreError::TtlNegative);
    }
    let payload = argv[3].as_ref();
    dump::verify(payload).map_err(RestoreError::BadPayload)?;
    let value: V = dump::decode_value(payload).map_err(|e| {
        if e.is_bad_data() {
            RestoreError::BadData(e)
        } else {
            RestoreError::BadPayload(e)
        }
    })?;
    let expire_at_ms = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(t.saturating_add(now_ms)),
    };
    if drop_expired && expire_at_ms.is_some_and(|at| at <= now_ms) {
        return Ok(Restore::Expired {
            key: key.to_vec(),
            replace,
        });
    }
    Ok(Restore::Store {
        key: key.to_vec(),
        value,
        expire_at_ms,
        replace,
        idle_secs: idle,
        freq: freq.map(|f| f as u8),
    })
}
