//! Errors of the ASM subcommands and the legacy SETSLOT/ASM exclusion, with Valkey's exact
//! texts (sheet A.2, A.4, A.5, A.10, A.17; `src/cluster_migrateslots.c` @ 008734ee).

use ferrocluster_topology::Reply;

/// A rejected `CLUSTER MIGRATESLOTS` / `CANCELSLOTMIGRATIONS` / `SYNCSLOTS` (or a SETSLOT
/// refused because an ASM job runs). `Display` gives the text without the `ERR ` prefix;
/// [`MigrationError::to_reply`] gives the error reply. An `Err` changed nothing: no job was
/// created, cancelled or advanced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationError {
    /// `wrong number of arguments for 'cluster|<sub>' command` (arity: MIGRATESLOTS -4,
    /// GETSLOTMIGRATIONS 2, CANCELSLOTMIGRATIONS 2, SYNCSLOTS -3).
    #[error("wrong number of arguments for 'cluster|{0}' command")]
    WrongArity(&'static str),
    /// `syntax error`.
    #[error("syntax error")]
    Syntax,
    /// `Slot migration can only be used on primary nodes.`
    #[error("Slot migration can only be used on primary nodes.")]
    NotPrimary,
    /// `Slots are being manually imported` (a legacy IMPORTING mark exists).
    #[error("Slots are being manually imported")]
    ManuallyImported,
    /// `Slots are being manually migrated` (a legacy MIGRATING mark exists).
    #[error("Slots are being manually migrated")]
    ManuallyMigrated,
    /// `Invalid or out of range slot`.
    #[error("Invalid or out of range slot")]
    InvalidSlot,
    /// `No slot ranges specified`.
    #[error("No slot ranges specified")]
    NoRanges,
    /// `No end slot for final slot range`.
    #[error("No end slot for final slot range")]
    NoEndSlot,
    /// `Start slot number <s> is greater than end slot number <e>.`
    #[error("Start slot number {0} is greater than end slot number {1}.")]
    StartAfterEnd(u16, u16),
    /// `Slot <n> has no node served.`
    #[error("Slot {0} has no node served.")]
    SlotUnowned(u16),
    /// `Requested slots span multiple shards`
    #[error("Requested slots span multiple shards")]
    MultipleShards,
    /// `Slot range <a>-<b> overlaps with previous range <c>-<d>.`
    #[error("Slot range {0}-{1} overlaps with previous range {2}-{3}.")]
    RangeOverlap(u16, u16, u16, u16),
    /// `Slots are not served by this node.`
    #[error("Slots are not served by this node.")]
    NotServedHere,
    /// `I am already migrating slot <n>.`
    #[error("I am already migrating slot {0}.")]
    AlreadyMigrating(u16),
    /// `Slot ranges in migrations overlap`
    #[error("Slot ranges in migrations overlap")]
    MigrationsOverlap,
    /// `Invalid node name: <id>` (not 40 bytes).
    #[error("Invalid node name: {0}")]
    InvalidNodeName(String),
    /// `Unknown node name: <id>`.
    #[error("Unknown node name: {0}")]
    UnknownNodeName(String),
    /// `Target node can not be this node.`
    #[error("Target node can not be this node.")]
    TargetIsMyself,
    /// `No migrations ongoing` (CANCELSLOTMIGRATIONS without an unfinished export).
    #[error("No migrations ongoing")]
    NoMigrations,
    /// `Target node does not know the source node` (ESTABLISH).
    #[error("Target node does not know the source node")]
    UnknownSource,
    /// `Source node is target node itself` (ESTABLISH).
    #[error("Source node is target node itself")]
    SourceIsMyself,
    /// `Slot is already being imported on the target by a different migration` (ESTABLISH).
    #[error("Slot is already being imported on the target by a different migration")]
    AlreadyImporting,
    /// `Target node does not agree about current slot ownership` (ESTABLISH).
    #[error("Target node does not agree about current slot ownership")]
    OwnershipDisagreement,
    /// `No such slot migration job` (FINISH with an unknown name).
    #[error("No such slot migration job")]
    NoSuchJob,
    /// `CLUSTER SYNCSLOTS <SUB> should only be used by slot migration clients`.
    #[error("CLUSTER SYNCSLOTS {0} should only be used by slot migration clients")]
    NotMigrationClient(&'static str),
    /// `Slot import in progress` (legacy SETSLOT MIGRATING/IMPORTING while an import runs).
    #[error("Slot import in progress")]
    SlotImportInProgress,
    /// `Slot export in progress` (legacy SETSLOT MIGRATING/IMPORTING while an export runs).
    #[error("Slot export in progress")]
    SlotExportInProgress,
}

impl MigrationError {
    /// The error reply: `ERR <text>`.
    pub fn to_reply(&self) -> Reply {
        Reply::Error(format!("ERR {self}"))
    }
}
