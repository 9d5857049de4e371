//! Writing a value in place at a vector's end, for the hot leaves.

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
