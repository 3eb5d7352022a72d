//! Criterion benchmarks for ferrocluster live in `benches/benches/`; this library holds only
//! the small helpers they share. Run them with `cargo bench -p ferrocluster-benches`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
