//! A counting global allocator shared by the memory benches: it wraps `System` and tracks
//! live bytes two ways, as requested (`Layout::size`) and rounded up to jemalloc-style size
//! classes (what an allocator really hands out for small sizes, and what redis-server's
//! `used_memory` counts: 8, 16, 32, 48, ... 128, then four classes per doubling).
//! Included by path (`#[path = "common/counting_alloc.rs"] mod counting_alloc;`); it installs
//! itself as the bench binary's global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);
static LIVE_CLASSED: AtomicIsize = AtomicIsize::new(0);

/// jemalloc-style size class of a request of `n` bytes.
pub fn size_class(n: usize) -> usize {
    if n <= 8 {
        8
    } else if n <= 128 {
        n.div_ceil(16) * 16
    } else {
        let base = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
        let step = base / 4;
        n.div_ceil(step) * step
    }
}

fn add(n: usize) {
    LIVE.fetch_add(n as isize, Ordering::Relaxed);
    LIVE_CLASSED.fetch_add(size_class(n) as isize, Ordering::Relaxed);
}

fn sub(n: usize) {
    LIVE.fetch_sub(n as isize, Ordering::Relaxed);
    LIVE_CLASSED.fetch_sub(size_class(n) as isize, Ordering::Relaxed);
}

struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the only addition is bookkeeping in atomics, which
// neither allocates nor touches the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (we only hand out System memory).
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds `new_size` rules.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            sub(layout.size());
            add(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Live heap bytes now: (requested, size-classed).
pub fn live() -> (isize, isize) {
    (
        LIVE.load(Ordering::Relaxed),
        LIVE_CLASSED.load(Ordering::Relaxed),
    )
}
