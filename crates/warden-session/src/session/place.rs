//! Writing a value in place at a vector's end, for the hot leaves: a value pushed is copied
//! from the stack, and that copy can wait on the stores that built it.

/// The end of `v`'s elements, with room for one more: where the caller writes a value in
/// place (`end.write(Value { .. })`), then counts it (`v.set_len(len + 1)`).
///
/// `v.push(value)` copies a value built just before from the stack, and the copy's wide loads
/// wait for the narrower stores that built it to reach the cache (a failed store-to-load
/// forwarding): in a 100-rule tick, the two pushes of a firing rule's leaf took a fifth of its
/// time. A value written in place goes straight to the vector. (It must be built in the
/// `write` call itself: a helper taking the value, or a closure making it, was measured, and
/// the compiler then built it on the stack again.)
#[inline(always)]
pub(crate) fn room_for_one<T>(v: &mut Vec<T>) -> *mut T {
    if v.len() == v.capacity() {
        v.reserve(1);
    }
    v.as_mut_ptr().wrapping_add(v.len())
}
