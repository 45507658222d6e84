//! Fixed arrays for the hot loop, indexed without bounds checks and without `unsafe`.
//!
//! Two ways to make an index evidently in bounds, one per index [`Width`]:
//!
//! - `u32` indices, into an array whose length is a power of two, indexed by
//!   `i & (len - 1)`: for every valid index (below the length) the mask changes nothing,
//!   and it tells the compiler that the index is in bounds, so the check disappears.
//!   `masked` borrows such an array with its mask, re-cut to `..=mask`, which states
//!   `len == mask + 1` right where the compiler needs it.
//! - `u16` indices, into an array of exactly `2^16` entries: every `u16` is in bounds, so
//!   an index needs no operation at all, and one loaded from memory arrives zero-extended
//!   for free. The loop's per-flow tables use this width when there are few enough
//!   flows (the benchmark's range), and the mask otherwise.
//!
//! ```text
//! let (nodes, m) = masked(&mut self.nodes); // borrow once: pointer and mask in registers
//! nodes[f as usize & m].next = g;           // no bounds check
//! ```

use std::fmt::Debug;

/// A boxed array of at least `min_len` copies of `fill`, its length a power of two.
pub(crate) fn pow2<T: Clone>(min_len: usize, fill: T) -> Box<[T]> {
    vec![fill; min_len.max(1).next_power_of_two()].into_boxed_slice()
}

/// An array made by [`pow2`] and its index mask.
#[inline(always)]
pub(crate) fn masked<T>(s: &mut [T]) -> (&mut [T], usize) {
    debug_assert!(s.len().is_power_of_two());
    // Non-empty, so `m` does not wrap; the cut makes `i & m < len` evident for every `i`.
    let m = s.len().wrapping_sub(1);
    (&mut s[..=m], m)
}

/// A power-of-two array borrowed with its mask (`masked`).
pub struct Masked<'a, T> {
    s: &'a mut [T],
    m: usize,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
}

/// The type of the indices of a table of the hot loop, and how it is indexed.
pub trait Width: Copy + Eq + Default + Debug + Send + Sync + 'static + sealed::Sealed {
    /// The most entries a table of this width has.
    const MAX_LEN: u64;

    /// A table borrowed for the loop.
    type Table<'a, T: 'a>;

    /// The length of a table of at least `min_len` entries (`1..=MAX_LEN`).
    fn table_len(min_len: usize) -> usize;

    /// The index `i` (truncated).
    fn new(i: u32) -> Self;

    /// The index as a `u32`.
    fn get(self) -> u32;

    /// Borrows `s`, of length `table_len(_)`, for the loop.
    fn table<T>(s: &mut [T]) -> Self::Table<'_, T>;

    /// Entry `i` of `t`, `i` truncated to the table's length.
    fn at<'b, T>(t: &'b mut Self::Table<'_, T>, i: Self) -> &'b mut T;
}

/// Tables of exactly `2^16` entries.
impl Width for u16 {
    const MAX_LEN: u64 = 1 << 16;

    type Table<'a, T: 'a> = &'a mut [T; 1 << 16];

    fn table_len(min_len: usize) -> usize {
        assert!(
            min_len as u64 <= Self::MAX_LEN,
            "table too long for u16 indices"
        );
        1 << 16
    }

    #[inline(always)]
    fn new(i: u32) -> Self {
        i as u16
    }

    #[inline(always)]
    fn get(self) -> u32 {
        u32::from(self)
    }

    #[inline(always)]
    fn table<T>(s: &mut [T]) -> &mut [T; 1 << 16] {
        s.try_into().expect("a u16 table has 2^16 entries")
    }

    #[inline(always)]
    fn at<'b, T>(t: &'b mut &mut [T; 1 << 16], i: u16) -> &'b mut T {
        &mut t[usize::from(i)]
    }
}

/// Power-of-two tables, indexed through a mask.
impl Width for u32 {
    const MAX_LEN: u64 = 1 << 32;

    type Table<'a, T: 'a> = Masked<'a, T>;

    fn table_len(min_len: usize) -> usize {
        assert!(
            min_len as u64 <= Self::MAX_LEN,
            "table too long for u32 indices"
        );
        min_len.max(1).next_power_of_two()
    }

    #[inline(always)]
    fn new(i: u32) -> Self {
        i
    }

    #[inline(always)]
    fn get(self) -> u32 {
        self
    }

    #[inline(always)]
    fn table<T>(s: &mut [T]) -> Masked<'_, T> {
        let (s, m) = masked(s);
        Masked { s, m }
    }

    #[inline(always)]
    fn at<'b, T>(t: &'b mut Masked<'_, T>, i: u32) -> &'b mut T {
        &mut t.s[i as usize & t.m]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_powers_of_two_covering_the_request() {
        assert_eq!(pow2(0, 0u8).len(), 1);
        assert_eq!(pow2(5, 0u8).len(), 8);
        assert_eq!(pow2(8, 0u8).len(), 8);
        let mut s = pow2(1025, 0u32);
        let len = s.len();
        let (s, m) = masked(&mut s);
        assert_eq!((len, s.len(), m), (2048, 2048, 2047));
    }

    #[test]
    fn widths_index_their_tables_modulo_their_length() {
        assert_eq!(<u32 as Width>::table_len(1025), 2048);
        let mut s = vec![0u8; 2048];
        let mut t = <u32 as Width>::table(&mut s);
        *<u32 as Width>::at(&mut t, 2048 + 5) = 1;
        assert_eq!(s[5], 1);
        assert_eq!(<u16 as Width>::table_len(3), 1 << 16);
        let mut s = vec![0u8; 1 << 16];
        let mut t = <u16 as Width>::table(&mut s);
        *<u16 as Width>::at(&mut t, <u16 as Width>::new(u32::MAX)) = 2;
        assert_eq!((s[(1 << 16) - 1], <u16 as Width>::new(7).get()), (2, 7));
    }
}
