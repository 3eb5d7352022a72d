//! [`Set`]: distinct members. Forms and conversions as Valkey 8+ (`t_set.c` `setTypeCreate`,
//! `setTypeAddAux`, `maybeConvertIntset`; Redis 7.2 has the same, Redis 7.0 has no listpack
//! sets and goes from intset straight to hashtable):
//! * `intset` ([`IntSet`]) while every member is an integer (`string2ll`) and there are at
//!   most `set-max-intset-entries`; past that count it becomes a `hashtable`;
//! * a non-integer member added to an intset makes it a `listpack` when the result stays
//!   within `set-max-listpack-entries` / `set-max-listpack-value`, else a `hashtable`;
//! * `listpack` ([`Packed`], insertion order) until it would pass those limits;
//! * a new set starts as intset if its first member is an integer and the command adds at
//!   most `set-max-intset-entries` members, as listpack if it adds at most
//!   `set-max-listpack-entries`, else as a `hashtable` ([`Table`]).

use super::intset::IntSet;
use super::packed::Packed;
use super::table::{Table, TooBig};
use super::Limits;
use crate::cmd::parse_i64;

/// A set value (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum Set {
    /// All members integers.
    Ints(IntSet),
    /// Members in insertion order.
    Compact(Packed),
    /// The big form.
    Big(Table),
}

/// One member as bytes: borrowed, or an integer formatted in place.
#[derive(Clone, Copy)]
pub enum Member<'a> {
    /// Stored bytes.
    Bytes(&'a [u8]),
    /// An intset member, formatted.
    Int([u8; 20], u8),
}

impl<'a> Member<'a> {
    fn int(n: i64) -> Member<'a> {
        let mut buf = [0u8; 20];
        let mut w = std::io::Cursor::new(&mut buf[..]);
        // An i64 takes at most 20 bytes in decimal.
        let _ = std::io::Write::write_fmt(&mut w, format_args!("{n}"));
        let len = w.position() as u8;
        Member::Int(buf, len)
    }

    /// Copies the bytes out.
    pub fn to_vec(self) -> Vec<u8> {
        self.as_ref().to_vec()
    }
}

impl AsRef<[u8]> for Member<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            Member::Bytes(b) => b,
            Member::Int(buf, len) => &buf[..usize::from(*len)],
        }
    }
}

/// Iterator over the members.
#[derive(Clone)]
pub enum Iter<'a> {
    /// Intset, ascending.
    Ints(std::slice::Iter<'a, i64>),
    /// Listpack, insertion order.
    Compact(super::packed::Iter<'a>),
    /// Table order.
    Big(super::table::Iter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(it) => it.next().map(|&n| Member::int(n)),
            Iter::Compact(it) => it.next().map(|(_, m)| Member::Bytes(m)),
            Iter::Big(it) => it.next().map(|(k, _)| Member::Bytes(k)),
        }
    }
}

impl Set {
    /// A new set for a command that adds `count` members, the first being `first` (Valkey
    /// `setTypeCreate`).
    pub fn create(first: &[u8], count: usize, limits: &Limits) -> Set {
        if parse_i64(first).is_some() && count <= limits.set_max_intset_entries {
            Set::Ints(IntSet::new())
        } else if count <= limits.set_max_listpack_entries {
            Set::Compact(Packed::new())
        } else {
            Set::Big(Table::with_capacity(false, count))
        }
    }

    /// A set of `members` (RDB, RESTORE, SINTERSTORE results), in the form adding them one
    /// by one would give.
    ///
    /// # Errors
    /// [`TooBig`].
    pub fn from_members<M: AsRef<[u8]>>(
        members: impl ExactSizeIterator<Item = M> + Clone,
        limits: &Limits,
    ) -> Result<Set, TooBig> {
        let n = members.len();
        let mut first = members.clone();
        let Some(f) = first.next() else {
            return Ok(Set::Compact(Packed::new()));
        };
        let mut s = Set::create(f.as_ref(), n, limits);
        for m in members {
            s.insert(m.as_ref(), limits)?;
        }
        Ok(s)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Ints(i) => i.len(),
            Set::Compact(p) => p.len(),
            Set::Big(t) => t.len(),
        }
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Compact(_) => "listpack",
            Set::Big(_) => "hashtable",
        }
    }

    /// Heap bytes held (O(1)).
    pub fn heap_size(&self) -> usize {
        match self {
            Set::Ints(i) => i.heap_size(),
            Set::Compact(p) => p.heap_size(),
            Set::Big(t) => t.heap_size(),
        }
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Ints(i) => parse_i64(m).is_some_and(|n| i.contains(n)),
            Set::Compact(p) => p.find(m, 1).is_some(),
            Set::Big(t) => t.contains(m),
        }
    }

    fn convert_to_big(&mut self, extra: usize) {
        let mut t = Table::with_capacity(false, self.len() + extra);
        for m in self.iter() {
            // A compact set is far below 4 GiB.
            let _ = t.insert(m.as_ref(), b"");
        }
        *self = Set::Big(t);
    }

    /// Adds `m`; returns whether it is new. Converts as the module docs say.
    ///
    /// # Errors
    /// [`TooBig`]; nothing changed.
    pub fn insert(&mut self, m: &[u8], limits: &Limits) -> Result<bool, TooBig> {
        match self {
            Set::Ints(i) => {
                if let Some(n) = parse_i64(m) {
                    let new = i.insert(n);
                    if new && i.len() > limits.set_max_intset_entries {
                        self.convert_to_big(0);
                    }
                    return Ok(new);
                }
                // The longest member of the intset, in digits (its min or max).
                let widest = i
                    .members()
                    .first()
                    .into_iter()
                    .chain(i.members().last())
                    .map(|n| n.to_string().len())
                    .max()
                    .unwrap_or(0);
                if i.len() < limits.set_max_listpack_entries
                    && m.len() <= limits.set_max_listpack_value
                    && widest <= limits.set_max_listpack_value
                {
                    let mut p = Packed::new();
                    for n in i.members() {
                        p.push(n.to_string().as_bytes());
                    }
                    p.push(m);
                    *self = Set::Compact(p);
                } else {
                    self.convert_to_big(1);
                    if let Set::Big(t) = self {
                        t.insert(m, b"")?;
                    }
                }
                Ok(true)
            }
            Set::Compact(p) => {
                if p.find(m, 1).is_some() {
                    return Ok(false);
                }
                if p.len() < limits.set_max_listpack_entries
                    && m.len() <= limits.set_max_listpack_value
                {
                    p.push(m);
                    return Ok(true);
                }
                self.convert_to_big(1);
                match self {
                    Set::Big(t) => t.insert(m, b""),
                    _ => Ok(true),
                }
            }
            Set::Big(t) => t.insert(m, b""),
        }
    }

    /// Removes `m`; returns whether it was a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Ints(i) => parse_i64(m).is_some_and(|n| i.remove(n)),
            Set::Compact(p) => match p.find(m, 1) {
                Some(pos) => {
                    p.remove(pos, 1);
                    true
                }
                None => false,
            },
            Set::Big(t) => t.remove(m),
        }
    }

    /// The members (intset ascending, listpack insertion order, table order).
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Set::Ints(i) => Iter::Ints(i.members().iter()),
            Set::Compact(p) => Iter::Compact(p.iter()),
            Set::Big(t) => Iter::Big(t.iter()),
        }
    }

    /// A random member (`rng(n)` draws from `0..n`).
    pub fn random(&self, rng: &mut impl FnMut(usize) -> usize) -> Option<Member<'_>> {
        match self {
            Set::Ints(i) => {
                let m = i.members();
                (!m.is_empty()).then(|| Member::int(m[rng(m.len())]))
            }
            Set::Compact(p) => {
                if p.is_empty() {
                    return None;
                }
                let pos = p.position_of(rng(p.len()))?;
                Some(Member::Bytes(p.get(pos).0))
            }
            Set::Big(t) => t.random(rng).map(|(k, _)| Member::Bytes(k)),
        }
    }

    /// Removes and returns a random member.
    pub fn pop_random(&mut self, rng: &mut impl FnMut(usize) -> usize) -> Option<Vec<u8>> {
        match self {
            Set::Ints(i) => {
                if i.is_empty() {
                    return None;
                }
                let at = rng(i.len());
                Some(i.remove_at(at).to_string().into_bytes())
            }
            Set::Compact(p) => {
                if p.is_empty() {
                    return None;
                }
                let pos = p.position_of(rng(p.len()))?;
                let m = p.get(pos).0.to_vec();
                p.remove(pos, 1);
                Some(m)
            }
            Set::Big(t) => t.pop_random(rng),
        }
    }

    /// One SSCAN step (a compact set returns everything and cursor 0).
    pub fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(&[u8])) -> u64 {
        match self {
            Set::Big(t) => t.scan(cursor, count, |k, _| emit(k)),
            _ => {
                for m in self.iter() {
                    emit(m.as_ref());
                }
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encodings(members: &[&str], limits: &Limits) -> &'static str {
        let mut s = Set::create(members[0].as_bytes(), 1, limits);
        for m in members {
            s.insert(m.as_bytes(), limits).unwrap();
        }
        s.encoding()
    }

    #[test]
    fn forms_follow_valkey() {
        let l = Limits {
            set_max_intset_entries: 3,
            set_max_listpack_entries: 3,
            set_max_listpack_value: 4,
            ..Limits::default()
        };
        assert_eq!(encodings(&["1", "2", "3"], &l), "intset");
        assert_eq!(encodings(&["1", "2", "3", "4"], &l), "hashtable");
        assert_eq!(encodings(&["1", "a"], &l), "listpack");
        assert_eq!(encodings(&["1", "2", "3", "a"], &l), "hashtable");
        assert_eq!(encodings(&["1", "abcde"], &l), "hashtable");
        assert_eq!(encodings(&["a", "b", "c"], &l), "listpack");
        assert_eq!(encodings(&["a", "b", "c", "d"], &l), "hashtable");
        assert_eq!(encodings(&["01"], &l), "listpack", "01 is not an integer");
        let mut s = Set::create(b"1", 1, &l);
        s.insert(b"-5", &l).unwrap();
        s.insert(b"10", &l).unwrap();
        let m: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        assert_eq!(m, vec![b"-5".to_vec(), b"10".to_vec()]);
        assert!(s.contains(b"10") && !s.contains(b"010"));
    }
}
