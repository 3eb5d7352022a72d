//! Decoding one object (Valkey `rdbLoadObject`), resumable between elements: a streaming
//! caller feeds more bytes and calls [`ObjectReader::step`] again, and no element is parsed
//! twice except the one that was cut off.

use crate::error::DecodeErrorKind;
use crate::listpack::{self, LpValue};
use crate::object::RdbObject;
use crate::read::{parse_double, Fail, Input, PResult};
use crate::types::RdbType;
use crate::{intset, ziplist, zipmap};

/// Quicklist node containers (`QUICKLIST_NODE_CONTAINER_*`).
pub(crate) const CONTAINER_PLAIN: u64 = 1;
pub(crate) const CONTAINER_PACKED: u64 = 2;

#[derive(Debug)]
enum Acc {
    Single,
    Items(Vec<Vec<u8>>),
    Scored(Vec<(Vec<u8>, f64)>),
    Pairs(Vec<(Vec<u8>, Vec<u8>)>),
    Triples(Vec<(Vec<u8>, Vec<u8>, Option<i64>)>),
}

/// Reads one object of a known type, element by element.
#[derive(Debug)]
pub(crate) struct ObjectReader {
    t: RdbType,
    /// Elements (or quicklist nodes) still to read; `None` before the count.
    remaining: Option<u64>,
    acc: Acc,
}

fn is_counted(t: RdbType) -> bool {
    matches!(
        t,
        RdbType::List
            | RdbType::Set
            | RdbType::ZSet
            | RdbType::ZSet2
            | RdbType::Hash
            | RdbType::Hash2
            | RdbType::ListQuicklist
            | RdbType::ListQuicklist2
    )
}

fn bad<T>(at: usize, kind: DecodeErrorKind) -> PResult<T> {
    Err(Fail::Invalid { at, kind })
}

/// Whether any two of `items` are equal (sorting references; no hashing).
fn has_duplicates<'a>(items: impl Iterator<Item = &'a [u8]>) -> bool {
    let mut v: Vec<&[u8]> = items.collect();
    if v.len() < 2 {
        return false;
    }
    v.sort_unstable();
    v.windows(2).any(|w| w[0] == w[1])
}

fn lp_score(v: LpValue<'_>) -> Result<f64, DecodeErrorKind> {
    let s = match v {
        LpValue::Int(i) => i as f64,
        LpValue::Str(s) => parse_double(s).ok_or(DecodeErrorKind::BadDouble)?,
    };
    if s.is_nan() {
        return Err(DecodeErrorKind::NanScore);
    }
    Ok(s)
}

impl ObjectReader {
    /// A reader for type `t`.
    ///
    /// # Errors
    /// [`DecodeErrorKind::UnsupportedType`] for streams, modules, path hashes and unknown
    /// type bytes.
    pub fn new(t: RdbType) -> Result<ObjectReader, DecodeErrorKind> {
        let acc = match t {
            RdbType::String
            | RdbType::HashZipmap
            | RdbType::ListZiplist
            | RdbType::SetIntset
            | RdbType::ZSetZiplist
            | RdbType::HashZiplist
            | RdbType::HashListpack
            | RdbType::ZSetListpack
            | RdbType::SetListpack => Acc::Single,
            RdbType::List | RdbType::Set | RdbType::ListQuicklist | RdbType::ListQuicklist2 => {
                Acc::Items(Vec::new())
            }
            RdbType::ZSet | RdbType::ZSet2 => Acc::Scored(Vec::new()),
            RdbType::Hash => Acc::Pairs(Vec::new()),
            RdbType::Hash2 => Acc::Triples(Vec::new()),
            other => return Err(DecodeErrorKind::UnsupportedType(other)),
        };
        Ok(ObjectReader {
            t,
            remaining: None,
            acc,
        })
    }

    /// The type being read.
    pub fn rdb_type(&self) -> RdbType {
        self.t
    }

    /// Reads as many elements as `inp` holds. Returns the object once complete; on
    /// [`Fail::Incomplete`] `inp.pos` stays after the last complete element, and the next call
    /// (with more bytes after it) goes on from there. `Ok(None)`: an empty collection, its
    /// bytes consumed (servers skip such keys in files and refuse them in RESTORE).
    pub fn step(&mut self, inp: &mut Input<'_>) -> PResult<Option<RdbObject>> {
        if !is_counted(self.t) {
            let mut t = *inp;
            let obj = self.single(&mut t)?;
            *inp = t;
            return Ok(obj);
        }
        let mut remaining = match self.remaining {
            Some(n) => n,
            None => {
                let mut t = *inp;
                let n = t.count()?;
                *inp = t;
                if n == 0 {
                    return Ok(None);
                }
                let cap = n.min(inp.remaining() as u64 + 1).min(1 << 16) as usize;
                match &mut self.acc {
                    Acc::Items(v) => v.reserve(cap),
                    Acc::Scored(v) => v.reserve(cap),
                    Acc::Pairs(v) => v.reserve(cap),
                    Acc::Triples(v) => v.reserve(cap),
                    Acc::Single => {}
                }
                self.remaining = Some(n);
                n
            }
        };
        while remaining > 0 {
            let mut t = *inp;
            let at = t.pos;
            let r = self.element(&mut t, at);
            if let Err(e) = r {
                self.remaining = Some(remaining);
                return Err(e);
            }
            *inp = t;
            remaining -= 1;
        }
        self.remaining = Some(0);
        // Errors found once every element is in (duplicates) point at the object's end: the
        // same offset however the input was split.
        self.finish(inp.pos)
    }

    fn element(&mut self, t: &mut Input<'_>, at: usize) -> PResult<()> {
        match (&mut self.acc, self.t) {
            (Acc::Items(v), RdbType::List | RdbType::Set) => v.push(t.string()?),
            (Acc::Items(v), RdbType::ListQuicklist) => {
                let node = t.string_cow()?;
                let entries = ziplist::entries(&node).or_else(|k| bad(at, k))?;
                v.extend(entries.into_iter().map(LpValue::to_vec));
            }
            (Acc::Items(v), _) => {
                let container = t.plain_len()?;
                if container != CONTAINER_PLAIN && container != CONTAINER_PACKED {
                    return bad(at, DecodeErrorKind::BadContainer(container));
                }
                let node = t.string_cow()?;
                if node.is_empty() {
                    return bad(at, DecodeErrorKind::EmptyNode);
                }
                if container == CONTAINER_PLAIN {
                    v.push(node.into_owned());
                } else {
                    listpack::for_each(&node, |e| {
                        v.push(e.to_vec());
                        Ok(())
                    })
                    .or_else(|k| bad(at, k))?;
                }
            }
            (Acc::Scored(v), t_) => {
                let m = t.string()?;
                let s = if t_ == RdbType::ZSet2 {
                    t.double_bin()?
                } else {
                    t.double_text()?
                };
                if s.is_nan() {
                    return bad(at, DecodeErrorKind::NanScore);
                }
                v.push((m, s));
            }
            (Acc::Pairs(v), _) => {
                let f = t.string()?;
                let x = t.string()?;
                v.push((f, x));
            }
            (Acc::Triples(v), _) => {
                let f = t.string()?;
                let x = t.string()?;
                let e = t.i64_le()?;
                if e < -1 {
                    return bad(at, DecodeErrorKind::BadFieldExpiry(e));
                }
                v.push((f, x, (e != -1).then_some(e)));
            }
            (Acc::Single, _) => {}
        }
        Ok(())
    }

    fn finish(&mut self, at: usize) -> PResult<Option<RdbObject>> {
        let acc = std::mem::replace(&mut self.acc, Acc::Single);
        let obj = match (acc, self.t) {
            (Acc::Items(v), RdbType::Set) => {
                if has_duplicates(v.iter().map(|x| x.as_slice())) {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::Set(v)
            }
            (Acc::Items(v), _) => {
                if v.is_empty() {
                    return Ok(None);
                }
                RdbObject::List(v)
            }
            (Acc::Scored(v), _) => {
                if has_duplicates(v.iter().map(|x| x.0.as_slice())) {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::SortedSet(v)
            }
            (Acc::Pairs(v), _) => {
                if has_duplicates(v.iter().map(|x| x.0.as_slice())) {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::Hash(v)
            }
            (Acc::Triples(v), _) => {
                if has_duplicates(v.iter().map(|x| x.0.as_slice())) {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::HashWithExpiry(v)
            }
            (Acc::Single, _) => return Ok(None),
        };
        Ok(Some(obj))
    }

    /// Types stored as one string (the value, or an encoded blob).
    fn single(&mut self, t: &mut Input<'_>) -> PResult<Option<RdbObject>> {
        let at = t.pos;
        let blob = t.string_cow()?;
        let fail = |k| Fail::Invalid { at, kind: k };
        let obj = match self.t {
            RdbType::String => return Ok(Some(RdbObject::String(blob.into_owned()))),
            RdbType::HashZipmap => {
                let p = zipmap::pairs(&blob).map_err(fail)?;
                if has_duplicates(p.iter().map(|x| x.0)) {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::Hash(
                    p.into_iter()
                        .map(|(f, v)| (f.to_vec(), v.to_vec()))
                        .collect(),
                )
            }
            RdbType::ListZiplist => RdbObject::List(
                ziplist::entries(&blob)
                    .map_err(fail)?
                    .into_iter()
                    .map(LpValue::to_vec)
                    .collect(),
            ),
            RdbType::SetIntset => RdbObject::Set(
                intset::members(&blob)
                    .map_err(fail)?
                    .into_iter()
                    .map(crate::read::int_text)
                    .collect(),
            ),
            RdbType::SetListpack => {
                let mut v = Vec::new();
                listpack::for_each(&blob, |e| {
                    v.push(e.to_vec());
                    Ok(())
                })
                .map_err(fail)?;
                RdbObject::Set(v)
            }
            RdbType::ZSetZiplist | RdbType::ZSetListpack => {
                let entries = if self.t == RdbType::ZSetZiplist {
                    ziplist::entries(&blob).map_err(fail)?
                } else {
                    listpack::entries(&blob).map_err(fail)?
                };
                if entries.len() % 2 != 0 {
                    return bad(at, odd(self.t));
                }
                let mut v = Vec::with_capacity(entries.len() / 2);
                for c in entries.chunks_exact(2) {
                    v.push((c[0].to_vec(), lp_score(c[1]).map_err(fail)?));
                }
                if self.t == RdbType::ZSetZiplist
                    && has_duplicates(v.iter().map(|x| x.0.as_slice()))
                {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::SortedSet(v)
            }
            RdbType::HashZiplist | RdbType::HashListpack => {
                let entries = if self.t == RdbType::HashZiplist {
                    ziplist::entries(&blob).map_err(fail)?
                } else {
                    listpack::entries(&blob).map_err(fail)?
                };
                if entries.len() % 2 != 0 {
                    return bad(at, odd(self.t));
                }
                let v: Vec<(Vec<u8>, Vec<u8>)> = entries
                    .chunks_exact(2)
                    .map(|c| (c[0].to_vec(), c[1].to_vec()))
                    .collect();
                if self.t == RdbType::HashZiplist
                    && has_duplicates(v.iter().map(|x| x.0.as_slice()))
                {
                    return bad(at, DecodeErrorKind::Duplicate);
                }
                RdbObject::Hash(v)
            }
            other => return bad(at, DecodeErrorKind::UnsupportedType(other)),
        };
        if obj.is_empty() {
            return Ok(None);
        }
        Ok(Some(obj))
    }
}

fn odd(t: RdbType) -> DecodeErrorKind {
    if t == RdbType::ZSetZiplist || t == RdbType::HashZiplist {
        DecodeErrorKind::BadZiplist("odd number of entries in a pairs ziplist")
    } else {
        DecodeErrorKind::BadListpack("odd number of entries in a pairs listpack")
    }
}

/// Decodes one complete object of type `t` from `inp` (DUMP payloads, tests); an empty
/// collection is [`DecodeErrorKind::EmptyCollection`].
pub(crate) fn object(t: RdbType, inp: &mut Input<'_>) -> PResult<RdbObject> {
    let start = inp.pos;
    let mut r = ObjectReader::new(t).map_err(|k| Fail::Invalid { at: start, kind: k })?;
    match r.step(inp)? {
        Some(o) => Ok(o),
        None => bad(start, DecodeErrorKind::EmptyCollection),
    }
}
