//! The append-only file (issue 19, its AOF part), Redis 7.0's multi-part layout (src/aof.c:
//! `feedAppendOnlyFile`, `flushAppendOnlyFile`, `rewriteAppendOnlyFileBackground`,
//! `backgroundRewriteDoneHandler`, `loadAppendOnlyFiles`, `aofLoadManifestFromFile`).
//!
//! * **Files**, in `dir`/`appenddirname` (default `appendonlydir`), named from `appendfilename`
//!   (default `appendonly.aof`): a base file `appendonly.aof.<n>.base.rdb` (an RDB, with
//!   `aof-use-rdb-preamble yes`, the default) or `.base.aof` (the rewrite commands of
//!   `ferrocluster_dataplane::aof`), incremental files `appendonly.aof.<n>.incr.aof`, and the
//!   manifest `appendonly.aof.manifest`, one line a file: `file <name> seq <n> type b|h|i`.
//!   The manifest is replaced as every file here is: a temporary file, fsync, rename, fsync of
//!   the directory.
//! * **What is written** is the replication stream's commands (the effects the primary
//!   propagates: `SET k v PXAT <ms>`, `DEL`, ...), with a `SELECT` when the database changes
//!   (each new incremental file starts with one), appended at the one place the server
//!   propagates (`crate::repl`'s feed), under the state lock, so the file's order is the
//!   execution order. A replica writes what it applies from its primary.
//! * **`appendfsync`**: the bytes are written (`write(2)`) before any reply of the same
//!   event-loop turn leaves an I/O thread ([`Aof::flush`], called at the start of every
//!   flush of replies: Redis's `beforeSleep`). `always`: that flush also fsyncs, so a reply
//!   leaves only after the fsync that covers its write (one write + fsync per turn for all the
//!   clients of that turn; threads share it: a turn finding its bytes already synced by another
//!   does nothing); `everysec`: a background thread fsyncs once a second (a second handle on
//!   the file, so writes go on meanwhile); `no`: never fsynced by us.
//! * **`BGREWRITEAOF`** and the automatic rewrite (`auto-aof-rewrite-percentage`, `-min-size`
//!   over the base size): a new incremental file is opened and listed in the manifest first
//!   (writes from then on go there), the data set is serialized under the state lock (as
//!   BGSAVE takes its snapshot), and a thread writes the new base; then the manifest is
//!   swapped to the new base + the new incremental file and the old files are deleted. A crash
//!   at any point leaves a manifest whose files hold every write: the old base and increments
//!   plus the new increment, or the new base and the new increment.
//! * **Loading at start** with `appendonly yes`: the AOF, not the RDB (as Redis). A torn last
//!   command of the last file is cut (`aof-load-truncated yes`, Redis's log lines) or refused;
//!   anything else refuses to start with the file, offset and reason (exit 1).
//! * **Write errors** (Redis 7.0's handling): with `always`, a failed write or fsync ends the
//!   process (`Can't recover from AOF write error when the AOF fsync policy is 'always'.
//!   Exiting...`), so no reply of an unsynced write ever leaves; otherwise a short write is
//!   cut off the file, the bytes stay buffered and are written again, `aof_last_write_status`
//!   is `err` and write commands get `-MISCONF Errors writing to the AOF file: <reason>` until a
//!   write succeeds.
//!
//! Left out: `aof-timestamp-enabled yes` (only `no` is accepted); the Redis 6 single-file
//! `appendonly.aof` (no manifest) is not upgraded; a `.base.aof` holding an RDB preamble
//! followed by commands is not read (a base is an RDB or commands, by its first bytes);
//! `aof_delayed_fsync` (we never postpone an fsync) and fork CoW figures (there is no fork).
//! The snapshot of a rewrite is taken under the state lock, as BGSAVE's: writes wait while it
//! is serialized (`benches/persist-latency-compare.sh` measures it against redis-server).

use crate::fsio::{Disk, DiskFile};
use crate::server::{unix_ms, Shared, State};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

/// `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// `always`: a reply leaves after the fsync covering its write.
    Always,
    /// `everysec` (the default): a background fsync once a second.
    Everysec,
    /// `no`: the OS decides.
    No,
}

impl Fsync {
    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Everysec => "everysec",
            Fsync::No => "no",
        }
    }

    /// Parses a config value.
    ///
    /// # Errors
    /// Redis's text for an unknown value.
    pub fn parse(v: &str) -> Result<Fsync, String> {
        match v.to_ascii_lowercase().as_str() {
            "always" => Ok(Fsync::Always),
            "everysec" => Ok(Fsync::Everysec),
            "no" => Ok(Fsync::No),
            _ => Err("argument(s) must be one of the following: everysec, always, no".into()),
        }
    }

    fn from_u8(v: u8) -> Fsync {
        match v {
            0 => Fsync::Always,
            1 => Fsync::Everysec,
            _ => Fsync::No,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Fsync::Always => 0,
            Fsync::Everysec => 1,
            Fsync::No => 2,
        }
    }
}

/// The AOF directives, Redis 7.0's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofOptions {
    /// `appendonly` (default no; CONFIG SET yes rewrites first, as Redis).
    pub enabled: bool,
    /// `appendfilename` (default `appendonly.aof`), start-up only.
    pub filename: String,
    /// `appenddirname` (default `appendonlydir`, in `dir`), start-up only.
    pub dirname: String,
    /// `appendfsync` (default everysec).
    pub fsync: Fsync,
    /// `aof-use-rdb-preamble` (default yes): the base is an RDB.
    pub use_rdb_preamble: bool,
    /// `aof-load-truncated` (default yes): a torn last command is cut at load.
    pub load_truncated: bool,
    /// `auto-aof-rewrite-percentage` (default 100; 0: off): growth over the base size, %.
    pub rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size` (default 64 MiB), bytes.
    pub rewrite_min_size: u64,
    /// `no-appendfsync-on-rewrite` (default no): no fsync of the incremental file while a
    /// rewrite runs (Redis's trade of durability for latency).
    pub no_fsync_on_rewrite: bool,
    /// `aof-rewrite-incremental-fsync` (default yes): the new base is fsynced every 4 MiB as
    /// it is written (Redis `REDIS_AUTOSYNC_BYTES`), not only at its end.
    pub rewrite_incremental_fsync: bool,
}

impl Default for AofOptions {
    fn default() -> Self {
        AofOptions {
            enabled: false,
            filename: "appendonly.aof".into(),
            dirname: "appendonlydir".into(),
            fsync: Fsync::Everysec,
            use_rdb_preamble: true,
            load_truncated: true,
            rewrite_percentage: 100,
            rewrite_min_size: 64 * 1024 * 1024,
            no_fsync_on_rewrite: false,
            rewrite_incremental_fsync: true,
        }
    }
}

/// Checks an `appendfilename` / `appenddirname` value (Redis: `isValidAOFfilename`, no path).
///
/// # Errors
/// Redis's texts.
pub fn valid_name(v: &str, what: &str) -> Result<String, String> {
    if v.is_empty() || v.contains('/') || v.contains(' ') || v == "." || v == ".." {
        return Err(format!("{what} can't be a path, just a filename"));
    }
    Ok(v.to_string())
}

// ----- the manifest -----

/// A file's role in the manifest (`type b|h|i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// `b`: the base.
    Base,
    /// `h`: history, to delete.
    History,
    /// `i`: incremental.
    Incr,
}

/// One manifest line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The file name (in the AOF directory).
    pub name: String,
    /// Its sequence number.
    pub seq: u64,
    /// Its role.
    pub kind: FileType,
}

/// The manifest (Redis `aofManifest`): at most one base, then the incremental files in
/// order; history files are to be deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file.
    pub base: Option<ManifestEntry>,
    /// Incremental files, oldest first.
    pub incrs: Vec<ManifestEntry>,
    /// History files.
    pub history: Vec<ManifestEntry>,
}

impl Manifest {
    /// Parses a manifest's text (Redis 7.0 `aofLoadManifestFromFile`: `#` comments, lines of
    /// `key value` pairs with `file`, `seq` and `type`, incremental seqs increasing).
    ///
    /// # Errors
    /// Redis's reason texts, with the line number.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        if !text.is_empty() && !text.ends_with('\n') {
            return Err("The AOF manifest file is invalid format (no newline at its end)".into());
        }
        for (i, line) in text.lines().enumerate() {
            let bad = |why: &str| format!("{why} (manifest line {})", i + 1);
            if line.starts_with('#') {
                continue;
            }
            if line.len() > 1024 {
                return Err(bad("The AOF manifest file contains too long line"));
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return Err(bad("Invalid AOF manifest file format"));
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for kv in words.chunks(2) {
                match kv[0] {
                    "file" => name = Some(kv[1].to_string()),
                    "seq" => seq = kv[1].parse::<u64>().ok(),
                    "type" => {
                        kind = match kv[1] {
                            "b" => Some(FileType::Base),
                            "h" => Some(FileType::History),
                            "i" => Some(FileType::Incr),
                            _ => return Err(bad("Unknown AOF file type")),
                        }
                    }
                    // Redis skips keys it does not know (later versions add some).
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(bad("Invalid AOF manifest file format"));
            };
            let e = ManifestEntry { name, seq, kind };
            match kind {
                FileType::Base => {
                    if m.base.is_some() {
                        return Err(bad("Found duplicate base file information"));
                    }
                    m.base = Some(e);
                }
                FileType::History => m.history.push(e),
                FileType::Incr => {
                    if m.incrs.last().is_some_and(|l| l.seq >= e.seq) {
                        return Err(bad("Found a non-monotonic sequence number"));
                    }
                    m.incrs.push(e);
                }
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// The manifest's text (Redis `getAofManifestAsString`: base, history, incremental).
    pub fn render(&self) -> String {
        let mut s = String::new();
        let line = |s: &mut String, e: &ManifestEntry, t: &str| {
            s.push_str(&format!("file {} seq {} type {}\n", e.name, e.seq, t));
        };
        if let Some(b) = &self.base {
            line(&mut s, b, "b");
        }
        for h in &self.history {
            line(&mut s, h, "h");
        }
        for i in &self.incrs {
            line(&mut s, i, "i");
        }
        s
    }

    fn next_incr_seq(&self) -> u64 {
        self.incrs.last().map_or(1, |e| e.seq + 1)
    }

    fn next_base_seq(&self) -> u64 {
        self.base.as_ref().map_or(1, |e| e.seq + 1)
    }
}

// ----- the writer -----

struct Buf {
    /// Appending (the AOF is on, or being turned on).
    on: bool,
    data: Vec<u8>,
    /// The database the current file's stream is in (`None`: a SELECT comes first).
    db: Option<u32>,
    /// Bytes ever appended (a counter, not a file offset).
    appended: u64,
}

#[derive(Default)]
struct FileSide {
    out: Option<Box<dyn DiskFile>>,
    manifest: Manifest,
    /// Of the `appended` counter: written to the file, and fsynced.
    written: u64,
    synced: u64,
    /// `aof_current_size` and `aof_base_size`, bytes.
    size: u64,
    base_size: u64,
    /// The last write failed: its reason (`aof_last_write_status:err`).
    write_err: Option<String>,
    rewrite_started_ms: Option<u64>,
    last_rewrite_secs: Option<u64>,
    last_rewrite_failed: bool,
    rewrites: u64,
    consecutive_failures: u64,
    /// A background fsync is running (`aof_pending_bio_fsync`).
    fsync_running: bool,
    /// Unix ms of the last rewrite start attempt.
    last_try_ms: u64,
}

/// The AOF of one server: the buffer the propagation point appends to (under the state lock)
/// and the open incremental file (its own lock, so writes and fsyncs happen outside the state
/// lock). Lock order: state, then file, then buffer.
pub struct Aof {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    filename: String,
    fsync: AtomicU8,
    use_rdb_preamble: AtomicBool,
    /// The directives in force (CONFIG SET changes the run-time ones).
    opts: Mutex<AofOptions>,
    buf: Mutex<Buf>,
    file: Mutex<FileSide>,
    /// Mirrors `FileSide::write_err.is_some()` for the command path.
    failing: AtomicBool,
    /// Mirrors `Buf::on` (an I/O thread's turn skips the locks when the AOF is off).
    on: AtomicBool,
}

/// Redis's texts for a rewrite that cannot start.
pub const REWRITE_IN_PROGRESS: &str =
    "ERR Background append only file rewriting already in progress";

impl Aof {
    /// An AOF (off) in `dir`/`opts.dirname`, writing through `disk`.
    pub fn new(disk: Arc<dyn Disk>, dir: &Path, opts: &AofOptions) -> Aof {
        Aof {
            disk,
            dir: dir.join(&opts.dirname),
            filename: opts.filename.clone(),
            fsync: AtomicU8::new(opts.fsync.to_u8()),
            use_rdb_preamble: AtomicBool::new(opts.use_rdb_preamble),
            opts: Mutex::new(opts.clone()),
            buf: Mutex::new(Buf {
                on: false,
                data: Vec::new(),
                db: None,
                appended: 0,
            }),
            file: Mutex::new(FileSide::default()),
            failing: AtomicBool::new(false),
            on: AtomicBool::new(false),
        }
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.join(format!("{}.manifest", self.filename))
    }

    /// `appendfsync` in force.
    pub fn policy(&self) -> Fsync {
        Fsync::from_u8(self.fsync.load(Ordering::Relaxed))
    }

    /// The directives in force, `enabled` as it is now.
    pub fn options(&self) -> AofOptions {
        let mut o = self.opts.lock().clone();
        o.enabled = self.is_on();
        o
    }

    /// CONFIG SET of the run-time directives (`appendfsync`, `aof-use-rdb-preamble`,
    /// `aof-load-truncated`, `auto-aof-rewrite-*`); `appendonly` goes through [`set_enabled`].
    pub fn set_options(&self, opts: &AofOptions) {
        self.fsync.store(opts.fsync.to_u8(), Ordering::Relaxed);
        self.use_rdb_preamble
            .store(opts.use_rdb_preamble, Ordering::Relaxed);
        *self.opts.lock() = opts.clone();
    }

    /// Whether commands are being appended.
    pub fn is_on(&self) -> bool {
        self.buf.lock().on
    }

    /// Appends one propagated command executed in database `db` (a `SELECT` first when the
    /// file's stream is in another one), in the replication stream's encoding
    /// (`ferrocluster_dataplane::resp::encode_command`). Nothing when the AOF is off.
    pub fn append(&self, db: u32, argv: &[&[u8]]) {
        self.append_in(Some(db), argv);
    }

    /// Appends a command that touches no database (the `MULTI` / `EXEC` around a transaction's
    /// writes): no `SELECT` before it.
    pub fn append_without_db(&self, argv: &[&[u8]]) {
        self.append_in(None, argv);
    }

    fn append_in(&self, db: Option<u32>, argv: &[&[u8]]) {
        let mut b = self.buf.lock();
        if !b.on {
            return;
        }
        let start = b.data.len();
        if let Some(db) = db.filter(|db| b.db != Some(*db)) {
            let d = db.to_string();
            ferrocluster_dataplane::resp::encode_command(
                &mut b.data,
                &[b"SELECT".as_slice(), d.as_bytes()],
            );
            b.db = Some(db);
        }
        ferrocluster_dataplane::resp::encode_command(&mut b.data, argv);
        b.appended += (b.data.len() - start) as u64;
    }

    /// `-MISCONF` for a write command while the AOF cannot be written (Redis
    /// `writeCommandsDeniedByDiskError`), else `None`.
    pub fn write_denied(&self) -> Option<String> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        let f = self.file.lock();
        f.write_err
            .as_ref()
            .map(|e| format!("MISCONF Errors writing to the AOF file: {e}"))
    }

    /// Writes what was appended (and, with `always`, fsyncs it): call before any reply of the
    /// same turn leaves. `Err` is fatal (Redis exits): the log line, already logged.
    ///
    /// # Errors
    /// With `always`, a failed write or fsync.
    pub fn flush(&self) -> Result<(), String> {
        if !self.on.load(Ordering::Acquire) {
            return Ok(());
        }
        let always = self.policy() == Fsync::Always;
        let mut f = self.file.lock();
        self.write_locked(&mut f, always)
    }

    fn write_locked(&self, f: &mut FileSide, fsync: bool) -> Result<(), String> {
        let (bytes, upto) = {
            let mut b = self.buf.lock();
            if b.data.is_empty() && (!fsync || f.synced >= f.written) {
                return Ok(());
            }
            (std::mem::take(&mut b.data), b.appended)
        };
        let Some(out) = f.out.as_mut() else {
            // Off: nothing to write to (the buffer was only filled while on).
            return Ok(());
        };
        if !bytes.is_empty() {
            let before = out.len().ok();
            if let Err((n, e)) = crate::fsio::write_all(out.as_mut(), &bytes) {
                let reason = if n == 0 {
                    tracing::warn!("Error writing to the AOF file: {e}");
                    e.to_string()
                } else {
                    tracing::warn!(
                        "Short write while writing to the AOF file: (nwritten={n}, expected={})",
                        bytes.len()
                    );
                    e.to_string()
                };
                // Redis removes the partial write so the file ends at a command boundary.
                let cut = before.map(|l| out.truncate(l));
                let mut b = self.buf.lock();
                match cut {
                    Some(Ok(())) => {
                        let mut again = bytes;
                        again.extend_from_slice(&b.data);
                        b.data = again;
                    }
                    _ => {
                        tracing::warn!("Could not remove short write from the append-only file. The AOF may not load the next time the server starts.");
                        let mut again = bytes[n..].to_vec();
                        again.extend_from_slice(&b.data);
                        b.data = again;
                        f.size += n as u64;
                    }
                }
                drop(b);
                if self.policy() == Fsync::Always {
                    let line = "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...";
                    tracing::warn!("{line}");
                    return Err(line.into());
                }
                f.write_err = Some(reason);
                self.failing.store(true, Ordering::Relaxed);
                return Ok(());
            }
            f.size += bytes.len() as u64;
            if f.write_err.take().is_some() {
                self.failing.store(false, Ordering::Relaxed);
                tracing::warn!("AOF write error looks solved, the server can write again.");
            }
        }
        f.written = upto;
        let skip = f.rewrite_started_ms.is_some() && self.opts.lock().no_fsync_on_rewrite;
        if fsync && !skip && f.synced < f.written {
            if let Err(e) = out.sync() {
                let line = format!(
                    "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}. Exiting..."
                );
                tracing::warn!("{line}");
                return Err(line);
            }
            f.synced = f.written;
        }
        Ok(())
    }

    /// The `everysec` fsync (Redis's `bio` job): on a second handle, without holding the file
    /// lock while the disk works. A failure is logged and marks the AOF as failing (writes
    /// get `-MISCONF`) until a later fsync succeeds.
    pub fn background_fsync(&self) {
        let (handle, upto) = {
            let mut f = self.file.lock();
            if f.synced >= f.written || f.fsync_running {
                return;
            }
            if f.rewrite_started_ms.is_some() && self.opts.lock().no_fsync_on_rewrite {
                return;
            }
            let Some(h) = f.out.as_ref().and_then(|o| o.try_clone().ok()) else {
                return;
            };
            f.fsync_running = true;
            (h, f.written)
        };
        let mut handle = handle;
        let res = handle.sync();
        let mut f = self.file.lock();
        f.fsync_running = false;
        match res {
            Ok(()) => {
                f.synced = f.synced.max(upto);
                if f.write_err.as_deref() == Some(FSYNC_FAILED) {
                    f.write_err = None;
                    self.failing.store(false, Ordering::Relaxed);
                    tracing::warn!("AOF write error looks solved, the server can write again.");
                }
            }
            Err(e) => {
                tracing::warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'everysec': {e}");
                if f.write_err.is_none() {
                    f.write_err = Some(FSYNC_FAILED.into());
                    self.failing.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Writes and fsyncs everything (shutdown, `appendonly no`): Redis's "Calling fsync() on
    /// the AOF file.".
    ///
    /// # Errors
    /// The write or fsync error.
    pub fn sync_all(&self) -> Result<(), String> {
        let mut f = self.file.lock();
        if f.out.is_none() {
            return Ok(());
        }
        self.write_locked(&mut f, false)?;
        if let Some(e) = &f.write_err {
            return Err(e.clone());
        }
        tracing::info!("Calling fsync() on the AOF file.");
        if let Some(out) = f.out.as_mut() {
            out.sync().map_err(|e| e.to_string())?;
        }
        f.synced = f.written;
        Ok(())
    }

    /// The `aof_*` lines of INFO persistence (Redis 7.0's, those we fill truthfully).
    pub fn info_lines(&self, now_ms: u64) -> String {
        let on = self.is_on();
        let f = self.file.lock();
        let mut s = format!(
            "aof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{}\r\n",
            u8::from(on),
            u8::from(f.rewrite_started_ms.is_some()),
            f.last_rewrite_secs.map_or(-1, |s| s as i64),
            f.rewrite_started_ms
                .map_or(-1, |t| (now_ms.saturating_sub(t) / 1000) as i64),
            if f.last_rewrite_failed { "err" } else { "ok" },
            f.rewrites,
            f.consecutive_failures,
            if f.write_err.is_some() { "err" } else { "ok" },
        );
        if on {
            let pending = self.buf.lock().data.len();
            s.push_str(&format!(
                "aof_current_size:{}\r\naof_base_size:{}\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:{}\r\n",
                f.size,
                f.base_size,
                pending,
                u8::from(f.fsync_running),
            ));
        }
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn incr_name(&self, seq: u64) -> String {
        format!("{}.{seq}.incr.aof", self.filename)
    }

    fn base_name(&self, seq: u64, rdb: bool) -> String {
        format!(
            "{}.{seq}.base.{}",
            self.filename,
            if rdb { "rdb" } else { "aof" }
        )
    }

    /// Writes `m` as the manifest: temporary file, fsync, rename, directory fsync.
    fn persist_manifest(&self, m: &Manifest) -> Result<(), String> {
        let tmp = format!("temp-{}.manifest", self.filename);
        crate::persist::write_atomically_on(
            self.disk.as_ref(),
            &self.manifest_path(),
            m.render().as_bytes(),
            &tmp,
        )
    }

    /// Opens a new incremental file, lists it in the manifest (persisted) and makes it the
    /// one appended to; the buffer is written to the old one first. Appending is on after.
    fn open_new_incr(&self, f: &mut FileSide, why: &str) -> Result<(), String> {
        self.write_locked(f, false)?;
        // Bytes that could not be written belong before the new file: a rewrite now would put
        // them after a base that already holds their effect.
        if let Some(e) = &f.write_err {
            return Err(format!("the AOF can't be written: {e}"));
        }
        if let Some(old) = f.out.as_mut() {
            old.sync()
                .map_err(|e| format!("can't fsync the AOF file: {e}"))?;
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("can't create the AOF directory {}: {e}", self.dir.display()))?;
        let seq = f.manifest.next_incr_seq();
        let name = self.incr_name(seq);
        let out = self
            .disk
            .append(&self.path(&name))
            .map_err(|e| format!("can't open the AOF file {name}: {e}"))?;
        let mut next = f.manifest.clone();
        next.incrs.push(ManifestEntry {
            name: name.clone(),
            seq,
            kind: FileType::Incr,
        });
        self.persist_manifest(&next)?;
        tracing::info!("Creating AOF incr file {name} on {why}");
        f.manifest = next;
        f.out = Some(out);
        let mut b = self.buf.lock();
        b.on = true;
        self.on.store(true, Ordering::Release);
        b.db = None;
        f.written = b.appended;
        f.synced = b.appended;
        Ok(())
    }

    /// The new base's bytes from `keys` (an RDB with `aof-use-rdb-preamble yes`, else
    /// commands) and whether they are an RDB.
    fn snapshot(
        &self,
        keys: crate::snapshot::Keys<'_>,
        now: u64,
    ) -> Result<(Vec<u8>, bool), String> {
        let rdb = self.use_rdb_preamble.load(Ordering::Relaxed);
        if rdb {
            let mut aux = crate::snapshot::server_aux(now);
            aux.push(("aof-base", "1".to_string()));
            Ok((crate::snapshot::write_rdb(keys, &aux)?, true))
        } else {
            Ok((write_commands(keys)?, false))
        }
    }

    /// The rewrite's end: `bytes` (an RDB when `rdb`) become the new base, the manifest lists
    /// it and the newest incremental file only, and the files it replaced are deleted.
    fn install_base(&self, bytes: &[u8], rdb: bool, keep_incr: bool) -> Result<(), String> {
        let tmp = format!("temp-rewriteaof-bg-{}.aof", std::process::id());
        let tmp_path = self.path(&tmp);
        let write = || -> Result<(), String> {
            let mut out = self
                .disk
                .create(&tmp_path)
                .map_err(|e| format!("can't create {tmp}: {e}"))?;
            let incremental = self.opts.lock().rewrite_incremental_fsync;
            for chunk in bytes.chunks(AUTOSYNC_BYTES) {
                crate::fsio::write_all(out.as_mut(), chunk)
                    .map_err(|(_, e)| format!("can't write {tmp}: {e}"))?;
                if incremental {
                    out.sync().map_err(|e| format!("can't fsync {tmp}: {e}"))?;
                }
            }
            out.sync().map_err(|e| format!("can't fsync {tmp}: {e}"))
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp_path);
            return Err(e);
        }
        tracing::info!("Successfully created the temporary AOF base file {tmp}");
        let mut f = self.file.lock();
        let seq = f.manifest.next_base_seq();
        let name = self.base_name(seq, rdb);
        self.disk
            .rename(&tmp_path, &self.path(&name))
            .map_err(|e| format!("can't rename {tmp} into {name}: {e}"))?;
        let mut next = f.manifest.clone();
        let mut gone: Vec<ManifestEntry> = next.base.take().into_iter().collect();
        let keep = if keep_incr { next.incrs.pop() } else { None };
        gone.append(&mut next.incrs);
        gone.append(&mut next.history);
        next.base = Some(ManifestEntry {
            name: name.clone(),
            seq,
            kind: FileType::Base,
        });
        next.incrs = keep.into_iter().collect();
        self.persist_manifest(&next)?;
        tracing::info!("Successfully renamed the temporary AOF base file {tmp} into {name}");
        f.manifest = next;
        for g in gone {
            tracing::info!("Removing the history file {} in the background", g.name);
            let _ = std::fs::remove_file(self.path(&g.name));
        }
        let incr = f
            .manifest
            .incrs
            .last()
            .and_then(|e| std::fs::metadata(self.path(&e.name)).ok())
            .map_or(0, |m| m.len());
        f.base_size = bytes.len() as u64;
        f.size = f.base_size + incr;
        Ok(())
    }

    fn finish_rewrite(&self, result: Result<(), String>, now: u64) {
        let mut f = self.file.lock();
        let started = f.rewrite_started_ms.take().unwrap_or(now);
        f.last_rewrite_secs = Some(now.saturating_sub(started) / 1000);
        match result {
            Ok(()) => {
                f.rewrites += 1;
                f.consecutive_failures = 0;
                f.last_rewrite_failed = false;
                tracing::info!("Background AOF rewrite finished successfully");
            }
            Err(e) => {
                f.consecutive_failures += 1;
                f.last_rewrite_failed = true;
                tracing::warn!("Background AOF rewrite failed: {e}");
            }
        }
    }
}

const FSYNC_FAILED: &str = "fsync failed";

/// Redis's `REDIS_AUTOSYNC_BYTES`: `aof-rewrite-incremental-fsync` fsyncs the new base this
/// often, bytes.
pub(crate) const AUTOSYNC_BYTES: usize = 4 * 1024 * 1024;

/// The rewrite's reason when `appendonly yes` is set at run time (Redis's log word).
const ENABLING: &str = "AOF enabling";

/// The data set as the rewrite commands (`ferrocluster_dataplane::aof::AofWriter`, each key
/// then its `PEXPIREAT`), a `SELECT` before each database: a `.base.aof`.
fn write_commands(keys: crate::snapshot::Keys<'_>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    crate::snapshot::for_each_key(
        keys,
        &mut out,
        |out, db| {
            let d = db.to_string();
            ferrocluster_dataplane::resp::encode_command(
                out,
                &[b"SELECT".as_slice(), d.as_bytes()],
            );
            Ok(())
        },
        |out, k, v, at| {
            ferrocluster_dataplane::aof::AofWriter::new(out, k)
                .value(v, at)
                .map_err(|e| format!("key {:?}: {e}", String::from_utf8_lossy(k)))
        },
    )?;
    Ok(out)
}

/// `BGREWRITEAOF` (and the automatic rewrite, and `appendonly yes`): a new incremental file,
/// the snapshot now (under the state lock), the new base written by a thread. Returns the
/// reply's status text.
///
/// # Errors
/// A rewrite in progress (Redis's text), or the new incremental file / snapshot failed.
pub fn start_rewrite(shared: &Arc<Shared>, state: &State, why: &str) -> Result<(), String> {
    let aof = Arc::clone(&shared.aof);
    let now = unix_ms();
    // With the AOF off, a rewrite writes a base only (redis-server 7.0.15: the manifest lists
    // the base alone); turning it on opens the first incremental file.
    let keep_incr = aof.is_on() || why == ENABLING;
    let snapshot = {
        let mut f = aof.file.lock();
        if f.rewrite_started_ms.is_some() {
            return Err(REWRITE_IN_PROGRESS.into());
        }
        f.last_try_ms = now;
        let opened = if keep_incr {
            aof.open_new_incr(&mut f, why)
        } else {
            std::fs::create_dir_all(&aof.dir)
                .map_err(|e| format!("can't create the AOF directory {}: {e}", aof.dir.display()))
        };
        if let Err(e) = opened {
            f.last_rewrite_failed = true;
            f.consecutive_failures += 1;
            tracing::warn!("Background append only file rewriting failed: {e}");
            return Err(format!("ERR {e}"));
        }
        // The copy is taken under the lock; it is encoded and written by the thread.
        f.rewrite_started_ms = Some(now);
        crate::snapshot::KeyspaceCopy::of(&state.kv, now)
    };
    tracing::info!("Background append only file rewriting started");
    let a2 = Arc::clone(&aof);
    let spawned = std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || {
            let r = a2
                .snapshot(crate::snapshot::Keys::Copy(&snapshot), now)
                .and_then(|(bytes, rdb)| {
                    drop(snapshot);
                    a2.install_base(&bytes, rdb, keep_incr)
                });
            a2.finish_rewrite(r, unix_ms());
        });
    if let Err(e) = spawned {
        aof.finish_rewrite(Err(format!("can't start the rewrite thread: {e}")), now);
        return Err(
            "ERR Can't rewrite append only file in background: fork: can't start a thread".into(),
        );
    }
    Ok(())
}

/// `BGREWRITEAOF`: the reply's status text or error line.
///
/// # Errors
/// As [`start_rewrite`]; the AOF off is fine (Redis rewrites then too, into new files).
pub fn bgrewriteaof(shared: &Arc<Shared>, state: &State) -> Result<&'static str, String> {
    start_rewrite(shared, state, "background rewrite")?;
    Ok("Background append only file rewriting started")
}

/// CONFIG SET `appendonly yes|no` (Redis `startAppendOnly` / `stopAppendOnly`): on, a rewrite
/// first (new incremental file now, base in the background); off, the file is synced and
/// closed.
///
/// # Errors
/// The rewrite could not start.
pub fn set_enabled(shared: &Arc<Shared>, state: &State, on: bool) -> Result<(), String> {
    let aof = &shared.aof;
    if on == aof.is_on() {
        return Ok(());
    }
    if on {
        return start_rewrite(shared, state, ENABLING);
    }
    let _ = aof.sync_all();
    let mut f = aof.file.lock();
    f.out = None;
    aof.buf.lock().on = false;
    aof.on.store(false, Ordering::Release);
    Ok(())
}

/// The automatic rewrite (Redis `serverCron`): when the AOF grew by
/// `auto-aof-rewrite-percentage` over its base and is above `auto-aof-rewrite-min-size`.
pub fn cron(shared: &Arc<Shared>, opts: &AofOptions) {
    let aof = &shared.aof;
    if opts.rewrite_percentage == 0 || !aof.is_on() {
        return;
    }
    let (size, base, busy) = {
        let f = aof.file.lock();
        // After a failure the next try waits 5 s (as BGSAVE's `CONFIG_BGSAVE_RETRY_DELAY`).
        let waiting = f.last_rewrite_failed && unix_ms().saturating_sub(f.last_try_ms) < 5_000;
        (
            f.size,
            f.base_size.max(1),
            f.rewrite_started_ms.is_some() || waiting,
        )
    };
    if busy || size < opts.rewrite_min_size {
        return;
    }
    let growth = (size * 100 / base).saturating_sub(100);
    if growth >= opts.rewrite_percentage {
        tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
        let st = shared.state.lock();
        let _ = start_rewrite(shared, &st, "background rewrite");
    }
}

// ----- loading -----

/// Loads the AOF at start (`appendonly yes`): the manifest's base, then its incremental files
/// in order. `Ok(false)` when there is no manifest (nothing to load).
///
/// # Errors
/// A line of Redis's (file, offset, reason) for anything that does not load; the server
/// exits 1 with it.
pub fn load_at_start(shared: &Shared, load_truncated: bool) -> Result<bool, String> {
    let aof = &shared.aof;
    let mpath = aof.manifest_path();
    let text = match std::fs::read_to_string(&mpath) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(format!(
                "Can't open the AOF manifest {}: {e}",
                mpath.display()
            ))
        }
    };
    let manifest = Manifest::parse(&text).map_err(|e| format!("{e} ({})", mpath.display()))?;
    let started = std::time::Instant::now();
    let mut st = shared.state.lock();
    st.repl.loading_aof = true;
    let loaded = load_files(shared, &mut st, &manifest, load_truncated);
    st.repl.loading_aof = false;
    let (size, base_size) = loaded?;
    st.persist.dirty = 0;
    st.persist.loaded_keys = (0..st.kv.databases())
        .map(|d| st.kv.dbsize(d).unwrap_or(0))
        .sum();
    drop(st);
    tracing::info!(
        "DB loaded from append only file: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
    let mut f = shared.aof.file.lock();
    f.manifest = manifest;
    f.size = size;
    f.base_size = base_size;
    Ok(true)
}

/// The manifest's base and incremental files, in order: (bytes kept, base bytes).
fn load_files(
    shared: &Shared,
    st: &mut State,
    manifest: &Manifest,
    load_truncated: bool,
) -> Result<(u64, u64), String> {
    let aof = &shared.aof;
    let mut files: Vec<&ManifestEntry> = manifest.base.iter().collect();
    files.extend(manifest.incrs.iter());
    let last = files.len() - 1;
    let mut size = 0;
    let mut base_size = 0;
    for (i, e) in files.iter().enumerate() {
        let path = aof.path(&e.name);
        let bytes = std::fs::read(&path).map_err(|err| {
            format!(
                "The AOF file {} doesn't exist or can't be read: {err}",
                e.name
            )
        })?;
        let t = std::time::Instant::now();
        let is_base = e.kind == FileType::Base;
        let kept = if bytes.starts_with(b"REDIS") {
            tracing::info!("Reading RDB base file on AOF loading...");
            load_rdb(st, &bytes, &e.name)?;
            bytes.len()
        } else {
            load_commands(
                shared,
                st,
                &bytes,
                &e.name,
                i == last && load_truncated,
                i == last,
            )?
        };
        if kept < bytes.len() {
            // A torn last command, cut as Redis does.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(kept as u64))
                .map_err(|err| format!("Error truncating the AOF file {}: {err}", e.name))?;
        }
        size += kept as u64;
        if is_base {
            base_size = kept as u64;
        }
        tracing::info!(
            "DB loaded from {} file {}: {:.3} seconds",
            if is_base { "base" } else { "incr" },
            e.name,
            t.elapsed().as_secs_f64()
        );
    }
    Ok((size, base_size))
}

fn load_rdb(st: &mut State, bytes: &[u8], name: &str) -> Result<(), String> {
    let now = unix_ms();
    let refused = |e: String| format!("Bad file format reading the append only file {name}: {e}");
    let mut loader = crate::snapshot::RdbLoader::new(st.kv.databases()).map_err(refused)?;
    loader.feed(bytes, now).map_err(refused)?;
    let (kv, keys) = loader.finish(now).map_err(refused)?;
    drop(st.install_kv(kv, now));
    tracing::info!("Done loading RDB, keys loaded: {keys}.");
    Ok(())
}

/// Runs a file of commands; returns the bytes that hold whole commands (the file's length,
/// or less when a torn end was cut with `may_cut`).
fn load_commands(
    shared: &Shared,
    st: &mut State,
    bytes: &[u8],
    name: &str,
    may_cut: bool,
    last: bool,
) -> Result<usize, String> {
    use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
    let mut reader = CommandReader::new(ReaderLimits::default());
    reader.push(bytes);
    let mut ctx = crate::client::ClientCtx::internal(shared);
    if shared.config.cluster_enabled {
        ctx.cluster = Some(ferrocluster_command::ClientState::primary_link());
    }
    let mut pos = 0usize;
    let mut multi: Option<(usize, Vec<Vec<Vec<u8>>>)> = None;
    let bad = |at: u64, why: &str| {
        format!("Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest> (offset {at}: {why})")
    };
    loop {
        match reader.next_item() {
            Ok(Some(Item::Command(c))) => {
                let start = pos;
                pos += c.raw.len();
                let cmd = c.argv.first().map(Vec::as_slice).unwrap_or_default();
                if crate::table::lookup(&cmd.to_ascii_lowercase()).is_none() {
                    // Redis `loadSingleAppendOnlyFile`'s refusal.
                    return Err(format!(
                        "Unknown command '{}' reading the append only file {name} (offset {start})",
                        String::from_utf8_lossy(cmd)
                    ));
                }
                let is = |n: &str| {
                    c.argv
                        .first()
                        .is_some_and(|a| a.eq_ignore_ascii_case(n.as_bytes()))
                };
                if is("multi") {
                    if multi.is_some() {
                        return Err(bad(start as u64, "nested MULTI"));
                    }
                    multi = Some((start, Vec::new()));
                } else if is("exec") {
                    let Some((_, cmds)) = multi.take() else {
                        return Err(bad(start as u64, "EXEC without MULTI"));
                    };
                    for argv in cmds {
                        run(shared, st, &mut ctx, &argv);
                    }
                } else if let Some((_, cmds)) = multi.as_mut() {
                    cmds.push(c.argv);
                } else {
                    run(shared, st, &mut ctx, &c.argv);
                }
            }
            Ok(Some(Item::Empty(raw))) => pos += raw.len(),
            Ok(None) => break,
            Err(e) => return Err(bad(e.offset, &e.kind.to_string())),
        }
    }
    let mut valid = pos;
    let torn = reader.buffered() > 0;
    if let Some((at, _)) = multi {
        tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
        valid = at;
    } else if !torn {
        return Ok(bytes.len());
    }
    if may_cut {
        if torn {
            tracing::warn!("!!! Warning: short read while loading the AOF file {name}!!!");
        }
        tracing::warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
        tracing::warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
        return Ok(valid);
    }
    if !last {
        return Err(format!(
            "Fatal error: the truncated file {name} is not the last file (offset {valid})"
        ));
    }
    Err(format!("Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server. (offset {valid}: a command cut short)"))
}

fn run(shared: &Shared, st: &mut State, ctx: &mut crate::client::ClientCtx, argv: &[Vec<u8>]) {
    let parts: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    crate::repl::run_argv(shared, st, ctx, &parts, &mut crate::resp::Out::new());
}

/// Opens the AOF after loading (Redis `aofOpenIfNeededOnServerStart`): without a manifest,
/// a base of the data set in memory and a first incremental file are created; otherwise the
/// last incremental file is opened for appending (a new one when the manifest has none).
///
/// # Errors
/// A file or the manifest cannot be created.
pub fn open_at_start(shared: &Shared) -> Result<(), String> {
    let aof = &shared.aof;
    let mut f = aof.file.lock();
    let fresh = f.manifest.base.is_none() && f.manifest.incrs.is_empty();
    if fresh {
        std::fs::create_dir_all(&aof.dir)
            .map_err(|e| format!("can't create the AOF directory {}: {e}", aof.dir.display()))?;
        let now = unix_ms();
        let (bytes, rdb) = {
            let st = shared.state.lock();
            aof.snapshot(crate::snapshot::Keys::Live(&st.kv, now), now)?
        };
        let name = aof.base_name(1, rdb);
        crate::persist::write_atomically_on(
            aof.disk.as_ref(),
            &aof.path(&name),
            &bytes,
            &format!("temp-rewriteaof-{}.aof", std::process::id()),
        )?;
        tracing::info!("Creating AOF base file {name} on server start");
        f.manifest.base = Some(ManifestEntry {
            name,
            seq: 1,
            kind: FileType::Base,
        });
        f.base_size = bytes.len() as u64;
        f.size = f.base_size;
        return aof.open_new_incr(&mut f, "server start");
    }
    let Some(last) = f.manifest.incrs.last().cloned() else {
        return aof.open_new_incr(&mut f, "server start");
    };
    let out = aof
        .disk
        .append(&aof.path(&last.name))
        .map_err(|e| format!("can't open the AOF file {}: {e}", last.name))?;
    tracing::info!("Opening AOF incr file {} on server start", last.name);
    f.out = Some(out);
    let mut b = aof.buf.lock();
    b.on = true;
    aof.on.store(true, Ordering::Release);
    b.db = None;
    Ok(())
}

/// A replica loaded a full copy from its primary: the AOF starts again from it (Redis
/// `restartAOFAfterSYNC`), by a rewrite.
pub fn after_full_sync(shared: &Shared, state: &State) {
    if !shared.aof.is_on() {
        return;
    }
    if let Some(me) = shared.arc() {
        if let Err(e) = start_rewrite(&me, state, "background rewrite") {
            tracing::warn!("AOF rewrite after the full sync failed to start: {e}");
        }
    }
}

/// The AOF thread: writes what was appended every 100 ms (what no I/O thread flushed: a
/// replica's applied stream), fsyncs once a second with `everysec`, and runs the automatic
/// rewrite check.
pub fn spawn_thread(shared: Arc<Shared>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("aof".into())
        .spawn(move || {
            let mut last_fsync = unix_ms();
            loop {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if let Err(e) = shared.aof.flush() {
                    exit_fatal(&e);
                }
                let now = unix_ms();
                if shared.aof.policy() == Fsync::Everysec && now.saturating_sub(last_fsync) >= 1000
                {
                    last_fsync = now;
                    shared.aof.background_fsync();
                }
                cron(&shared, &shared.aof.options());
            }
        })?;
    Ok(())
}

/// Ends the process after a fatal AOF error (Redis `exit(1)`: no reply of an unsynced write
/// may leave).
pub fn exit_fatal(line: &str) -> ! {
    tracing::error!("{line}");
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsio::{FaultDisk, OsDisk};

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fc-aof-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn manifest_parses_and_renders_as_redis_7() {
        // The manifest redis-server 7.0.15 wrote after one BGREWRITEAOF.
        let text = "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().seq, 2);
        assert_eq!(m.incrs.len(), 1);
        assert_eq!(m.render(), text);
        assert!(Manifest::parse("file a seq 1\n")
            .unwrap_err()
            .contains("Invalid AOF manifest file format"));
        assert!(Manifest::parse("file a seq 1 type x\n")
            .unwrap_err()
            .contains("Unknown AOF file type"));
        assert!(
            Manifest::parse("file a seq 2 type i\nfile b seq 1 type i\n")
                .unwrap_err()
                .contains("non-monotonic")
        );
        assert!(
            Manifest::parse("file a seq 1 type b\nfile b seq 2 type b\n")
                .unwrap_err()
                .contains("duplicate base")
        );
        assert!(Manifest::parse("").unwrap_err().contains("empty"));
    }

    fn open(disk: Arc<dyn Disk>, dir: &Path, fsync: Fsync) -> Aof {
        let opts = AofOptions {
            fsync,
            ..AofOptions::default()
        };
        let aof = Aof::new(disk, dir, &opts);
        {
            let mut f = aof.file.lock();
            aof.open_new_incr(&mut f, "test").unwrap();
        }
        aof
    }

    fn incr(aof: &Aof) -> Vec<u8> {
        std::fs::read(aof.path(&aof.incr_name(1))).unwrap_or_default()
    }

    #[test]
    fn commands_are_written_with_select_as_the_replication_stream() {
        let dir = tmpdir("enc");
        let aof = open(Arc::new(OsDisk), &dir, Fsync::Always);
        aof.append(0, &[b"SET", b"a", b"1"]);
        aof.append(0, &[b"INCR", b"a"]);
        aof.append(3, &[b"DEL", b"b"]);
        aof.flush().unwrap();
        assert_eq!(
            incr(&aof),
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n".to_vec()
        );
        let m = std::fs::read_to_string(aof.manifest_path()).unwrap();
        assert_eq!(m, "file appendonly.aof.1.incr.aof seq 1 type i\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_short_write_then_enospc_is_reported_refuses_writes_and_loses_nothing() {
        let dir = tmpdir("enospc");
        let disk = FaultDisk::default();
        let faults = Arc::clone(&disk.faults);
        let aof = open(Arc::new(disk), &dir, Fsync::Everysec);
        aof.append(0, &[b"SET", b"a", b"1"]);
        aof.flush().unwrap();
        let good = incr(&aof);
        faults.lock().unwrap().short_write = Some(5);
        aof.append(0, &[b"SET", b"b", b"2"]);
        aof.flush().unwrap();
        // The partial write was cut off; the bytes wait in the buffer.
        assert_eq!(incr(&aof), good);
        assert!(aof.info_lines(0).contains("aof_last_write_status:err\r\n"));
        assert_eq!(
            aof.write_denied().as_deref(),
            Some("MISCONF Errors writing to the AOF file: No space left on device (os error 28)")
        );
        // Still full: nothing changes, nothing is lost, and no rewrite starts (the buffered
        // bytes must land before a new base).
        aof.flush().unwrap();
        assert_eq!(incr(&aof), good);
        let e = aof.open_new_incr(&mut aof.file.lock(), "test").unwrap_err();
        assert!(e.starts_with("the AOF can't be written"), "{e}");
        faults.lock().unwrap().enospc = false;
        aof.append(0, &[b"SET", b"c", b"3"]);
        aof.flush().unwrap();
        let mut all = good.clone();
        ferrocluster_dataplane::resp::encode_command(&mut all, &[b"SET".as_slice(), b"b", b"2"]);
        ferrocluster_dataplane::resp::encode_command(&mut all, &[b"SET".as_slice(), b"c", b"3"]);
        assert_eq!(incr(&aof), all);
        assert!(aof.write_denied().is_none());
        assert!(aof.info_lines(0).contains("aof_last_write_status:ok\r\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn with_always_a_failed_write_or_fsync_is_fatal_before_any_reply() {
        let dir = tmpdir("always");
        let disk = FaultDisk::default();
        let faults = Arc::clone(&disk.faults);
        let aof = open(Arc::new(disk), &dir, Fsync::Always);
        faults.lock().unwrap().fail_fsync = true;
        aof.append(0, &[b"SET", b"a", b"1"]);
        let e = aof.flush().unwrap_err();
        assert!(
            e.starts_with(
                "Can't persist AOF for fsync error when the AOF fsync policy is 'always'"
            ),
            "{e}"
        );
        faults.lock().unwrap().enospc = true;
        aof.append(0, &[b"SET", b"b", b"1"]);
        assert_eq!(
            aof.flush().unwrap_err(),
            "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_everysec_fsync_is_reported_until_one_succeeds() {
        let dir = tmpdir("bgfsync");
        let disk = FaultDisk::default();
        let faults = Arc::clone(&disk.faults);
        let aof = open(Arc::new(disk), &dir, Fsync::Everysec);
        aof.append(0, &[b"SET", b"a", b"1"]);
        aof.flush().unwrap();
        faults.lock().unwrap().fail_fsync = true;
        aof.background_fsync();
        assert!(aof.write_denied().is_some());
        assert!(aof.info_lines(0).contains("aof_last_write_status:err\r\n"));
        // The next second's fsync succeeds: writes are accepted again.
        aof.background_fsync();
        assert!(aof.write_denied().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
