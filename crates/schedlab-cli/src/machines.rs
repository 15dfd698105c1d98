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
];

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
    fn unknown_machine_names_the_choices() {
        let e = load("pentium").unwrap_err();
        assert_eq!(e.value, "pentium");
        assert!(e.expected.contains("broadwell-ep"));
    }
}
