//! Machine cost profiles: the ones shipped in `machines/` (built into the binary so
//! it runs from anywhere), or a TOML file given by path.

use schedlab_core::cost::MachineProfile;
use schedlab_core::error::SpecError;

/// (name, TOML text) of every shipped profile.
pub const BUILTIN: &[(&str, &str)] = &[
    ("broadwell-ep", include_str!("../../../machines/broadwell-ep.toml")),
    ("cascadelake", include_str!("../../../machines/cascadelake.toml")),
    ("zen1", include_str!("../../../machines/zen1.toml")),
    ("kvm-haswell", include_str!("../../../machines/kvm-haswell.toml")),
    ("rpi5", include_str!("../../../machines/rpi5.toml")),
    ("epyc-kvm", include_str!("../../../machines/epyc-kvm.toml")),
];

/// The shipped profile of each topology preset's machine.
const PRESET_MACHINES: &[(&str, &str)] = &[
    ("x6-2-20", "broadwell-ep"),
    ("x6-2-56", "broadwell-ep"),
    ("cascadelake-2s", "cascadelake"),
    ("ryzen-1700", "zen1"),
    ("kvm-4", "kvm-haswell"),
    ("kvm-2", "kvm-haswell"),
    ("rpi5", "rpi5"),
];

/// The profile to use when `--machine` is not given: the preset's own machine,
/// else broadwell-ep. For the host, whose costs only `schedlab calibrate` knows,
/// the second value is a warning to print.
pub fn default_for(topology: &str) -> (&'static str, Option<String>) {
    if let Some(&(_, m)) = PRESET_MACHINES.iter().find(|(t, _)| *t == topology) {
        return (m, None);
    }
    if topology == "host" {
        let warning = "no --machine for --topology host: using broadwell-ep costs; \
                       `schedlab calibrate --out host.toml` measures this host, then --machine host.toml";
        return ("broadwell-ep", Some(warning.to_string()));
    }
    // An NxLxCxT machine: the quick start's profile, as its --help says.
    ("broadwell-ep", None)
}

/// `--machine` as given, or the topology's default (its warning printed).
pub fn load_for(machine: Option<&str>, topology: &str) -> Result<MachineProfile, SpecError> {
    match machine {
        Some(m) => load(m),
        None => {
            let (m, warning) = default_for(topology);
            if let Some(w) = warning {
                eprintln!("schedlab: warning: {w}");
            }
            load(m)
        }
    }
}

/// A shipped profile by name, or a `.toml` file by path.
pub fn load(name_or_path: &str) -> Result<MachineProfile, SpecError> {
    let (text, origin) = crate::shipped::text("machine", BUILTIN, name_or_path)?;
    MachineProfile::from_toml(&text, &origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_profile_loads_and_is_sane() {
        for (name, _) in BUILTIN {
            let p = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&p.name, name);
            assert!(!p.sources.is_empty(), "{name} must cite its sources");
            assert!(p.context_switch_ns > 0 && p.syscall_ns > 0 && p.idle_exit_ns > 0);
            assert!(p.migration.smt_ns <= p.migration.llc_ns && p.migration.llc_ns <= p.migration.cross_node_ns);
        }
    }

    #[test]
    fn every_preset_has_a_shipped_profile() {
        for (preset, _, _, _) in schedlab_core::topology::PRESETS {
            let (m, warning) = default_for(preset);
            assert!(BUILTIN.iter().any(|(b, _)| *b == m) && warning.is_none(), "{preset}");
            assert!(PRESET_MACHINES.iter().any(|(t, _)| t == preset), "{preset} has no profile of its own");
        }
        assert!(default_for("host").1.is_some());
        assert_eq!(default_for("1x1x4x2"), ("broadwell-ep", None));
    }

    #[test]
    fn unknown_machine_names_the_choices() {
        let e = load("pentium").unwrap_err();
        assert_eq!(e.value, "pentium");
        assert!(e.expected.contains("broadwell-ep"));
    }
}
