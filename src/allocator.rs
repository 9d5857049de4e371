//! The `warden` binary's allocator: the system's, until `warden serve` starts; mimalloc from then
//! on.
//!
//! Most of the binary's commands are short processes (Claude Code runs `warden hook` once per
//! event), and those are fastest on the system allocator: on mimalloc a hook process took about
//! 13% longer, its set-up and the pages it touches first costing more than it saves. A server that
//! allocates and frees on every request, from several threads, is the other way round: `warden
//! serve` spends about 12% less CPU per event on mimalloc (both measured side by side; the book's
//! reference/performance.md has the figures). So the process starts on the system allocator
//! and the command line switches when it serves ([`use_mimalloc`]).
//!
//! A block allocated before the switch is freed, or grown, by the allocator that made it:
//! mimalloc's page map says whether a pointer is one of its own. The switch is one-way, so a
//! thread that frees a block mimalloc made has seen the switch (the block reached it through
//! some synchronisation after the allocating thread saw it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use libmimalloc_sys as mi;

/// Whether new blocks come from mimalloc. Never set back.
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// From now on, new blocks come from mimalloc.
pub fn use_mimalloc() {
    MIMALLOC.store(true, Ordering::Release);
}

/// The global allocator of the `warden` binary (see the module's documentation).
pub struct Switching;

/// Whether `ptr`, a live block of this allocator, is mimalloc's.
fn is_mimalloc(ptr: *mut u8) -> bool {
    // SAFETY: `mi_is_in_heap_region` only looks the address up in mimalloc's page map, which it
    // answers for any address, before mimalloc's first allocation too.
    MIMALLOC.load(Ordering::Acquire) && unsafe { mi::mi_is_in_heap_region(ptr.cast()) }
}

// SAFETY: every block is allocated by exactly one of the two allocators and handed back to the
// same one (`is_mimalloc`); each of them keeps `GlobalAlloc`'s contract, which mimalloc's
// aligned functions do for any size and alignment.
unsafe impl GlobalAlloc for Switching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if MIMALLOC.load(Ordering::Acquire) {
            // SAFETY: as `GlobalAlloc::alloc`'s caller promises, `layout` is valid and not empty.
            unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()).cast() }
        } else {
            // SAFETY: as above.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if MIMALLOC.load(Ordering::Acquire) {
            // SAFETY: as in `alloc`.
            unsafe { mi::mi_zalloc_aligned(layout.size(), layout.align()).cast() }
        } else {
            // SAFETY: as in `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_mimalloc(ptr) {
            // SAFETY: `ptr` is a live block mimalloc allocated.
            unsafe { mi::mi_free(ptr.cast()) }
        } else {
            // SAFETY: `ptr` is a live block the system allocator allocated with `layout`.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if is_mimalloc(ptr) {
            // SAFETY: `ptr` is a live block mimalloc allocated with `layout.align()`.
            unsafe { mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast() }
        } else {
            // SAFETY: `ptr` is a live block the system allocator allocated with `layout`; a
            // block made before the switch stays the system's when it grows.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks made before the switch and after it, grown and freed in every order, on several
    /// threads: each goes back to the allocator that made it (a mix-up would abort the test).
    #[test]
    fn blocks_outlive_the_switch() {
        let before: Vec<Vec<u64>> = (0..1000).map(|i| vec![i; 1 + i as usize % 64]).collect();
        let mut grown_before = vec![1u8; 10];
        use_mimalloc();
        let after: Vec<Vec<u64>> = (0..1000).map(|i| vec![i; 1 + i as usize % 64]).collect();
        assert!(is_mimalloc(after[0].as_ptr() as *mut u8));
        assert!(!is_mimalloc(before[0].as_ptr() as *mut u8));
        grown_before.extend(std::iter::repeat_n(2u8, 1 << 20));
        assert!(!is_mimalloc(grown_before.as_mut_ptr()));
        let threads: Vec<_> = [before, after]
            .into_iter()
            .map(|blocks| {
                std::thread::spawn(move || {
                    let mut kept = blocks;
                    for b in &mut kept {
                        b.extend_from_slice(&[7; 100]);
                    }
                    kept.iter().map(|b| b.len()).sum::<usize>()
                })
            })
            .collect();
        let sums: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(sums[0], sums[1]);
        let big = Layout::from_size_align(1 << 16, 4096).unwrap();
        // SAFETY: `big` is valid and not empty; the block is freed with the same layout.
        unsafe {
            let p = Switching.alloc_zeroed(big);
            assert!(!p.is_null() && p as usize % 4096 == 0 && *p.add(100) == 0);
            Switching.dealloc(p, big);
        }
    }
}
