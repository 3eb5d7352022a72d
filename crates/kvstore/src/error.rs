//! Errors of the keyspace API.

/// Host misuse of a [`crate::KvStore`] call. Every error leaves the store unchanged.
///
/// Slot arguments are [`ferrocluster_slot::Slot`]s, so an out-of-range slot number is rejected
/// before it reaches the store (by `Slot::new`/`Slot::parse` with
/// [`ferrocluster_slot::SlotError::OutOfRange`]); SCAN cursors always carry a valid slot in
/// their low 14 bits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KvError {
    /// A database index not below the configured number of databases (`cluster-databases`).
    /// Valkey replies `DB index is out of range` to such a `SELECT` (facts sheet D.5).
    #[error("DB index is out of range: {db} (databases: {databases})")]
    DbOutOfRange {
        /// The index given.
        db: usize,
        /// The configured number of databases.
        databases: usize,
    },
    /// A database count of 0 or above [`crate::MAX_DATABASES`] given to the constructor.
    #[error("number of databases must be 1..={max}, got {0}", max = crate::MAX_DATABASES)]
    DatabaseCount(usize),
    /// SCAN with `COUNT 0`: Redis/Valkey reply with a syntax error (COUNT must be >= 1).
    #[error("SCAN COUNT must be at least 1")]
    ZeroScanCount,
}
