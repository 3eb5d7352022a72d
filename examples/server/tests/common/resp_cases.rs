//! Reading `tests/vectors/resp-cases.json` (made by `tests/vectors/capture_resp.py`): a case
//! sends parts `{"text": s}` (the string's code points 0-255 as bytes) or `{"repeat": s,
//! "times": n}`, and replies are strings of code points 0-255 too. Used by the parser's unit
//! tests (src/resp.rs) and by `tests/resp_vectors.rs`.
#![allow(dead_code)]

/// The bytes of a capture string (code points 0-255).
pub fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

/// The bytes of a list of parts (`null` is empty).
pub fn parts(v: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::new();
    for p in v.as_array().into_iter().flatten() {
        if let Some(t) = p["text"].as_str() {
            out.extend(latin1(t));
        } else {
            let r = latin1(p["repeat"].as_str().unwrap_or_default());
            for _ in 0..p["times"].as_u64().unwrap_or_default() {
                out.extend_from_slice(&r);
            }
        }
    }
    out
}
