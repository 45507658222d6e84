//! The ipfw/dnctl front end: the command syntax of FreeBSD's ipfw(8) and dnctl(8) as the
//! dummynet slides use it (`sched 4 config type qfq bw 4Mbit/s`), read by [`parser`] (its
//! rule language by [`rule`], with [`names`], and the rule stream's commands by
//! [`stream`]) and written back by [`print`] (the `Display` of [`crate::Config`]).

pub mod lexer;
pub mod names;
mod objects;
pub mod parser;
pub mod print;
pub mod rule;
pub mod stream;
mod sysctl;
