//! The file layer the persistence writers go through (the AOF, `crate::aof`, and the RDB file,
//! `crate::persist::write_atomically`): a small trait over the few operations they use, so a
//! test can inject the faults a disk gives (a short write, a failed fsync, `ENOSPC`) the way
//! the simulator injects nodes.conf write failures. [`OsDisk`] is the real one; `FaultDisk`
//! (unit tests only) wraps it with faults armed by the test.

use std::io;
use std::path::Path;
#[cfg(test)]
use std::sync::{Arc, Mutex};

/// A file open for writing (appending at its end).
pub trait DiskFile: Send {
    /// Writes some of `buf`, as `write(2)`: the count written, which may be short.
    ///
    /// # Errors
    /// The OS error (`ENOSPC`, `EIO`, ...).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// `fsync(2)`: data and metadata on stable storage.
    ///
    /// # Errors
    /// The OS error.
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the file to `len` bytes (Redis removes a short write this way).
    ///
    /// # Errors
    /// The OS error.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// The file's length, bytes.
    ///
    /// # Errors
    /// The OS error.
    fn len(&self) -> io::Result<u64>;
    /// A second handle on the same open file (a background fsync uses it while writes go on).
    ///
    /// # Errors
    /// The OS error.
    fn try_clone(&self) -> io::Result<Box<dyn DiskFile>>;
}

/// The directory operations of the persistence writers.
pub trait Disk: Send + Sync {
    /// Creates (or truncates) `path` for writing.
    ///
    /// # Errors
    /// The OS error.
    fn create(&self, path: &Path) -> io::Result<Box<dyn DiskFile>>;
    /// Opens `path` for appending, creating it when missing.
    ///
    /// # Errors
    /// The OS error.
    fn append(&self, path: &Path) -> io::Result<Box<dyn DiskFile>>;
    /// `rename(2)`, atomic within a directory.
    ///
    /// # Errors
    /// The OS error.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsync of a directory (makes a rename or a new file durable).
    ///
    /// # Errors
    /// The OS error.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// Writes all of `buf` to `f`, retrying short writes; `Err` carries how many bytes went in
/// before the error.
///
/// # Errors
/// `(written, error)`; a write returning 0 is `WriteZero`.
pub fn write_all(f: &mut dyn DiskFile, buf: &[u8]) -> Result<(), (usize, io::Error)> {
    let mut done = 0;
    while done < buf.len() {
        match f.write(&buf[done..]) {
            Ok(0) => return Err((done, io::Error::from(io::ErrorKind::WriteZero))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsDisk;

struct OsFile(std::fs::File);

impl DiskFile for OsFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        io::Write::write(&mut self.0, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn try_clone(&self) -> io::Result<Box<dyn DiskFile>> {
        Ok(Box::new(OsFile(self.0.try_clone()?)))
    }
}

impl Disk for OsDisk {
    fn create(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        Ok(Box::new(OsFile(std::fs::File::create(path)?)))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Box::new(OsFile(f)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
}

/// Faults a [`FaultDisk`] gives, armed by a test. Each is taken once it fired, except
/// `enospc`, which lasts until cleared.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// The next write writes at most this many bytes (a short write), then fails the one after
    /// with `ENOSPC` (what a full disk does).
    pub short_write: Option<usize>,
    /// Every write fails with `ENOSPC` while set.
    pub enospc: bool,
    /// The next fsync fails with `EIO`.
    pub fail_fsync: bool,
}

/// [`OsDisk`] with injected faults ([`Faults`], shared with the test through
/// [`FaultDisk::faults`]).
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct FaultDisk {
    /// The faults armed now.
    pub faults: Arc<Mutex<Faults>>,
}

#[cfg(test)]
struct FaultFile {
    inner: Box<dyn DiskFile>,
    faults: Arc<Mutex<Faults>>,
}

#[cfg(test)]
fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

#[cfg(test)]
impl DiskFile for FaultFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut f = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        if f.enospc {
            return Err(enospc());
        }
        if let Some(n) = f.short_write.take() {
            // The rest finds the disk full.
            f.enospc = true;
            return self.inner.write(&buf[..n.min(buf.len())]);
        }
        drop(f);
        self.inner.write(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        let mut f = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        if std::mem::take(&mut f.fail_fsync) {
            return Err(io::Error::from_raw_os_error(5));
        }
        drop(f);
        self.inner.sync()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn try_clone(&self) -> io::Result<Box<dyn DiskFile>> {
        Ok(Box::new(FaultFile {
            inner: self.inner.try_clone()?,
            faults: Arc::clone(&self.faults),
        }))
    }
}

#[cfg(test)]
impl Disk for FaultDisk {
    fn create(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        Ok(Box::new(FaultFile {
            inner: OsDisk.create(path)?,
            faults: Arc::clone(&self.faults),
        }))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        Ok(Box::new(FaultFile {
            inner: OsDisk.append(path)?,
            faults: Arc::clone(&self.faults),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsDisk.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsDisk.sync_dir(dir)
    }
}
