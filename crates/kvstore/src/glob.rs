//! Glob-style pattern matching with the semantics of Redis/Valkey `stringmatchlen`
//! (`src/util.c`), case-sensitive, as KEYS and SCAN MATCH use it.

/// Recursion bound for `*`: deeper patterns do not match. Redis 7.0.10+ (CVE-2022-36021 fix)
/// stops at a nesting of 1000, which keeps `*?*?*?...` patterns from exhausting the stack.
const MAX_NESTING: u32 = 1000;

/// Whether `key` matches the glob `pattern`, exactly as Redis/Valkey `stringmatchlen(pattern,
/// key, nocase = 0)` decides (the KEYS and SCAN MATCH matcher).
///
/// Syntax:
/// * `*` any run of bytes (also empty), `?` one byte;
/// * `[abc]` one of the listed bytes, `[^abc]` any byte not listed, `[a-z]` a range (reversed
///   bounds are swapped; like the C code on x86, bounds and the byte compare as *signed* chars);
///   `\x` inside brackets is the literal `x`; a bracket without `]` ends at the pattern's end;
/// * `\x` outside brackets is the literal `x` (a trailing lone `\` matches a `\`);
/// * every other byte matches itself.
///
/// Quirks kept on purpose: the empty key never matches a non-empty pattern, not even `*`
/// (KEYS and SCAN treat the pattern `*` as "no pattern" before calling the matcher; see
/// [`crate::KvStore::scan`]); patterns that need more than 1000 nested `*` levels do not match.
///
/// ```
/// use ferrocluster_kvstore::glob_match;
/// assert!(glob_match(b"h?llo", b"hello"));
/// assert!(glob_match(b"h[^e]llo", b"hallo"));
/// assert!(!glob_match(b"h[^e]llo", b"hello"));
/// assert!(glob_match(b"h\\*llo", b"h*llo"));
/// ```
pub fn glob_match(pattern: &[u8], key: &[u8]) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, key, &mut skip_longer, 0)
}

fn match_impl(mut p: &[u8], mut s: &[u8], skip_longer: &mut bool, nesting: u32) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() >= 2 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_impl(&p[1..], s, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                // No match for the rest of the pattern anywhere in the rest of the key: a
                // longer match for an earlier `*` cannot help either.
                *skip_longer = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p = &p[1..];
                let negate = p.first() == Some(&b'^');
                if negate {
                    p = &p[1..];
                }
                let c = s[0];
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == c {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut lo, mut hi) = (signed(p[0]), signed(p[2]));
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        p = &p[2..];
                        let sc = signed(c);
                        if sc >= lo && sc <= hi {
                            matched = true;
                        }
                    } else if p[0] == c {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if negate {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // Unterminated bracket: the C code steps back onto the last byte and the
                    // common advance below consumes it, so nothing of the pattern is left.
                    return s.is_empty();
                }
            }
            b'\\' => {
                if p.len() >= 2 {
                    p = &p[1..];
                }
                if p[0] != s[0] {
                    return false;
                }
                s = &s[1..];
            }
            other => {
                if other != s[0] {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// A byte as the C code's (signed, on x86) `char`.
fn signed(b: u8) -> i8 {
    b as i8
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes())
    }

    // Examples from the KEYS command documentation (redis.io / valkey.io "KEYS").
    #[test]
    fn keys_doc_examples() {
        for s in ["hello", "hallo", "hxllo"] {
            assert!(m("h?llo", s), "{s}");
        }
        for s in ["hllo", "heeeello"] {
            assert!(m("h*llo", s), "{s}");
        }
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(m("h[^e]llo", "hbllo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hallo"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
    }

    // tests/unit/keyspace.tcl "KEYS with pattern" and "KEYS with hashtag".
    #[test]
    fn keyspace_tcl_patterns() {
        let keys = ["key_x", "key_y", "key_z", "foo_a", "foo_b", "foo_c"];
        let got: Vec<_> = keys.iter().filter(|k| m("foo*", k)).collect();
        assert_eq!(got, [&"foo_a", &"foo_b", &"foo_c"]);
        let keys = ["{a}x", "{a}y", "{a}z", "{b}a", "{b}b", "{b}c"];
        let got: Vec<_> = keys.iter().filter(|k| m("{a}*", k)).collect();
        assert_eq!(got, [&"{a}x", &"{a}y", &"{a}z"]);
        let got: Vec<_> = keys.iter().filter(|k| m("*{b}*", k)).collect();
        assert_eq!(got, [&"{b}a", &"{b}b", &"{b}c"]);
    }

    // tests/unit/keyspace.tcl "Regression for pattern matching long nested loops" and
    // "... very long nested loops": both KEYS calls reply with an empty array.
    #[test]
    fn long_nested_loops_do_not_match() {
        let key = "a".repeat(110);
        let pat = format!("{}b", "a*".repeat(40));
        assert!(!m(&pat, &key));
        let key = "a".repeat(50_000);
        let pat = "*?".repeat(50_000);
        assert!(!m(&pat, &key));
    }

    #[test]
    fn star_rules() {
        assert!(m("*", "anything"));
        assert!(!m("*", ""), "stringmatchlen never matches an empty string");
        assert!(!m("", "a"));
        assert!(m("", ""));
        assert!(m("a*", "a"), "trailing stars match the empty rest");
        assert!(m("a**", "a"));
        assert!(m("*a*", "bab"));
        assert!(!m("*a*", "bbb"));
        assert!(m("**b", "aab"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXcYYb"));
    }

    #[test]
    fn question_mark_needs_one_byte() {
        assert!(!m("a?", "a"));
        assert!(m("a?", "ab"));
        assert!(!m("a?", "abc"));
    }

    #[test]
    fn brackets() {
        assert!(m("[a-c]", "b"));
        assert!(m("[c-a]", "b"), "reversed range bounds are swapped");
        assert!(!m("[a-c]", "d"));
        assert!(m("[^a-c]", "d"));
        assert!(m("[a\\]]", "]"), "escaped ] inside brackets");
        assert!(m("[\\-]", "-"));
        // `a-]` is read as the range a..] (swapped to ]..a), leaving the bracket unterminated:
        // the C code's reading, kept.
        assert!(m("[a-]", "_"));
        assert!(!m("[a-]", "-"));
        assert!(m("[a-c-]", "-"), "a - after a range is a literal");
        assert!(m("[-a]", "-"), "a leading - is a literal");
        assert!(!m("[]", "]"), "[] is an empty set");
        assert!(!m("[]", "a"));
        // Unterminated bracket: the set runs to the end of the pattern.
        assert!(m("[abc", "b"));
        assert!(!m("[abc", "bx"));
        assert!(!m("[abc", "d"));
        // Ranges compare as signed chars (x86 C): 0x80..0xff sort below ASCII.
        assert!(glob_match(b"[\x80-a]", b"5"));
        assert!(glob_match(b"[\x80-a]", b"\xff"));
        assert!(!glob_match(b"[a-\xff]", b"b"));
    }

    #[test]
    fn escapes() {
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("\\?x", "?x"));
        assert!(
            m("a\\", "a\\"),
            "a trailing lone backslash is a literal backslash"
        );
        assert!(m("\\[a]", "[a]"));
        assert!(!m("\\[a]", "a"));
    }

    #[test]
    fn binary_bytes() {
        assert!(glob_match(b"\x00*\xff", b"\x00abc\xff"));
        assert!(!glob_match(b"\x00?", b"\x00"));
    }
}
