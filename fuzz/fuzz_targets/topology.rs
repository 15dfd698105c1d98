//! `--topology`: any text is refused with an error or parsed into a machine whose
//! derived spans and memory estimate are consistent; nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = schedlab_core::Topology::parse(text) {
            assert_eq!(t.cpus.len(), t.ncpus());
            let _ = t.state_bytes_estimate();
        }
    }
});
