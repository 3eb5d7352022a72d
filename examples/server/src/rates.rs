//! INFO's `instantaneous_*` figures (Redis 7.0 `trackInstantaneousMetric` /
//! `getInstantaneousMetric`, src/server.c): every 100 ms the timer thread takes a reading of
//! each counter; a figure is the mean of the last 16 per-second rates.

/// Samples kept per figure (Redis `STATS_METRIC_SAMPLES`).
const SAMPLES: usize = 16;

/// One counter's recent rates.
#[derive(Debug, Clone, Default)]
struct Metric {
    last_ms: u64,
    last_count: u64,
    samples: [u64; SAMPLES],
    idx: usize,
}

impl Metric {
    fn track(&mut self, now_ms: u64, count: u64) {
        if self.last_ms != 0 {
            let dt = now_ms.saturating_sub(self.last_ms);
            let d = count.saturating_sub(self.last_count);
            self.samples[self.idx] = (d * 1000).checked_div(dt).unwrap_or(0);
            self.idx = (self.idx + 1) % SAMPLES;
        }
        self.last_ms = now_ms;
        self.last_count = count;
    }

    fn value(&self) -> u64 {
        self.samples.iter().sum::<u64>() / SAMPLES as u64
    }
}

/// The instantaneous figures: commands, input bytes and output bytes per second.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    ops: Metric,
    net_in: Metric,
    net_out: Metric,
}

impl Rates {
    /// Takes one reading of the counters (totals since start or RESETSTAT) at `now_ms`.
    pub fn sample(&mut self, now_ms: u64, commands: u64, net_in: u64, net_out: u64) {
        self.ops.track(now_ms, commands);
        self.net_in.track(now_ms, net_in);
        self.net_out.track(now_ms, net_out);
    }

    /// INFO `stats` lines `instantaneous_ops_per_sec`, `instantaneous_input_kbps`,
    /// `instantaneous_output_kbps` (kbps as Redis: KiB per second, two decimals).
    pub fn info_lines(&self) -> String {
        format!(
            "instantaneous_ops_per_sec:{}\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\n",
            self.ops.value(),
            self.net_in.value() as f64 / 1024.0,
            self.net_out.value() as f64 / 1024.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_rate_shows_once_sixteen_samples_hold_it() {
        let mut r = Rates::default();
        let mut t = 1_000;
        r.sample(t, 0, 0, 0);
        for i in 1..=16u64 {
            t += 100;
            // 500 commands and 10 KiB in per 100 ms: 5000/s and 100 KiB/s.
            r.sample(t, i * 500, i * 10_240, 0);
        }
        assert_eq!(
            r.info_lines(),
            "instantaneous_ops_per_sec:5000\r\ninstantaneous_input_kbps:100.00\r\ninstantaneous_output_kbps:0.00\r\n"
        );
        // Half the samples idle: half the rate.
        for _ in 0..8 {
            t += 100;
            r.sample(t, 8000, 163_840, 0);
        }
        assert!(r
            .info_lines()
            .starts_with("instantaneous_ops_per_sec:2500\r\n"));
    }
}
