//! Fixed arrays for the hot loop, indexed without bounds checks and without `unsafe`.
//!
//! An array whose length is a power of two, indexed by `i & (len - 1)`: for every valid
//! index (below the length) the mask changes nothing, and it tells the compiler that the
//! index is in bounds, so the check disappears. Used for the per-flow and per-buffer arrays
//! the loop touches on every packet, where a bounds check per access would be a good part
//! of the harness's cost.
//!
//! ```text
//! let nodes = &mut *self.nodes;   // borrow once: pointer and length stay in registers
//! let m = mask(nodes);
//! nodes[f as usize & m].next = g; // no bounds check
//! ```

/// A boxed array of at least `min_len` copies of `fill`, its length a power of two.
pub(crate) fn pow2<T: Clone>(min_len: usize, fill: T) -> Box<[T]> {
    vec![fill; min_len.max(1).next_power_of_two()].into_boxed_slice()
}

/// The index mask of an array made by [`pow2`].
#[inline(always)]
pub(crate) fn mask<T>(s: &[T]) -> usize {
    debug_assert!(s.len().is_power_of_two());
    // Non-empty, so `len - 1` does not wrap and `i & mask < len` for every `i`.
    assert!(!s.is_empty());
    s.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_powers_of_two_covering_the_request() {
        assert_eq!(pow2(0, 0u8).len(), 1);
        assert_eq!(pow2(5, 0u8).len(), 8);
        assert_eq!(pow2(8, 0u8).len(), 8);
        let s = pow2(1025, 0u32);
        assert_eq!((s.len(), mask(&s)), (2048, 2047));
    }
}
