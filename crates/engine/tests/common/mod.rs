//! Helpers shared by the engine's integration tests.

use pspat_io::Pkt;

/// Checks that every client's packets arrived exactly once and in submission order: the
/// packets of one client must appear with seq 0, 1, 2, ... and `per_client` of them.
pub fn assert_complete_and_ordered<'a>(
    pkts: impl IntoIterator<Item = &'a Pkt>,
    clients: usize,
    per_client: u32,
) {
    let mut next = vec![0u32; clients];
    for p in pkts {
        let c = p.client as usize;
        assert_eq!(
            p.seq, next[c],
            "client {c}: expected seq {} got {}",
            next[c], p.seq
        );
        next[c] += 1;
    }
    assert_eq!(next, vec![per_client; clients], "packets lost");
}
