//! Seeds: where a run's seed comes from and how a failing one is replayed.

/// Environment variable that fixes the seed of a simulator test (replay).
pub const SEED_ENV: &str = "FERROCLUSTER_SIM_SEED";
/// Environment variable that sets how many seeds the random-fault test runs.
pub const SEEDS_ENV: &str = "FERROCLUSTER_SIM_SEEDS";

/// The seed fixed through [`SEED_ENV`], if set and a valid decimal or `0x` hex `u64`.
pub fn seed_from_env() -> Option<u64> {
    std::env::var(SEED_ENV).ok().and_then(|v| parse_seed(&v))
}

/// Parses a decimal or `0x`-prefixed hexadecimal seed.
pub fn parse_seed(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// Environment variable that sets how many seeds the random failover test runs.
pub const FAILOVER_SEEDS_ENV: &str = "FERROCLUSTER_SIM_FAILOVER_SEEDS";

/// Environment variable that sets the first seed of the random tests' seed ranges (default
/// 0), so a long run can go in chunks: `FERROCLUSTER_SIM_FIRST_SEED=5000
/// FERROCLUSTER_SIM_SEEDS=1000` runs seeds 5000..6000.
pub const FIRST_SEED_ENV: &str = "FERROCLUSTER_SIM_FIRST_SEED";

/// `first..first + count` with `first` from [`FIRST_SEED_ENV`] (0 if unset or invalid).
pub fn seed_range(count: u64) -> std::ops::Range<u64> {
    let first = std::env::var(FIRST_SEED_ENV)
        .ok()
        .and_then(|v| parse_seed(&v))
        .unwrap_or(0);
    first..first.saturating_add(count)
}

/// How many seeds to run: the variable `env` if set and valid, else `default`.
pub fn seed_count_from(env: &str, default: u64) -> u64 {
    std::env::var(env)
        .ok()
        .and_then(|v| parse_seed(&v))
        .unwrap_or(default)
}

/// The seeds a test should run: the one from [`SEED_ENV`] if set, else `default`.
pub fn seeds_or(default: impl IntoIterator<Item = u64>) -> Vec<u64> {
    match seed_from_env() {
        Some(s) => vec![s],
        None => default.into_iter().collect(),
    }
}

/// How many seeds to run: [`SEEDS_ENV`] if set and valid, else `default`.
pub fn seed_count_or(default: u64) -> u64 {
    seed_count_from(SEEDS_ENV, default)
}

/// The command line that replays `seed` for `test` in package `ferrocluster-sim`.
pub fn replay_hint(seed: u64, test: &str) -> String {
    format!("{SEED_ENV}={seed} cargo test -p ferrocluster-sim {test} -- --nocapture")
}

/// Runs `f` for every seed of [`seeds_or`]`(seeds)` and panics on the first failure with the
/// seed, the error and the command that replays it. This is the harness of the simulator's
/// tests; the panic is its purpose.
///
/// # Panics
/// When `f` fails for a seed.
pub fn check_seeds<E: std::fmt::Display>(
    test: &str,
    seeds: impl IntoIterator<Item = u64>,
    mut f: impl FnMut(u64) -> Result<(), E>,
) {
    for seed in seeds_or(seeds) {
        if let Err(e) = f(seed) {
            panic!(
                "{test} failed with seed {seed}: {e}\nreplay with: {}",
                replay_hint(seed, test)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("1234"), Some(1234));
        assert_eq!(parse_seed(" 0x10 "), Some(16));
        assert_eq!(parse_seed("nope"), None);
        assert_eq!(
            replay_hint(7, "chain"),
            "FERROCLUSTER_SIM_SEED=7 cargo test -p ferrocluster-sim chain -- --nocapture"
        );
    }
}
