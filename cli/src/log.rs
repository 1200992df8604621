//! Caffe's log lines, as glog writes them to standard error
//! (`I1128 11:40:00.123456 4242 solver] Iteration 100, loss = 0.2`), so
//! that the parsers users keep for `caffe train` logs
//! (`tools/extra/parse_log.py` among them) read blobflow's; and, on a
//! terminal, a progress line kept below them.

use std::io::{IsTerminal, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A number as C++'s `ostream` prints a `float` by default (`%g`, six
/// significant digits): what Caffe's log lines hold.
pub fn g6(x: f64) -> String {
    blobflow::proto::format_g(x, 6)
}

/// Writes log lines and the progress line, both on standard error.
pub struct Log {
    source: &'static str,
    progress: Option<Progress>,
}

struct Progress {
    start: Instant,
    first: usize,
    last: usize,
    shown: bool,
}

impl Log {
    /// Lines from `source` (glog's file name: `solver`, `caffe`), with a
    /// progress line towards iteration `last` where standard error is a
    /// terminal.
    pub fn new(source: &'static str, progress_to: Option<(usize, usize)>) -> Self {
        let progress =
            progress_to
                .filter(|_| std::io::stderr().is_terminal())
                .map(|(first, last)| Progress {
                    start: Instant::now(),
                    first,
                    last,
                    shown: false,
                });
        Self { source, progress }
    }

    /// One `I...` line.
    pub fn info(&mut self, message: &str) {
        let mut err = std::io::stderr().lock();
        if let Some(p) = &mut self.progress
            && p.shown
        {
            // Clear the progress line; the next iteration draws it again.
            let _ = write!(err, "\r\x1b[K");
            p.shown = false;
        }
        let _ = writeln!(err, "{} {}] {message}", glog_prefix(), self.source);
    }

    /// Redraws the progress line at iteration `iter` (on a terminal).
    pub fn progress(&mut self, iter: usize) {
        let Some(p) = &mut self.progress else {
            return;
        };
        let done = iter.saturating_sub(p.first);
        let total = p.last.saturating_sub(p.first).max(1);
        let secs = p.start.elapsed().as_secs_f64();
        let rate = done as f64 / secs.max(1e-9);
        let left = if rate > 0.0 {
            (total.saturating_sub(done)) as f64 / rate
        } else {
            0.0
        };
        let width = 30;
        let filled = (width * done.min(total)) / total;
        let _ = write!(
            std::io::stderr().lock(),
            "\r\x1b[K[{}{}] iteration {iter}/{}  {rate:.1} iter/s  {}:{:02} left",
            "=".repeat(filled),
            " ".repeat(width - filled),
            p.last,
            (left / 60.0) as u64,
            (left % 60.0) as u64
        );
        p.shown = true;
    }
}

/// glog's prefix: severity, month and day, time to the microsecond
/// (UTC), thread id (the process id here).
fn glog_prefix() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (_, month, day) = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    format!(
        "I{month:02}{day:02} {:02}:{:02}:{:02}.{:06} {}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        now.subsec_micros(),
        std::process::id()
    )
}

/// The (year, month, day) of a count of days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_cpp_streams_print_floats() {
        for (x, want) in [
            (0.0105728, "0.0105728"),
            (2.30261, "2.30261"),
            (0.00998532, "0.00998532"),
            (1.0, "1"),
            (0.9775, "0.9775"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (-0.5, "-0.5"),
            (0.01, "0.01"),
            (0.00594604, "0.00594604"),
        ] {
            assert_eq!(g6(x), want, "{x}");
        }
    }

    #[test]
    fn days_count_to_calendar_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_785), (2026, 11, 28));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
