//! INCRBYFLOAT / HINCRBYFLOAT arithmetic as Redis does it, in x87 80-bit `long double`
//! (64-bit mantissa): `strtold` of both operands (correctly rounded), one addition rounded to
//! nearest-even, and the result printed with `%.17Lf` and trailing zeros removed
//! (`ld2string(.., LD_STR_HUMAN)`). Why not `f64`: Redis answers `INCRBYFLOAT` of 0.1 by 0.2
//! with `0.3` and of 5000 by 0.1 with `5000.10000000000000009`; only the 64-bit mantissa gives
//! both. Exact big-integer arithmetic below does the rounding steps the FPU and glibc do.

use std::cmp::Ordering;

/// Redis `MAX_LONG_DOUBLE_CHARS`: longer inputs are not numbers.
const MAX_CHARS: usize = 5 * 1024;
/// Exponent of the least significant mantissa bit of the smallest subnormal.
const MIN_EXP: i64 = -16445;
/// Largest exponent of the least significant mantissa bit of a finite value.
const MAX_EXP: i64 = 16320;

/// A finite `long double`: `(-1)^neg × mant × 2^exp`, `mant` < 2^64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ld {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// Unsigned big integer, little-endian 32-bit limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }
    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }
    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        self.0.get(limb).is_some_and(|l| l >> (i % 32) & 1 == 1)
    }
    /// Whether any bit below `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        self.0.iter().take(limb).any(|&l| l != 0)
            || self
                .0
                .get(limb)
                .is_some_and(|&l| !i.is_multiple_of(32) && l & ((1u32 << (i % 32)) - 1) != 0)
    }
    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }
    fn add_small(&mut self, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.0 {
            if carry == 0 {
                return;
            }
            let v = u64::from(*l) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }
    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return self.clone();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                out.push(l);
            } else {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
        }
        if carry != 0 {
            out.push(carry);
        }
        Big(out)
    }
    /// The bits from `lo` up, as a u128 (the caller knows they fit).
    fn bits_from(&self, lo: u64) -> u128 {
        let mut v = 0u128;
        let top = self.bits();
        let mut i = top;
        while i > lo {
            i -= 1;
            v = (v << 1) | u128::from(self.bit(i));
        }
        v
    }
    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
    fn sub(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = i64::from(self.0[i]) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = i64::from(v < 0);
            self.0[i] = v.rem_euclid(1 << 32) as u32;
        }
        self.trim();
    }
    fn add(&mut self, o: &Big) {
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            if i == self.0.len() {
                self.0.push(0);
            }
            let v = u64::from(self.0[i]) + u64::from(o.0.get(i).copied().unwrap_or(0)) + carry;
            self.0[i] = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }
    fn pow10(k: u64) -> Big {
        let mut b = Big::from_u64(1);
        for _ in 0..k / 9 {
            b.mul_small(1_000_000_000);
        }
        for _ in 0..k % 9 {
            b.mul_small(10);
        }
        b
    }
    /// (self / d, self % d) for a quotient of at most 127 bits.
    fn div_small_quotient(&self, d: &Big) -> (u128, Big) {
        let mut rem = self.clone();
        let mut q = 0u128;
        let qbits = self.bits().saturating_sub(d.bits()) + 1;
        for i in (0..qbits.min(127)).rev() {
            let s = d.shl(i);
            if rem.cmp(&s) != Ordering::Less {
                rem.sub(&s);
                q |= 1 << i;
            }
        }
        (q, rem)
    }
    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut limbs = self.0.clone();
        let mut parts = Vec::new();
        while !limbs.is_empty() {
            let mut rem = 0u64;
            for l in limbs.iter_mut().rev() {
                let v = (rem << 32) | u64::from(*l);
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
            parts.push(rem as u32);
        }
        let mut s = parts.last().map(|p| p.to_string()).unwrap_or_default();
        for p in parts.iter().rev().skip(1) {
            s.push_str(&format!("{p:09}"));
        }
        s
    }
}

/// Rounds `n × 2^exp` (plus a sticky bit for a non-zero remainder below it) to a
/// `long double`, nearest-even, with subnormals; `None` on overflow or when it underflows to 0.
fn round(neg: bool, n: &Big, exp: i64, sticky: bool) -> Option<Ld> {
    if n.is_zero() {
        return None;
    }
    let bits = n.bits() as i64;
    // Drop enough low bits for 64 significant ones, and more below the subnormal limit. The
    // callers pass at least 66 bits when `sticky` is set, so a remainder always lies below a
    // dropped half bit.
    let drop = (bits - 64).max(MIN_EXP - exp).max(0);
    let mut e = exp + drop;
    let mut mant: u128;
    if drop == 0 {
        mant = n.bits_from(0);
    } else {
        let d = drop as u64;
        mant = n.bits_from(d);
        let half = n.bit(d - 1);
        let rest = n.any_below(d - 1) || sticky;
        if half && (rest || mant & 1 == 1) {
            mant += 1;
            if mant >> 64 != 0 {
                mant >>= 1;
                e += 1;
            }
        }
    }
    if mant == 0 {
        return None;
    }
    // The top bit's exponent may not pass the largest finite value's (2^16383).
    if e + (128 - i64::from(mant.leading_zeros())) - 1 > MAX_EXP + 63 {
        return None;
    }
    Some(Ld {
        neg,
        mant: mant as u64,
        exp: e,
    })
}

/// A parsed operand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// A finite value.
    Finite(Ld),
    /// Zero (signed).
    Zero(bool),
    /// Infinity (signed).
    Inf(bool),
}

/// `strtold` as Redis's `string2ld` accepts it: the whole string, no leading space, decimal
/// or `inf`/`infinity`, not NaN, not out of range; hexadecimal floats as glibc reads them
/// (`0x1.8p3`: valkey-server 9.1 answers `INCRBYFLOAT k 0x10` with 16).
pub fn parse(b: &[u8]) -> Option<Operand> {
    if b.is_empty() || b.len() >= MAX_CHARS {
        return None;
    }
    let (neg, rest) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let lower = rest.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(Operand::Inf(neg));
    }
    if let Some(hex) = lower.strip_prefix(b"0x") {
        return parse_hex(neg, hex);
    }
    let (mut digits, frac, i) = mantissa(rest, 10)?;
    let mut e10 = 0i64;
    if i < rest.len() && (rest[i] == b'e' || rest[i] == b'E') {
        e10 = exponent(&rest[i + 1..])?;
    } else if i != rest.len() {
        return None;
    }
    digits.trim();
    if digits.is_zero() {
        return Some(Operand::Zero(neg));
    }
    let e10 = e10 - frac;
    if e10 > 5000 {
        return None;
    }
    if e10 < -10000 {
        return None;
    }
    let v = if e10 >= 0 {
        let mut n = digits;
        let p = Big::pow10(e10 as u64);
        let mut prod = Big(vec![0; n.0.len() + p.0.len()]);
        for (i, &a) in n.0.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in p.0.iter().enumerate() {
                let v = u64::from(prod.0[i + j]) + u64::from(a) * u64::from(b) + carry;
                prod.0[i + j] = v as u32;
                carry = v >> 32;
            }
            let mut k = i + p.0.len();
            while carry != 0 {
                let v = u64::from(prod.0[k]) + carry;
                prod.0[k] = v as u32;
                carry = v >> 32;
                k += 1;
            }
        }
        prod.trim();
        n = prod;
        round(neg, &n, 0, false)
    } else {
        let p = Big::pow10((-e10) as u64);
        // Scale so the quotient has 66 to 67 bits, then round it with the remainder sticky.
        let s = 66 + p.bits() as i64 - digits.bits() as i64;
        let (num, den) = if s >= 0 {
            (digits.shl(s as u64), p)
        } else {
            (digits, p.shl((-s) as u64))
        };
        let (q, r) = num.div_small_quotient(&den);
        let mut qb = Big((0..4).map(|i| (q >> (32 * i)) as u32).collect());
        qb.trim();
        round(neg, &qb, -s, !r.is_zero())
    };
    v.map(Operand::Finite)
}

/// Digits in `radix` (10 or 16) with at most one `.`: the integer they spell (the point left
/// out), how many of them came after the point, and where they end; `None` without a digit.
fn mantissa(s: &[u8], radix: u32) -> Option<(Big, i64, usize)> {
    let mut digits = Big(Vec::new());
    let (mut seen, mut frac, mut i, mut dot) = (false, 0i64, 0usize, false);
    while i < s.len() {
        if let Some(v) = char::from(s[i]).to_digit(radix) {
            digits.mul_small(radix);
            digits.add_small(v);
            seen = true;
            if dot {
                frac += 1;
            }
        } else if s[i] == b'.' && !dot {
            dot = true;
        } else {
            break;
        }
        i += 1;
    }
    seen.then_some((digits, frac, i))
}

/// The exponent after `e` / `p` to the end of the string: an optional sign and at least one
/// decimal digit (magnitudes past 10^6 are kept at 10^6, out of range either way).
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let e = digits
        .iter()
        .fold(0i64, |e, &d| (e * 10 + i64::from(d - b'0')).min(1_000_000));
    Some(if neg { -e } else { e })
}

/// glibc `strtold`'s hexadecimal form after `0x`: hex digits with an optional `.` and
/// fraction, then an optional binary exponent `p[+-]digits` (the whole string; at least one
/// digit). Exact but for the final rounding.
fn parse_hex(neg: bool, s: &[u8]) -> Option<Operand> {
    let (mut digits, frac, i) = mantissa(s, 16)?;
    let mut e2 = 0i64;
    if i < s.len() && s[i] == b'p' {
        e2 = exponent(&s[i + 1..])?;
    } else if i != s.len() {
        return None;
    }
    digits.trim();
    if digits.is_zero() {
        return Some(Operand::Zero(neg));
    }
    round(neg, &digits, e2 - 4 * frac, false).map(Operand::Finite)
}

/// `v` as the nearest `f64` (for a BLPOP-style timeout: Valkey reads it as a `long double`,
/// then only compares and rounds it): infinities kept, values beyond `f64` infinite.
pub fn to_f64(v: Operand) -> f64 {
    let sign = |neg: bool, x: f64| if neg { -x } else { x };
    match v {
        Operand::Zero(neg) => sign(neg, 0.0),
        Operand::Inf(neg) => sign(neg, f64::INFINITY),
        Operand::Finite(l) => {
            let e = l.exp.clamp(-2000, 2000) as i32;
            sign(l.neg, l.mant as f64 * 2f64.powi(e))
        }
    }
}

fn big_of(l: &Ld, shift: u64) -> Big {
    Big::from_u64(l.mant).shl(shift)
}

/// `a + b` in `long double`; `None` when the result is infinite or NaN (Redis: "increment
/// would produce NaN or Infinity").
pub fn add(a: Operand, b: Operand) -> Option<Operand> {
    let (a, b) = match (a, b) {
        (Operand::Inf(_), _) | (_, Operand::Inf(_)) => return None,
        (Operand::Zero(n1), Operand::Zero(n2)) => return Some(Operand::Zero(n1 && n2)),
        (Operand::Zero(_), x) | (x, Operand::Zero(_)) => return Some(x),
        (Operand::Finite(a), Operand::Finite(b)) => (a, b),
    };
    let lo = a.exp.min(b.exp);
    let mut x = big_of(&a, (a.exp - lo) as u64);
    let y = big_of(&b, (b.exp - lo) as u64);
    let neg = if a.neg == b.neg {
        x.add(&y);
        a.neg
    } else {
        match x.cmp(&y) {
            Ordering::Equal => return Some(Operand::Zero(false)),
            Ordering::Greater => {
                x.sub(&y);
                a.neg
            }
            Ordering::Less => {
                let mut y = y;
                y.sub(&x);
                x = y;
                b.neg
            }
        }
    };
    round(neg, &x, lo, false).map(Operand::Finite)
}

/// `%.17Lf` with trailing zeros (and a trailing `.`) removed, `-0` as `0`.
pub fn format(v: Operand) -> String {
    let l = match v {
        Operand::Zero(_) => return "0".into(),
        Operand::Inf(n) => return if n { "-inf".into() } else { "inf".into() },
        Operand::Finite(l) => l,
    };
    // n = mant × 10^17
    let mut n = Big(Vec::new());
    for (i, &limb) in Big::pow10(17).0.iter().enumerate() {
        let mut t = Big::from_u64(l.mant);
        t.mul_small(limb);
        n.add(&t.shl(32 * i as u64));
    }
    // scaled = round_half_even(n × 2^exp)
    let scaled = if l.exp >= 0 {
        n.shl(l.exp as u64)
    } else {
        let d = (-l.exp) as u64;
        let mut q = Big(Vec::new());
        if n.bits() > d {
            // q = n >> d
            let limbs = (d / 32) as usize;
            let bits = (d % 32) as u32;
            let mut out = Vec::new();
            for i in limbs..n.0.len() {
                let lo = n.0[i] >> bits;
                let hi = if bits == 0 {
                    0
                } else {
                    n.0.get(i + 1).map_or(0, |h| h << (32 - bits))
                };
                out.push(lo | hi);
            }
            q = Big(out);
            q.trim();
        }
        let half = n.bit(d - 1);
        let rest = n.any_below(d - 1);
        if half && (rest || q.bit(0)) {
            q.add_small(1);
        }
        q
    };
    let digits = scaled.to_decimal();
    let digits = format!("{digits:0>18}");
    let (int, frac) = digits.split_at(digits.len() - 17);
    let frac = frac.trim_end_matches('0');
    let mut s = String::new();
    if l.neg {
        s.push('-');
    }
    s.push_str(int);
    if !frac.is_empty() {
        s.push('.');
        s.push_str(frac);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// `stored + incr` as INCRBYFLOAT computes it: the text stored and replied, or the error.
///
/// # Errors
/// `ERR value is not a valid float`, `ERR increment would produce NaN or Infinity`.
pub fn incr(stored: &[u8], incr: &[u8]) -> Result<String, &'static str> {
    let a = parse(stored).ok_or(super::NOT_FLOAT)?;
    let b = parse(incr).ok_or(super::NOT_FLOAT)?;
    add(a, b)
        .map(format)
        .ok_or("ERR increment would produce NaN or Infinity")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `INCRBYFLOAT f <hex>` on a missing key, as valkey-server 9.1.2 answered.
    #[test]
    fn hexadecimal_floats_as_valkey_reads_them() {
        for (v, want) in [
            ("0x10", "16"),
            ("0x1.8p3", "12"),
            ("0x.8", "0.5"),
            ("-0x10p-4", "-1"),
            ("0X1P+2", "4"),
            ("0x1p-1074", "0"),
        ] {
            assert_eq!(incr(b"0", v.as_bytes()).unwrap(), want, "{v}");
        }
        for bad in ["0x", "0x1p", "0xg", "0x1.p", "0x1q"] {
            assert!(incr(b"0", bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn matches_redis_7_0() {
        // Captured from redis-server 7.0.15 (x86-64).
        assert_eq!(incr(b"5000", b"0.1").unwrap(), "5000.10000000000000009");
        assert_eq!(incr(b"0.1", b"0.2").unwrap(), "0.3");
        assert_eq!(
            incr(b"3", b"1.123456789012345678").unwrap(),
            "4.12345678901234568"
        );
        assert_eq!(
            incr(b"4.12345678901234568", b"100000000000000").unwrap(),
            "100000000000004.1234588623046875"
        );
        assert_eq!(incr(b"1.5e10", b"0").unwrap(), "15000000000");
        assert_eq!(incr(b"10.5", b"0.1").unwrap(), "10.6");
        assert_eq!(incr(b"1", b"-1").unwrap(), "0");
        assert_eq!(incr(b"-0.1", b"0.1").unwrap(), "0");
        assert_eq!(
            incr(b"1e300", b"1e300").unwrap(),
            "2000000000000000000017994648159118387741047888546581495876520164642531293192361871511698304167500994380700745017228549671807185112369345967826192521041497292574654271283687306588168510215212033579453305864740061102765895241989080589545563779241212358535223254194821301134374772211380178849830208012288"
        );
        assert_eq!(incr(b"0", b"1.5").unwrap(), "1.5");
        assert_eq!(incr(b"1.5", b"0.1").unwrap(), "1.6");
        assert_eq!(incr(b"abc", b"1"), Err(crate::cmd::NOT_FLOAT));
        assert_eq!(incr(b"1", b" 1"), Err(crate::cmd::NOT_FLOAT));
        assert_eq!(incr(b"1", b"nan"), Err(crate::cmd::NOT_FLOAT));
        assert_eq!(
            incr(b"inf", b"1"),
            Err("ERR increment would produce NaN or Infinity")
        );
    }
}
