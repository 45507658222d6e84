//! The ipfw front end never panics; what it accepts, printed in either syntax, parses back
//! to an equal model.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = pspat_config::parse_ipfw(text, "fuzz") {
        let printed = c.to_string();
        let back = pspat_config::parse_ipfw(&printed, "printed")
            .unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(back, c, "{printed}");
        let toml = c.to_toml();
        let back = pspat_config::parse_toml(&toml, "printed")
            .unwrap_or_else(|e| panic!("{e}\n{toml}"));
        assert_eq!(back, c, "{toml}");
    }
});
