//! Test-only support shared by every test binary of the workspace (the real-process tests of
//! `examples/server`, the data plane's interop suites, the host kit's tests, the small hosts).
//!
//! * [`ports`]: loopback ports from one allocator. Every data port and its bus port
//!   (data + 10000) lie below Linux's range for outgoing connections (32768-60999), and no
//!   two test processes — of the same binary or of two binaries running at once — get the
//!   same port.
//! * [`wait`]: waits for a condition with a deadline that only bounds a hang.
//! * [`proc`]: child processes with their output in a log file; a start that fails says why
//!   (the child exited, or who holds its port) with the log's last lines, and keeps the
//!   directory.
//! * [`dir`]: a test's scratch directory, removed when the test passes and kept when it fails.
//! * [`cluster`]: what cluster tests compare across nodes (the slot map's signature).
//! * [`certs`]: TLS test certificates (a CA and the node certificates it signs).
#![allow(clippy::disallowed_methods)] // a test host: it reads the clock and spawns threads

pub mod certs;
pub mod cluster;
pub mod dir;
pub mod ports;
pub mod proc;
pub mod wait;

pub use dir::TestDir;
pub use ports::{BUS_OFFSET, DATA_END, DATA_FIRST};
pub use wait::{wait_until, HANG};
