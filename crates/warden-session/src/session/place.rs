//! Writing a value in place at a vector's end, for the hot leaves.

/// The end of `v`'s elements, with room for one more: the caller writes a value there, built in
/// the `write` call itself (`end.write(Value { .. })`), then counts it (`v.set_len(len + 1)`).
/// A pushed value is copied from the stack, and the copy waits on the narrower stores that
/// built it: a fifth of a 100-rule tick (the book's performance chapter, seventh round).
#[inline(always)]
pub(crate) fn room_for_one<T>(v: &mut Vec<T>) -> *mut T {
    if v.len() == v.capacity() {
        v.reserve(1);
    }
    v.as_mut_ptr().wrapping_add(v.len())
}
