//! Building blocks shared by the algorithms.

pub mod flowlist;
pub mod heap;
pub mod stamp;
