//! `schedlab sweep GRID.toml` grid files: refused with an error, or parsed and
//! expanded into jobs that validate or are refused; nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(g) = schedlab_spec::sweep::Grid::parse_toml(text, "fuzz.toml") {
            // Expansion validates every cell; keep it to grids of a sane size.
            if g.axes.iter().map(|(_, v)| v.len()).product::<usize>() * g.runs as usize <= 10_000 {
                let _ = g.jobs();
            }
        }
    }
});
