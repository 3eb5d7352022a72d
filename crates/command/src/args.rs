//! Argument helpers with the exact semantics of the real servers' parsers.

/// Parses a signed 64-bit integer exactly as Valkey's `string2ll` (used by
/// `getLongLongFromObject`): an optional `-`, then digits without a leading zero (the single
/// digit `0` is allowed), no sign `+`, no spaces, at most 20 bytes, no overflow.
///
/// Returns `None` for anything else (the callers turn that into their error text).
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    if arg.is_empty() || arg.len() > 20 {
        return None;
    }
    if arg == b"0" {
        return Some(0);
    }
    let (negative, digits) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, arg),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            None
        } else {
            // value <= 2^63, so the wrapping negation is exact (i64::MIN for 2^63).
            Some((value as i64).wrapping_neg())
        }
    } else {
        i64::try_from(value).ok()
    }
}

/// C `atoi` as Valkey's `genericGetKeys` uses it for EVAL's `numkeys`: leading whitespace is
/// skipped, an optional sign, then as many digits as follow; anything else stops the scan.
/// Saturates instead of overflowing (C leaves overflow undefined; any huge value is rejected by
/// the caller's range check either way).
pub fn atoi(arg: &[u8]) -> i64 {
    let mut i = 0;
    while i < arg.len() && matches!(arg[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut negative = false;
    if i < arg.len() && (arg[i] == b'-' || arg[i] == b'+') {
        negative = arg[i] == b'-';
        i += 1;
    }
    let mut value: i64 = 0;
    while i < arg.len() && arg[i].is_ascii_digit() {
        value = value
            .saturating_mul(10)
            .saturating_add(i64::from(arg[i] - b'0'));
        i += 1;
    }
    if negative {
        -value
    } else {
        value
    }
}

/// ASCII case-insensitive comparison (`strcasecmp` on the argument).
pub fn eq_ignore_case(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// The bytes a C `%s` prints for an argument: everything before the first NUL byte.
pub(crate) fn c_str(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(n) => &arg[..n],
        None => arg,
    }
}

/// The bytes a C `%.Ns` prints: [`c_str`] cut to at most `max` bytes.
pub(crate) fn c_str_max(arg: &[u8], max: usize) -> &[u8] {
    let s = c_str(arg);
    &s[..s.len().min(max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"16384"), Some(16384));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"notaport",
            b"9223372036854775808",
            b"-9223372036854775809",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn atoi_rules() {
        assert_eq!(atoi(b"2"), 2);
        assert_eq!(atoi(b"  2abc"), 2);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b""), 0);
    }

    #[test]
    fn c_strings_stop_at_nul() {
        assert_eq!(c_str(b"ab\0cd"), b"ab");
        assert_eq!(c_str_max(b"abcdef", 3), b"abc");
    }
}
