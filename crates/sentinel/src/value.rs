//! Protocol-neutral reply values.

/// One reply value as the host decoded it from the wire.
///
/// The crate never sees RESP bytes: the host decodes RESP2 or RESP3 and converts each
/// frame into a `Value`. A RESP3 push frame (pub/sub message) SHOULD be converted to
/// [`Value::Array`]; RESP3 doubles, big numbers and verbatim strings MAY be converted to
/// [`Value::Bulk`] holding their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// The null reply (RESP2 null bulk string or null array, RESP3 `_`).
    Nil,
    /// An integer reply.
    Int(i64),
    /// A bulk string (binary safe).
    Bulk(Vec<u8>),
    /// A simple status string such as `OK`.
    Simple(String),
    /// An error reply, e.g. `ERR No such master with that name`.
    Error(String),
    /// An array reply (RESP2 `*`, RESP3 `*` and `>` push).
    Array(Vec<Value>),
    /// A RESP3 map, as key/value pairs in wire order.
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// A bulk string value from text; handy for hosts and tests.
    pub fn bulk(s: impl AsRef<[u8]>) -> Value {
        Value::Bulk(s.as_ref().to_vec())
    }

    /// The text of a bulk or simple string (lossy UTF-8), or the decimal text of an
    /// integer; `None` for every other variant.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Simple(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            _ => None,
        }
    }

    /// The key/value pairs of a map, accepting both shapes Sentinel uses: a RESP3 map, or
    /// (RESP2) a flat array `[k1, v1, k2, v2, ...]`. Keys and values that are not text are
    /// skipped; an odd trailing element is ignored. `None` if the value is neither shape.
    pub fn as_pairs(&self) -> Option<Vec<(String, String)>> {
        match self {
            Value::Map(pairs) => Some(
                pairs
                    .iter()
                    .filter_map(|(k, v)| Some((k.as_text()?, v.as_text()?)))
                    .collect(),
            ),
            Value::Array(items) => Some(
                items
                    .chunks_exact(2)
                    .filter_map(|kv| Some((kv[0].as_text()?, kv[1].as_text()?)))
                    .collect(),
            ),
            _ => None,
        }
    }
}
