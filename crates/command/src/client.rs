//! Per-connection client state: ASKING, READONLY/READWRITE, the selected database and the
//! MULTI transaction (facts sheet §20.2, §20.5; captured `asking-only-once`,
//! `replica-readwrite-get`, `crossslot-multi-exec`).

use crate::args::parse_i64;
use crate::error::{CommandError, Rejection};
use crate::route::{route, ClusterContext, ClusterView, KeyPresence};
use crate::spec::{CommandFlags, CommandKind, CommandSpec};
use crate::table::{builtin_table, CommandTable};
use bytes::Bytes;
use ferrocluster_slot::Slot;

/// One command queued inside MULTI: its table row and a copy of its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedCommand {
    spec: &'static CommandSpec,
    argv: Vec<Bytes>,
}

impl QueuedCommand {
    /// The command's table row.
    pub fn spec(&self) -> &'static CommandSpec {
        self.spec
    }
    /// The arguments, name first.
    pub fn argv(&self) -> &[Bytes] {
        &self.argv
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Transaction {
    queue: Vec<QueuedCommand>,
    dirty: bool,
}

/// What the host does with a command after [`ClientState::handle_command`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// Run the command here now (`slot`: its hash slot, `None` when keyless). For RESET the
    /// client state here is already reset; the host resets its own part and replies `+RESET`.
    Execute {
        /// The command's table row.
        spec: &'static CommandSpec,
        /// The request's hash slot.
        slot: Option<Slot>,
    },
    /// Reply `+OK`: a connection command fully handled here (ASKING, READONLY, READWRITE,
    /// SELECT, MULTI, DISCARD).
    Ok,
    /// Reply `+QUEUED`: the command was queued inside MULTI.
    Queued,
    /// EXEC: run these commands in order and reply with the array of their replies. Before
    /// running each, pass it to [`ClientState::apply_connection_command`]: connection commands
    /// take effect there and give their reply.
    Exec(Vec<QueuedCommand>),
    /// Reply with this error.
    Reject(Rejection),
}

/// The state the host keeps per client connection.
///
/// Rules (Valkey `processCommand`, `resetClient`, `multi.c`):
/// * ASKING sets a one-shot flag, cleared after the next command (even a rejected one) unless
///   the client is inside MULTI (then it lasts through EXEC) or that command was ASKING.
/// * READONLY stays until READWRITE or RESET.
/// * Inside MULTI every command except EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is routed
///   and queued; an unknown command, an arity error or a redirection flags the transaction and
///   EXEC then answers EXECABORT. A redirection of EXEC itself discards the transaction.
/// * On a replica a write that is not redirected (a keyless one) is refused with `READONLY`
///   before it runs or is queued; only the primary's replication link writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientState {
    tls: bool,
    ipv6: bool,
    primary_link: bool,
    db: usize,
    readonly: bool,
    asking: bool,
    multi: Option<Transaction>,
}

impl ClientState {
    /// A fresh client on a connection: `tls` selects the TLS ports in redirections, `ipv6`
    /// the announced client IPv6 (else IPv4) address. Database 0, no flags, no transaction.
    pub fn new(tls: bool, ipv6: bool) -> ClientState {
        ClientState {
            tls,
            ipv6,
            ..ClientState::default()
        }
    }

    /// The replication link from this node's primary: commands on it are obeyed, never
    /// routed (Valkey `mustObeyClient`).
    pub fn primary_link() -> ClientState {
        ClientState {
            primary_link: true,
            ..ClientState::default()
        }
    }

    /// Whether this is the primary's replication link.
    pub fn is_primary_link(&self) -> bool {
        self.primary_link
    }

    /// Whether the connection uses TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Whether the client connected over IPv6.
    pub fn ipv6(&self) -> bool {
        self.ipv6
    }

    /// The selected database.
    pub fn db(&self) -> usize {
        self.db
    }

    /// Whether READONLY is in effect.
    pub fn readonly(&self) -> bool {
        self.readonly
    }

    /// Whether the one-shot ASKING flag is set.
    pub fn asking(&self) -> bool {
        self.asking
    }

    /// Whether the client is inside MULTI.
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// The commands queued so far inside MULTI.
    pub fn queued(&self) -> Option<&[QueuedCommand]> {
        self.multi.as_ref().map(|t| t.queue.as_slice())
    }

    /// Whether the open transaction will answer EXECABORT.
    pub fn transaction_failed(&self) -> bool {
        self.multi.as_ref().is_some_and(|t| t.dirty)
    }

    /// Marks the open transaction failed, so its EXEC answers EXECABORT (Valkey
    /// `flagTransaction`): for a command the host refused before queueing it (an `-OOM` under
    /// `maxmemory`, say). Does nothing outside MULTI.
    pub fn flag_transaction(&mut self) {
        if let Some(tx) = self.multi.as_mut() {
            tx.dirty = true;
        }
    }

    /// Ends the open transaction without running it (Valkey `discardTransaction`): for an
    /// EXEC the host refuses as a whole (`-EXECABORT` under `min-replicas-to-write`, say).
    /// `false` outside MULTI.
    pub fn discard_transaction(&mut self) -> bool {
        self.multi.take().is_some()
    }

    /// Handles one command from this client: resolves it in the table of every built-in
    /// command ([`builtin_table`]), routes it ([`route`]), applies the connection commands
    /// and the MULTI rules, and consumes the ASKING flag. `ctx` and `keys` are only read.
    /// A host with a table of its own uses [`ClientState::handle_command_in`].
    pub fn handle_command<A, V, K>(
        &mut self,
        argv: &[A],
        ctx: &ClusterContext<'_, V>,
        keys: &K,
    ) -> Dispatch
    where
        A: AsRef<[u8]>,
        V: ClusterView + ?Sized,
        K: KeyPresence + ?Sized,
    {
        self.handle_command_in(builtin_table(), argv, ctx, keys)
    }

    /// [`ClientState::handle_command`] with the host's table: a command the table does not
    /// serve is unknown (flagging an open transaction), and one the host registered is routed
    /// by its key specs.
    pub fn handle_command_in<H, A, V, K>(
        &mut self,
        table: &CommandTable<H>,
        argv: &[A],
        ctx: &ClusterContext<'_, V>,
        keys: &K,
    ) -> Dispatch
    where
        H: Copy,
        A: AsRef<[u8]>,
        V: ClusterView + ?Sized,
        K: KeyPresence + ?Sized,
    {
        let spec = match table.resolve(argv) {
            Ok(r) => r.spec,
            Err(e) => {
                // The table row is known when only the arity failed (Valkey sets c->cmd).
                let asking_cmd =
                    matches!(&e, CommandError::WrongArity { fullname } if *fullname == "asking");
                self.flag_transaction();
                self.after_command(asking_cmd);
                return Dispatch::Reject(e.into());
            }
        };
        let out = self.dispatch(spec, argv, ctx, keys);
        self.after_command(spec.kind == CommandKind::Asking);
        out
    }

    fn dispatch<A, V, K>(
        &mut self,
        spec: &'static CommandSpec,
        argv: &[A],
        ctx: &ClusterContext<'_, V>,
        keys: &K,
    ) -> Dispatch
    where
        A: AsRef<[u8]>,
        V: ClusterView + ?Sized,
        K: KeyPresence + ?Sized,
    {
        if self.multi.is_some() && spec.flags.contains(CommandFlags::NO_MULTI) {
            self.flag_transaction();
            return Dispatch::Reject(
                CommandError::NotAllowedInTransaction {
                    fullname: spec.name,
                }
                .into(),
            );
        }
        let slot = match route(spec, argv, self, ctx, keys) {
            Ok(slot) => slot,
            Err(e) => {
                if spec.kind == CommandKind::Exec {
                    self.multi = None;
                } else {
                    self.flag_transaction();
                }
                return Dispatch::Reject(e.into());
            }
        };
        if let Some(refusal) = self.replica_refuses(spec, argv, ctx) {
            return Dispatch::Reject(refusal.into());
        }
        let immediate = matches!(
            spec.kind,
            CommandKind::Exec
                | CommandKind::Discard
                | CommandKind::Multi
                | CommandKind::Watch
                | CommandKind::Quit
                | CommandKind::Reset
        );
        if let Some(tx) = self.multi.as_mut() {
            if !immediate {
                tx.queue.push(QueuedCommand {
                    spec,
                    argv: argv
                        .iter()
                        .map(|a| Bytes::copy_from_slice(a.as_ref()))
                        .collect(),
                });
                return Dispatch::Queued;
            }
        }
        match spec.kind {
            CommandKind::Multi => {
                if self.multi.is_some() {
                    return Dispatch::Reject(CommandError::MultiNested.into());
                }
                self.multi = Some(Transaction::default());
                Dispatch::Ok
            }
            CommandKind::Exec => match self.multi.take() {
                None => Dispatch::Reject(CommandError::ExecWithoutMulti.into()),
                Some(tx) if tx.dirty => Dispatch::Reject(CommandError::ExecAbort.into()),
                Some(tx) => Dispatch::Exec(tx.queue),
            },
            CommandKind::Discard => match self.multi.take() {
                None => Dispatch::Reject(CommandError::DiscardWithoutMulti.into()),
                Some(_) => Dispatch::Ok,
            },
            CommandKind::Watch if self.multi.is_some() => {
                Dispatch::Reject(CommandError::WatchInsideMulti.into())
            }
            CommandKind::Reset => {
                self.db = 0;
                self.readonly = false;
                self.asking = false;
                self.multi = None;
                Dispatch::Execute { spec, slot }
            }
            _ => match self.apply_inner(spec, argv, ctx.config.databases) {
                Some(Ok(())) => Dispatch::Ok,
                Some(Err(e)) => Dispatch::Reject(e),
                None => Dispatch::Execute { spec, slot },
            },
        }
    }

    /// Valkey `processCommand`, after the cluster redirection: a replica refuses a write from
    /// a normal client with `READONLY You can't write against a read only replica.` (the
    /// primary's replication link is obeyed). A keyed write never gets here on a replica (it
    /// is redirected to the slot's primary first), so this is what keyless writes (FLUSHALL,
    /// FLUSHDB, SWAPDB, ...) answer, before their own checks and before queueing inside MULTI
    /// (the transaction is flagged and EXEC answers EXECABORT). EXEC whose queue holds a write
    /// (myself became a replica after queueing it) discards the transaction with `EXECABORT
    /// Transaction discarded because of: READONLY ...` (`execCommandAbort`). Captured on
    /// Redis 7.0 and Valkey 9.1 (the server's `tests/vectors/replica-writes.json`).
    fn replica_refuses<A, V>(
        &mut self,
        spec: &CommandSpec,
        argv: &[A],
        ctx: &ClusterContext<'_, V>,
    ) -> Option<CommandError>
    where
        A: AsRef<[u8]>,
        V: ClusterView + ?Sized,
    {
        if self.primary_link || !ctx.view.myself().is_replica() {
            return None;
        }
        if spec.kind == CommandKind::Exec {
            let writes = self
                .queued()
                .is_some_and(|q| q.iter().any(|c| c.spec().is_write(c.argv())));
            if !writes {
                return None;
            }
            self.multi = None;
            return Some(CommandError::ExecAbortBecause(Box::new(
                CommandError::ReadonlyReplica,
            )));
        }
        if !spec.is_write(argv) {
            return None;
        }
        self.flag_transaction();
        Some(CommandError::ReadonlyReplica)
    }

    /// Runs a connection command whose whole effect is client state: ASKING, READONLY,
    /// READWRITE, SELECT (`databases` = `cluster-databases`), and the cluster-mode refusals
    /// of SWAPDB and FAILOVER. Returns `None` for any other command (the host runs it).
    /// Use it for commands handed out by [`Dispatch::Exec`].
    pub fn apply_connection_command(
        &mut self,
        cmd: &QueuedCommand,
        databases: usize,
    ) -> Option<Result<(), Rejection>> {
        self.apply_inner(cmd.spec, &cmd.argv, databases)
    }

    fn apply_inner<A: AsRef<[u8]>>(
        &mut self,
        spec: &CommandSpec,
        argv: &[A],
        databases: usize,
    ) -> Option<Result<(), Rejection>> {
        Some(match spec.kind {
            CommandKind::Asking => {
                self.asking = true;
                Ok(())
            }
            CommandKind::Readonly => {
                self.readonly = true;
                Ok(())
            }
            CommandKind::Readwrite => {
                self.readonly = false;
                Ok(())
            }
            CommandKind::Select => {
                let arg = argv.get(1).map(|a| a.as_ref()).unwrap_or(b"");
                match select_db(arg, databases) {
                    Ok(db) => {
                        self.db = db;
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                }
            }
            CommandKind::Swapdb => Err(CommandError::SwapdbNotAllowed.into()),
            _ if spec.name == "failover" => Err(CommandError::FailoverInClusterMode.into()),
            _ => return None,
        })
    }

    fn after_command(&mut self, was_asking: bool) {
        if self.multi.is_none() && !was_asking {
            self.asking = false;
        }
    }
}

/// SELECT in cluster mode, Valkey 9 (#1671): `arg` must be an integer (else `value is not an
/// integer or out of range`) and `0 <= db < cluster_databases` (else `DB index is out of
/// range`). With the default `cluster-databases 1`, `SELECT 0` is `+OK` (captured `select-0`).
///
/// Valkey 8 and Redis 7.0 answered a non-zero DB with `SELECT is not allowed in cluster mode`
/// (captured `select-1`, [`CommandError::SelectNotAllowed`]).
///
/// # Errors
/// [`CommandError::NotAnInteger`], [`CommandError::DbIndexOutOfRange`].
pub fn select_db(arg: &[u8], cluster_databases: usize) -> Result<usize, CommandError> {
    let id = parse_i64(arg).ok_or(CommandError::NotAnInteger)?;
    let id = i32::try_from(id).map_err(|_| CommandError::NotAnInteger)?;
    match usize::try_from(id) {
        Ok(db) if db < cluster_databases => Ok(db),
        _ => Err(CommandError::DbIndexOutOfRange),
    }
}
