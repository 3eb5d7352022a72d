//! The list: a quicklist, a deque of packed nodes (Valkey `quicklist.c`).
//!
//! Each node holds a run of elements as listpack entries ([`super::listpack`]) in one exactly
//! sized buffer (the nodes at the two ends grow by an eighth at a time, the others are shrunk
//! when a new end node starts). Node boundaries follow `list-max-listpack-size` the way
//! Redis 7.0's `_quicklistNodeAllowInsert` draws them: a negative fill `-1..=-5` caps a node's
//! listpack at 4/8/16/32/64 KiB (listpack bytes, header included, plus the new element plus 8),
//! a positive fill caps its element count (and its size at 8 KiB), a fill below `-5` counts as
//! `-5` and above 32767 as 32767 (`quicklistSetFill`). Memory per element is therefore the
//! listpack entry (element + 2 bytes for short strings, less for integers) plus a 32-byte
//! node per run, as on the servers.
//!
//! `list-compress-depth` is accepted by the configuration but nodes are not compressed
//! (see the module `types` docs).
//!
//! An index is found by walking node counts from the nearer end (`quicklistGetIteratorAtIdx`),
//! O(nodes); pushes and pops at either end are O(node size) at worst (a front insert moves the
//! head node's bytes, as a listpack insert does).

use super::listpack::{self, Elem};
use std::collections::VecDeque;

/// `list-max-listpack-size` after `quicklistSetFill`'s clamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill(i32);

/// Node listpack size caps for fills -1..=-5, bytes (`optimization_level`).
const SIZE_LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// `SIZE_SAFETY_LIMIT`: a count-capped node still stays within 8 KiB.
const SAFETY_LIMIT: usize = 8192;
/// `SIZE_ESTIMATE_OVERHEAD`: what an entry may add beyond the element's bytes.
const ESTIMATE_OVERHEAD: usize = 8;
/// A listpack's header (6) and end byte (1), counted in node sizes as the servers do.
const LP_OVERHEAD: usize = 7;

impl Fill {
    /// From the configured `list-max-listpack-size`.
    pub fn new(v: i64) -> Fill {
        Fill(v.clamp(-5, 32767) as i32)
    }

    /// Whether a node of `bytes` listpack-entry bytes and `count` elements takes another
    /// element of `elem_len` bytes.
    fn allows(self, bytes: usize, count: usize, elem_len: usize) -> bool {
        let new_sz = bytes + LP_OVERHEAD + elem_len + ESTIMATE_OVERHEAD;
        if self.0 < 0 {
            // Clamped to -5..=-1 above.
            return new_sz <= SIZE_LEVELS[(-self.0 - 1) as usize];
        }
        new_sz <= SAFETY_LIMIT && count < self.0 as usize
    }

    /// Whether two nodes may become one (`_quicklistNodeAllowMerge`: one listpack header
    /// and end fewer, less 4 more for the servers' estimate).
    fn allows_merge(self, bytes: usize, count: usize) -> bool {
        let merged = (bytes + 2 * LP_OVERHEAD).saturating_sub(11);
        if self.0 < 0 {
            return merged <= SIZE_LEVELS[(-self.0 - 1) as usize];
        }
        merged <= SAFETY_LIMIT && count <= self.0 as usize
    }
}

impl Default for Fill {
    /// `-2`: 8 KiB nodes.
    fn default() -> Fill {
        Fill(-2)
    }
}

#[derive(Debug, Clone, Default)]
struct Node {
    buf: Vec<u8>,
    count: u32,
}

impl Node {
    fn with(s: &[u8]) -> Node {
        let mut buf = Vec::with_capacity(listpack::entry_size(s));
        listpack::push(&mut buf, s);
        Node { buf, count: 1 }
    }

    fn len(&self) -> usize {
        self.count as usize
    }

    /// Room for `extra` more bytes, growing by an eighth (a node at an end fills one
    /// element at a time; exact reallocation would copy it each time).
    fn reserve(&mut self, extra: usize) {
        if self.buf.capacity() - self.buf.len() < extra {
            let grow = (self.buf.len() / 8).max(extra).max(16);
            self.buf.reserve_exact(grow);
        }
    }

    fn offset_of(&self, i: usize) -> usize {
        listpack::offset_of(&self.buf, self.len(), i)
    }
}

/// A list of byte strings.
#[derive(Debug, Clone, Default)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
    /// Sum of the nodes' entry bytes (kept so that [`List::heap_size`] is O(1)).
    bytes: usize,
}

/// Lists are equal when their elements are (node boundaries do not matter).
impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.with_bytes(|x| b.eq_bytes(x)))
    }
}

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (`LEFT`, index 0).
    Left,
    /// The tail (`RIGHT`, index -1).
    Right,
}

impl List {
    /// An empty list.
    pub fn new() -> List {
        List::default()
    }

    /// The list of `items`, head first.
    pub fn from_items<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>, fill: Fill) -> List {
        let mut l = List::new();
        for it in items {
            l.push(End::Right, it.as_ref(), fill);
        }
        l.shrink_ends();
        l
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list has no element (the key is then deleted by the caller).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of nodes.
    #[cfg(test)]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Heap bytes, O(1): the node table and the nodes' entry bytes (the growth room of the
    /// two end nodes is not counted).
    pub fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>() + self.bytes
    }

    /// Pushes `s` at `end`.
    pub fn push(&mut self, end: End, s: &[u8], fill: Fill) {
        let node = match end {
            End::Left => self.nodes.front_mut(),
            End::Right => self.nodes.back_mut(),
        };
        match node {
            Some(n) if fill.allows(n.buf.len(), n.len(), s.len()) => {
                let e = listpack::entry_size(s);
                n.reserve(e);
                self.bytes += e;
                match end {
                    End::Right => listpack::push(&mut n.buf, s),
                    End::Left => listpack::insert(&mut n.buf, 0, s),
                }
                n.count += 1;
            }
            _ => {
                // The old end node is now an inner node: no growth slack.
                let node = Node::with(s);
                self.bytes += node.buf.len();
                match end {
                    End::Left => {
                        if let Some(n) = self.nodes.front_mut() {
                            n.buf.shrink_to_fit();
                        }
                        self.nodes.push_front(node);
                    }
                    End::Right => {
                        if let Some(n) = self.nodes.back_mut() {
                            n.buf.shrink_to_fit();
                        }
                        self.nodes.push_back(node);
                    }
                }
            }
        }
        self.len += 1;
    }

    /// Pops the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let n = match end {
            End::Left => self.nodes.front_mut()?,
            End::Right => self.nodes.back_mut()?,
        };
        let (start, stop) = match end {
            End::Left => (0, listpack::next(&n.buf, 0)),
            End::Right => (listpack::prev(&n.buf, n.buf.len()), n.buf.len()),
        };
        let v = listpack::decode(&n.buf, start).0.to_vec();
        n.buf.drain(start..stop);
        n.count -= 1;
        self.bytes -= stop - start;
        if n.count == 0 {
            match end {
                End::Left => self.nodes.pop_front(),
                End::Right => self.nodes.pop_back(),
            };
        }
        self.len -= 1;
        Some(v)
    }

    /// The node holding index `i` (< len) and the index within it.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut rest = i;
            for (k, n) in self.nodes.iter().enumerate() {
                if rest < n.len() {
                    return (k, rest);
                }
                rest -= n.len();
            }
        } else {
            let mut after = self.len - i; // elements from i to the end, i included
            for (k, n) in self.nodes.iter().enumerate().rev() {
                if after <= n.len() {
                    return (k, n.len() - after);
                }
                after -= n.len();
            }
        }
        unreachable!("index {i} within a list of {} elements", self.len)
    }

    /// Calls `f` with element `i` (`LINDEX`); `None` past the end.
    pub fn with<R>(&self, i: usize, f: impl FnOnce(Elem<'_>) -> R) -> Option<R> {
        if i >= self.len {
            return None;
        }
        let (k, j) = self.locate(i);
        let n = &self.nodes[k];
        Some(f(listpack::decode(&n.buf, n.offset_of(j)).0))
    }

    /// Element `i`, copied.
    #[cfg(test)]
    pub fn get(&self, i: usize) -> Option<Vec<u8>> {
        self.with(i, |e| e.to_vec())
    }

    /// Replaces element `i` (`LSET`); false past the end.
    pub fn set(&mut self, i: usize, s: &[u8], fill: Fill) -> bool {
        if i >= self.len {
            return false;
        }
        let (k, j) = self.locate(i);
        let n = &mut self.nodes[k];
        let off = n.offset_of(j);
        let before = n.buf.len();
        listpack::replace(&mut n.buf, off, s);
        self.bytes = self.bytes + n.buf.len() - before;
        self.split_if_over(k, fill);
        true
    }

    /// Inserts `s` so that it becomes element `i` (`i <= len`).
    pub fn insert(&mut self, i: usize, s: &[u8], fill: Fill) {
        if i == 0 {
            return self.push(End::Left, s, fill);
        }
        if i >= self.len {
            return self.push(End::Right, s, fill);
        }
        let (k, j) = self.locate(i);
        let n = &mut self.nodes[k];
        let off = n.offset_of(j);
        listpack::insert(&mut n.buf, off, s);
        n.count += 1;
        self.bytes += listpack::entry_size(s);
        self.len += 1;
        self.split_if_over(k, fill);
    }

    /// Splits node `k` in two while it is over the fill's limit (after an insert or a
    /// replacement made it grow).
    fn split_if_over(&mut self, k: usize, fill: Fill) {
        let n = &self.nodes[k];
        if n.count <= 1 || fill.allows(n.buf.len(), n.len() - 1, 0) {
            return;
        }
        let half = n.len() / 2;
        let off = n.offset_of(half);
        let n = &mut self.nodes[k];
        let tail = n.buf.split_off(off);
        let right = Node {
            buf: tail,
            count: n.count - half as u32,
        };
        n.count = half as u32;
        n.buf.shrink_to_fit();
        self.nodes.insert(k + 1, right);
        self.split_if_over(k + 1, fill);
        self.split_if_over(k, fill);
    }

    /// Merges neighbouring nodes of `from..=to` while two of them fit in one (after a
    /// removal left small nodes).
    fn merge_window(&mut self, from: usize, to: usize, fill: Fill) {
        let mut k = from;
        while k < to && k + 1 < self.nodes.len() {
            if !self.try_merge(k, fill) {
                k += 1;
            }
        }
    }

    /// Merges nodes `k` and `k + 1` if the fill allows.
    fn try_merge(&mut self, k: usize, fill: Fill) -> bool {
        let (a, b) = (&self.nodes[k], &self.nodes[k + 1]);
        if !fill.allows_merge(a.buf.len() + b.buf.len(), a.len() + b.len()) {
            return false;
        }
        // k + 1 exists: checked by the callers.
        let b = self.nodes.remove(k + 1).expect("node k + 1 exists");
        let a = &mut self.nodes[k];
        a.buf.extend_from_slice(&b.buf);
        a.buf.shrink_to_fit();
        a.count += b.count;
        true
    }

    /// Removes elements `start..end` (indexes within `0..=len`).
    pub fn remove_range(&mut self, start: usize, end: usize, fill: Fill) {
        let end = end.min(self.len);
        if start >= end {
            return;
        }
        let mut base = 0; // index of node k's first element, in the list before removal
        let mut first = None;
        let mut k = 0;
        while k < self.nodes.len() && base < end {
            let cnt = self.nodes[k].len();
            let (a, b) = (start.max(base), end.min(base + cnt));
            if a < b {
                first.get_or_insert(k);
                self.len -= b - a;
                if b - a == cnt {
                    if let Some(gone) = self.nodes.remove(k) {
                        self.bytes -= gone.buf.len();
                    }
                    base += cnt;
                    continue;
                }
                let n = &mut self.nodes[k];
                let (oa, ob) = (n.offset_of(a - base), n.offset_of(b - base));
                n.buf.drain(oa..ob);
                n.count -= (b - a) as u32;
                self.bytes -= ob - oa;
            }
            base += cnt;
            k += 1;
        }
        if let Some(f) = first {
            self.merge_window(f.saturating_sub(1), f + 1, fill);
        }
    }

    /// Keeps elements `start..=end` only (`LTRIM` with resolved, in-range indexes); an
    /// empty range (`start > end`) empties the list.
    pub fn trim(&mut self, start: usize, end: usize, fill: Fill) {
        if start > end || start >= self.len {
            *self = List::new();
            return;
        }
        let len = self.len;
        self.remove_range(end + 1, len, fill);
        self.remove_range(0, start, fill);
    }

    /// Calls `f` with elements `start..=end` in order (`LRANGE` with resolved, in-range
    /// indexes).
    pub fn for_each_range(&self, start: usize, end: usize, mut f: impl FnMut(Elem<'_>)) {
        if start > end || start >= self.len {
            return;
        }
        let end = end.min(self.len - 1);
        let (mut k, j) = self.locate(start);
        let mut left = end - start + 1;
        let mut off = self.nodes[k].offset_of(j);
        while left > 0 {
            let n = &self.nodes[k];
            while off < n.buf.len() && left > 0 {
                let (e, next) = listpack::decode(&n.buf, off);
                f(e);
                off = next;
                left -= 1;
            }
            k += 1;
            off = 0;
        }
    }

    /// Every element, head first.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            nodes: self.nodes.iter(),
            cur: listpack::Iter::new(&[]),
        }
    }

    /// Every element, tail first.
    pub fn iter_rev(&self) -> impl Iterator<Item = Elem<'_>> + '_ {
        self.nodes
            .iter()
            .rev()
            .flat_map(|n| listpack::Iter::new(&n.buf).rev())
    }

    /// Removes up to `count` elements equal to `s` (all when `count == 0`), from the head when
    /// `from_tail` is false (`LREM`). Returns how many were removed.
    pub fn remove_matching(
        &mut self,
        s: &[u8],
        count: usize,
        from_tail: bool,
        fill: Fill,
    ) -> usize {
        let limit = if count == 0 { usize::MAX } else { count };
        let mut removed = 0;
        let order: Vec<usize> = if from_tail {
            (0..self.nodes.len()).rev().collect()
        } else {
            (0..self.nodes.len()).collect()
        };
        let mut emptied = Vec::new();
        let mut touched = Vec::new();
        for k in order {
            if removed == limit {
                break;
            }
            let n = &mut self.nodes[k];
            // Offsets of matches within this node, in the direction of the walk.
            let mut hits: Vec<(usize, usize)> = Vec::new();
            let mut off = 0;
            while off < n.buf.len() {
                let (e, next) = listpack::decode(&n.buf, off);
                if e.eq_bytes(s) {
                    hits.push((off, next));
                }
                off = next;
            }
            if hits.is_empty() {
                continue;
            }
            if from_tail {
                hits.reverse();
            }
            hits.truncate(limit - removed);
            removed += hits.len();
            hits.sort_unstable();
            let mut out = Vec::with_capacity(n.buf.len());
            let mut last = 0;
            for &(a, b) in &hits {
                out.extend_from_slice(&n.buf[last..a]);
                last = b;
            }
            out.extend_from_slice(&n.buf[last..]);
            self.bytes -= n.buf.len() - out.len();
            n.buf = out;
            n.count -= hits.len() as u32;
            if n.count == 0 {
                emptied.push(k);
            } else {
                touched.push(k);
            }
        }
        emptied.sort_unstable();
        for k in emptied.into_iter().rev() {
            self.nodes.remove(k);
        }
        self.len -= removed;
        if removed > 0 {
            self.merge_window(0, usize::MAX, fill);
        }
        removed
    }

    /// Drops the growth slack of the two end nodes (after a bulk load).
    pub fn shrink_ends(&mut self) {
        if let Some(n) = self.nodes.front_mut() {
            n.buf.shrink_to_fit();
        }
        if let Some(n) = self.nodes.back_mut() {
            n.buf.shrink_to_fit();
        }
        self.nodes.shrink_to_fit();
    }
}

/// Forward iterator over a list's elements.
#[derive(Clone)]
pub struct Iter<'a> {
    nodes: std::collections::vec_deque::Iter<'a, Node>,
    cur: listpack::Iter<'a>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;
    fn next(&mut self) -> Option<Elem<'a>> {
        loop {
            if let Some(e) = self.cur.next() {
                return Some(e);
            }
            self.cur = listpack::Iter::new(&self.nodes.next()?.buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(|e| e.to_vec()).collect()
    }

    /// The node invariants: counts add up, no empty node, every node but single-element
    /// ones within the fill's limit.
    fn check(l: &List, fill: Fill) {
        let mut total = 0;
        for n in &l.nodes {
            assert!(n.count > 0, "empty node");
            assert_eq!(listpack::Iter::new(&n.buf).count(), n.len());
            if n.count > 1 {
                assert!(
                    fill.allows(n.buf.len(), n.len() - 1, 0)
                        || fill.allows_merge(n.buf.len(), n.len()),
                    "node over the limit: {} bytes, {} elements",
                    n.buf.len(),
                    n.count
                );
            }
            total += n.len();
        }
        assert_eq!(total, l.len());
        assert_eq!(l.bytes, l.nodes.iter().map(|n| n.buf.len()).sum::<usize>());
    }

    #[test]
    fn nodes_follow_the_servers_fill_rules() {
        // 8 KiB nodes: 10-byte elements (12-byte entries) fill (8192 - 7 - 18) / 12 + 1.
        let mut l = List::new();
        for i in 0..10_000 {
            l.push(End::Right, format!("v{i:09}").as_bytes(), Fill::default());
        }
        let per_node = (8192 - LP_OVERHEAD - 10 - ESTIMATE_OVERHEAD) / 12 + 1;
        assert_eq!(l.nodes[0].len(), per_node);
        // Count-capped nodes.
        let mut l = List::new();
        for i in 0..100 {
            l.push(End::Left, format!("v{i}").as_bytes(), Fill::new(16));
        }
        assert_eq!(l.node_count(), 7);
        assert!(l.nodes.iter().all(|n| n.count <= 16));
        // A fill of 0 keeps one element per node (count < 0 never holds).
        let l = List::from_items(["a", "b", "c"], Fill::new(0));
        assert_eq!(l.node_count(), 3);
        assert_eq!(Fill::new(-100), Fill::new(-5));
    }

    #[test]
    fn memory_is_close_to_the_entries() {
        let mut l = List::new();
        for _ in 0..100_000 {
            l.push(End::Left, b"xxx", Fill::default());
        }
        // 5 bytes per "xxx" entry, nodes of 8 KiB: at most 5.2 bytes per element.
        assert!(l.heap_size() < 100_000 * 52 / 10, "{} bytes", l.heap_size());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool),
        Set(usize, Vec<u8>),
        Insert(usize, Vec<u8>),
        RemoveRange(usize, usize),
        Trim(usize, usize),
        Rem(Vec<u8>, usize, bool),
    }

    fn elem() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => prop::sample::select(vec![b"a".to_vec(), b"b".to_vec(), b"12".to_vec(), b"-7000".to_vec()]),
            1 => proptest::collection::vec(any::<u8>(), 0..120),
            1 => proptest::collection::vec(b'x'..=b'z', 500..3000),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (any::<bool>(), elem()).prop_map(|(l, e)| Op::Push(l, e)),
            3 => any::<bool>().prop_map(Op::Pop),
            2 => (any::<usize>(), elem()).prop_map(|(i, e)| Op::Set(i, e)),
            2 => (any::<usize>(), elem()).prop_map(|(i, e)| Op::Insert(i, e)),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::RemoveRange(a, b)),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Trim(a, b)),
            1 => (elem(), 0usize..3, any::<bool>()).prop_map(|(e, c, t)| Op::Rem(e, c, t)),
        ]
    }

    proptest! {
        #[test]
        fn behaves_like_a_deque(ops in proptest::collection::vec(op(), 0..300),
                                fill in prop::sample::select(vec![-2i64, -1, 3, 1, 0, 128])) {
            let fill = Fill::new(fill);
            let mut l = List::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(left, e) => {
                        if left { l.push(End::Left, &e, fill); m.push_front(e); }
                        else { l.push(End::Right, &e, fill); m.push_back(e); }
                    }
                    Op::Pop(left) => {
                        let (a, b) = if left { (l.pop(End::Left), m.pop_front()) } else { (l.pop(End::Right), m.pop_back()) };
                        prop_assert_eq!(a, b);
                    }
                    Op::Set(i, e) => {
                        if m.is_empty() { prop_assert!(!l.set(i, &e, fill)); continue; }
                        let i = i % m.len();
                        prop_assert!(l.set(i, &e, fill));
                        m[i] = e;
                    }
                    Op::Insert(i, e) => {
                        let i = i % (m.len() + 1);
                        l.insert(i, &e, fill);
                        m.insert(i, e);
                    }
                    Op::RemoveRange(a, b) => {
                        let n = m.len() + 1;
                        let (a, b) = (a % n, b % n);
                        l.remove_range(a, b, fill);
                        if a < b { m.drain(a..b); }
                    }
                    Op::Trim(a, b) => {
                        if m.is_empty() { continue; }
                        let (a, b) = (a % m.len(), b % m.len());
                        l.trim(a, b, fill);
                        if a > b { m.clear(); } else { m = m.drain(a..=b).collect(); }
                    }
                    Op::Rem(e, count, tail) => {
                        let got = l.remove_matching(&e, count, tail, fill);
                        let limit = if count == 0 { usize::MAX } else { count };
                        let mut want = 0;
                        let v: Vec<Vec<u8>> = m.drain(..).collect();
                        let mut keep: Vec<Option<Vec<u8>>> = v.into_iter().map(Some).collect();
                        let idx: Vec<usize> = if tail { (0..keep.len()).rev().collect() } else { (0..keep.len()).collect() };
                        for i in idx {
                            if want < limit && keep[i].as_deref() == Some(&e[..]) { keep[i] = None; want += 1; }
                        }
                        m = keep.into_iter().flatten().collect();
                        prop_assert_eq!(got, want);
                    }
                }
                check(&l, fill);
                prop_assert_eq!(l.len(), m.len());
            }
            let want: Vec<Vec<u8>> = m.iter().cloned().collect();
            prop_assert_eq!(items(&l), want.clone());
            let back: Vec<Vec<u8>> = l.iter_rev().map(|e| e.to_vec()).collect();
            prop_assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
            for (i, e) in m.iter().enumerate() {
                prop_assert_eq!(l.get(i), Some(e.clone()));
            }
            prop_assert_eq!(l.get(m.len()), None);
            if !m.is_empty() {
                let (a, b) = (m.len() / 3, m.len() - 1);
                let mut got = Vec::new();
                l.for_each_range(a, b, |e| got.push(e.to_vec()));
                prop_assert_eq!(got, want[a..=b].to_vec());
            }
        }
    }
}
