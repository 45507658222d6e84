//! The interfaces a classifier runs between, for the rules' `recv`, `xmit` and `via`.
//!
//! Interfaces are fixed for a classifier's life (a shaper's `--in` and `--out`), so an
//! interface condition is decided once per direction when the classifier is built: a rule
//! whose interface condition fails in a direction is left out of that direction's lists,
//! and a packet pays nothing for it.
//!
//! What a packet sees, as ipfw sees a packet forwarded from `input` to `output` (FreeBSD's
//! `ip_fw2.c`: `recv` is the receiving interface, `xmit` the transmitting one, `via` the
//! transmitting one when there is one, else the receiving one):
//! - an `in` packet was received on `input` and has no transmit interface yet (ipfw's
//!   inbound pass);
//! - an `out` packet was received on `input` and leaves by `output` (the outbound pass).
//!
//! Without interfaces (`pspat run`, which generates its packets) a rule naming one is
//! refused when the classifier is built: matching nothing would silently change what the
//! file means.

use crate::model::{Direction, IfName, IfaceDir};

/// The interfaces packets pass between; `None` where there is none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interfaces {
    /// Where packets come in (`pspat shape --in`).
    pub input: Option<String>,
    /// Where they leave (`pspat shape --out`).
    pub output: Option<String>,
}

impl Interfaces {
    /// Packets received on `input` and sent on `output`.
    pub fn between(input: &str, output: &str) -> Self {
        Interfaces {
            input: Some(input.to_owned()),
            output: Some(output.to_owned()),
        }
    }

    /// Whether there are none (a rule naming an interface is then refused).
    pub fn is_none(&self) -> bool {
        self.input.is_none() && self.output.is_none()
    }

    /// The receive and transmit interfaces of a packet classified in `dir`.
    fn of(&self, dir: Direction) -> (Option<&str>, Option<&str>) {
        let recv = self.input.as_deref();
        match dir {
            Direction::In => (recv, None),
            Direction::Out => (recv, self.output.as_deref()),
        }
    }

    /// Whether `which` of a packet classified in `dir` is `name`.
    pub fn holds(&self, dir: Direction, which: IfaceDir, name: &IfName) -> bool {
        let (recv, xmit) = self.of(dir);
        let iface = match which {
            IfaceDir::Recv => recv,
            IfaceDir::Xmit => xmit,
            IfaceDir::Via => xmit.or(recv),
        };
        match (iface, name) {
            (None, _) => false,
            (Some(_), IfName::Any) => true,
            (Some(i), IfName::Name(pattern)) => glob(pattern.as_bytes(), i.as_bytes()),
        }
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob(rest, &text[i..])),
        Some((c, rest)) => text
            .split_first()
            .is_some_and(|(t, tr)| t == c && glob(rest, tr)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> IfName {
        IfName::Name(n.into())
    }

    #[test]
    fn wildcards() {
        assert!(glob(b"igb*", b"igb0"));
        assert!(glob(b"igb*", b"igb"));
        assert!(glob(b"*0", b"igb0"));
        assert!(glob(b"i*b*1", b"igb.vlan1"));
        assert!(!glob(b"igb*", b"em0"));
        assert!(!glob(b"igb0", b"igb01"));
    }

    #[test]
    fn what_each_direction_sees() {
        let i = Interfaces::between("igb1", "igb0");
        use Direction::{In, Out};
        use IfaceDir::{Recv, Via, Xmit};
        // out: received on igb1, leaving by igb0; `via` is the transmit interface.
        assert!(i.holds(Out, Recv, &name("igb1")));
        assert!(i.holds(Out, Xmit, &name("igb0")));
        assert!(i.holds(Out, Via, &name("igb0")));
        assert!(!i.holds(Out, Via, &name("igb1")));
        // in: received on igb1, no transmit interface yet; `via` is the receive one.
        assert!(i.holds(In, Via, &name("igb1")));
        assert!(!i.holds(In, Xmit, &IfName::Any));
        assert!(i.holds(In, Recv, &IfName::Any));
        assert!(i.holds(Out, Xmit, &name("igb*")));
        // none: nothing holds
        assert!(!Interfaces::default().holds(Out, Via, &IfName::Any));
    }
}
