//! `--policy` names with switches, and `--sysctl NAME=VALUE` pairs: refused with
//! an error or built; nothing panics. The input's first line is the name, each
//! further line a sysctl.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let mut lines = text.lines();
        let name = lines.next().unwrap_or("");
        let sysctls: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        let _ = schedlab_policies::policy_by_name(name, &sysctls);
    }
});
