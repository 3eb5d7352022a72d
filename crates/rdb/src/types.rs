//! Type and opcode bytes (Valkey `src/rdb.h` `enum RdbType`, `RDB_OPCODE_*`) and RDB versions.

/// An object type byte (the byte before a key in a file, the first byte of a DUMP payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdbType {
    /// 0 `RDB_TYPE_STRING`.
    String,
    /// 1 `RDB_TYPE_LIST`: a count and plain strings (before RDB 7).
    List,
    /// 2 `RDB_TYPE_SET`: a count and plain strings.
    Set,
    /// 3 `RDB_TYPE_ZSET`: scores as strings (before RDB 8).
    ZSet,
    /// 4 `RDB_TYPE_HASH`: a count and field/value strings.
    Hash,
    /// 5 `RDB_TYPE_ZSET_2`: scores as binary doubles.
    ZSet2,
    /// 6 `RDB_TYPE_MODULE_PRE_GA`.
    ModulePreGa,
    /// 7 `RDB_TYPE_MODULE_2`.
    Module2,
    /// 9 `RDB_TYPE_HASH_ZIPMAP` (Redis 2.4 and older).
    HashZipmap,
    /// 10 `RDB_TYPE_LIST_ZIPLIST`.
    ListZiplist,
    /// 11 `RDB_TYPE_SET_INTSET`.
    SetIntset,
    /// 12 `RDB_TYPE_ZSET_ZIPLIST`.
    ZSetZiplist,
    /// 13 `RDB_TYPE_HASH_ZIPLIST`.
    HashZiplist,
    /// 14 `RDB_TYPE_LIST_QUICKLIST`: nodes are ziplists (RDB 7..9).
    ListQuicklist,
    /// 15 `RDB_TYPE_STREAM_LISTPACKS`.
    StreamListpacks,
    /// 16 `RDB_TYPE_HASH_LISTPACK` (RDB 10).
    HashListpack,
    /// 17 `RDB_TYPE_ZSET_LISTPACK` (RDB 10).
    ZSetListpack,
    /// 18 `RDB_TYPE_LIST_QUICKLIST_2`: nodes are listpacks or plain strings (RDB 10).
    ListQuicklist2,
    /// 19 `RDB_TYPE_STREAM_LISTPACKS_2`.
    StreamListpacks2,
    /// 20 `RDB_TYPE_SET_LISTPACK` (RDB 11, Redis 7.2 / Valkey 7.2).
    SetListpack,
    /// 21 `RDB_TYPE_STREAM_LISTPACKS_3`.
    StreamListpacks3,
    /// 22 `RDB_TYPE_HASH_2`: a hash with per-field expiry (RDB 80, Valkey 9.0).
    Hash2,
    /// 23 `RDB_TYPE_PATH_HASH` (RDB 81, Valkey 9.2; not read by Valkey 9.1).
    PathHash,
    /// Any other byte below the opcodes.
    Unknown(u8),
}

impl RdbType {
    /// The type of a byte (every byte maps; opcodes 242..=255 are not types and map to
    /// `Unknown`).
    pub fn from_code(code: u8) -> RdbType {
        match code {
            0 => RdbType::String,
            1 => RdbType::List,
            2 => RdbType::Set,
            3 => RdbType::ZSet,
            4 => RdbType::Hash,
            5 => RdbType::ZSet2,
            6 => RdbType::ModulePreGa,
            7 => RdbType::Module2,
            9 => RdbType::HashZipmap,
            10 => RdbType::ListZiplist,
            11 => RdbType::SetIntset,
            12 => RdbType::ZSetZiplist,
            13 => RdbType::HashZiplist,
            14 => RdbType::ListQuicklist,
            15 => RdbType::StreamListpacks,
            16 => RdbType::HashListpack,
            17 => RdbType::ZSetListpack,
            18 => RdbType::ListQuicklist2,
            19 => RdbType::StreamListpacks2,
            20 => RdbType::SetListpack,
            21 => RdbType::StreamListpacks3,
            22 => RdbType::Hash2,
            23 => RdbType::PathHash,
            c => RdbType::Unknown(c),
        }
    }

    /// The type byte.
    pub fn code(self) -> u8 {
        match self {
            RdbType::String => 0,
            RdbType::List => 1,
            RdbType::Set => 2,
            RdbType::ZSet => 3,
            RdbType::Hash => 4,
            RdbType::ZSet2 => 5,
            RdbType::ModulePreGa => 6,
            RdbType::Module2 => 7,
            RdbType::HashZipmap => 9,
            RdbType::ListZiplist => 10,
            RdbType::SetIntset => 11,
            RdbType::ZSetZiplist => 12,
            RdbType::HashZiplist => 13,
            RdbType::ListQuicklist => 14,
            RdbType::StreamListpacks => 15,
            RdbType::HashListpack => 16,
            RdbType::ZSetListpack => 17,
            RdbType::ListQuicklist2 => 18,
            RdbType::StreamListpacks2 => 19,
            RdbType::SetListpack => 20,
            RdbType::StreamListpacks3 => 21,
            RdbType::Hash2 => 22,
            RdbType::PathHash => 23,
            RdbType::Unknown(c) => c,
        }
    }

    /// The name Valkey's `rdb_type_string[]` gives the type (`"unknown"` for others).
    pub fn name(self) -> &'static str {
        match self {
            RdbType::String => "string",
            RdbType::List => "list-linked",
            RdbType::Set => "set-hashtable",
            RdbType::ZSet => "zset-v1",
            RdbType::Hash => "hash-hashtable",
            RdbType::ZSet2 => "zset-v2",
            RdbType::ModulePreGa => "module-pre-release",
            RdbType::Module2 => "module-value",
            RdbType::HashZipmap => "hash-zipmap",
            RdbType::ListZiplist => "list-ziplist",
            RdbType::SetIntset => "set-intset",
            RdbType::ZSetZiplist => "zset-ziplist",
            RdbType::HashZiplist => "hash-ziplist",
            RdbType::ListQuicklist => "quicklist",
            RdbType::StreamListpacks => "stream",
            RdbType::HashListpack => "hash-listpack",
            RdbType::ZSetListpack => "zset-listpack",
            RdbType::ListQuicklist2 => "quicklist-v2",
            RdbType::StreamListpacks2 => "stream-v2",
            RdbType::SetListpack => "set-listpack",
            RdbType::StreamListpacks3 => "stream-v3",
            RdbType::Hash2 => "hash-hashtable-with-field-expiry",
            RdbType::PathHash => "path-hash",
            RdbType::Unknown(_) => "unknown",
        }
    }

    /// The oldest RDB version that defines the type (`None` for unknown types).
    pub fn since_version(self) -> Option<u16> {
        Some(match self {
            RdbType::String | RdbType::List | RdbType::Set | RdbType::ZSet | RdbType::Hash => 1,
            RdbType::HashZipmap
            | RdbType::ListZiplist
            | RdbType::SetIntset
            | RdbType::ZSetZiplist
            | RdbType::HashZiplist => 2,
            RdbType::ListQuicklist => 7,
            RdbType::ZSet2 | RdbType::ModulePreGa | RdbType::Module2 => 8,
            RdbType::StreamListpacks => 9,
            RdbType::HashListpack
            | RdbType::ZSetListpack
            | RdbType::ListQuicklist2
            | RdbType::StreamListpacks2 => 10,
            RdbType::SetListpack | RdbType::StreamListpacks3 => 11,
            RdbType::Hash2 => 80,
            RdbType::PathHash => 81,
            RdbType::Unknown(_) => return None,
        })
    }
}

/// Opcode bytes of a file (`RDB_OPCODE_*`, Valkey `src/rdb.h`).
pub mod opcode {
    /// 242 `RDB_OPCODE_UPDATE`: an inline replication command during a forkless save.
    pub const UPDATE: u8 = 242;
    /// 243 `RDB_OPCODE_SLOT_IMPORT`: an atomic slot migration import in progress (9.0).
    pub const SLOT_IMPORT: u8 = 243;
    /// 244 `RDB_OPCODE_SLOT_INFO`: foreign slot sizes (Redis 7.4+), safe to ignore.
    pub const SLOT_INFO: u8 = 244;
    /// 245 `RDB_OPCODE_FUNCTION2`: one function library's code.
    pub const FUNCTION2: u8 = 245;
    /// 246 `RDB_OPCODE_FUNCTION_PRE_GA`: 7.0 release-candidate functions (refused).
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// 247 `RDB_OPCODE_MODULE_AUX`.
    pub const MODULE_AUX: u8 = 247;
    /// 248 `RDB_OPCODE_IDLE`: LRU idle time of the next key, seconds.
    pub const IDLE: u8 = 248;
    /// 249 `RDB_OPCODE_FREQ`: LFU counter of the next key.
    pub const FREQ: u8 = 249;
    /// 250 `RDB_OPCODE_AUX`: a key/value string pair.
    pub const AUX: u8 = 250;
    /// 251 `RDB_OPCODE_RESIZEDB`: key and expire counts of the database.
    pub const RESIZEDB: u8 = 251;
    /// 252 `RDB_OPCODE_EXPIRETIME_MS`: absolute expiry of the next key, Unix ms, 8 bytes LE.
    pub const EXPIRETIME_MS: u8 = 252;
    /// 253 `RDB_OPCODE_EXPIRETIME`: absolute expiry of the next key, Unix s, 4 bytes LE.
    pub const EXPIRETIME: u8 = 253;
    /// 254 `RDB_OPCODE_SELECTDB`.
    pub const SELECTDB: u8 = 254;
    /// 255 `RDB_OPCODE_EOF`: then the 8-byte CRC-64 (0: checksum disabled).
    pub const EOF: u8 = 255;
}

/// The RDB version a writer stamps, and with it the encodings it may use.
///
/// | version | magic | read by | set encodings |
/// |---|---|---|---|
/// | `V10` | `REDIS0010` | Redis 7.0+, Valkey 7.2+ (all) | intset, plain |
/// | `V11` | `REDIS0011` | Redis 7.2+, Valkey 7.2+ (not Redis 7.0) | intset, listpack, plain |
/// | `V80` | `VALKEY080` | Valkey 9.0+ only | as `V11`, plus `HASH_2` field expiry |
///
/// [`RdbVersion::COMPATIBLE`] (`V10`) is the default: it is the newest version that both
/// redis-server 7.0 (which refuses DUMP payloads and files above 10) and valkey-server 9.1
/// (which accepts 1..=11 and 80) read. Neither server checks that a payload's types fit the
/// version it carries, but a writer that stamps 10 only emits RDB 10 types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RdbVersion {
    /// RDB 10 (Redis 7.0).
    V10,
    /// RDB 11 (Redis 7.2, Valkey 7.2 and 8.x).
    V11,
    /// RDB 80 (Valkey 9.0 and 9.1).
    V80,
}

impl RdbVersion {
    /// The version every peer we interoperate with reads: RDB 10.
    pub const COMPATIBLE: RdbVersion = RdbVersion::V10;

    /// The version number.
    pub fn number(self) -> u16 {
        match self {
            RdbVersion::V10 => 10,
            RdbVersion::V11 => 11,
            RdbVersion::V80 => 80,
        }
    }

    /// The 9-byte file signature (`REDIS0010`, `REDIS0011`, `VALKEY080`).
    pub fn signature(self) -> [u8; 9] {
        match self {
            RdbVersion::V10 => *b"REDIS0010",
            RdbVersion::V11 => *b"REDIS0011",
            RdbVersion::V80 => *b"VALKEY080",
        }
    }

    /// Whether a writer of this version may emit type `t` (only types the version defines).
    pub fn allows(self, t: RdbType) -> bool {
        t.since_version().is_some_and(|v| v <= self.number())
    }
}

/// Whether a reader like Valkey 9.1 (`rdb-version-check strict`) accepts `version`:
/// 1..=11 with the `REDIS` magic (or none, in DUMP payloads), 80 with `VALKEY` (or none).
/// (`rdbIsVersionAccepted`; 12..=79 are foreign Redis versions, 81 is Valkey 9.2.)
pub fn version_accepted(version: u32, magic: Option<Magic>) -> bool {
    let known = (1..=11).contains(&version) || version == 80;
    match magic {
        None => known,
        Some(Magic::Redis) => known && version <= 11,
        Some(Magic::Valkey) => version == 80,
    }
}

/// The signature a file starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Magic {
    /// `REDIS` + 4 digits (`REDIS0010`).
    Redis,
    /// `VALKEY` + 3 digits (`VALKEY080`).
    Valkey,
}
