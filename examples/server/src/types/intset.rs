//! [`IntSet`]: a set of integers as a sorted vector (Redis's intset: members ascending,
//! binary search). The compact form of sets whose members are all integers, up to
//! `set-max-intset-entries`.

/// Sorted distinct integers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntSet {
    v: Vec<i64>,
}

impl IntSet {
    /// The empty set.
    pub fn new() -> IntSet {
        IntSet::default()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// Heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.v.capacity() * 8
    }

    /// Whether `n` is a member.
    pub fn contains(&self, n: i64) -> bool {
        self.v.binary_search(&n).is_ok()
    }

    /// Adds `n`; returns whether it is new.
    pub fn insert(&mut self, n: i64) -> bool {
        match self.v.binary_search(&n) {
            Ok(_) => false,
            Err(at) => {
                self.v.reserve_exact(1);
                self.v.insert(at, n);
                true
            }
        }
    }

    /// Removes `n`; returns whether it was a member.
    pub fn remove(&mut self, n: i64) -> bool {
        match self.v.binary_search(&n) {
            Ok(at) => {
                self.v.remove(at);
                if self.v.capacity() > self.v.len() * 2 + 4 {
                    self.v.shrink_to_fit();
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Removes the member at `index` (ascending order).
    pub fn remove_at(&mut self, index: usize) -> i64 {
        self.v.remove(index)
    }

    /// The members, ascending.
    pub fn members(&self) -> &[i64] {
        &self.v
    }
}
