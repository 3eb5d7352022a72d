//! Log lines in redis-server's format (Redis 7.0 `serverLogRaw`, src/server.c):
//!
//! ```text
//! <pid>:<role> <dd Mon yyyy hh:mm:ss.mmm> <level> <message> [field=value ...]
//! ```
//!
//! `role` is `M` for a primary and `S` for a replica (`C` for a child and `X` for Sentinel do
//! not occur here); `level` is `#` warning (and error), `*` notice (tracing's INFO), `-` verbose
//! (DEBUG) and `.` debug (TRACE). The time is UTC: redis-server prints local time, which a
//! server without a time-zone database cannot know; machines that run clusters are usually set
//! to UTC anyway.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

static ROLE: AtomicU8 = AtomicU8::new(b'M');

/// Records the server's role for the lines that follow: `true` for a replica.
pub fn set_replica(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, Ordering::Relaxed);
}

/// The tracing-subscriber event format of redis-server's lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedisLines;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The civil date (year, month 1-12, day 1-31) of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `dd Mon yyyy hh:mm:ss.mmm` of a unix time in ms (UTC).
pub fn timestamp(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{d:02} {} {y} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(m - 1) as usize],
        s / 3600,
        s % 3600 / 60,
        s % 60,
        unix_ms % 1000
    )
}

fn level_char(level: &Level) -> char {
    match *level {
        Level::ERROR | Level::WARN => '#',
        Level::INFO => '*',
        Level::DEBUG => '-',
        Level::TRACE => '.',
    }
}

impl<S, N> FormatEvent<S, N> for RedisLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(
            writer,
            "{}:{} {} {} ",
            std::process::id(),
            ROLE.load(Ordering::Relaxed) as char,
            timestamp(crate::server::unix_ms()),
            level_char(event.metadata().level())
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_redis_day_month_year_and_milliseconds() {
        // 2026-12-02 03:21:22.664 UTC
        assert_eq!(timestamp(1_796_181_682_664), "02 Dec 2026 03:21:22.664");
        assert_eq!(timestamp(0), "01 Jan 1970 00:00:00.000");
        // A leap day.
        assert_eq!(timestamp(951_782_400_000), "29 Feb 2000 00:00:00.000");
    }
}
