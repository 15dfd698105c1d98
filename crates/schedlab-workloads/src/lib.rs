//! schedlab-workloads: the benchmarks kernel developers run, as lazily generated
//! task programs.

pub mod hackbench;
pub mod params;

use schedlab_core::error::SpecError;
use schedlab_core::program::Program;
use schedlab_core::RunResult;

pub use hackbench::Hackbench;

/// Workloads this build knows, for help and errors.
pub const WORKLOADS: &[(&str, &str)] =
    &[("hackbench", "hackbench groups=G loops=L ipc=socket|pipe mode=process|thread [fds=20] [datasize=100]")];

/// A parsed workload spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    Hackbench(Hackbench),
}

impl Workload {
    /// Parses e.g. `hackbench groups=1 loops=100000 ipc=socket mode=process`.
    pub fn parse(spec: &str) -> Result<Workload, SpecError> {
        let (name, mut p) = params::Params::parse(spec)?;
        match name.as_str() {
            "hackbench" => {
                let h = Hackbench::from_params(&mut p)?;
                p.finish("groups, loops, ipc, mode, fds, datasize")?;
                Ok(Workload::Hackbench(h))
            }
            _ => {
                let known: Vec<&str> = WORKLOADS.iter().map(|w| w.0).collect();
                Err(SpecError::new("workload", name, format!("one of: {}", known.join(", "))))
            }
        }
    }

    /// The name of the main task.
    pub fn main_comm(&self) -> &'static str {
        match self {
            Workload::Hackbench(_) => "hackbench",
        }
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        match self {
            Workload::Hackbench(h) => h.main_program(),
        }
    }

    /// What the tool itself prints before running.
    pub fn banner(&self) -> String {
        match self {
            Workload::Hackbench(h) => h.banner(),
        }
    }

    /// What the tool itself prints after running.
    pub fn result_line(&self, res: &RunResult) -> String {
        match self {
            Workload::Hackbench(_) => Hackbench::time_line(res),
        }
    }
}
