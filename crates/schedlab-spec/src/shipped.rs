//! Files the binary ships (machine profiles, experiments, suites: built in, so it
//! runs from anywhere) or a user's own `.toml` by path.

use schedlab_core::error::SpecError;

/// The text of the shipped file `name_or_path` from `builtin` ((name, text)
/// pairs), or of the `.toml` file at that path; with the name errors should use
/// for it. `what` names the kind ("machine", "experiment", "suite").
pub fn text(what: &str, builtin: &[(&str, &str)], name_or_path: &str) -> Result<(String, String), SpecError> {
    if let Some((name, text)) = builtin.iter().find(|(n, _)| *n == name_or_path) {
        return Ok((text.to_string(), name.to_string()));
    }
    if name_or_path.ends_with(".toml") {
        let text = std::fs::read_to_string(name_or_path)
            .map_err(|e| SpecError::new(format!("{what} file"), name_or_path, format!("a readable TOML file ({e})")))?;
        return Ok((text, name_or_path.to_string()));
    }
    let names: Vec<&str> = builtin.iter().map(|(n, _)| *n).collect();
    Err(SpecError::new(what, name_or_path, format!("one of {} or a path ending in .toml", names.join(", "))))
}
