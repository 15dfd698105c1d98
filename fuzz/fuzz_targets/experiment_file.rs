//! `reproduce FILE.toml` experiment files: refused with an error, or parsed and
//! turned into a comparison that validates or is refused; nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(e) = schedlab_spec::experiment::parse(text, "fuzz.toml") {
            if let Ok(c) = e.comparison(Some(1), None, None) {
                let _ = c.validate();
            }
        }
    }
});
