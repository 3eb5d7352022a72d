//! A test's scratch directory: removed when the test passes, kept (and named on stderr) when
//! it fails, so the logs of the processes it ran can be read.

use std::path::{Path, PathBuf};

/// A fresh directory `$TMPDIR/ferrocluster-test-<name>-<pid>`; removed on drop unless the
/// thread is panicking (a failed test), then kept and its path printed.
pub struct TestDir(PathBuf);

impl TestDir {
    /// Creates the directory, emptying what an earlier process of the same pid left.
    pub fn new(name: &str) -> TestDir {
        let d =
            std::env::temp_dir().join(format!("ferrocluster-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("can't create {}: {e}", d.display()));
        TestDir(d)
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test failed: its files are kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
