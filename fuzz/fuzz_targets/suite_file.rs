//! `validate --suite FILE.toml` suite files: refused with an error or parsed;
//! nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = schedlab_spec::suite::parse(text, "fuzz.toml");
    }
});
