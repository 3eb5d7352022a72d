//! nodes.conf ownership and durable writes.
//!
//! * Start-up ([`NodesConfFile::open`]): `dir` must exist and be writable (Redis refuses to
//!   start otherwise), and the process takes an exclusive lock that it keeps for its whole
//!   lifetime. The lock sits on a separate file `<nodes.conf>.lock` next to the config file:
//!   nodes.conf itself is replaced by an atomic rename on every save, so a lock on it would
//!   be held on the old inode only. A second process with the same file gets Redis's text
//!   ("Sorry, the cluster configuration file ... is already used by a different Redis
//!   Cluster node ...") and exits 1. The lock is advisory (`flock`), released by the kernel
//!   when the process dies, so a kill -9 leaves no stale lock.
//! * Writes ([`NodesConfFile::write_persist`]): the node's `Output::Persist { seq, .. }`
//!   outputs, in order (the start-up one before anything is served, then the bus thread's).
//!   A CLUSTER command's reply waits inside the node until its Persist is acknowledged
//!   (`Output::Reply`), so nothing else writes the file. A write whose sequence number is not
//!   above the one on disk is skipped, so the file never goes back to an older snapshot.
//! * Each write is atomic ([`write_atomically`]): a temporary `.<name>.tmp-<pid>` in the same
//!   directory, fsync, rename, fsync of the directory. A crash can leave temporary files of
//!   earlier processes behind; [`NodesConfFile::open`] removes them once it holds the lock.
//! * Redis's rules on failure: CLUSTER SAVECONFIG replies `ERR error saving the cluster node
//!   config: <reason>`; any other failed save of a config change is fatal ("Fatal: can't
//!   update cluster config file.", exit 1), see [`fatal_save_failure`].

use crate::config::SaveBehavior;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The locked nodes.conf of this process.
pub struct NodesConfFile {
    path: PathBuf,
    /// Held (locked) for the process lifetime.
    _lock: File,
    /// The sequence number of the last snapshot on disk.
    written: Mutex<u64>,
    /// `cluster-config-save-behavior best-effort` (else `sync`).
    best_effort: AtomicBool,
    /// Last time a best-effort failure was logged (one line a second).
    last_failure_log: Mutex<Option<std::time::Instant>>,
}

/// Redis's text when another process holds the config file (`clusterLockConfig`).
pub fn already_used_text(path: &Path) -> String {
    format!(
        "Sorry, the cluster configuration file {} is already used by a different Redis Cluster \
         node. Please make sure that different nodes use different cluster configuration files.",
        path.display()
    )
}

/// Checks that `dir` is an existing directory we can create files in.
///
/// # Errors
/// A message naming the directory and the reason.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let meta =
        std::fs::metadata(dir).map_err(|e| format!("Can't chdir to '{}': {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "Can't chdir to '{}': Not a directory",
            dir.display()
        ));
    }
    let probe = dir.join(format!(".ferrocluster-probe-{}", std::process::id()));
    match File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "the working directory '{}' is not writable: {e}",
            dir.display()
        )),
    }
}

impl NodesConfFile {
    /// Checks the directory of `path` and takes the exclusive lock on `<path>.lock`.
    ///
    /// # Errors
    /// The directory is missing or not writable, the lock file cannot be opened, or another
    /// process holds the lock (Redis's "already used" text).
    pub fn open(path: &Path) -> Result<Self, String> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        check_dir(dir)?;
        let mut lock_name = path.as_os_str().to_owned();
        lock_name.push(".lock");
        let lock_path = PathBuf::from(lock_name);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| {
                format!(
                    "Can't open {} in order to acquire a lock: {e}",
                    lock_path.display()
                )
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(already_used_text(path)),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("Impossible to lock {}: {e}", lock_path.display()))
            }
        }
        remove_stale_temporaries(path);
        Ok(NodesConfFile {
            path: path.to_path_buf(),
            _lock: lock,
            written: Mutex::new(0),
            best_effort: AtomicBool::new(false),
            last_failure_log: Mutex::new(None),
        })
    }

    /// `cluster-config-save-behavior` in force.
    pub fn save_behavior(&self) -> SaveBehavior {
        if self.best_effort.load(Ordering::Relaxed) {
            SaveBehavior::BestEffort
        } else {
            SaveBehavior::Sync
        }
    }

    /// Sets `cluster-config-save-behavior` (start-up and CONFIG SET).
    pub fn set_save_behavior(&self, b: SaveBehavior) {
        self.best_effort
            .store(b == SaveBehavior::BestEffort, Ordering::Relaxed);
    }

    /// A config change could not be saved (not SAVECONFIG, which replies the error). `sync`:
    /// [`fatal_save_failure`], the process exits. `best-effort` (Valkey 9.1): the failure is
    /// logged (at most once a second) and the caller goes on as if the change were on disk:
    /// the node acknowledges it and sends what waited for it; a crash before the next good
    /// save loses it.
    pub fn save_failed(&self, err: &std::io::Error) {
        if !self.best_effort.load(Ordering::Relaxed) {
            fatal_save_failure(&self.path, err);
        }
        let mut last = self.last_failure_log.lock();
        let now = std::time::Instant::now();
        if last.is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1)) {
            *last = Some(now);
            tracing::warn!(
                file = %self.path.display(),
                "Could not save the cluster config file (cluster-config-save-behavior best-effort, going on): {err}"
            );
        }
    }

    /// Writes the contents of the node's `Output::Persist { seq, contents }` unless the file
    /// holds a snapshot at least as new already (then nothing is written: the caller still
    /// acknowledges `seq`, the file covers it).
    ///
    /// # Errors
    /// The I/O error; the file is then unchanged.
    pub fn write_persist(&self, seq: u64, contents: &[u8]) -> std::io::Result<()> {
        let mut w = self.written.lock();
        if seq <= *w {
            return Ok(());
        }
        write_atomically(&self.path, contents)?;
        *w = seq;
        Ok(())
    }
}

/// The name of this process's temporary file for `path` (`.<name>.tmp-<pid>`, beside it).
fn temporary_path(path: &Path) -> PathBuf {
    let (dir, name) = dir_and_name(path);
    dir.join(format!(".{name}.tmp-{}", std::process::id()))
}

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

/// Removes the temporary files of `path` that crashed processes left behind
/// (`.<name>.tmp-<pid>`). Call it only while holding the config lock: no live process writes
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

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename
/// over the target, fsync of the directory (so the rename itself is durable).
///
/// # Errors
/// Any I/O error; the target is then unchanged.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (dir, _) = dir_and_name(path);
    let tmp = temporary_path(path);
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)?.sync_all()?;
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
        let _ = writeln!(
            std::io::stderr().lock(),
            "ferrocluster-server: Fatal: can't update cluster config file {}: {err}",
            path.display()
        );
    }));
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fc-nodesconf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn second_open_is_refused_with_redis_text() {
        let d = tmpdir("lock");
        let path = d.join("nodes.conf");
        let first = NodesConfFile::open(&path).unwrap();
        let second = NodesConfFile::open(&path).err().unwrap();
        assert_eq!(second, already_used_text(&path));
        assert!(second.starts_with("Sorry, the cluster configuration file "));
        drop(first);
        assert!(NodesConfFile::open(&path).is_ok(), "lock released on drop");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn missing_dir_is_refused() {
        let d = tmpdir("missing").join("nope");
        assert!(NodesConfFile::open(&d.join("nodes.conf")).is_err());
    }

    #[test]
    fn an_older_snapshot_never_overwrites_a_newer_one() {
        let d = tmpdir("order");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        f.write_persist(3, b"persist 3").unwrap();
        f.write_persist(2, b"persist 2").unwrap();
        f.write_persist(3, b"persist 3 again").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"persist 3");
        f.write_persist(4, b"persist 4").unwrap();
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
    fn failed_write_is_reported() {
        let d = tmpdir("fail");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        // A directory in the way of the rename makes the write fail.
        std::fs::create_dir_all(path.join("x")).unwrap();
        assert!(f.write_persist(1, b"x").is_err());
        assert!(f.write_persist(2, b"x").is_err(), "a failed write is not counted as done");
        assert!(!temporary_path(&path).exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
