//! [`enum@Hash`]: field/value pairs. Compact form: the pairs in a [`Packed`] in insertion order
//! (`OBJECT ENCODING` `listpack`); big form: a [`Table`] (`hashtable`). Conversion as Redis
//! 7.0 / Valkey `hashTypeTryConversion` and `hashTypeSet`: before a write, any field or value
//! longer than `hash-max-listpack-value` bytes, or more new pairs than
//! `hash-max-listpack-entries`, converts; after a write, more than
//! `hash-max-listpack-entries` fields converts. A big hash never converts back.

use super::packed::Packed;
use super::table::{Table, TooBig};
use super::Limits;

/// A hash value (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum Hash {
    /// Field, value, field, value, ... in insertion order.
    Compact(Packed),
    /// The big form.
    Big(Table),
}

impl Default for Hash {
    fn default() -> Hash {
        Hash::Compact(Packed::new())
    }
}

/// Iterator over (field, value).
#[derive(Clone)]
pub enum Iter<'a> {
    /// Compact form.
    Compact(super::packed::Iter<'a>),
    /// Big form.
    Big(super::table::Iter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Compact(it) => {
                let (_, f) = it.next()?;
                let (_, v) = it.next()?;
                Some((f, v))
            }
            Iter::Big(it) => it.next(),
        }
    }
}

impl Hash {
    /// An empty hash (compact).
    pub fn new() -> Hash {
        Hash::default()
    }

    /// A hash built from pairs (RDB, RESTORE): compact when within `limits`. Later pairs
    /// with a field seen before replace its value.
    ///
    /// # Errors
    /// [`TooBig`].
    pub fn from_pairs<F: AsRef<[u8]>, V: AsRef<[u8]>>(
        pairs: impl ExactSizeIterator<Item = (F, V)> + Clone,
        limits: &Limits,
    ) -> Result<Hash, TooBig> {
        let n = pairs.len();
        let long = pairs.clone().any(|(f, v)| {
            f.as_ref().len() > limits.hash_max_listpack_value
                || v.as_ref().len() > limits.hash_max_listpack_value
        });
        let mut h = if n > limits.hash_max_listpack_entries || long {
            Hash::Big(Table::with_capacity(true, n))
        } else {
            Hash::new()
        };
        for (f, v) in pairs {
            h.set(f.as_ref(), v.as_ref(), limits)?;
        }
        Ok(h)
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Compact(p) => p.len() / 2,
            Hash::Big(t) => t.len(),
        }
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        match self {
            Hash::Compact(p) => p.is_empty(),
            Hash::Big(t) => t.is_empty(),
        }
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Compact(_) => "listpack",
            Hash::Big(_) => "hashtable",
        }
    }

    /// Heap bytes held (O(1)).
    pub fn heap_size(&self) -> usize {
        match self {
            Hash::Compact(p) => p.heap_size(),
            Hash::Big(t) => t.heap_size(),
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Compact(p) => p.find(field, 2).map(|pos| {
                let next = p.get(pos).1;
                p.get(next).0
            }),
            Hash::Big(t) => t.get(field),
        }
    }

    /// Converts to the big form (before a write that would pass the limits).
    pub fn convert(&mut self) {
        if let Hash::Compact(p) = self {
            let mut t = Table::with_capacity(true, p.len() / 2 + 1);
            let mut it = p.iter();
            while let (Some((_, f)), Some((_, v))) = (it.next(), it.next()) {
                // A compact hash is far below 4 GiB.
                let _ = t.insert(f, v);
            }
            *self = Hash::Big(t);
        }
    }

    /// Converts when a write of these (field, value) lengths would pass the limits (Redis
    /// `hashTypeTryConversion`): a length over `hash-max-listpack-value`, or more pairs than
    /// `hash-max-listpack-entries`.
    pub fn prepare(&mut self, lens: impl Iterator<Item = usize>, pairs: usize, limits: &Limits) {
        if matches!(self, Hash::Compact(_))
            && (pairs > limits.hash_max_listpack_entries
                || lens.into_iter().any(|l| l > limits.hash_max_listpack_value))
        {
            self.convert();
        }
    }

    /// Sets `field` to `value`; returns whether the field is new. Converts past the limits.
    ///
    /// # Errors
    /// [`TooBig`]; nothing changed.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> Result<bool, TooBig> {
        if let Hash::Compact(_) = self {
            if field.len() > limits.hash_max_listpack_value
                || value.len() > limits.hash_max_listpack_value
            {
                self.convert();
            }
        }
        match self {
            Hash::Compact(p) => {
                let new = match p.find(field, 2) {
                    Some(pos) => {
                        let next = p.get(pos).1;
                        p.replace(next, value);
                        false
                    }
                    None => {
                        p.push(field);
                        p.push(value);
                        true
                    }
                };
                if p.len() / 2 > limits.hash_max_listpack_entries {
                    self.convert();
                }
                Ok(new)
            }
            Hash::Big(t) => t.insert(field, value),
        }
    }

    /// Removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Compact(p) => match p.find(field, 2) {
                Some(pos) => {
                    p.remove(pos, 2);
                    true
                }
                None => false,
            },
            Hash::Big(t) => t.remove(field),
        }
    }

    /// Every (field, value): insertion order when compact, table order when big.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Compact(p) => Iter::Compact(p.iter()),
            Hash::Big(t) => Iter::Big(t.iter()),
        }
    }

    /// The pair at index `i` of [`Hash::iter`] order for a compact hash; a random pair for
    /// a big one (`rng(n)` draws from `0..n`).
    pub fn random(&self, rng: &mut impl FnMut(usize) -> usize) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Compact(p) => {
                let n = p.len() / 2;
                if n == 0 {
                    return None;
                }
                let pos = p.position_of(rng(n) * 2)?;
                let (f, next) = p.get(pos);
                Some((f, p.get(next).0))
            }
            Hash::Big(t) => t.random(rng),
        }
    }

    /// One HSCAN step: a compact hash returns everything and cursor 0 (as Redis does for a
    /// listpack); a big one scans [`Table::scan`].
    pub fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(&[u8], &[u8])) -> u64 {
        match self {
            Hash::Compact(_) => {
                for (f, v) in self.iter() {
                    emit(f, v);
                }
                0
            }
            Hash::Big(t) => t.scan(cursor, count, emit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_past_the_limits_and_keeps_pairs() {
        let limits = Limits {
            hash_max_listpack_entries: 4,
            hash_max_listpack_value: 8,
            ..Limits::default()
        };
        let mut h = Hash::new();
        for i in 0..4 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v", &limits).unwrap());
        }
        assert_eq!(h.encoding(), "listpack");
        assert!(!h.set(b"f1", b"v2", &limits).unwrap());
        let order: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(
            order,
            vec![
                b"f0".to_vec(),
                b"f1".to_vec(),
                b"f2".to_vec(),
                b"f3".to_vec()
            ]
        );
        h.set(b"f4", b"v", &limits).unwrap();
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f1"), Some(&b"v2"[..]));
        let mut h2 = Hash::new();
        h2.set(b"f", b"a value over 8", &limits).unwrap();
        assert_eq!(h2.encoding(), "hashtable");
        assert!(h2.remove(b"f"));
        assert!(h2.is_empty());
    }
}
