//! Errors for malformed input. Each names the field, the value given and the
//! accepted form, so the command line can print one clear line and exit 2.

use std::fmt;

/// A malformed spec, profile, workload or flag.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// What was being read, e.g. `topology` or `workload hackbench: groups`.
    pub field: String,
    /// The offending value as given.
    pub value: String,
    /// The accepted form.
    pub expected: String,
}

impl SpecError {
    pub fn new(field: impl Into<String>, value: impl Into<String>, expected: impl Into<String>) -> Self {
        SpecError { field: field.into(), value: value.into(), expected: expected.into() }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {} '{}': expected {}", self.field, self.value, self.expected)
    }
}
