//! Room at a vector's end for the hot path: a value written in place by the leaves, and a
//! tick's own vectors allocated whole.

/// The end of `v`'s elements, with room for one more. The caller writes a value there, built in
/// the `write` call itself, touching nothing of `v`, then counts it: `v.set_len(len + 1)`, `len`
/// the length before. A pushed value is copied from the stack, and the copy waits on the stores
/// that built it: a fifth of a 100-rule tick (the book's performance chapter, seventh round).
#[inline(always)]
pub(crate) fn room_for_one<T>(v: &mut Vec<T>) -> *mut T {
    if v.len() == v.capacity() {
        v.reserve(1);
    }
    debug_assert!(v.capacity() > v.len());
    v.as_mut_ptr().wrapping_add(v.len())
}

/// Room for `n` more in `v`. A vector not yet allocated (the tick's own, most often) is
/// allocated whole: `Vec::reserve` takes the path that grows a vector, about 50 instructions
/// more, at every tick that selects a tree. Exactly `n`, where `reserve` makes room for four
/// at least: a tree of several rules, or a tree of another hook resumed after this hook's
/// (neither counted in `n`), grows the trace once more, a rarer tick than the lone waiting
/// script's, which saves its 50. (`n.max(4)` was measured: the compiler then laid the step out
/// differently, 100 instructions more in `hundred-rules`.)
#[inline]
pub(crate) fn room<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() - v.len() >= n {
        // (No tree selected, most often.)
    } else if v.capacity() == 0 {
        *v = Vec::with_capacity(n);
    } else {
        v.reserve(n);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::room_for_one;

    /// Values with a destructor, written past the vector's first capacities: each is counted
    /// once and dropped once (a test Miri can run: no Lua, no input or output).
    #[test]
    fn values_written_in_place_are_counted_and_dropped_once() {
        let shared: Arc<str> = Arc::from("shared");
        let mut v: Vec<(Arc<str>, usize)> = Vec::new();
        for i in 0..10 {
            let len = v.len();
            let end = room_for_one(&mut v);
            // SAFETY: `end` is the vector's end, with room for one more: written, then counted.
            unsafe {
                end.write((shared.clone(), i));
                v.set_len(len + 1);
            }
        }
        assert_eq!(
            v.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        assert_eq!(Arc::strong_count(&shared), 11);
        drop(v);
        assert_eq!(Arc::strong_count(&shared), 1);
    }
}
