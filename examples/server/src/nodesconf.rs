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
//! * Writes ([`NodesConfFile::write`]): every snapshot of the node's config carries a
//!   generation taken under the state lock (so generations follow the order of the
//!   snapshots); a write whose generation is not newer than the last one written is skipped,
//!   so a late write of an old snapshot never overwrites a newer one already on disk.
//! * Redis's rules on failure: CLUSTER SAVECONFIG replies `ERR error saving the cluster node
//!   config: <reason>`; any other failed save of a config change is fatal ("Fatal: can't
//!   update cluster config file.", exit 1), see [`fatal_save_failure`].

use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The locked nodes.conf of this process.
pub struct NodesConfFile {
    path: PathBuf,
    /// Held (locked) for the process lifetime.
    _lock: File,
    next_gen: AtomicU64,
    /// (generation, contents) of the last snapshot on disk.
    written: Mutex<(u64, Vec<u8>)>,
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
        Ok(NodesConfFile {
            path: path.to_path_buf(),
            _lock: lock,
            next_gen: AtomicU64::new(1),
            written: Mutex::new((0, Vec::new())),
        })
    }

    /// The config file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new generation for a snapshot. Call it under the state lock, when the snapshot is
    /// taken, so generations follow the order of the snapshots.
    pub fn next_generation(&self) -> u64 {
        self.next_gen.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether `contents` is what the file holds now (the last snapshot written).
    pub fn is_current(&self, contents: &[u8]) -> bool {
        self.written.lock().1 == contents
    }

    /// Writes the snapshot `contents` of generation `generation` atomically with fsync (see
    /// [`crate::cluster::write_atomically`]) unless a newer generation is on disk already or
    /// the file holds these bytes. `force` writes even identical bytes (SAVECONFIG).
    ///
    /// # Errors
    /// The I/O error; the file is then unchanged.
    pub fn write(&self, generation: u64, contents: &[u8], force: bool) -> std::io::Result<()> {
        let mut w = self.written.lock();
        if generation <= w.0 || (!force && w.1 == contents) {
            w.0 = w.0.max(generation);
            return Ok(());
        }
        crate::cluster::write_atomically(&self.path, contents)?;
        *w = (generation, contents.to_vec());
        Ok(())
    }
}

/// A config change could not be saved: like Redis's `clusterSaveConfigOrDie`, log and exit 1
/// (the change must never be acknowledged or acted on without being on disk).
pub fn fatal_save_failure(path: &Path, err: &std::io::Error) -> ! {
    tracing::error!(file = %path.display(), "Fatal: can't update cluster config file: {err}");
    eprintln!(
        "ferrocluster-server: Fatal: can't update cluster config file {}: {err}",
        path.display()
    );
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
    fn old_generation_never_overwrites_a_newer_one() {
        let d = tmpdir("gen");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        let old = f.next_generation();
        let new = f.next_generation();
        f.write(new, b"new", false).unwrap();
        f.write(old, b"old", false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(f.is_current(b"new"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_write_is_reported() {
        let d = tmpdir("fail");
        let path = d.join("nodes.conf");
        let f = NodesConfFile::open(&path).unwrap();
        // A directory in the way of the rename makes the write fail.
        std::fs::create_dir_all(path.join("x")).unwrap();
        let g = f.next_generation();
        assert!(f.write(g, b"x", true).is_err());
        assert!(!f.is_current(b"x"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
