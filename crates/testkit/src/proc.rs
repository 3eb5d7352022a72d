//! Child processes of a test (our servers, real redis-server / valkey-server nodes, tools)
//! with their output in a log file, killed and reaped when dropped. A start that fails says
//! why: the child's exit status, the last lines of its log, and who holds its ports.

use crate::ports::{holders, BUS_OFFSET};
use crate::wait::HANG;
use std::ffi::OsStr;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How many of a log's last lines a failure message shows.
pub const TAIL_LINES: usize = 40;

/// A running child whose stdout and stderr go to `log`. SIGKILLed and reaped on drop.
pub struct Logged {
    child: Option<Child>,
    log: PathBuf,
    what: String,
}

impl Logged {
    /// Spawns `cmd` (stdin closed, stdout and stderr appended to `log`), named `what` in
    /// messages. Panics with the reason when it cannot be spawned (a missing binary: the
    /// message says `.ci/run` installs it).
    pub fn spawn(cmd: &mut Command, log: &Path, what: &str) -> Logged {
        if let Some(parent) = log.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("can't open {}: {e}", log.display()));
        let err = out.try_clone().expect("clone the log's handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "can't start {what} ({:?}): {e} (.ci/run installs the real servers and tools)",
                    cmd.get_program()
                )
            });
        Logged {
            child: Some(child),
            log: log.to_path_buf(),
            what: what.to_string(),
        }
    }

    /// Waits until `port` accepts TCP connections on 127.0.0.1 or ::1. Panics when the child
    /// exits first or after [`HANG`], with its status, its log's last lines and who holds
    /// `port` and its bus port.
    pub fn wait_listening(&mut self, port: u16) {
        let end = Instant::now() + HANG;
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok()
                || TcpStream::connect(("::1", port)).is_ok()
            {
                return;
            }
            if let Some(status) = self.exited() {
                panic!(
                    "{}",
                    self.failure(
                        &format!("exited ({status}) before it listened on {port}"),
                        port
                    )
                );
            }
            if Instant::now() >= end {
                panic!(
                    "{}",
                    self.failure(&format!("did not listen on {port} within {HANG:?}"), port)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A failure message about this child: `why`, its log's tail, and who holds `port` and
    /// `port + BUS_OFFSET`.
    pub fn failure(&self, why: &str, port: u16) -> String {
        format!(
            "{} {why}\n--- last lines of {} ---\n{}\n--- who holds its ports ---\n{}\n{}",
            self.what,
            self.log.display(),
            log_tail(&self.log, TAIL_LINES),
            holders(port),
            port.checked_add(BUS_OFFSET).map_or(String::new(), holders),
        )
    }

    /// The exit status, when the child has exited (it is reaped then).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits for the child to exit by itself (after a SHUTDOWN, say), up to [`HANG`]; panics
    /// with its log's tail when it does not.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let end = Instant::now() + HANG;
        loop {
            if let Some(s) = self.exited() {
                return s;
            }
            if Instant::now() >= end {
                panic!(
                    "{} did not exit within {HANG:?}\n--- last lines of {} ---\n{}",
                    self.what,
                    self.log.display(),
                    log_tail(&self.log, TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILLs the child and reaps it (no-op when it already exited).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The child's pid (None once killed).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The child itself (None once killed).
    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// The log file's path.
    pub fn log(&self) -> &Path {
        &self.log
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of the file at `path` (a note when it cannot be read).
pub fn log_tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(can't read {}: {e})", path.display()),
    }
}

/// Runs `cmd args...` to its end (stdin closed) with a deadline that only bounds a hang
/// (`limit`, raised to at least [`HANG`]); returns (success, stdout then stderr). Both pipes
/// are drained on their own threads, so a chatty child never blocks on a full pipe. Panics
/// when the command cannot be started (`.ci/run` installs the tools) or hangs (with what it
/// printed).
pub fn run_bounded<S: AsRef<OsStr>>(cmd: &str, args: &[S], limit: Duration) -> (bool, String) {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("can't run {cmd} (.ci/run installs it): {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let limit = limit.max(HANG);
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait().expect("wait") {
            Some(status) => break Some(status),
            None if Instant::now() > end => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.join().unwrap_or_default()),
        String::from_utf8_lossy(&err.join().unwrap_or_default())
    );
    match status {
        Some(s) => (s.success(), text),
        None => {
            let args: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
            panic!("{cmd} {args:?} did not finish within {limit:?} (a hang):\n{text}")
        }
    }
}
