//! RDB persistence (issue 19, its RDB part; Redis 7.0 src/rdb.c `rdbSave`, `bgsaveCommand`,
//! `serverCron`'s save points, `rdbLoad`, `prepareForShutdown`):
//! * `SAVE` writes `dir`/`dbfilename` now; `BGSAVE [SCHEDULE]` takes the snapshot under the
//!   state lock (the same RDB as a full sync, `crate::snapshot::write_rdb`) and writes the file
//!   on a background thread; `LASTSAVE`;
//! * the `save <seconds> <changes> [...]` schedule (Redis 7.0's default `3600 1 300 100 60
//!   10000`; `save ""` turns it off), checked every 100 ms by the timer thread; after a failed
//!   background save the next try waits 5 s (`CONFIG_BGSAVE_RETRY_DELAY`);
//! * the file is written as Redis writes it: a temporary `temp-<pid>.rdb` in `dir`, fsync,
//!   rename over `dbfilename`, fsync of the directory, so a crash leaves the old file or the
//!   new one, never a torn one;
//! * loaded at start before the data port opens; a file that does not decode is refused with
//!   its offset and reason and the server exits 1 (Redis: "Short read or OOM loading DB.
//!   Unrecoverable error, aborting now.");
//! * `SHUTDOWN [NOSAVE|SAVE]` and SIGTERM save first when save points are set (or SAVE is
//!   given), as `prepareForShutdown`; a failed save keeps the server running (`Errors trying
//!   to SHUTDOWN. Check logs.`).
//!
//! Left out: the snapshot is taken under the state lock (writes wait while it is serialized,
//! about 0.5 s per million small keys; Redis forks instead); `changes` counts write commands
//! that succeeded (Redis counts modified keys: an MSET of ten keys is one change here, ten
//! there); SHUTDOWN does not wait for replicas to catch up (`shutdown-timeout`). The AOF is
//! `crate::aof`.

use crate::server::{unix_ms, Shared, State};
use std::path::{Path, PathBuf};

/// One `save` point: save when at least `changes` writes happened in `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavePoint {
    /// Seconds since the last save.
    pub seconds: u64,
    /// Writes since the last save.
    pub changes: u64,
}

/// Redis 7.0's default save points (`save 3600 1 300 100 60 10000`).
pub fn default_save_points() -> Vec<SavePoint> {
    [(3600, 1), (300, 100), (60, 10_000)]
        .iter()
        .map(|&(seconds, changes)| SavePoint { seconds, changes })
        .collect()
}

/// Parses a `save` value: pairs of seconds and changes; `""` is none.
///
/// # Errors
/// An odd count of numbers or a word that is not a non-negative integer (Redis's text).
pub fn parse_save(v: &str) -> Result<Vec<SavePoint>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|p| {
            let n = |w: &str| {
                w.parse::<u64>()
                    .map_err(|_| "Invalid save parameters".to_string())
            };
            Ok(SavePoint {
                seconds: n(p[0])?,
                changes: n(p[1])?,
            })
        })
        .collect()
}

/// The `save` value as CONFIG GET shows it (`3600 1 300 100 60 10000`).
pub fn show_save(points: &[SavePoint]) -> String {
    points
        .iter()
        .map(|p| format!("{} {}", p.seconds, p.changes))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The persistence state (under the state lock).
#[derive(Debug, Default)]
pub struct Persistence {
    /// The `save` points in force.
    pub points: Vec<SavePoint>,
    /// Write commands since the last successful save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    dirty_at_bgsave: u64,
    /// Unix s of the last successful save (start time until the first).
    pub last_save_s: u64,
    last_bgsave_ok: bool,
    bgsave_started_ms: Option<u64>,
    last_bgsave_secs: Option<u64>,
    last_try_ms: u64,
    saves: u64,
    /// A BGSAVE SCHEDULE waits for the one in progress.
    scheduled: bool,
    /// Keys loaded at start (`rdb_last_load_keys_loaded`).
    pub loaded_keys: u64,
}

impl Persistence {
    /// Valkey `writeCommandsDeniedByDiskError`'s RDB case: save points are set and the last
    /// background save failed (`rdb_last_bgsave_status:err`).
    pub fn bgsave_failing(&self) -> bool {
        !self.points.is_empty() && !self.last_bgsave_ok
    }

    /// The state of a server started at `start_ms` with `points`.
    pub fn new(start_ms: u64, points: Vec<SavePoint>) -> Persistence {
        Persistence {
            points,
            last_save_s: start_ms / 1000,
            last_bgsave_ok: true,
            ..Persistence::default()
        }
    }

    /// A write command succeeded.
    pub fn changed(&mut self) {
        self.dirty += 1;
    }

    /// INFO `persistence` lines; `loading`: a replica is loading its primary's RDB.
    pub fn info_section(&self, loading: bool, now_ms: u64) -> String {
        format!(
            "# Persistence\r\nloading:{}\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_load_keys_loaded:{}\r\n",
            u8::from(loading),
            self.dirty,
            u8::from(self.bgsave_started_ms.is_some()),
            self.last_save_s,
            if self.last_bgsave_ok { "ok" } else { "err" },
            self.last_bgsave_secs.map_or(-1, |s| s as i64),
            self.bgsave_started_ms
                .map_or(-1, |t| (now_ms.saturating_sub(t) / 1000) as i64),
            self.saves,
            self.loaded_keys,
        )
    }
}

fn rdb_path(shared: &Shared) -> PathBuf {
    shared.config.dir.join(&shared.config.dbfilename)
}

fn snapshot(keys: crate::snapshot::Keys<'_>, now: u64) -> Result<Vec<u8>, String> {
    let mut aux = crate::snapshot::server_aux(now);
    aux.push(("aof-base", "0".to_string()));
    crate::snapshot::write_rdb(keys, &aux)
}

/// Writes `bytes` as `path` through the temporary file `tmp_name` in the same directory,
/// fsynced every 4 MiB as it is written (Redis's `rdb-save-incremental-fsync yes`,
/// `REDIS_AUTOSYNC_BYTES`) and at its end, renamed, then fsyncs the directory.
///
/// # Errors
/// The failed step and the OS error.
pub fn write_atomically(path: &Path, bytes: &[u8], tmp_name: &str) -> Result<(), String> {
    write_atomically_on(&crate::fsio::OsDisk, path, bytes, tmp_name)
}

/// [`write_atomically`] through the file layer `disk` (`crate::fsio`: the AOF's manifest and
/// base files, fault injection in tests).
///
/// # Errors
/// The failed step and the OS error; the temporary file is removed.
pub fn write_atomically_on(
    disk: &dyn crate::fsio::Disk,
    path: &Path,
    bytes: &[u8],
    tmp_name: &str,
) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(tmp_name);
    let fail = |what: &str, e: std::io::Error| {
        let _ = std::fs::remove_file(&tmp);
        format!("{what} {}: {e}", tmp.display())
    };
    let mut f = disk.create(&tmp).map_err(|e| fail("can't create", e))?;
    for chunk in bytes.chunks(crate::aof::AUTOSYNC_BYTES) {
        crate::fsio::write_all(f.as_mut(), chunk).map_err(|(_, e)| fail("can't write", e))?;
        f.sync().map_err(|e| fail("can't fsync", e))?;
    }
    f.sync().map_err(|e| fail("can't fsync", e))?;
    drop(f);
    disk.rename(&tmp, path)
        .map_err(|e| fail("can't rename", e))?;
    let _ = disk.sync_dir(dir);
    Ok(())
}

/// `SAVE`: the snapshot written now, under the lock. `Err` holds the reply's error line.
///
/// # Errors
/// A background save in progress, or the write failed (logged with its reason).
pub fn save(shared: &Shared, state: &mut State, now: u64) -> Result<(), String> {
    if state.persist.bgsave_started_ms.is_some() {
        return Err("ERR Background save already in progress".into());
    }
    let tmp = format!("temp-{}.rdb", std::process::id());
    let keys = crate::snapshot::Keys::Live(&state.kv, now);
    let result = snapshot(keys, now).and_then(|b| write_atomically(&rdb_path(shared), &b, &tmp));
    match result {
        Ok(()) => {
            tracing::info!("DB saved on disk");
            let p = &mut state.persist;
            p.dirty = 0;
            p.last_save_s = now / 1000;
            p.saves += 1;
            p.last_bgsave_ok = true;
            Ok(())
        }
        Err(e) => {
            tracing::warn!("Failed saving the DB: {e}");
            Err("ERR".into())
        }
    }
}

/// `BGSAVE [SCHEDULE]`: the reply's status text, or its error line.
///
/// # Errors
/// A background save in progress (without SCHEDULE), or the snapshot failed.
pub fn bgsave(
    shared: &std::sync::Arc<Shared>,
    state: &mut State,
    schedule: bool,
    now: u64,
) -> Result<&'static str, String> {
    if state.persist.bgsave_started_ms.is_some() {
        if schedule {
            state.persist.scheduled = true;
            return Ok("Background saving scheduled");
        }
        return Err("ERR Background save already in progress".into());
    }
    start_bgsave(shared, state, now)?;
    Ok("Background saving started")
}

fn start_bgsave(
    shared: &std::sync::Arc<Shared>,
    state: &mut State,
    now: u64,
) -> Result<(), String> {
    state.persist.last_try_ms = now;
    // The copy is taken under the lock; it is encoded and written by the thread.
    let copy = crate::snapshot::KeyspaceCopy::of(&state.kv, now);
    state.persist.bgsave_started_ms = Some(now);
    state.persist.dirty_at_bgsave = state.persist.dirty;
    tracing::info!("Background saving started");
    let shared2 = std::sync::Arc::clone(shared);
    let path = rdb_path(shared);
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || {
            let tmp = format!("temp-{}-bgsave.rdb", std::process::id());
            let result = snapshot(crate::snapshot::Keys::Copy(&copy), now)
                .and_then(|bytes| write_atomically(&path, &bytes, &tmp));
            drop(copy);
            let done = unix_ms();
            let mut st = shared2.state.lock();
            finish_bgsave(&shared2, &mut st, result, done);
        });
    if let Err(e) = spawned {
        finish_bgsave(
            shared,
            state,
            Err(format!("can't start the bgsave thread: {e}")),
            now,
        );
        return Err("ERR Background save failed to start".into());
    }
    Ok(())
}

fn finish_bgsave(
    shared: &std::sync::Arc<Shared>,
    state: &mut State,
    result: Result<(), String>,
    now: u64,
) {
    let p = &mut state.persist;
    let started = p.bgsave_started_ms.take().unwrap_or(now);
    p.last_bgsave_secs = Some(now.saturating_sub(started) / 1000);
    match result {
        Ok(()) => {
            tracing::info!("Background saving terminated with success");
            p.dirty = p.dirty.saturating_sub(p.dirty_at_bgsave);
            p.last_save_s = started / 1000;
            p.last_bgsave_ok = true;
            p.saves += 1;
        }
        Err(e) => {
            tracing::warn!("Background saving error: {e}");
            p.last_bgsave_ok = false;
        }
    }
    if std::mem::take(&mut p.scheduled) {
        let _ = start_bgsave(shared, state, now);
    }
}

/// The timer's check of the save points (Redis `serverCron`): starts a background save when
/// one is due.
pub fn cron(shared: &std::sync::Arc<Shared>, state: &mut State, now: u64) {
    let p = &state.persist;
    if p.bgsave_started_ms.is_some() || p.dirty == 0 {
        return;
    }
    let since_s = (now / 1000).saturating_sub(p.last_save_s);
    let may_retry = p.last_bgsave_ok || now.saturating_sub(p.last_try_ms) >= 5_000;
    let due = p
        .points
        .iter()
        .find(|sp| p.dirty >= sp.changes && since_s >= sp.seconds);
    if let (Some(sp), true) = (due, may_retry) {
        tracing::info!(
            "{} changes in {} seconds. Saving...",
            sp.changes,
            sp.seconds
        );
        let _ = start_bgsave(shared, state, now);
    }
}

/// Loads `dir`/`dbfilename` at start, when it exists. Returns the keys loaded.
///
/// # Errors
/// A file that cannot be read or decoded: the path, the offset and the reason.
pub fn load_at_start(shared: &Shared) -> Result<u64, String> {
    let path = rdb_path(shared);
    // Timed from the read on, as redis-server's "DB loaded from disk" (`rdbLoad` reads as it
    // decodes).
    let started = std::time::Instant::now();
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("can't read {}: {e}", path.display())),
    };
    let now = unix_ms();
    let mut st = shared.state.lock();
    let refused = |e: String| {
        format!(
            "Short read or OOM loading DB. Unrecoverable error, aborting now. ({}: {e})",
            path.display()
        )
    };
    let mut loader = crate::snapshot::RdbLoader::new(st.kv.databases()).map_err(refused)?;
    loader.feed(&bytes, now).map_err(refused)?;
    let (kv, keys) = loader.finish(now).map_err(refused)?;
    drop(st.install_kv(kv, now));
    st.persist.loaded_keys = keys;
    tracing::info!("Done loading RDB, keys loaded: {keys}.");
    tracing::info!(
        "DB loaded from disk: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
    Ok(keys)
}

/// Saves before a shutdown when asked (`save`), or when save points are set and NOSAVE was not
/// given. `Err` when the save failed.
///
/// # Errors
/// The save's error (already logged).
pub fn save_for_shutdown(
    shared: &Shared,
    state: &mut State,
    save_flag: Option<bool>,
) -> Result<(), String> {
    let wanted = save_flag.unwrap_or(!state.persist.points.is_empty());
    if !wanted {
        return Ok(());
    }
    tracing::info!("Saving the final RDB snapshot before exiting.");
    // A background save in progress writes its own temporary file; the final save writes
    // the newer data set over whatever it renames.
    state.persist.bgsave_started_ms = None;
    save(shared, state, unix_ms())
}

/// Ends the process after a shutdown's save (redis-server's last lines: the pidfile removed,
/// then "ready to exit").
pub fn exit_now(shared: &Shared) -> ! {
    if shared.aof.is_on() {
        if let Err(e) = shared.aof.sync_all() {
            tracing::warn!("Error writing the AOF before exiting: {e}");
        }
    }
    if let Some(p) = &shared.config.pidfile {
        tracing::info!("Removing the pid file.");
        let _ = std::fs::remove_file(p);
    }
    tracing::warn!("ferrocluster-server is now ready to exit, bye bye...");
    std::process::exit(0)
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: exits unless the save fails (without
/// FORCE); `Err` is the reply's error line.
///
/// # Errors
/// Bad arguments, ABORT (nothing to abort), or a failed save.
pub fn shutdown(
    shared: &Shared,
    state: &mut State,
    args: &crate::client::Args<'_>,
) -> Result<(), String> {
    let (mut flag, mut force) = (None, false);
    for i in 1..args.len() {
        let a = String::from_utf8_lossy(args.get(i)).to_ascii_lowercase();
        match a.as_str() {
            "nosave" if flag.is_none() => flag = Some(false),
            "save" if flag.is_none() => flag = Some(true),
            "now" => {}
            "force" => force = true,
            "abort" if args.len() == 2 => return Err("ERR No shutdown in progress.".into()),
            _ => return Err("ERR syntax error".into()),
        }
    }
    tracing::warn!("User requested shutdown...");
    if save_for_shutdown(shared, state, flag).is_err() && !force {
        tracing::warn!("Error trying to save the DB, can't exit.");
        return Err("ERR Errors trying to SHUTDOWN. Check logs.".into());
    }
    exit_now(shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_points_parse_and_show_as_redis() {
        let p = parse_save("3600 1 300 100 60 10000").unwrap();
        assert_eq!(p, default_save_points());
        assert_eq!(show_save(&p), "3600 1 300 100 60 10000");
        assert_eq!(parse_save("").unwrap(), vec![]);
        assert!(parse_save("3600").is_err());
        assert!(parse_save("x 1").is_err());
    }

    #[test]
    fn a_file_is_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("fc-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dump.rdb");
        write_atomically(&path, b"first", "t.rdb").unwrap();
        write_atomically(&path, b"second", "t.rdb").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_full_disk_or_a_failed_fsync_leaves_the_old_file_whole() {
        let dir = std::env::temp_dir().join(format!("fc-persist-fault-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dump.rdb");
        write_atomically(&path, b"old", "t.rdb").unwrap();
        let disk = crate::fsio::FaultDisk::default();
        disk.faults.lock().unwrap().short_write = Some(2);
        let e = write_atomically_on(&disk, &path, b"newer data", "t.rdb").unwrap_err();
        assert!(
            e.starts_with("can't write") && e.contains("No space left on device"),
            "{e}"
        );
        disk.faults.lock().unwrap().enospc = false;
        disk.faults.lock().unwrap().fail_fsync = true;
        let e = write_atomically_on(&disk, &path, b"newer data", "t.rdb").unwrap_err();
        assert!(e.starts_with("can't fsync"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
