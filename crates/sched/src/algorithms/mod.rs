//! The scheduling algorithms, one file each. Register a new one in [`crate::registry`].

pub mod drr;
pub mod drr_sfo;
pub mod fifo;
pub mod kps;
pub mod prio;
pub mod qfq;
pub mod qfq_plus;
pub mod scfq;
pub mod scrr;
pub mod self_clocked;
pub mod stfq;
pub mod wf2qp;
pub mod wf2qpp;
