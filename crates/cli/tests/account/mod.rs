//! The account of a `pspat run --json` report, as the cli's tests check it.

use serde_json::Value;

/// Every tenant of a `pspat run --json` account balances; returns the packets left
/// queued over all tenants.
pub fn assert_balanced(v: &Value, what: &str) -> u64 {
    let u = |t: &Value, k: &str| {
        t[k].as_u64()
            .unwrap_or_else(|| panic!("{what}: {k} in {t}"))
    };
    let mut left = 0;
    for t in v["tenants"].as_array().unwrap() {
        let dropped: u64 = t["dropped"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(
            u(t, "submitted"),
            u(t, "sent") + u(t, "send_failed") + dropped + u(t, "left_queued"),
            "{what}: {t}"
        );
        // Released onto the link but not transmitted would hide in `left_queued`.
        assert_eq!(
            u(t, "scheduled"),
            u(t, "sent") + u(t, "send_failed"),
            "{what}: {t}"
        );
        left += u(t, "left_queued");
    }
    left
}
