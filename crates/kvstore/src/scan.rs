//! SCAN and KEYS over one database (facts sheet D.4).
//!
//! Cursor = `(table cursor << 14) | slot`, as Valkey's cluster-mode kvstore encodes it. The
//! table cursor here counts entry positions from the top of the slot's entry vector down:
//! `0` = the slot is not started, `t > 0` = positions below `t` remain. Entries only ever
//! move down (removal moves the last entry into the hole), so every key present for the
//! whole scan is returned at least once, however the table grows or shrinks in between.

use crate::store::KvStore;
use crate::{glob_match, KvError, KvValue};
use bytes::Bytes;
use ferrocluster_slot::{pattern_slot, SLOT_COUNT};
use std::hash::BuildHasher;

const SLOT_BITS: u32 = 14;
const SLOT_MASK: u64 = (SLOT_COUNT as u64) - 1;

/// Options of one SCAN call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions<'a> {
    /// `MATCH pattern` (glob, [`glob_match`]); `None` or `*` matches every key. A pattern
    /// confined to one slot ([`pattern_slot`]) visits only that slot.
    pub pattern: Option<&'a [u8]>,
    /// `COUNT`: how many stored keys to examine in this call (default 10, at least 1). The
    /// call may return fewer (filtered, expired) keys.
    pub count: usize,
    /// `TYPE`: keep only values whose [`KvValue::type_name`] equals this, ASCII
    /// case-insensitively.
    pub type_name: Option<&'a str>,
}

impl Default for ScanOptions<'_> {
    fn default() -> Self {
        ScanOptions {
            pattern: None,
            count: 10,
            type_name: None,
        }
    }
}

/// The reply of one SCAN call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScanPage {
    /// The cursor to pass next; `0` when the scan is complete.
    pub cursor: u64,
    /// Keys found in this step.
    pub keys: Vec<Bytes>,
}

impl<V: KvValue, S: BuildHasher> KvStore<V, S> {
    /// Visits every key of `db` live at `now` outside hidden slots, the keys SCAN returns, in
    /// slot order then storage order: `visit(key, value, deadline)` (absolute ms). One pass
    /// over the tables with no lookup per key (a full walk for a snapshot or an AOF
    /// rewrite's base, where SCAN + GET + PTTL would find every key three more times). Stops
    /// at the first error `visit` returns.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`]; the visitor's own error comes back as the inner `Err`.
    pub fn for_each_live<E>(
        &self,
        db: usize,
        now: u64,
        mut visit: impl FnMut(&[u8], &V, Option<u64>) -> Result<(), E>,
    ) -> Result<Result<(), E>, KvError> {
        let Some(d) = self.db(db)? else {
            return Ok(Ok(()));
        };
        let mut slot = 0;
        while let Some(s) = d.nonempty.next_from(slot, self.hidden_bits()) {
            if let Some(t) = d.table(s) {
                for (pos, e) in t.entries.iter().enumerate() {
                    if t.is_expired(pos, now) {
                        continue;
                    }
                    if let Err(err) = visit(e.key.as_bytes(), &e.value, t.deadline(pos)) {
                        return Ok(Err(err));
                    }
                }
            }
            slot = s + 1;
        }
        Ok(Ok(()))
    }
}

impl<V: KvValue, S: BuildHasher> KvStore<V, S> {
    /// One SCAN step over `db` from `cursor` (start with 0; continue until it returns 0).
    ///
    /// Returns keys live at `now`, outside hidden slots, matching the options. Guarantee: a key
    /// present in a visible slot for the whole scan is returned at least once; a key may be
    /// returned more than once. Slots are visited in ascending order, skipping empty and hidden
    /// ones; with a single-slot `MATCH` pattern the scan jumps to that slot (cursor slot lower)
    /// or ends (cursor slot higher), and ends when the slot is done (facts sheet D.4).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`]; [`KvError::ZeroScanCount`] when `count` is 0.
    pub fn scan(
        &self,
        db: usize,
        cursor: u64,
        opts: &ScanOptions<'_>,
        now: u64,
    ) -> Result<ScanPage, KvError> {
        if opts.count == 0 {
            return Err(KvError::ZeroScanCount);
        }
        let d = self.db(db)?;
        let pattern = opts.pattern.filter(|p| *p != b"*");
        let target = pattern.and_then(pattern_slot).map(|s| s.index());
        let mut slot = (cursor & SLOT_MASK) as usize;
        let mut top = cursor >> SLOT_BITS;
        let mut page = ScanPage::default();
        if let Some(t) = target {
            if slot < t {
                (slot, top) = (t, 0);
            } else if slot > t {
                return Ok(page);
            }
        }
        let Some(d) = d else { return Ok(page) };
        let mut examined = 0usize;
        loop {
            let table = if self.is_hidden_index(slot) {
                None
            } else {
                d.table(slot)
            };
            if let Some(t) = table {
                let len = t.len() as u64;
                let mut pos = if top == 0 || top > len { len } else { top };
                while pos > 0 && examined < opts.count {
                    pos -= 1;
                    examined += 1;
                    // `pos < len`, which came from a usize.
                    let p = pos as usize;
                    let e = &t.entries[p];
                    let key = e.key.as_bytes();
                    if t.is_expired(p, now)
                        || pattern.is_some_and(|pat| !glob_match(pat, key))
                        || opts
                            .type_name
                            .is_some_and(|ty| !e.value.type_name().eq_ignore_ascii_case(ty))
                    {
                        continue;
                    }
                    page.keys.push(Bytes::copy_from_slice(key));
                }
                if pos > 0 {
                    page.cursor = (pos << SLOT_BITS) | slot as u64;
                    return Ok(page);
                }
            }
            if target.is_some() {
                return Ok(page);
            }
            match d.nonempty.next_from(slot + 1, self.hidden_bits()) {
                None => return Ok(page),
                Some(next) => {
                    (slot, top) = (next, 0);
                    if examined >= opts.count {
                        // `next > 0`, so this cursor is not 0.
                        page.cursor = next as u64;
                        return Ok(page);
                    }
                }
            }
        }
    }

    /// One page of the entries of one slot of `db`, hidden or not, for a caller that walks a
    /// slot in small steps (a slot migration's snapshot, which must not hold the host's lock
    /// for a whole slot). `visit` gets each live entry as (key, value, deadline in unix ms or
    /// `None`). Start with `cursor` 0; the returned cursor continues the walk and is 0 at the
    /// end. At most `count` entries are examined (at least one per call); keys expired at `now`
    /// are left out. Every key present in the slot for the whole walk is visited at least once,
    /// also while keys are added and removed between pages (the walk goes down the dense entry
    /// vector, whose removals move the last entry into the hole).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn slot_page(
        &self,
        db: usize,
        slot: ferrocluster_slot::Slot,
        cursor: u64,
        count: usize,
        now: u64,
        mut visit: impl FnMut(&[u8], &V, Option<u64>),
    ) -> Result<u64, KvError> {
        let Some(t) = self.db(db)?.and_then(|d| d.table(slot.index())) else {
            return Ok(0);
        };
        let len = t.len() as u64;
        let mut pos = if cursor == 0 || cursor > len {
            len
        } else {
            cursor
        };
        let mut examined = 0usize;
        while pos > 0 && examined < count.max(1) {
            pos -= 1;
            examined += 1;
            let p = pos as usize;
            if !t.is_expired(p, now) {
                let e = &t.entries[p];
                visit(e.key.as_bytes(), &e.value, t.deadline(p));
            }
        }
        Ok(pos)
    }

    /// KEYS: every key of `db` live at `now`, outside hidden slots, matching `pattern` (glob;
    /// `*` matches all, including the empty key). A single-slot pattern visits only that slot
    /// (facts sheet D.4). Order: slots ascending, then storage order.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn keys(&self, db: usize, pattern: &[u8], now: u64) -> Result<Vec<Bytes>, KvError> {
        let Some(d) = self.db(db)? else {
            return Ok(Vec::new());
        };
        let all = pattern == b"*";
        let mut out = Vec::new();
        let mut visit = |slot: usize| {
            let Some(t) = d.table(slot) else { return };
            for (p, e) in t.entries.iter().enumerate() {
                let key = e.key.as_bytes();
                if !t.is_expired(p, now) && (all || glob_match(pattern, key)) {
                    out.push(Bytes::copy_from_slice(key));
                }
            }
        };
        match pattern_slot(pattern).filter(|_| !all) {
            Some(s) => {
                if !self.is_hidden_index(s.index()) {
                    visit(s.index());
                }
            }
            None => {
                let mut slot = 0;
                while let Some(s) = d.nonempty.next_from(slot, self.hidden_bits()) {
                    visit(s);
                    slot = s + 1;
                }
            }
        }
        Ok(out)
    }
}
