//! Unit tests per rule; expected values come from the facts sheet sections named in each test.

mod claims;
mod election;
mod epochs;
mod manual;
mod migration;
mod util;
mod vote;
