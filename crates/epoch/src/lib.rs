//! Epochs, configuration propagation, replica election and failover (facts sheet §11-§14).
//!
//! This crate is being written by the epoch helper (issue 5); the node crate wires it in.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
