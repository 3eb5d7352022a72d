//! The sorted set: members with scores, ordered by (score, member bytes).
//!
//! Two forms, as on the servers (`t_zset.c`):
//!
//! - **packed** (`OBJECT ENCODING listpack`): member and score entries alternating in one
//!   [`super::listpack`] buffer, in order. Used while the set has at most
//!   `zset-max-listpack-entries` members of at most `zset-max-listpack-value` bytes; the set
//!   becomes big when an add would break either limit (`zsetAdd`), and a store command's
//!   result comes back to packed when it fits (`zsetConvertToListpackIfNeeded`). Scores are
//!   integer entries when integral, else raw doubles (listpacks store the text and parse it at
//!   every comparison).
//! - **big** (reported as `skiplist`, the name clients and tests expect): each member and its
//!   score once in a chunked member table ([`Slab`], 32 bytes per member with members of up to
//!   22 bytes inline), a hash index of table ids (4 bytes a slot), and an order-statistic
//!   B+tree of table ids (leaves of 64 ids, inner nodes of 64 children with subtree sizes and
//!   minima) for O(log n) rank, select and range by score or lex.
//!
//! Why a B+tree over ids and not the servers' skiplist plus dict: per member the servers pay
//! an `sds` (header, bytes, NUL, in a size class), a skiplist node (40 bytes plus 16 per
//! extra level, in a size class) and a dict entry (24 bytes plus 8 to 16 of bucket array),
//! 110 to 126 bytes for a short member; here a member costs its 32-byte table entry, about 10
//! bytes of hash index and about 17 bytes of tree (each id beside its score, in leaves of 62):
//! 64 bytes, 0.51-0.58x Redis 7.0 (bench `types_memory`). Keeping only ids in the tree took
//! 54 bytes but made every comparison of a descent a cache miss into the table: 2-3x slower
//! ZADD, ZRANK and range starts (bench `types_ops`); with the scores inline the table is read
//! only between equal scores. A std `BTreeSet<(score, member)>` plus `HashMap` takes 169
//! bytes a member and has no O(log n) rank.

use super::listpack::{self, Elem};
use hashbrown::HashTable;
use std::cmp::Ordering;
use std::hash::BuildHasher;

/// `zset-max-listpack-entries` and `zset-max-listpack-value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZLimits {
    /// Most members in the packed form (128).
    pub max_entries: usize,
    /// Longest member in the packed form, bytes (64).
    pub max_value: usize,
}

impl Default for ZLimits {
    fn default() -> ZLimits {
        ZLimits {
            max_entries: 128,
            max_value: 64,
        }
    }
}

/// Orders two scores (never NaN; `-0` equals `0`, as the servers' `<` and `==` compare).
#[inline]
pub fn cmp_score(a: f64, b: f64) -> Ordering {
    if a < b {
        Ordering::Less
    } else if a > b {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// A score bound of a range (`ZRANGEBYSCORE` min/max: `(` makes it exclusive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    /// The score.
    pub value: f64,
    /// Whether the bound itself is outside the range.
    pub exclusive: bool,
}

/// A lex bound (`ZRANGEBYLEX`: `-`, `+`, `[member`, `(member`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[m` (inclusive) or `(m` (exclusive).
    At(Vec<u8>, bool),
}

impl ScoreBound {
    /// Whether `s` is above (or at, when inclusive) this lower bound.
    pub fn below_ok(&self, s: f64) -> bool {
        if self.exclusive {
            s > self.value
        } else {
            s >= self.value
        }
    }

    /// Whether `s` is below (or at, when inclusive) this upper bound.
    pub fn above_ok(&self, s: f64) -> bool {
        if self.exclusive {
            s < self.value
        } else {
            s <= self.value
        }
    }
}

impl LexBound {
    /// Whether `m` is at or above this lower bound.
    pub fn below_ok(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::At(b, excl) => {
                if *excl {
                    m > &b[..]
                } else {
                    m >= &b[..]
                }
            }
        }
    }

    /// Whether `m` is at or below this upper bound.
    pub fn above_ok(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::At(b, excl) => {
                if *excl {
                    m < &b[..]
                } else {
                    m <= &b[..]
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The member table.

/// Members of up to this many bytes sit inside their table entry.
pub const INLINE_MEMBER: usize = 22;

#[derive(Debug, Clone)]
enum MemberRepr {
    Inline {
        len: u8,
        bytes: [u8; INLINE_MEMBER],
    },
    Heap(Box<[u8]>),
    /// A free table slot.
    Vacant,
}

#[derive(Debug, Clone)]
struct Entry {
    score: f64,
    member: MemberRepr,
}

impl Entry {
    fn new(m: &[u8], score: f64) -> Entry {
        let member = if m.len() <= INLINE_MEMBER {
            let mut bytes = [0u8; INLINE_MEMBER];
            bytes[..m.len()].copy_from_slice(m);
            MemberRepr::Inline {
                len: m.len() as u8,
                bytes,
            }
        } else {
            MemberRepr::Heap(m.into())
        };
        Entry { score, member }
    }

    #[inline]
    fn member(&self) -> &[u8] {
        match &self.member {
            MemberRepr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            MemberRepr::Heap(b) => b,
            MemberRepr::Vacant => &[],
        }
    }

    fn is_vacant(&self) -> bool {
        matches!(self.member, MemberRepr::Vacant)
    }
}

/// Table entries per chunk (a chunk grows by doubling up to this, then a new one starts:
/// no reallocation ever copies more than one chunk).
const CHUNK: usize = 4096;

/// Stable ids for members: the hash index and the tree hold ids.
#[derive(Debug, Clone, Default)]
pub struct Slab {
    chunks: Vec<Vec<Entry>>,
    free: Vec<u32>,
    /// Bytes of the members stored out of line.
    heap_members: usize,
}

impl Slab {
    #[inline]
    fn get(&self, id: u32) -> &Entry {
        &self.chunks[id as usize / CHUNK][id as usize % CHUNK]
    }

    #[inline]
    fn get_mut(&mut self, id: u32) -> &mut Entry {
        &mut self.chunks[id as usize / CHUNK][id as usize % CHUNK]
    }

    #[inline]
    fn key(&self, id: u32) -> (f64, &[u8]) {
        let e = self.get(id);
        (e.score, e.member())
    }

    fn alloc(&mut self, e: Entry) -> u32 {
        if let MemberRepr::Heap(b) = &e.member {
            self.heap_members += b.len();
        }
        if let Some(id) = self.free.pop() {
            *self.get_mut(id) = e;
            return id;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::new());
        }
        let n = self.chunks.len() - 1;
        let c = &mut self.chunks[n];
        c.push(e);
        // Ids are below 2^32: a sorted set holds fewer members than that.
        (n * CHUNK + c.len() - 1) as u32
    }

    fn release(&mut self, id: u32) {
        let old = std::mem::replace(&mut self.get_mut(id).member, MemberRepr::Vacant);
        if let MemberRepr::Heap(b) = old {
            self.heap_members -= b.len();
        }
        self.free.push(id);
    }

    /// Slots ever used (live or free).
    fn slots(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// O(1): the table's slots (full chunks are exactly sized) and the out-of-line members.
    fn heap_size(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Vec<Entry>>()
            + self.free.capacity() * 4
            + self.slots_capacity() * std::mem::size_of::<Entry>()
            + self.heap_members
    }

    fn slots_capacity(&self) -> usize {
        match self.chunks.last() {
            None => 0,
            Some(last) => (self.chunks.len() - 1) * CHUNK + last.capacity(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The order-statistic B+tree of ids.
//
// Leaves keep each id beside its score, and inner nodes each child's smallest score beside
// its id, so a descent compares scores without reading the member table; the table is read
// only between equal scores (to compare members). Measured on 1M random-score members (bench
// `types_ops`): ids alone made every comparison a cache miss into the table.

/// Items a leaf holds (one more slot takes the insert that splits it): 63 slots of score and
/// id make a 768-byte leaf, an exact allocator size class.
const LEAF_CAP: usize = 62;
const LEAF_SLOTS: usize = LEAF_CAP + 1;
const INNER_CAP: usize = 64;
/// A node below this many items is merged with or refilled from a neighbour.
const LEAF_MIN: usize = LEAF_CAP / 4;
const INNER_MIN: usize = INNER_CAP / 4;

#[derive(Debug, Clone)]
struct Leaf {
    len: usize,
    scores: [f64; LEAF_SLOTS],
    ids: [u32; LEAF_SLOTS],
}

impl Leaf {
    fn new() -> Box<Leaf> {
        Box::new(Leaf {
            len: 0,
            scores: [0.0; LEAF_SLOTS],
            ids: [0; LEAF_SLOTS],
        })
    }

    fn insert(&mut self, pos: usize, score: f64, id: u32) {
        let n = self.len;
        self.scores.copy_within(pos..n, pos + 1);
        self.ids.copy_within(pos..n, pos + 1);
        self.scores[pos] = score;
        self.ids[pos] = id;
        self.len += 1;
    }

    fn remove(&mut self, pos: usize) {
        let n = self.len;
        self.scores.copy_within(pos + 1..n, pos);
        self.ids.copy_within(pos + 1..n, pos);
        self.len -= 1;
    }

    /// Moves items `at..` to the end of `to`.
    fn move_tail(&mut self, at: usize, to: &mut Leaf) {
        let n = self.len - at;
        let t = to.len;
        to.scores[t..t + n].copy_from_slice(&self.scores[at..self.len]);
        to.ids[t..t + n].copy_from_slice(&self.ids[at..self.len]);
        to.len += n;
        self.len = at;
    }

    /// Moves the first `n` items of `from` to the end of `self`.
    fn take_front(&mut self, from: &mut Leaf, n: usize) {
        let t = self.len;
        self.scores[t..t + n].copy_from_slice(&from.scores[..n]);
        self.ids[t..t + n].copy_from_slice(&from.ids[..n]);
        self.len += n;
        from.scores.copy_within(n..from.len, 0);
        from.ids.copy_within(n..from.len, 0);
        from.len -= n;
    }

    /// Moves the last `n` items of `self` to the front of `to`.
    fn give_back(&mut self, to: &mut Leaf, n: usize) {
        let t = to.len;
        to.scores.copy_within(0..t, n);
        to.ids.copy_within(0..t, n);
        to.scores[..n].copy_from_slice(&self.scores[self.len - n..self.len]);
        to.ids[..n].copy_from_slice(&self.ids[self.len - n..self.len]);
        to.len += n;
        self.len -= n;
    }
}

#[derive(Debug, Clone)]
struct Child {
    node: Node,
    /// Ids in the subtree.
    size: u32,
    /// The subtree's smallest id (by key) and its score.
    first: u32,
    first_score: f64,
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(Box<Leaf>),
    Inner(Vec<Child>),
}

impl Node {
    fn first(&self) -> (f64, u32) {
        match self {
            Node::Leaf(l) => (l.scores[0], l.ids[0]),
            Node::Inner(k) => (k[0].first_score, k[0].first),
        }
    }

    fn size(&self) -> u32 {
        match self {
            Node::Leaf(l) => l.len as u32,
            Node::Inner(k) => k.iter().map(|c| c.size).sum(),
        }
    }

    fn items(&self) -> usize {
        match self {
            Node::Leaf(l) => l.len,
            Node::Inner(k) => k.len(),
        }
    }

    fn child(node: Node) -> Child {
        let (first_score, first) = node.first();
        Child {
            size: node.size(),
            first,
            first_score,
            node,
        }
    }

    #[cfg(test)]
    fn heap_size(&self) -> usize {
        match self {
            Node::Leaf(_) => std::mem::size_of::<Leaf>(),
            Node::Inner(k) => {
                k.capacity() * std::mem::size_of::<Child>()
                    + k.iter().map(|c| c.node.heap_size()).sum::<usize>()
            }
        }
    }
}

impl Child {
    fn refresh_first(&mut self) {
        let (s, id) = self.node.first();
        self.first_score = s;
        self.first = id;
    }
}

/// A key being looked for: its score and member (read from the table only on a score tie).
#[derive(Clone, Copy)]
struct Key<'a> {
    score: f64,
    member: &'a [u8],
}

impl Key<'_> {
    /// How the item (`score`, `id`) orders against this key.
    #[inline]
    fn cmp_item(&self, score: f64, id: u32, slab: &Slab) -> Ordering {
        match cmp_score(score, self.score) {
            Ordering::Equal => slab.get(id).member().cmp(self.member),
            o => o,
        }
    }
}

/// In inner `kids`, the last child starting at or before `key` (child 0 when none does).
#[inline]
fn route(kids: &[Child], key: Key<'_>, slab: &Slab) -> usize {
    kids[1..].partition_point(|c| key.cmp_item(c.first_score, c.first, slab) != Ordering::Greater)
}

/// Inserts `id` with key `key`; returns a right sibling when the node split.
fn tree_insert(node: &mut Node, id: u32, key: Key<'_>, slab: &Slab) -> Option<Node> {
    match node {
        Node::Leaf(l) => {
            let pos = leaf_lower_bound(l, key, slab);
            l.insert(pos, key.score, id);
            if l.len <= LEAF_CAP {
                return None;
            }
            // Appending at a leaf's end (ascending loads: timestamps, counters) leaves the
            // left leaf full; elsewhere split in halves.
            let at = if pos == l.len - 1 {
                l.len - 1
            } else {
                l.len / 2
            };
            let mut right = Leaf::new();
            l.move_tail(at, &mut right);
            Some(Node::Leaf(right))
        }
        Node::Inner(kids) => {
            let c = route(kids, key, slab);
            let split = tree_insert(&mut kids[c].node, id, key, slab);
            kids[c].size += 1;
            kids[c].refresh_first();
            if let Some(right) = split {
                let r = Node::child(right);
                kids[c].size -= r.size;
                kids.insert(c + 1, r);
            }
            if kids.len() <= INNER_CAP {
                return None;
            }
            let at = if c + 1 == kids.len() - 1 {
                kids.len() - 1
            } else {
                kids.len() / 2
            };
            let mut right = Vec::with_capacity(INNER_CAP + 1);
            right.extend(kids.drain(at..));
            Some(Node::Inner(right))
        }
    }
}

/// The position in leaf `l` of the first item not below `key`.
#[inline]
fn leaf_lower_bound(l: &Leaf, key: Key<'_>, slab: &Slab) -> usize {
    let (mut lo, mut hi) = (0, l.len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if key.cmp_item(l.scores[mid], l.ids[mid], slab) == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Removes `id` (key `key`); whether it was found.
fn tree_remove(node: &mut Node, id: u32, key: Key<'_>, slab: &Slab) -> bool {
    match node {
        Node::Leaf(l) => {
            let pos = leaf_lower_bound(l, key, slab);
            if pos >= l.len || l.ids[pos] != id {
                return false;
            }
            l.remove(pos);
            true
        }
        Node::Inner(kids) => {
            let c = route(kids, key, slab);
            if !tree_remove(&mut kids[c].node, id, key, slab) {
                return false;
            }
            kids[c].size -= 1;
            if kids[c].size == 0 {
                kids.remove(c);
                return true;
            }
            kids[c].refresh_first();
            let min = match kids[c].node {
                Node::Leaf(_) => LEAF_MIN,
                Node::Inner(_) => INNER_MIN,
            };
            if kids[c].node.items() < min && kids.len() > 1 {
                let (a, b) = if c + 1 < kids.len() {
                    (c, c + 1)
                } else {
                    (c - 1, c)
                };
                rebalance(kids, a, b);
            }
            true
        }
    }
}

/// Merges children `a` and `b = a + 1` when they fit in one node, else evens them out.
fn rebalance(kids: &mut Vec<Child>, a: usize, b: usize) {
    let (left, right) = kids.split_at_mut(b);
    let (l, r) = (&mut left[a], &mut right[0]);
    match (&mut l.node, &mut r.node) {
        (Node::Leaf(x), Node::Leaf(y)) => {
            let total = x.len + y.len;
            if total <= LEAF_CAP {
                let n = y.len;
                x.take_front(y, n);
            } else {
                let want = total / 2;
                if x.len < want {
                    let take = want - x.len;
                    x.take_front(y, take);
                } else {
                    let give = x.len - want;
                    x.give_back(y, give);
                }
            }
        }
        (Node::Inner(x), Node::Inner(y)) => {
            if x.len() + y.len() <= INNER_CAP {
                x.append(y);
            } else {
                let want = (x.len() + y.len()) / 2;
                if x.len() < want {
                    let take = want - x.len();
                    x.extend(y.drain(..take));
                } else {
                    let give = x.len() - want;
                    let tail: Vec<Child> = x.drain(x.len() - give..).collect();
                    y.splice(0..0, tail);
                }
            }
        }
        // Siblings are at the same depth.
        _ => unreachable!("siblings of different heights"),
    }
    if r.node.items() == 0 {
        l.size += r.size;
        kids.remove(b);
        return;
    }
    l.size = l.node.size();
    l.refresh_first();
    r.size = r.node.size();
    r.refresh_first();
}

/// Number of items for which `pred(score, id)` holds, `pred` being true on a prefix of the
/// order.
fn tree_count_prefix(node: &Node, pred: &mut impl FnMut(f64, u32) -> bool) -> usize {
    match node {
        Node::Leaf(l) => {
            let (mut lo, mut hi) = (0, l.len);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if pred(l.scores[mid], l.ids[mid]) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        }
        Node::Inner(kids) => {
            // Children whose first item satisfies pred: all but the last are wholly inside.
            let c = kids.partition_point(|k| pred(k.first_score, k.first));
            if c == 0 {
                return 0;
            }
            let before: usize = kids[..c - 1].iter().map(|k| k.size as usize).sum();
            before + tree_count_prefix(&kids[c - 1].node, pred)
        }
    }
}

/// Calls `f(score, id)` for ranks `start..end` (ascending) or, when `rev`, for reversed ranks
/// `start..end` (rank 0 = the largest); `f` returns false to stop. Returns false if stopped.
fn tree_walk(
    node: &Node,
    start: usize,
    end: usize,
    rev: bool,
    f: &mut impl FnMut(f64, u32) -> bool,
) -> bool {
    match node {
        Node::Leaf(l) => {
            let n = l.len;
            if rev {
                for i in (n - end.min(n)..n - start.min(n)).rev() {
                    if !f(l.scores[i], l.ids[i]) {
                        return false;
                    }
                }
            } else {
                for i in start.min(n)..end.min(n) {
                    if !f(l.scores[i], l.ids[i]) {
                        return false;
                    }
                }
            }
            true
        }
        Node::Inner(kids) => {
            let mut base = 0;
            let mut visit = |k: &Child, base: &mut usize| -> bool {
                let size = k.size as usize;
                let (lo, hi) = (*base, *base + size);
                *base = hi;
                if hi <= start || lo >= end {
                    return true;
                }
                tree_walk(
                    &k.node,
                    start.saturating_sub(lo),
                    (end - lo).min(size),
                    rev,
                    f,
                )
            };
            if rev {
                for k in kids.iter().rev() {
                    if base >= end {
                        break;
                    }
                    if !visit(k, &mut base) {
                        return false;
                    }
                }
            } else {
                for k in kids {
                    if base >= end {
                        break;
                    }
                    if !visit(k, &mut base) {
                        return false;
                    }
                }
            }
            true
        }
    }
}

type Hasher = hashbrown::DefaultHashBuilder;

/// The big form.
#[derive(Clone)]
struct Big {
    slab: Slab,
    index: HashTable<u32>,
    root: Node,
    len: usize,
    hasher: Hasher,
}

impl Big {
    fn new() -> Big {
        Big {
            slab: Slab::default(),
            index: HashTable::new(),
            root: Node::Leaf(Leaf::new()),
            len: 0,
            hasher: Hasher::default(),
        }
    }

    fn find(&self, m: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(m);
        self.index
            .find(h, |&id| self.slab.get(id).member() == m)
            .copied()
    }

    fn insert_new(&mut self, m: &[u8], score: f64) {
        let id = self.slab.alloc(Entry::new(m, score));
        let h = self.hasher.hash_one(m);
        let (slab, hasher) = (&self.slab, &self.hasher);
        self.index
            .insert_unique(h, id, |&x| hasher.hash_one(slab.get(x).member()));
        self.tree_add(id);
        self.len += 1;
    }

    fn tree_add(&mut self, id: u32) {
        let (score, member) = self.slab.key(id);
        let key = Key { score, member };
        if let Some(right) = tree_insert(&mut self.root, id, key, &self.slab) {
            let left = std::mem::replace(&mut self.root, Node::Inner(Vec::new()));
            let mut kids = Vec::with_capacity(INNER_CAP + 1);
            kids.push(Node::child(left));
            kids.push(Node::child(right));
            self.root = Node::Inner(kids);
        }
    }

    fn tree_del(&mut self, id: u32) {
        let (score, member) = self.slab.key(id);
        let key = Key { score, member };
        let found = tree_remove(&mut self.root, id, key, &self.slab);
        debug_assert!(found, "member in the index but not in the tree");
        if let Node::Inner(k) = &mut self.root {
            if k.len() == 1 {
                // One child left: it becomes the root.
                let only = k.pop().expect("one child");
                self.root = only.node;
            }
        }
    }

    fn set_score(&mut self, id: u32, score: f64) {
        if self.slab.get(id).score == score {
            return;
        }
        self.tree_del(id);
        self.slab.get_mut(id).score = score;
        self.tree_add(id);
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        let h = self.hasher.hash_one(m);
        let Ok(slot) = self
            .index
            .find_entry(h, |&id| self.slab.get(id).member() == m)
        else {
            return false;
        };
        let (id, _) = slot.remove();
        self.tree_del(id);
        self.slab.release(id);
        self.len -= 1;
        true
    }

    /// O(1): the tree is estimated as leaves three quarters full, each with its child record.
    fn heap_size(&self) -> usize {
        let leaves = self.len.div_ceil(LEAF_CAP * 3 / 4).max(1);
        self.slab.heap_size()
            + self.index.allocation_size()
            + leaves * (std::mem::size_of::<Leaf>() + std::mem::size_of::<Child>())
    }
}

/// The packed form: member and score entries alternating, in order.
#[derive(Debug, Clone, Default)]
struct Packed {
    buf: Vec<u8>,
    len: u32,
}

impl Packed {
    /// Offsets of the member entry of `m` and of the entry after its score.
    fn find(&self, m: &[u8]) -> Option<(usize, usize, f64)> {
        let mut off = 0;
        while off < self.buf.len() {
            let (e, s_off) = listpack::decode(&self.buf, off);
            let (score, next) = listpack::decode(&self.buf, s_off);
            if e.eq_bytes(m) {
                return Some((off, next, score.as_f64()));
            }
            off = next;
        }
        None
    }

    fn insert(&mut self, m: &[u8], score: f64) {
        let mut off = 0;
        while off < self.buf.len() {
            let (e, s_off) = listpack::decode(&self.buf, off);
            let (s, next) = listpack::decode(&self.buf, s_off);
            let ord = cmp_score(s.as_f64(), score).then_with(|| e.cmp_bytes(m));
            if ord == Ordering::Greater {
                break;
            }
            off = next;
        }
        let mut e = Vec::with_capacity(listpack::entry_size(m) + 10);
        listpack::push(&mut e, m);
        listpack::push_double(&mut e, score);
        self.buf.splice(off..off, e);
        self.len += 1;
    }

    fn remove_at(&mut self, start: usize, end: usize) {
        self.buf.drain(start..end);
        self.len -= 1;
    }

    fn iter(&self) -> PackedPairs<'_> {
        PackedPairs {
            it: listpack::Iter::new(&self.buf),
        }
    }
}

#[derive(Clone)]
struct PackedPairs<'a> {
    it: listpack::Iter<'a>,
}

impl<'a> Iterator for PackedPairs<'a> {
    type Item = (Elem<'a>, f64);
    fn next(&mut self) -> Option<Self::Item> {
        let m = self.it.next()?;
        let s = self.it.next()?;
        Some((m, s.as_f64()))
    }
}

impl DoubleEndedIterator for PackedPairs<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let s = self.it.next_back()?;
        let m = self.it.next_back()?;
        Some((m, s.as_f64()))
    }
}

#[derive(Clone)]
enum Repr {
    Packed(Packed),
    Big(Box<Big>),
}

/// A sorted set.
#[derive(Clone)]
pub struct ZSet {
    repr: Repr,
}

impl std::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        self.for_each_rank(0, self.len(), false, |m, s| {
            m.with_bytes(|b| {
                l.entry(&(String::from_utf8_lossy(b), s));
            });
            true
        });
        l.finish()
    }
}

/// Sorted sets are equal when their members and scores are, in order (whatever the form).
impl PartialEq for ZSet {
    fn eq(&self, other: &ZSet) -> bool {
        self.len() == other.len()
            && self
                .iter(false)
                .zip(other.iter(false))
                .all(|((a, s), (b, t))| s == t && a.with_bytes(|x| b.eq_bytes(x)))
    }
}

/// What [`ZSet::add`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Added {
    /// A new member.
    New,
    /// The member existed with this score (now replaced).
    Updated(f64),
}

impl ZSet {
    /// An empty packed set (`createZsetListpackObject`).
    pub fn new() -> ZSet {
        ZSet {
            repr: Repr::Packed(Packed::default()),
        }
    }

    /// An empty big set (`createZsetObject`).
    pub fn new_big() -> ZSet {
        ZSet {
            repr: Repr::Big(Box::new(Big::new())),
        }
    }

    /// The empty set a write that creates a key starts with: big when `zset-max-listpack-
    /// entries` is 0 or the first member is over `zset-max-listpack-value` (Redis 7.0
    /// `zaddGenericCommand`).
    pub fn for_first_member(first: &[u8], limits: ZLimits) -> ZSet {
        if limits.max_entries == 0 || first.len() > limits.max_value {
            ZSet::new_big()
        } else {
            ZSet::new()
        }
    }

    /// A set of `entries` (distinct members) as a store command builds its result: packed
    /// when it fits the limits (`zsetConvertToListpackIfNeeded`).
    pub fn from_entries<T: AsRef<[u8]>>(
        entries: impl IntoIterator<Item = (T, f64)>,
        limits: ZLimits,
    ) -> ZSet {
        let mut z = ZSet::new_big();
        let mut max_len = 0;
        for (m, s) in entries {
            let m = m.as_ref();
            max_len = max_len.max(m.len());
            z.add(m, s, limits);
        }
        z.shrink_to_limits(max_len, limits);
        z
    }

    /// Turns a big set back into the packed form when it fits (`zsetConvertToListpackIfNeeded`
    /// with the longest member's length).
    pub fn shrink_to_limits(&mut self, max_member_len: usize, limits: ZLimits) {
        if let Repr::Big(b) = &self.repr {
            if b.len <= limits.max_entries && max_member_len <= limits.max_value {
                let mut p = Packed::default();
                let mut ids = Vec::with_capacity(b.len);
                tree_walk(&b.root, 0, b.len, false, &mut |_, id| {
                    ids.push(id);
                    true
                });
                for id in ids {
                    let (s, m) = b.slab.key(id);
                    listpack::push(&mut p.buf, m);
                    listpack::push_double(&mut p.buf, s);
                    p.len += 1;
                }
                self.repr = Repr::Packed(p);
            }
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.len as usize,
            Repr::Big(b) => b.len,
        }
    }

    /// Whether there are no members (the key is then deleted by the caller).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `OBJECT ENCODING`: `listpack` or `skiplist` (the servers' name for the big form).
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Packed(_) => "listpack",
            Repr::Big(_) => "skiplist",
        }
    }

    /// Heap bytes.
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.buf.capacity(),
            Repr::Big(b) => std::mem::size_of::<Big>() + b.heap_size(),
        }
    }

    /// The score of `m`.
    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Packed(p) => p.find(m).map(|x| x.2),
            Repr::Big(b) => b.find(m).map(|id| b.slab.get(id).score),
        }
    }

    fn convert(&mut self) {
        if let Repr::Packed(p) = &self.repr {
            let mut b = Big::new();
            for (m, s) in p.iter() {
                m.with_bytes(|m| b.insert_new(m, s));
            }
            self.repr = Repr::Big(Box::new(b));
        }
    }

    /// Sets `m`'s score to `score` (not NaN), adding it if new; converts to the big form
    /// when the packed one would exceed `limits` (`zsetAdd`).
    pub fn add(&mut self, m: &[u8], score: f64, limits: ZLimits) -> Added {
        if let Repr::Packed(p) = &mut self.repr {
            if let Some((start, end, old)) = p.find(m) {
                if old != score || old.is_sign_negative() != score.is_sign_negative() {
                    p.remove_at(start, end);
                    p.insert(m, score);
                }
                return Added::Updated(old);
            }
            if p.len as usize + 1 > limits.max_entries || m.len() > limits.max_value {
                self.convert();
            } else {
                p.insert(m, score);
                return Added::New;
            }
        }
        let Repr::Big(b) = &mut self.repr else {
            unreachable!("converted above")
        };
        match b.find(m) {
            Some(id) => {
                let old = b.slab.get(id).score;
                b.set_score(id, score);
                Added::Updated(old)
            }
            None => {
                b.insert_new(m, score);
                Added::New
            }
        }
    }

    /// Removes `m`; whether it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Packed(p) => match p.find(m) {
                Some((start, end, _)) => {
                    p.remove_at(start, end);
                    true
                }
                None => false,
            },
            Repr::Big(b) => b.remove(m),
        }
    }

    /// The 0-based ascending rank of `m` (`ZRANK`).
    pub fn rank(&self, m: &[u8]) -> Option<usize> {
        match &self.repr {
            Repr::Packed(p) => p.iter().position(|(e, _)| e.eq_bytes(m)),
            Repr::Big(b) => {
                let id = b.find(m)?;
                let (score, member) = b.slab.key(id);
                let key = Key { score, member };
                Some(tree_count_prefix(&b.root, &mut |sc, x| {
                    key.cmp_item(sc, x, &b.slab) == Ordering::Less
                }))
            }
        }
    }

    /// Number of members for which `pred(score, member)` holds, `pred` being true on a
    /// prefix of the order (a lower bound's complement, an upper bound).
    pub fn count_prefix(&self, mut pred: impl FnMut(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Packed(p) => {
                let mut n = 0;
                for (m, s) in p.iter() {
                    if !m.with_bytes(|m| pred(s, m)) {
                        break;
                    }
                    n += 1;
                }
                n
            }
            Repr::Big(b) => tree_count_prefix(&b.root, &mut |s, x| pred(s, b.slab.get(x).member())),
        }
    }

    /// As [`count_prefix`](Self::count_prefix) for a predicate on scores alone (the member
    /// table is not read).
    pub fn count_prefix_score(&self, mut pred: impl FnMut(f64) -> bool) -> usize {
        match &self.repr {
            Repr::Packed(_) => self.count_prefix(|s, _| pred(s)),
            Repr::Big(b) => tree_count_prefix(&b.root, &mut |s, _| pred(s)),
        }
    }

    /// Members with a score below `min` (i.e. not satisfying the lower bound).
    pub fn rank_of_score(&self, min: ScoreBound) -> usize {
        self.count_prefix_score(|s| !min.below_ok(s))
    }

    /// Members at or below `max` (the rank just past the upper bound).
    pub fn rank_past_score(&self, max: ScoreBound) -> usize {
        self.count_prefix_score(|s| max.above_ok(s))
    }

    /// Members below the lex lower bound `min` (all scores assumed equal, as `ZRANGEBYLEX`
    /// requires).
    pub fn rank_of_lex(&self, min: &LexBound) -> usize {
        self.count_prefix(|_, m| !min.below_ok(m))
    }

    /// The rank just past the lex upper bound `max`.
    pub fn rank_past_lex(&self, max: &LexBound) -> usize {
        self.count_prefix(|_, m| max.above_ok(m))
    }

    /// Calls `f(member, score)` for ranks `start..end`, ascending, or when `rev` for
    /// reverse ranks `start..end` (reverse rank 0 is the highest); `f` returns false to stop.
    pub fn for_each_rank(
        &self,
        start: usize,
        end: usize,
        rev: bool,
        mut f: impl FnMut(Elem<'_>, f64) -> bool,
    ) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        match &self.repr {
            Repr::Packed(p) => {
                let n = end - start;
                if rev {
                    for (m, s) in p.iter().rev().skip(start).take(n) {
                        if !f(m, s) {
                            return;
                        }
                    }
                } else {
                    for (m, s) in p.iter().skip(start).take(n) {
                        if !f(m, s) {
                            return;
                        }
                    }
                }
            }
            Repr::Big(b) => {
                tree_walk(&b.root, start, end, rev, &mut |s, id| {
                    f(Elem::Str(b.slab.get(id).member()), s)
                });
            }
        }
    }

    /// The member and score at ascending rank `r`.
    pub fn at_rank(&self, r: usize) -> Option<(Vec<u8>, f64)> {
        let mut got = None;
        self.for_each_rank(r, r + 1, false, |m, s| {
            got = Some((m.to_vec(), s));
            false
        });
        got
    }

    /// Removes ranks `start..end` (ascending); how many were removed.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        let mut victims = Vec::new();
        self.for_each_rank(start, end, false, |m, _| {
            victims.push(m.to_vec());
            true
        });
        for m in &victims {
            self.remove(m);
        }
        victims.len()
    }

    /// Every member and score, ascending (or descending when `rev`), for RDB writes.
    pub fn iter(&self, rev: bool) -> ZIter<'_> {
        match &self.repr {
            Repr::Packed(p) => ZIter(IterRepr::Packed(p.iter(), rev)),
            Repr::Big(b) => ZIter(IterRepr::Big(&b.slab, Cursor::new(&b.root, rev))),
        }
    }

    /// One page of `ZSCAN` from `cursor`: up to about `count` members of the table in slot
    /// order, and the next cursor (0 when done). A packed set is returned whole. Members
    /// present for the whole scan are returned exactly once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(Elem<'_>, f64)) -> u64 {
        match &self.repr {
            Repr::Packed(p) => {
                for (m, s) in p.iter() {
                    f(m, s);
                }
                0
            }
            Repr::Big(b) => {
                let slots = b.slab.slots() as u64;
                let mut c = cursor;
                let mut seen = 0;
                while c < slots && seen < count.max(1) {
                    let e = b.slab.get(c as u32);
                    if !e.is_vacant() {
                        f(Elem::Str(e.member()), e.score);
                        seen += 1;
                    }
                    c += 1;
                }
                if c >= slots {
                    0
                } else {
                    c
                }
            }
        }
    }
}

impl Default for ZSet {
    fn default() -> ZSet {
        ZSet::new()
    }
}

/// An iterator over a set's members and scores in order ([`ZSet::iter`]).
#[derive(Clone)]
pub struct ZIter<'a>(IterRepr<'a>);

#[derive(Clone)]
enum IterRepr<'a> {
    Packed(PackedPairs<'a>, bool),
    Big(&'a Slab, Cursor<'a>),
}

/// An in-order walk of the B+tree: the path of inner nodes and the position in a leaf.
#[derive(Clone)]
struct Cursor<'a> {
    path: Vec<(&'a [Child], usize)>,
    /// The leaf being read and the next position (forward) or the position past the next
    /// one (reverse).
    leaf: Option<(&'a Leaf, usize)>,
    rev: bool,
}

impl<'a> Cursor<'a> {
    fn new(root: &'a Node, rev: bool) -> Cursor<'a> {
        let mut c = Cursor {
            path: Vec::new(),
            leaf: None,
            rev,
        };
        c.descend(root);
        c
    }

    /// Goes down to the first (or, reverse, the last) leaf under `node`.
    fn descend(&mut self, mut node: &'a Node) {
        loop {
            match node {
                Node::Leaf(l) => {
                    self.leaf = Some((l, if self.rev { l.len } else { 0 }));
                    return;
                }
                Node::Inner(kids) if kids.is_empty() => return,
                Node::Inner(kids) => {
                    let i = if self.rev { kids.len() - 1 } else { 0 };
                    self.path.push((kids, i));
                    node = &kids[i].node;
                }
            }
        }
    }

    fn next(&mut self) -> Option<(f64, u32)> {
        loop {
            if let Some((l, i)) = &mut self.leaf {
                if self.rev {
                    if *i > 0 {
                        *i -= 1;
                        return Some((l.scores[*i], l.ids[*i]));
                    }
                } else if *i < l.len {
                    let item = (l.scores[*i], l.ids[*i]);
                    *i += 1;
                    return Some(item);
                }
                self.leaf = None;
            }
            // The next sibling subtree up the path.
            loop {
                let (kids, i) = *self.path.last()?;
                let next = if self.rev {
                    i.checked_sub(1)
                } else {
                    Some(i + 1).filter(|&n| n < kids.len())
                };
                match next {
                    Some(n) => {
                        if let Some(top) = self.path.last_mut() {
                            top.1 = n;
                        }
                        self.descend(&kids[n].node);
                        break;
                    }
                    None => {
                        self.path.pop();
                    }
                }
            }
        }
    }
}

impl<'a> Iterator for ZIter<'a> {
    type Item = (Elem<'a>, f64);
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Packed(it, rev) => {
                if *rev {
                    it.next_back()
                } else {
                    it.next()
                }
            }
            IterRepr::Big(slab, cursor) => {
                let (s, id) = cursor.next()?;
                Some((Elem::Str(slab.get(id).member()), s))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn table_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        assert_eq!(std::mem::size_of::<Child>(), 40);
        assert_eq!(std::mem::size_of::<Leaf>(), 768);
    }

    #[test]
    fn converts_past_the_limits_like_zset_add() {
        let lim = ZLimits::default();
        let mut z = ZSet::new();
        for i in 0..128 {
            z.add(format!("m{i}").as_bytes(), f64::from(i), lim);
        }
        assert_eq!(z.encoding(), "listpack");
        z.add(b"m0", 5.0, lim);
        assert_eq!(z.encoding(), "listpack", "an update adds no member");
        z.add(b"m128", 1.0, lim);
        assert_eq!(z.encoding(), "skiplist");
        let mut z = ZSet::new();
        z.add(&[b'x'; 65], 1.0, lim);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(
            ZSet::for_first_member(&[b'x'; 64], lim).encoding(),
            "listpack"
        );
        assert_eq!(
            ZSet::for_first_member(&[b'x'; 65], lim).encoding(),
            "skiplist"
        );
        let z = ZSet::from_entries([("a", 1.0), ("b", 2.0)], lim);
        assert_eq!(z.encoding(), "listpack");
    }

    #[test]
    fn ascending_loads_fill_leaves() {
        let mut z = ZSet::new_big();
        for i in 0..100_000 {
            z.add(format!("m{i}").as_bytes(), f64::from(i), ZLimits::default());
        }
        // Full leaves: 768 bytes per 62 scores and ids, about 12.4 bytes each.
        let Repr::Big(b) = &z.repr else { panic!() };
        assert!(b.root.heap_size() < 100_000 * 14, "{}", b.root.heap_size());
        // The O(1) estimate of a random-order load stays within 25% of the measured size.
        let mut z = ZSet::new_big();
        let mut x = 1u64;
        for i in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            z.add(
                format!("member:{i}").as_bytes(),
                (x >> 11) as f64,
                ZLimits::default(),
            );
        }
        let Repr::Big(b) = &z.repr else { panic!() };
        let exact = b.slab.heap_size() + b.index.allocation_size() + b.root.heap_size();
        let est = b.heap_size();
        assert!(
            est * 4 >= exact * 3 && est * 4 <= exact * 5,
            "{est} vs {exact}"
        );
    }

    type Model = BTreeMap<Vec<u8>, f64>;

    fn sorted(m: &Model) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<(Vec<u8>, f64)> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
        v.sort_by(|a, b| cmp_score(a.1, b.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    fn all(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        let mut v = Vec::new();
        z.for_each_rank(0, z.len(), false, |m, s| {
            v.push((m.to_vec(), s));
            true
        });
        v
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(Vec<u8>, f64),
        Rem(Vec<u8>),
        RemRanks(usize, usize),
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => (0u32..400).prop_map(|i| format!("m{i}").into_bytes()),
            1 => (0i64..300).prop_map(|i| i.to_string().into_bytes()),
            1 => proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    fn score() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-20i32..20).prop_map(f64::from),
            (-1e6f64..1e6),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            10 => (member(), score()).prop_map(|(m, s)| Op::Add(m, s)),
            4 => member().prop_map(Op::Rem),
            1 => (0usize..50, 0usize..60).prop_map(|(a, b)| Op::RemRanks(a, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_like_an_ordered_map(
            ops in proptest::collection::vec(op(), 0..1500),
            entries in prop::sample::select(vec![0usize, 4, 128]),
        ) {
            let lim = ZLimits { max_entries: entries, max_value: 64 };
            let mut z = ZSet::new();
            let mut m = Model::new();
            for op in ops {
                match op {
                    Op::Add(k, s) => {
                        let got = z.add(&k, s, lim);
                        let want = match m.insert(k, s) { Some(o) => Added::Updated(o), None => Added::New };
                        prop_assert_eq!(got, want);
                    }
                    Op::Rem(k) => prop_assert_eq!(z.remove(&k), m.remove(&k).is_some()),
                    Op::RemRanks(a, b) => {
                        let v = sorted(&m);
                        let n = z.remove_ranks(a, b);
                        let gone = &v[a.min(v.len())..b.min(v.len()).max(a.min(v.len()))];
                        prop_assert_eq!(n, gone.len());
                        for (k, _) in gone { m.remove(k); }
                    }
                }
                prop_assert_eq!(z.len(), m.len());
            }
            let want = sorted(&m);
            prop_assert_eq!(all(&z), want.clone());
            let it: Vec<(Vec<u8>, f64)> = z.iter(false).map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(&it, &want);
            let rev: Vec<(Vec<u8>, f64)> = z.iter(true).map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
            for (i, (k, s)) in want.iter().enumerate() {
                prop_assert_eq!(z.rank(k), Some(i));
                prop_assert_eq!(z.score(k), Some(*s));
                prop_assert_eq!(z.at_rank(i), Some((k.clone(), *s)));
            }
            prop_assert_eq!(z.rank(b"absent-member"), None);
            for bound in [-5.0, 0.0, 3.5, 1e7] {
                for exclusive in [false, true] {
                    let b = ScoreBound { value: bound, exclusive };
                    let below = want.iter().filter(|(_, s)| !b.below_ok(*s)).count();
                    let upto = want.iter().filter(|(_, s)| b.above_ok(*s)).count();
                    prop_assert_eq!(z.rank_of_score(b), below);
                    prop_assert_eq!(z.rank_past_score(b), upto);
                }
            }
            // Reverse windows.
            if !want.is_empty() {
                let (a, b) = (want.len() / 4, want.len() / 2 + 1);
                let mut got = Vec::new();
                z.for_each_rank(a, b, true, |m, s| { got.push((m.to_vec(), s)); true });
                let r: Vec<(Vec<u8>, f64)> = want.iter().rev().cloned().collect();
                prop_assert_eq!(got, r[a..b.min(r.len())].to_vec());
            }
            // A full scan returns every member once.
            let mut seen = Vec::new();
            let mut c = 0;
            loop {
                c = z.scan(c, 7, |m, s| seen.push((m.to_vec(), s)));
                if c == 0 { break; }
            }
            seen.sort_by(|a, b| cmp_score(a.1, b.1).then_with(|| a.0.cmp(&b.0)));
            prop_assert_eq!(seen, want);
        }

        #[test]
        fn lex_ranges_on_equal_scores(members in proptest::collection::btree_set(proptest::collection::vec(b'a'..=b'e', 0..4), 0..300),
                                      lo in proptest::collection::vec(b'a'..=b'e', 0..3), excl in any::<bool>()) {
            let lim = ZLimits::default();
            let mut z = ZSet::new();
            for m in &members { z.add(m, 0.0, lim); }
            let want: Vec<&Vec<u8>> = members.iter().collect();
            let b = LexBound::At(lo.clone(), excl);
            prop_assert_eq!(z.rank_of_lex(&b), want.iter().filter(|m| !b.below_ok(m)).count());
            prop_assert_eq!(z.rank_past_lex(&b), want.iter().filter(|m| b.above_ok(m)).count());
            prop_assert_eq!(z.rank_of_lex(&LexBound::Min), 0);
            prop_assert_eq!(z.rank_past_lex(&LexBound::Max), members.len());
        }
    }
}
