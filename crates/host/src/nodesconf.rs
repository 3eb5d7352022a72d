//! nodes.conf: the node's cluster configuration on disk, owned by one process.
//!
//! * Start-up ([`NodesConfFile::open`]): the directory must exist and be writable (Redis
//!   refuses to start otherwise), and the process takes an exclusive lock that it keeps for
//!   its whole lifetime. The lock sits on a separate file `<nodes.conf>.lock` next to the
//!   config file: nodes.conf itself is replaced by an atomic rename on every save, so a lock on
//!   it would be held on the old inode only. A second process with the same file gets Redis's
//!   text ([`OpenError::AlreadyUsed`], Redis `clusterLockConfig`). The lock is advisory
//!   (`flock`), released by the kernel when the process dies, so a kill -9 leaves no stale
//!   lock. Only then is the file read ([`NodesConfFile::saved`]): a second process never even
//!   loads it. Temporary files that crashed processes left behind are removed.
//! * Writes ([`NodesConfFile::persist`], [`NodesConfFile::write_persist`]): the node's
//!   `Output::Persist { seq, .. }` snapshots (the start-up save and SAVECONFIG are Persists
//!   too), ordered by `seq`. A write whose sequence number is not above the one on disk is
//!   skipped (what is on disk covers it; the caller still acknowledges it), so the file never
//!   goes back to an older snapshot, whatever order the threads of a host reach it in.
//! * Each write is atomic ([`write_atomically`]): a temporary `.<name>.tmp-<pid>` in the same
//!   directory, written, fsynced and closed (the close checked), renamed over the target, then
//!   the directory fsynced so the rename itself is durable.
//! * Redis's rules on failure: CLUSTER SAVECONFIG replies `ERR error saving the cluster node
//!   config: <reason>` (the host writes that reply from the returned error); any other failed
//!   save of a config change is fatal ("Fatal: can't update cluster config file.", exit 1, Redis
//!   `clusterSaveConfigOrDie`), unless `cluster-config-save-behavior best-effort` (Valkey 9.1):
//!   see [`NodesConfFile::persist`].
//!
//! Host obligations this type takes over: the atomic, durable, ordered write; the lock; the
//! `dir` checks; the fatal exit. Left to the host: calling `ClusterNode::handle_persisted(seq)`
//! after [`NodesConfFile::persist`] returns (the drive loop does it), and keeping the value
//! alive for the whole process (dropping it releases the lock).

use ferrocluster_node::Millis;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// `cluster-config-save-behavior` (Valkey 9.1): what a failed nodes.conf save does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaveBehavior {
    /// `sync` (default): the process exits, as Redis's `clusterSaveConfigOrDie`.
    #[default]
    Sync,
    /// `best-effort`: the failure is logged and the node goes on as if the config were saved.
    BestEffort,
}

/// Why [`NodesConfFile::open`] (or [`check_dir`]) refused to start. Nothing was written; the
/// lock is not held.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The directory does not exist or is not a directory (Redis: `Can't chdir to '<dir>':
    /// <reason>`).
    #[error("Can't chdir to '{}': {reason}", dir.display())]
    NoDirectory {
        /// The directory.
        dir: PathBuf,
        /// The system's reason (`No such file or directory`, `Not a directory`).
        reason: String,
    },
    /// A file cannot be created in the directory.
    #[error("the working directory '{}' is not writable: {source}", dir.display())]
    NotWritable {
        /// The directory.
        dir: PathBuf,
        /// The error of the probe file's creation.
        source: std::io::Error,
    },
    /// The lock file cannot be opened (Redis's text).
    #[error("Can't open {} in order to acquire a lock: {source}", path.display())]
    LockFile {
        /// `<nodes.conf>.lock`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process holds the lock (Redis `clusterLockConfig`'s text).
    #[error(
        "Sorry, the cluster configuration file {} is already used by a different Redis Cluster \
         node. Please make sure that different nodes use different cluster configuration files.",
        path.display()
    )]
    AlreadyUsed {
        /// The nodes.conf path.
        path: PathBuf,
    },
    /// `flock` failed for another reason (Redis's text).
    #[error("Impossible to lock {}: {source}", path.display())]
    Lock {
        /// `<nodes.conf>.lock`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// nodes.conf exists but cannot be read.
    #[error("can't read {}: {source}", path.display())]
    Read {
        /// The nodes.conf path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The locked nodes.conf of this process. Shareable between threads (`&self` methods).
#[derive(Debug)]
pub struct NodesConfFile {
    path: PathBuf,
    /// Held (locked) for the lifetime of the value.
    _lock: File,
    /// The contents found at open (`None`: no file).
    saved: Option<Vec<u8>>,
    /// Sequence number and contents of the last snapshot on disk.
    /// The newest write: its sequence number, its contents, whether it was fsynced.
    written: Mutex<(u64, Vec<u8>, bool)>,
    /// Files written since open (see [`NodesConfFile::writes`]).
    writes: std::sync::atomic::AtomicU64,
    /// `cluster-config-save-behavior best-effort` (else `sync`).
    best_effort: AtomicBool,
    /// When a best-effort failure was last logged (one line a second).
    last_failure_log: Mutex<Option<Millis>>,
}

/// The directory a path's file lives in (`.` for a bare name) and the file's name.
fn dir_and_name(path: &Path) -> (&Path, String) {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "nodes.conf".into());
    (dir, name)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; it stays usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks that `dir` is an existing directory this process can create files in (Redis
/// refuses to start when it cannot chdir to `dir`).
///
/// # Errors
/// [`OpenError::NoDirectory`] or [`OpenError::NotWritable`].
pub fn check_dir(dir: &Path) -> Result<(), OpenError> {
    let meta = std::fs::metadata(dir).map_err(|e| OpenError::NoDirectory {
        dir: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(OpenError::NoDirectory {
            dir: dir.to_path_buf(),
            reason: "Not a directory".into(),
        });
    }
    let probe = dir.join(format!(".ferrocluster-probe-{}", std::process::id()));
    match File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(OpenError::NotWritable {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

impl NodesConfFile {
    /// Checks the directory of `path`, takes the exclusive lock on `<path>.lock`, removes the
    /// temporary files of crashed processes, and reads the file if it exists.
    ///
    /// # Errors
    /// See [`OpenError`]; nothing is held or changed then.
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let (dir, _) = dir_and_name(path);
        check_dir(dir)?;
        let mut lock_name = path.as_os_str().to_owned();
        lock_name.push(".lock");
        let lock_path = PathBuf::from(lock_name);
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| OpenError::LockFile {
                path: lock_path.clone(),
                source,
            })?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OpenError::AlreadyUsed {
                    path: path.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(OpenError::Lock {
                    path: lock_path,
                    source,
                })
            }
        }
        remove_stale_temporaries(path);
        let saved = match std::fs::read(path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(OpenError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Ok(NodesConfFile {
            path: path.to_path_buf(),
            _lock: lock_file,
            written: Mutex::new((0, saved.clone().unwrap_or_default(), true)),
            writes: std::sync::atomic::AtomicU64::new(0),
            saved,
            best_effort: AtomicBool::new(false),
            last_failure_log: Mutex::new(None),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The contents found at [`NodesConfFile::open`] (`None`: there was no file), for
    /// `ClusterNode::new`.
    pub fn saved(&self) -> Option<&[u8]> {
        self.saved.as_deref()
    }

    /// `cluster-config-save-behavior` in force (default [`SaveBehavior::Sync`]).
    pub fn save_behavior(&self) -> SaveBehavior {
        if self.best_effort.load(Ordering::Relaxed) {
            SaveBehavior::BestEffort
        } else {
            SaveBehavior::Sync
        }
    }

    /// How many times the file was written since [`NodesConfFile::open`] (skipped and failed
    /// writes not counted): a figure for operators and tests (the drive loop writes once per
    /// turn however many config changes the turn made).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Sets `cluster-config-save-behavior` (start-up and CONFIG SET).
    pub fn set_save_behavior(&self, b: SaveBehavior) {
        self.best_effort
            .store(b == SaveBehavior::BestEffort, Ordering::Relaxed);
    }

    /// Writes the node's `Output::Persist { seq, contents, fsync }` (fsynced when `fsync`;
    /// see [`write_atomically_with`]) and applies Redis's rule to a
    /// failure that loses a change: under [`SaveBehavior::Sync`] the process exits 1
    /// ([`fatal_save_failure`]); under [`SaveBehavior::BestEffort`] the failure is logged (at
    /// most once a second, `now` is the caller's clock read). A failed write of the bytes the
    /// file holds already (CLUSTER SAVECONFIG with nothing changed) loses nothing and is only
    /// returned, as Redis's SAVECONFIG replies the error and goes on. When this returns the
    /// caller MUST acknowledge `seq` (`ClusterNode::handle_persisted`): what waited for it may
    /// go. The error, if any, is returned for the reply of a SAVECONFIG that waits for it.
    /// A crash before the next good best-effort save loses the change.
    pub fn persist(
        &self,
        seq: u64,
        contents: &[u8],
        fsync: bool,
        now: Millis,
    ) -> Result<(), std::io::Error> {
        let Err(e) = self.write_persist(seq, contents, fsync) else {
            return Ok(());
        };
        if lock(&self.written).1 != contents {
            self.save_failed(&e, now);
        }
        Err(e)
    }

    /// A config change could not be saved (not SAVECONFIG, which replies the error):
    /// [`SaveBehavior::Sync`] exits the process ([`fatal_save_failure`]);
    /// [`SaveBehavior::BestEffort`] logs it, at most one line a second.
    pub fn save_failed(&self, err: &std::io::Error, now: Millis) {
        if !self.best_effort.load(Ordering::Relaxed) {
            fatal_save_failure(&self.path, err);
        }
        let mut last = lock(&self.last_failure_log);
        if last.is_none_or(|t| now.0.saturating_sub(t.0) >= 1000 || now.0 < t.0) {
            *last = Some(now);
            tracing::warn!(
                file = %self.path.display(),
                "Could not save the cluster config file (cluster-config-save-behavior best-effort, going on): {err}"
            );
        }
    }

    /// Writes the contents of the node's `Output::Persist { seq, contents, fsync }` unless the
    /// file holds a snapshot at least as new already (then nothing is written: the caller
    /// still acknowledges `seq`, the file covers it). No failure policy: see
    /// [`NodesConfFile::persist`].
    ///
    /// A skipped write that asks for `fsync` while the newer write on disk was not fsynced
    /// fsyncs that one (it holds the skipped write's change).
    ///
    /// # Errors
    /// The I/O error; the file is then unchanged.
    pub fn write_persist(&self, seq: u64, contents: &[u8], fsync: bool) -> std::io::Result<()> {
        let mut w = lock(&self.written);
        if seq <= w.0 {
            if fsync && !w.2 {
                sync_in_place(&self.path)?;
                w.2 = true;
            }
            return Ok(());
        }
        write_atomically_with(&self.path, contents, fsync)?;
        *w = (seq, contents.to_vec(), fsync);
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The name of this process's temporary file for `path` (`.<name>.tmp-<pid>`, beside it).
pub fn temporary_path(path: &Path) -> PathBuf {
    let (dir, name) = dir_and_name(path);
    dir.join(format!(".{name}.tmp-{}", std::process::id()))
}

/// Removes the temporary files of `path` that crashed processes left behind
/// (`.<name>.tmp-<pid>`). Called only while holding the config lock: no live process writes
/// them then. Failures are logged, never fatal.
fn remove_stale_temporaries(path: &Path) {
    let (dir, name) = dir_and_name(path);
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => {
                tracing::info!(file = %entry.path().display(), "removed a temporary config file left by a crash")
            }
            Err(e) => {
                tracing::warn!(file = %entry.path().display(), "can't remove a stale temporary config file: {e}")
            }
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, written,
/// fsynced and closed with the close's result checked, renamed over the target, then the
/// directory fsynced (so the rename itself is durable).
///
/// # Errors
/// Any I/O error; the target is then unchanged and the temporary file removed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with(path, bytes, true)
}

/// [`write_atomically`], with the two fsyncs (file and directory) only when `fsync`. Without
/// them the new contents are still atomic and survive a crash of the process (the kernel has
/// them), not a power loss: Valkey's `clusterSaveConfig(do_fsync = 0)`.
///
/// # Errors
/// Any I/O error; the target is then unchanged and the temporary file removed.
pub fn write_atomically_with(path: &Path, bytes: &[u8], fsync: bool) -> std::io::Result<()> {
    let (dir, _) = dir_and_name(path);
    let tmp = temporary_path(path);
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if fsync {
            f.sync_all()?;
        }
        close_checked(f)
    })();
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if !fsync {
        return Ok(());
    }
    let d = File::open(dir)?;
    d.sync_all()?;
    close_checked(d)
}

/// Fsyncs the file at `path` and its directory (a write made by
/// [`write_atomically_with`] without fsync becomes durable).
fn sync_in_place(path: &Path) -> std::io::Result<()> {
    let f = File::open(path)?;
    f.sync_all()?;
    close_checked(f)?;
    let d = File::open(dir_and_name(path).0)?;
    d.sync_all()?;
    close_checked(d)
}

/// Closes `f` and returns the result of `close(2)` (dropping a `File` ignores it; on some
/// file systems a deferred write error is only reported there).
///
/// The crate's one `unsafe` block: std has no checked close, and `rustix::io::try_close`
/// takes a raw descriptor. Sound because `into_raw_fd` gives up the only owner of it, so
/// nothing else closes or uses it.
#[allow(unsafe_code)]
fn close_checked(f: File) -> std::io::Result<()> {
    use std::os::fd::IntoRawFd as _;
    let fd = f.into_raw_fd();
    // SAFETY: `fd` is open and owned by nobody else (see above); it is not used again.
    unsafe { rustix::io::try_close(fd) }?;
    Ok(())
}

/// A config change could not be saved: like Redis's `clusterSaveConfigOrDie`, log and exit 1
/// (the change must never be acknowledged or acted on without being on disk).
///
/// The exit happens whatever becomes of the message: on a full disk the log file and stderr
/// may both refuse it, and `eprintln!` panics then (which would end only the calling thread
/// and leave the process running), so the message goes out through writes whose errors are
/// ignored, inside `catch_unwind`.
pub fn fatal_save_failure(path: &Path, err: &std::io::Error) -> ! {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tracing::error!(file = %path.display(), "Fatal: can't update cluster config file: {err}");
        let program = std::env::args()
            .next()
            .and_then(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "ferrocluster".into());
        let _ = writeln!(
            std::io::stderr().lock(),
            "{program}: Fatal: can't update cluster config file {}: {err}",
            path.display()
        );
    }));
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("fc-host-nodesconf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_write_without_fsync_replaces_the_file_and_an_older_fsync_write_syncs_it() {
        let d = tmpdir("nofsync");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        f.write_persist(2, b"two", false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(f.writes(), 1);
        // Persist 1 asked for fsync and is covered by 2, which was not fsynced: 2 is fsynced
        // in place (seen here by its failure once the file is gone), never rewritten.
        std::fs::remove_file(&path).unwrap();
        assert!(f.write_persist(1, b"one", true).is_err());
        std::fs::write(&path, b"two").unwrap();
        f.write_persist(1, b"one", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        // Now 2 is durable: a covered write does nothing at all.
        std::fs::remove_file(&path).unwrap();
        f.write_persist(1, b"one", true).unwrap();
        assert_eq!(f.writes(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn second_open_is_refused_with_redis_text() {
        let d = tmpdir("lock");
        let path = d.join("nodes.conf");
        let first = NodesConfFile::open(&path).unwrap();
        let second = NodesConfFile::open(&path).unwrap_err();
        assert!(matches!(second, OpenError::AlreadyUsed { .. }));
        assert_eq!(
            second.to_string(),
            format!(
                "Sorry, the cluster configuration file {} is already used by a different Redis \
                 Cluster node. Please make sure that different nodes use different cluster \
                 configuration files.",
                path.display()
            )
        );
        drop(first);
        assert!(NodesConfFile::open(&path).is_ok(), "lock released on drop");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn missing_dir_and_file_in_the_way_are_refused() {
        let d = tmpdir("missing");
        let e = NodesConfFile::open(&d.join("nope").join("nodes.conf")).unwrap_err();
        assert!(matches!(e, OpenError::NoDirectory { .. }), "{e}");
        assert!(e.to_string().starts_with("Can't chdir to '"), "{e}");
        std::fs::write(d.join("file"), b"x").unwrap();
        let e = check_dir(&d.join("file")).unwrap_err();
        assert!(e.to_string().ends_with(": Not a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn saved_contents_are_read_under_the_lock() {
        let d = tmpdir("saved");
        let path = d.join("nodes.conf");
        assert_eq!(NodesConfFile::open(&path).unwrap().saved(), None);
        std::fs::write(&path, b"abc vars currentEpoch 0 lastVoteEpoch 0\n").unwrap();
        let f = NodesConfFile::open(&path).unwrap();
        assert_eq!(
            f.saved(),
            Some(&b"abc vars currentEpoch 0 lastVoteEpoch 0\n"[..])
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_older_snapshot_never_overwrites_a_newer_one() {
        let d = tmpdir("order");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        f.write_persist(3, b"persist 3", true).unwrap();
        f.write_persist(2, b"persist 2", true).unwrap();
        f.write_persist(3, b"persist 3 again", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"persist 3");
        f.write_persist(4, b"persist 4", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"persist 4");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn stale_temporaries_are_removed_at_open() {
        let d = tmpdir("stale");
        let path = d.join("nodes.conf");
        for name in [
            ".nodes.conf.tmp-1",
            ".nodes.conf.tmp-99999",
            ".nodes.conf.tmp-x",
            "other",
        ] {
            std::fs::write(d.join(name), b"x").unwrap();
        }
        let _f = NodesConfFile::open(&path).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".nodes.conf.tmp-x", "nodes.conf.lock", "other"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_write_is_reported_and_changes_nothing() {
        let d = tmpdir("fail");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        f.write_persist(1, b"one", true).unwrap();
        // A directory in the way of the temporary file makes the write fail.
        std::fs::create_dir_all(temporary_path(&path).join("x")).unwrap();
        assert!(f.write_persist(2, b"x", true).is_err());
        // The same bytes again (SAVECONFIG): returned, never fatal (this is `sync`).
        assert!(f.persist(2, b"one", true, Millis(0)).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        std::fs::remove_dir_all(temporary_path(&path)).unwrap();
        // A failed write did not advance the version: Persist 2 is written now.
        f.write_persist(2, b"two", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn best_effort_failure_returns_and_logs() {
        let d = tmpdir("besteffort");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        assert_eq!(f.save_behavior(), SaveBehavior::Sync);
        f.set_save_behavior(SaveBehavior::BestEffort);
        std::fs::create_dir_all(temporary_path(&path).join("x")).unwrap();
        // Under `sync` this would exit the test process.
        assert!(f.persist(1, b"x", true, Millis(1_000)).is_err());
        assert!(f.persist(2, b"x", true, Millis(1_500)).is_err());
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn write_replaces_atomically_and_leaves_no_temporary() {
        let d = tmpdir("atomic");
        let path = d.join("nodes.conf");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert!(!temporary_path(&path).exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
