//! The target side: the import link's command stream parsed into commands to apply, the
//! source's `SYNCSLOTS` messages for the node, `SELECT`, activity (Valkey's slot import client:
//! a primary-like client with replies off, `clusterCommandSyncSlots*`).

use super::export::is_syncslots;
use super::{AsmError, AsmEvent, AsmOutput, AsmPlane, Link};
use crate::resp::{parse_i64, CommandReader};
use ferrocluster_migration::{ConnId, JobName, MigrationInput};
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::Millis;

/// One import data connection.
#[derive(Debug)]
pub(super) struct ImportLink {
    job: JobName,
    slots: SlotSet,
    reader: CommandReader,
    /// The stream's database (its last `SELECT`; 0 on a new connection).
    db: u32,
    last_report: Option<Millis>,
}

impl AsmPlane {
    /// Target: `conn`, on which `CLUSTER SYNCSLOTS ESTABLISH` was accepted, is the import link
    /// of `job` for `slots` (`MigrationRequest::AcceptImportLink`). `already` holds the bytes
    /// the host read from `conn` after the ESTABLISH command (its reader may have read
    /// ahead); they are parsed first. From now on the host passes every byte of `conn` to
    /// [`AsmPlane::handle_bytes`] and writes no reply on it.
    ///
    /// # Errors
    /// [`AsmError::ConnInUse`] when `conn` is an export link; nothing changed. Accepting an
    /// import link again replaces it.
    pub fn accept_import(
        &mut self,
        job: JobName,
        conn: ConnId,
        slots: SlotSet,
        already: &[u8],
        now: Millis,
    ) -> Result<(), AsmError> {
        let now = self.clock(now);
        if let Some(Link::Export(_)) = self.links.get(&conn) {
            return Err(AsmError::ConnInUse(conn));
        }
        self.links.insert(
            conn,
            Link::Import(Box::new(ImportLink {
                job,
                slots,
                reader: CommandReader::new(self.cfg.reader_limits),
                db: 0,
                last_report: None,
            })),
        );
        if !already.is_empty() {
            self.import_bytes(conn, already, now);
        }
        Ok(())
    }

    /// The job and slots of an import link.
    pub fn import_of(&self, conn: ConnId) -> Option<(&JobName, &SlotSet)> {
        match self.links.get(&conn) {
            Some(Link::Import(i)) => Some((&i.job, &i.slots)),
            _ => None,
        }
    }

    /// Target: applying a command of `conn`'s stream ran out of memory (`oom`) or produced an
    /// error reply: the link stops (its commands not yet applied are dropped from the output
    /// queue) and the node hears [`MigrationInput::ImportOom`] or
    /// [`MigrationInput::ImportApplyError`]; it fails the job and closes the link. Harmless
    /// for an unknown connection.
    pub fn handle_apply_failed(&mut self, conn: ConnId, oom: bool, now: Millis) {
        self.clock(now);
        if !matches!(self.links.get(&conn), Some(Link::Import(_))) {
            return;
        }
        self.links.remove(&conn);
        self.drop_pending(conn);
        self.fact(if oom {
            MigrationInput::ImportOom { conn }
        } else {
            MigrationInput::ImportApplyError { conn }
        });
    }

    /// Removes the queued outputs that act on `conn`'s stream.
    pub(super) fn drop_pending(&mut self, conn: ConnId) {
        self.out.retain(|o| match o {
            AsmOutput::Apply { conn: c, .. }
            | AsmOutput::SyncSlots { conn: c, .. }
            | AsmOutput::Send { conn: c, .. } => *c != conn,
            _ => true,
        });
    }

    pub(super) fn import_bytes(&mut self, conn: ConnId, bytes: &[u8], now: Millis) {
        let (every, databases) = (self.cfg.activity_report_ms, self.cfg.databases);
        let Some(Link::Import(link)) = self.links.get_mut(&conn) else {
            return;
        };
        link.reader.push(bytes);
        loop {
            let Some(Link::Import(link)) = self.links.get_mut(&conn) else {
                return;
            };
            let argv = match link.reader.next_command() {
                Ok(Some(argv)) => argv,
                Ok(None) => return,
                Err(error) => {
                    self.protocol_close(conn, AsmEvent::Protocol { conn, error });
                    return;
                }
            };
            let report = link.last_report.is_none_or(|t| now.since(t) >= every);
            if report {
                link.last_report = Some(now);
            }
            let db = link.db;
            let select = argv.len() == 2 && argv[0].eq_ignore_ascii_case(b"select");
            if select {
                match parse_i64(&argv[1]).and_then(|n| u32::try_from(n).ok()) {
                    Some(n) if n < databases => link.db = n,
                    _ => {
                        // Valkey: the SELECT's error reply fails the import; what came
                        // before it stands.
                        let db = argv[1].clone();
                        self.links.remove(&conn);
                        self.event(AsmEvent::BadSelect { conn, db });
                        self.fact(MigrationInput::ImportApplyError { conn });
                        return;
                    }
                }
            }
            if report {
                self.fact(MigrationInput::ImportData { conn });
            }
            if select {
                continue;
            }
            if is_syncslots(&argv) {
                self.out.push_back(AsmOutput::SyncSlots { conn, argv });
            } else {
                self.out.push_back(AsmOutput::Apply { conn, db, argv });
            }
        }
    }
}
