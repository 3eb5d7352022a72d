//! Argument parsing shared by MIGRATESLOTS and SYNCSLOTS ESTABLISH (Valkey
//! `parseSlotRangesOrReply`, `getSlotOrReply`, `string2ll`).

use crate::error::MigrationError;
use ferrocluster_slot::{Slot, SlotRange, SLOT_COUNT};
use ferrocluster_topology::{NodeId, Topology};

/// Strict decimal integer as Valkey's `string2ll`: optional `-`, no `+`, no spaces, no
/// leading zeros (except `0` itself), fits in `i64`.
pub(crate) fn parse_ll(arg: &[u8]) -> Option<i64> {
    let (neg, digits) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || neg) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// `getSlotOrReply`: an integer in `0..16384`, else `Invalid or out of range slot`.
pub(crate) fn parse_slot(arg: &[u8]) -> Result<Slot, MigrationError> {
    match parse_ll(arg) {
        Some(n) if (0..SLOT_COUNT as i64).contains(&n) => {
            Slot::try_from(n).map_err(|_| MigrationError::InvalidSlot)
        }
        _ => Err(MigrationError::InvalidSlot),
    }
}

/// Case-insensitive ASCII comparison of an argument with a keyword.
pub(crate) fn eq_ic(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Ranges parsed from `argv[start..]`.
pub(crate) struct ParsedRanges {
    pub ranges: Vec<SlotRange>,
    /// Index of the first argument after the ranges.
    pub next: usize,
    /// The one node owning every slot.
    pub owner: NodeId,
}

/// `parseSlotRangesOrReply`: pairs of slots until the first non-integer (taken as the next
/// keyword). Errors in Valkey's order: `Invalid or out of range slot`, `No end slot for final
/// slot range`, `Start slot number <s> is greater than end slot number <e>.`, `Slot <n> has
/// no node served.`, `Requested slots span multiple shards`, `Slot range <a>-<b> overlaps
/// with previous range <c>-<d>.`, and after the loop `No slot ranges specified`.
pub(crate) fn parse_ranges<A: AsRef<[u8]>>(
    argv: &[A],
    start: usize,
    topo: &Topology,
) -> Result<ParsedRanges, MigrationError> {
    let mut ranges: Vec<SlotRange> = Vec::new();
    let mut owner: Option<NodeId> = None;
    let mut next = argv.len();
    let mut i = start;
    while i < argv.len() {
        if parse_ll(argv[i].as_ref()).is_none() {
            next = i;
            break;
        }
        let s = parse_slot(argv[i].as_ref())?;
        let Some(end_arg) = argv.get(i + 1) else {
            return Err(MigrationError::NoEndSlot);
        };
        let e = parse_slot(end_arg.as_ref())?;
        let range =
            SlotRange::new(s, e).map_err(|_| MigrationError::StartAfterEnd(s.get(), e.get()))?;
        for slot in range.iter() {
            match (topo.slot_owner(slot), owner) {
                (None, _) => return Err(MigrationError::SlotUnowned(slot.get())),
                (Some(o), None) => owner = Some(*o),
                (Some(o), Some(prev)) if *o != prev => return Err(MigrationError::MultipleShards),
                _ => {}
            }
        }
        if let Some(p) = ranges.iter().find(|p| overlaps(p, &range)) {
            return Err(MigrationError::RangeOverlap(
                s.get(),
                e.get(),
                p.start().get(),
                p.end().get(),
            ));
        }
        ranges.push(range);
        i += 2;
    }
    match owner {
        Some(owner) if !ranges.is_empty() => Ok(ParsedRanges {
            ranges,
            next,
            owner,
        }),
        _ => Err(MigrationError::NoRanges),
    }
}

/// Whether two inclusive ranges share a slot.
pub(crate) fn overlaps(a: &SlotRange, b: &SlotRange) -> bool {
    a.end() >= b.start() && a.start() <= b.end()
}

#[cfg(test)]
mod tests {
    use super::parse_ll;

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_ll(b"0"), Some(0));
        assert_eq!(parse_ll(b"16383"), Some(16383));
        assert_eq!(parse_ll(b"-5"), Some(-5));
        assert_eq!(parse_ll(b"01"), None);
        assert_eq!(parse_ll(b"-0"), None);
        assert_eq!(parse_ll(b"+1"), None);
        assert_eq!(parse_ll(b""), None);
        assert_eq!(parse_ll(b"a"), None);
        assert_eq!(parse_ll(b"99999999999999999999"), None);
        assert_eq!(parse_ll(b"-9223372036854775808"), Some(i64::MIN));
    }
}
