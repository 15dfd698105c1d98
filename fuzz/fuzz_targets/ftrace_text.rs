//! The ftrace text parser: refused with an error naming the line, or parsed;
//! nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = schedlab_trace::parse_trace(text);
    }
});
