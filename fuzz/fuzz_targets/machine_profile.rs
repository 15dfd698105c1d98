//! Machine profile TOML: refused with an error naming a field, or a profile whose
//! every cost is in its range; nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(p) = schedlab_core::cost::MachineProfile::from_toml(text, "fuzz.toml") {
            assert!(p.check("fuzz.toml").is_ok());
            let _ = p.copy_ns(4096);
        }
    }
});
