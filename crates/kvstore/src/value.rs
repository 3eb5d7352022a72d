//! The trait a stored value implements.

use bytes::Bytes;

/// What the store needs to know about a value: its heap footprint (for the per-slot
/// `memory-bytes` figure) and its Redis type name (for `SCAN ... TYPE`).
///
/// `heap_size` MUST return the same number for a value that did not change; the store adds it
/// on insert and subtracts it on removal (a value changed in place through
/// [`crate::ValueMut`] is measured again when the guard drops).
pub trait KvValue {
    /// Heap bytes this value owns, not counting `size_of::<Self>()` (which the store adds).
    fn heap_size(&self) -> usize;

    /// The Redis type name `TYPE` replies with (`"string"`, `"list"`, `"set"`, `"zset"`,
    /// `"hash"`, `"stream"`, or a module type name). SCAN `TYPE` compares it ASCII
    /// case-insensitively, as Redis does.
    fn type_name(&self) -> &'static str;
}

/// A string value; the heap is the capacity.
impl KvValue for Vec<u8> {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
    fn type_name(&self) -> &'static str {
        "string"
    }
}

/// A string value; the heap is the length.
impl KvValue for Box<[u8]> {
    fn heap_size(&self) -> usize {
        self.len()
    }
    fn type_name(&self) -> &'static str {
        "string"
    }
}

/// A string value; the heap is the length (a shared buffer is attributed to every holder).
impl KvValue for Bytes {
    fn heap_size(&self) -> usize {
        self.len()
    }
    fn type_name(&self) -> &'static str {
        "string"
    }
}

/// A string value; the heap is the capacity.
impl KvValue for String {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
    fn type_name(&self) -> &'static str {
        "string"
    }
}
