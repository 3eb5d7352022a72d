//! Test-only helper: finds the real-server captures under `shared/vectors/` and reads them.
//!
//! The vectors live beside the repository (`<repo>/../shared/vectors`), where both developers'
//! checkouts and CI's clone find them. `FERROCLUSTER_VECTORS` overrides the location.
//! A missing vectors directory is a test failure (a panic with the path tried), never a skip.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

/// The two captured server flavours.
pub const FLAVORS: [&str; 2] = ["redis-7.0", "valkey-8.0"];

/// The `shared/vectors` directory. Panics (failing the test) if it cannot be found.
pub fn vectors_dir() -> PathBuf {
    if let Ok(p) = std::env::var("FERROCLUSTER_VECTORS") {
        return PathBuf::from(p);
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/testvectors -> repo root -> its parent holds shared/.
    for anc in here.ancestors() {
        let cand = anc.join("shared").join("vectors");
        if cand.join("README.md").is_file() {
            return cand;
        }
    }
    panic!(
        "shared/vectors not found above {} (set FERROCLUSTER_VECTORS)",
        here.display()
    );
}

/// `shared/vectors/<flavor>`.
pub fn flavor_dir(flavor: &str) -> PathBuf {
    vectors_dir().join(flavor)
}

/// Reads a file under `shared/vectors/` (path relative to it). Panics with the path on error.
pub fn read(rel: impl AsRef<Path>) -> Vec<u8> {
    let p = vectors_dir().join(rel.as_ref());
    std::fs::read(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// Parses a JSON file under `shared/vectors/`.
pub fn read_json(rel: impl AsRef<Path>) -> serde_json::Value {
    let bytes = read(rel.as_ref());
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("parsing {}: {e}", rel.as_ref().display()))
}

/// Every file below `dir` (relative to `shared/vectors/`) whose name ends with `suffix`,
/// sorted, as paths relative to `shared/vectors/`.
pub fn files_with_suffix(dir: impl AsRef<Path>, suffix: &str) -> Vec<PathBuf> {
    let root = vectors_dir();
    let mut out = Vec::new();
    let mut stack = vec![root.join(dir.as_ref())];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in entries {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p.strip_prefix(&root).expect("under root").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Decodes a hex string (as the index files write keys) into bytes.
pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}
