//! The `warden` binary's allocator: the system's, until `warden serve` starts; mimalloc from then
//! on.
//!
//! Most of the binary's commands are short processes (Claude Code runs `warden hook` once per
//! event), and those are fastest on the system allocator: on mimalloc a hook process took about
//! 13% longer, its set-up and the pages it touches first costing more than it saves. A server that
//! allocates and frees on every request, from several threads, is the other way round: `warden
//! serve` spends about 10% less CPU per event on mimalloc. Both were measured side by side; the
//! figures are in the book (serve.md, "Performance"; reference/performance.md for the hook). So
//! the process starts on the system allocator and the command line switches when it serves
//! ([`use_mimalloc`]). mimalloc is linked in every process all the same: it sets up its page map
//! when the binary loads, and reads its `MIMALLOC_*` environment variables.
//!
//! A block is freed, or grown, by the allocator that made it: mimalloc's page map says whether a
//! pointer is one of its own ([`is_mimalloc`]). The switch is one-way, and a block made by
//! mimalloc reaches another thread only through some synchronisation after the allocating
//! thread saw the switch, so the thread that frees it sees the switch too (a relaxed load
//! suffices: it cannot read a value older than one that happened before it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use libmimalloc_sys as mi;

/// Whether new blocks come from mimalloc. Never set back.
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// The largest alignment asked of mimalloc. It maps a block aligned past 64 KiB straight from
/// the system, and its page map then also claims the 64 KiB past that mapping's end, where the
/// system allocator may map a block of its own, which [`is_mimalloc`] would then take for
/// mimalloc's. Blocks aligned past this stay the system's (Warden asks for none).
const MIMALLOC_MAX_ALIGN: usize = 64 << 10;

/// From now on, new blocks come from mimalloc; unless `MIMALLOC_DESTROY_ON_EXIT` is set, which
/// makes mimalloc unmap its page map at exit while other threads may still free blocks (they
/// would go to the wrong allocator): then the process stays on the system allocator.
pub fn use_mimalloc() {
    let destroys_on_exit = std::env::var_os("MIMALLOC_DESTROY_ON_EXIT")
        .is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"));
    if !destroys_on_exit {
        MIMALLOC.store(true, Ordering::Relaxed);
    }
}

/// The global allocator of the `warden` binary (see the module's documentation).
pub struct Switching;

/// The alignment every block of mimalloc's `mi_malloc` has at least, when its size is at least
/// that (`MI_MAX_ALIGN_SIZE`); a smaller block is aligned to its size's power of two. As the
/// standard library does for the system's `malloc`, a layout within that is asked of
/// `mi_malloc` (about 20 instructions fewer a block than `mi_malloc_aligned`'s checks).
const MIMALLOC_MIN_ALIGN: usize = 16;

/// Whether mimalloc's unaligned functions give a block of this layout its alignment.
fn natural(layout: Layout) -> bool {
    layout.align() <= MIMALLOC_MIN_ALIGN && layout.align() <= layout.size()
}

/// Whether a block of this size and alignment is to come from mimalloc.
fn to_mimalloc(layout: Layout) -> bool {
    MIMALLOC.load(Ordering::Relaxed) && layout.align() <= MIMALLOC_MAX_ALIGN
}

/// Whether `ptr`, a live block of this allocator, is mimalloc's.
fn is_mimalloc(ptr: *mut u8) -> bool {
    // SAFETY: `mi_is_in_heap_region` only looks the address up in mimalloc's page map, which
    // is set up when the binary loads and answers for any address. It is exact for the blocks
    // this allocator asks of mimalloc (none aligned past `MIMALLOC_MAX_ALIGN`).
    MIMALLOC.load(Ordering::Relaxed) && unsafe { mi::mi_is_in_heap_region(ptr.cast()) }
}

// SAFETY: every block is allocated by exactly one of the two allocators and handed back to the
// same one (`is_mimalloc`); each keeps `GlobalAlloc`'s contract: mimalloc's aligned functions
// return a block of the size and alignment asked for, or null.
unsafe impl GlobalAlloc for Switching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if to_mimalloc(layout) {
            // SAFETY: as `GlobalAlloc::alloc`'s caller promises, `layout` is valid and not empty;
            // `mi_malloc` aligns a `natural` layout's block as asked.
            unsafe {
                if natural(layout) {
                    mi::mi_malloc(layout.size()).cast()
                } else {
                    mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
                }
            }
        } else {
            // SAFETY: as above.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if to_mimalloc(layout) {
            // SAFETY: as in `alloc`.
            unsafe {
                if natural(layout) {
                    mi::mi_zalloc(layout.size()).cast()
                } else {
                    mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
                }
            }
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
            // SAFETY: `ptr` is a live block mimalloc allocated with `layout.align()`; the new
            // size's layout decides as in `alloc`.
            unsafe {
                if layout.align() <= MIMALLOC_MIN_ALIGN && layout.align() <= new_size {
                    mi::mi_realloc(ptr.cast(), new_size).cast()
                } else {
                    mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
                }
            }
        } else {
            // SAFETY: `ptr` is a live block the system allocator allocated with `layout`; a
            // block made before the switch stays the system's when it grows.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

// The switch is for the whole process: it is thrown in this test binary's one test, and a test
// added here would run on whichever allocator the switch had left.
#[cfg(test)]
mod tests {
    use super::*;

    fn owner(block: &[u64]) -> bool {
        is_mimalloc(block.as_ptr().cast_mut().cast())
    }

    /// Blocks made before the switch and after it, grown on other threads (and moved by their
    /// allocator as they grow) and freed there: each stays with, and goes back to, the
    /// allocator that made it; and a block aligned past what mimalloc is asked for is the
    /// system's.
    #[test]
    fn blocks_outlive_the_switch() {
        let before: Vec<Vec<u64>> = (0..1000).map(|i| vec![i; 1 + i as usize % 64]).collect();
        let mut grown_before = vec![1u8; 10];
        assert!(before.iter().all(|b| !owner(b)));
        use_mimalloc();
        let after: Vec<Vec<u64>> = (0..1000).map(|i| vec![i; 1 + i as usize % 64]).collect();
        assert!(after.iter().all(|b| owner(b)));
        // Grown past the system allocator's threshold for blocks of their own mapping.
        grown_before.extend(std::iter::repeat_n(2u8, 1 << 20));
        assert!(!is_mimalloc(grown_before.as_mut_ptr()));
        let threads: Vec<_> = [(before, false), (after, true)]
            .into_iter()
            .map(|(mut blocks, mimalloc)| {
                std::thread::spawn(move || {
                    for b in &mut blocks {
                        b.extend_from_slice(&[7; 100]);
                    }
                    blocks.iter().all(|b| owner(b) == mimalloc)
                    // `blocks` is freed here, on this thread.
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().unwrap(), "a grown block changed allocator");
        }
        // Every small layout, natural or not (an alignment past the size), made, grown and
        // shrunk: each block keeps its alignment and its bytes.
        for align in [1, 2, 4, 8, 16, 32, 64] {
            for size in (1..=80).chain([4096, 70_000]) {
                let layout = Layout::from_size_align(size, align).unwrap();
                for new_size in [size * 3, size.div_ceil(2)] {
                    let grown = Layout::from_size_align(new_size, align).unwrap();
                    // SAFETY: `layout` and `grown` are valid and not empty; each block is
                    // resized and freed with the layout it has.
                    unsafe {
                        let p = Switching.alloc(layout);
                        assert!(
                            !p.is_null() && (p as usize).is_multiple_of(align),
                            "{layout:?}"
                        );
                        assert!(is_mimalloc(p));
                        p.write_bytes(0xa5, size);
                        let q = Switching.realloc(p, layout, new_size);
                        assert!(
                            (q as usize).is_multiple_of(align),
                            "{layout:?} to {new_size}"
                        );
                        assert!((0..size.min(new_size)).all(|i| *q.add(i) == 0xa5));
                        let back = Switching.realloc(q, grown, size);
                        assert!((back as usize).is_multiple_of(align), "{grown:?} to {size}");
                        Switching.dealloc(back, layout);
                        let zeroed = Switching.alloc_zeroed(layout);
                        assert!(
                            (zeroed as usize).is_multiple_of(align) && *zeroed.add(size - 1) == 0
                        );
                        Switching.dealloc(zeroed, layout);
                    }
                }
            }
        }
        for align in [4096, MIMALLOC_MAX_ALIGN, 2 * MIMALLOC_MAX_ALIGN] {
            let layout = Layout::from_size_align(1 << 17, align).unwrap();
            // SAFETY: `layout` is valid and not empty; the block is freed with it.
            unsafe {
                let p = Switching.alloc_zeroed(layout);
                assert!(!p.is_null() && (p as usize).is_multiple_of(align) && *p.add(100) == 0);
                assert_eq!(
                    is_mimalloc(p),
                    align <= MIMALLOC_MAX_ALIGN,
                    "alignment {align}"
                );
                Switching.dealloc(p, layout);
            }
        }
    }
}
