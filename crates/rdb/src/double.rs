//! Score text in listpacks and the old `ZSET` form, as Valkey writes it (`d2string`):
//! integral values in ±`LLONG_MAX/2` as integers (`double2ll`, `ll2string`), others with the
//! shortest digits that read back to the same double, laid out as `fpconv_dtoa` does
//! (plain up to 7 leading or trailing zeros, else `d.ddde±XX`).
//!
//! Redis 7.0 writes non-integral scores with `%.17g` (`0.1` is `0.10000000000000001`);
//! both read either text back to the same double, so only the bytes differ. We follow
//! Valkey.

/// The text Valkey's `d2string` gives a finite `v` (callers handle NaN and infinities).
pub fn format_double(v: f64) -> String {
    const HALF: f64 = (i64::MAX / 2) as f64;
    if (-HALF..=HALF).contains(&v) {
        let ll = v as i64;
        if ll as f64 == v {
            return ll.to_string();
        }
    }
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    // Shortest round-trip digits and decimal exponent from Rust's `{:e}` ("d.ddde-X").
    let sci = format!("{:e}", v.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let ndigits = digits.len() as i32;
    // fpconv: value = digits * 10^k.
    let k = exp - (ndigits - 1);
    let neg = v < 0.0;
    let mut out = String::with_capacity(26);
    if neg {
        out.push('-');
    }
    let e = (k + ndigits - 1).abs();
    if k >= 0 && e < ndigits + 7 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', k as usize));
        return out;
    }
    if k < 0 && (k > -7 || e < 4) {
        let offset = ndigits - k.abs();
        if offset <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-offset) as usize));
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..offset as usize]);
            out.push('.');
            out.push_str(&digits[offset as usize..]);
        }
        return out;
    }
    let nd = ndigits.min(18 - i32::from(neg)) as usize;
    out.push_str(&digits[..1]);
    if nd > 1 {
        out.push('.');
        out.push_str(&digits[1..nd]);
    }
    out.push('e');
    out.push(if k + ndigits - 1 < 0 { '-' } else { '+' });
    let mut e = e;
    let mut cent = 0;
    if e > 99 {
        cent = e / 100;
        out.push(char::from(b'0' + cent as u8));
        e -= cent * 100;
    }
    if e > 9 {
        let dec = e / 10;
        out.push(char::from(b'0' + dec as u8));
        e -= dec * 10;
    } else if cent > 0 {
        out.push('0');
    }
    out.push(char::from(b'0' + (e % 10) as u8));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integral_and_short_forms() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(-3.0), "-3");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(-0.25), "-0.25");
        assert_eq!(format_double(123.456), "123.456");
    }

    proptest! {
        #[test]
        fn text_reads_back_to_the_same_double(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            let t = format_double(v);
            let back: f64 = t.parse().unwrap();
            prop_assert_eq!(back, v, "{}", t);
        }
    }
}
