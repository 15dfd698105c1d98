//! Workload spec parsing: `NAME key=value ...`, every value checked, every unknown
//! key refused, each error naming the field, the value and the accepted form.

use schedlab_core::error::SpecError;

/// The `key=value` pairs of one workload spec.
pub struct Params {
    workload: String,
    pairs: Vec<(String, String, bool)>,
}

impl Params {
    /// Splits `spec` into the workload name and its pairs.
    pub fn parse(spec: &str) -> Result<(String, Params), SpecError> {
        let mut words = spec.split_whitespace();
        let name = words
            .next()
            .ok_or_else(|| SpecError::new("workload", spec, "NAME key=value ..., e.g. 'hackbench groups=1 loops=100000'"))?;
        let mut pairs = Vec::new();
        for w in words {
            let (k, v) = w
                .split_once('=')
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .ok_or_else(|| SpecError::new(format!("workload {name} parameter"), w, "key=value"))?;
            if pairs.iter().any(|(pk, _, _): &(String, String, bool)| pk == k) {
                return Err(SpecError::new(format!("workload {name} parameter"), w, "each key at most once"));
            }
            pairs.push((k.to_string(), v.to_string(), false));
        }
        Ok((name.to_string(), Params { workload: name.to_string(), pairs }))
    }

    fn take(&mut self, key: &str) -> Option<String> {
        self.pairs.iter_mut().find(|(k, _, used)| k == key && !used).map(|(_, v, used)| {
            *used = true;
            v.clone()
        })
    }

    /// An integer in `lo..=hi`, `default` if absent.
    pub fn u64_in(&mut self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, SpecError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => v.parse::<u64>().ok().filter(|x| (lo..=hi).contains(x)).ok_or_else(|| {
                SpecError::new(format!("workload {} {key}", self.workload), v, format!("an integer from {lo} to {hi}"))
            }),
        }
    }

    /// One of `choices`, `default` if absent.
    pub fn choice(&mut self, key: &str, default: &str, choices: &[&str]) -> Result<String, SpecError> {
        match self.take(key) {
            None => Ok(default.to_string()),
            Some(v) if choices.contains(&v.as_str()) => Ok(v),
            Some(v) => {
                Err(SpecError::new(format!("workload {} {key}", self.workload), v, format!("one of {}", choices.join(", "))))
            }
        }
    }

    /// Fails on any key nobody asked for.
    pub fn finish(self, known: &str) -> Result<(), SpecError> {
        match self.pairs.into_iter().find(|(_, _, used)| !used) {
            Some((k, v, _)) => Err(SpecError::new(
                format!("workload {} parameter", self.workload),
                format!("{k}={v}"),
                format!("one of the keys {known}"),
            )),
            None => Ok(()),
        }
    }
}
