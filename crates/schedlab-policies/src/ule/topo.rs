//! The `cpu_group` tree (sys/sys/smp.h, sys/kern/subr_smp.c:smp_topo(), x86
//! mp_x86.c:x86topo_add_sched_group()) and ULE's search over it
//! (sched_ule.c:cpu_search(), sched_lowest(), sched_highest()).

use schedlab_core::cpuset::CpuSet;
use schedlab_core::topology::Topology;

/// `cg_level`: the cache level a group's CPUs share.
pub const CG_SHARE_NONE: i64 = 0;
pub const CG_SHARE_L2: i64 = 2;
pub const CG_SHARE_L3: i64 = 3;

/// `struct cpu_group`.
#[derive(Clone, Debug)]
pub struct CpuGroup {
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub mask: CpuSet,
    pub level: i64,
    /// CG_FLAG_SMT: the CPUs are hardware threads of one core.
    pub smt: bool,
}

/// The tree plus each CPU's leaf (`tdq_cg`).
#[derive(Clone, Debug)]
pub struct CpuTopo {
    pub groups: Vec<CpuGroup>,
    pub leaf: Vec<usize>,
}

impl CpuTopo {
    /// Builds what FreeBSD's x86 code builds: the system, a group per package (our
    /// node) when there are several, per last-level cache, and per core (SMT,
    /// sharing L1/L2) when cores have threads; single-child chains collapse as
    /// smp_topo() does, so a group never equals its parent.
    pub fn build(topo: &Topology) -> CpuTopo {
        let n = topo.ncpus();
        let mut t = CpuTopo { groups: Vec::new(), leaf: vec![0; n] };
        let root = t.push(None, CpuSet::full(n), CG_SHARE_NONE, false);
        let mut nodes: Vec<u32> = topo.cpus.iter().map(|c| c.node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        for &node in &nodes {
            let node_mask = set_of(n, |c| topo.cpus[c].node == node);
            let node_g = t.child(root, node_mask, CG_SHARE_NONE, false);
            let mut llcs: Vec<u32> = topo.cpus.iter().filter(|c| c.node == node).map(|c| c.llc).collect();
            llcs.sort_unstable();
            llcs.dedup();
            for &llc in &llcs {
                let llc_mask = set_of(n, |c| topo.cpus[c].node == node && topo.cpus[c].llc == llc);
                let llc_g = t.child(node_g, llc_mask.clone(), CG_SHARE_L3, false);
                let mut cores: Vec<u32> = llc_mask.iter().map(|c| topo.cpus[c].core).collect();
                cores.sort_unstable();
                cores.dedup();
                for &core in &cores {
                    let core_mask = set_of(n, |c| llc_mask.contains(c) && topo.cpus[c].core == core);
                    let smt = core_mask.count() > 1;
                    let core_g = if smt { t.child(llc_g, core_mask.clone(), CG_SHARE_L2, true) } else { llc_g };
                    for c in core_mask.iter() {
                        t.leaf[c] = core_g;
                    }
                }
            }
        }
        t
    }

    fn push(&mut self, parent: Option<usize>, mask: CpuSet, level: i64, smt: bool) -> usize {
        self.groups.push(CpuGroup { parent, children: Vec::new(), mask, level, smt });
        let g = self.groups.len() - 1;
        if let Some(p) = parent {
            self.groups[p].children.push(g);
        }
        g
    }

    /// A child of `parent` spanning `mask`, or `parent` itself when they are equal
    /// (the collapse of single-child chains).
    fn child(&mut self, parent: usize, mask: CpuSet, level: i64, smt: bool) -> usize {
        if mask == self.groups[parent].mask {
            // The narrower sharing describes the group better: an LLC that is the
            // whole machine is an L3 group (as smp_topo() keeps the inner node).
            if level > self.groups[parent].level {
                self.groups[parent].level = level;
                self.groups[parent].smt = smt;
            }
            return parent;
        }
        self.push(Some(parent), mask, level, smt)
    }

    pub fn root(&self) -> usize {
        0
    }
}

fn set_of(n: usize, f: impl Fn(usize) -> bool) -> CpuSet {
    let mut s = CpuSet::new(n);
    for c in (0..n).filter(|&c| f(c)) {
        s.set(c);
    }
    s
}

/// What `cpu_search` reads of each CPU's `struct tdq`, without locks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TdqView {
    pub load: u32,
    pub lowpri: i32,
    pub transferable: u32,
}

/// A search request (`struct cpu_search`).
#[derive(Clone, Copy, Debug)]
pub enum Search {
    /// CPU_SEARCH_LOWEST: a CPU whose `tdq_lowpri` > `pri` and load <= `limit`;
    /// `prefer` gets a 64 bonus (a quarter thread).
    Lowest { pri: i32, limit: u32, prefer: Option<usize> },
    /// CPU_SEARCH_HIGHEST: a CPU with load >= `limit` and a transferable thread.
    Highest { limit: u32 },
}

/// Mirrors sched_ule.c:cpu_search(): the least (most) loaded CPU on the least
/// (most) loaded path of the tree, with random tie-breaks drawn per CPU
/// examined. `rnd` draws the tie-break (POST: sched_random() % 32; PRE: the top
/// 6 bits of the LCG). Returns (best CPU, the group's total load); `examine` is
/// told of every CPU looked at, for the cost.
pub fn cpu_search(
    t: &CpuTopo,
    g: usize,
    mask: &CpuSet,
    view: &dyn Fn(usize) -> TdqView,
    s: Search,
    rnd: &mut dyn FnMut() -> i64,
    examine: &mut dyn FnMut(usize),
) -> (Option<(usize, i64)>, i64) {
    let group = &t.groups[g];
    let lowest = matches!(s, Search::Lowest { .. });
    let mut total = 0i64;
    // (item load, candidate cpu, candidate key)
    let mut best: Option<(i64, usize, i64)> = None;
    let consider = |load: i64, cand: Option<(usize, i64)>, best: &mut Option<(i64, usize, i64)>| {
        let Some((cpu, key)) = cand else { return };
        let better = match *best {
            None => true,
            Some((bload, _, bkey)) => {
                if lowest {
                    load < bload || (load == bload && key < bkey)
                } else {
                    load > bload || (load == bload && key > bkey)
                }
            }
        };
        if better {
            *best = Some((load, cpu, key));
        }
    };
    if group.children.is_empty() {
        // The CPUs of a leaf, lowest id first (amd64 has an inline ffsl).
        for cpu in group.mask.iter() {
            examine(cpu);
            let v = view(cpu);
            let mut load = v.load as i64 * 256;
            let r = rnd();
            let cand = match s {
                Search::Lowest { pri, limit, prefer } => {
                    if prefer == Some(cpu) {
                        load -= 64;
                    }
                    (v.lowpri > pri && v.load <= limit && mask.contains(cpu)).then_some((cpu, load - r))
                }
                Search::Highest { limit } => {
                    (v.load >= limit && v.transferable > 0 && mask.contains(cpu)).then_some((cpu, load - r))
                }
            };
            total += load;
            consider(load, cand, &mut best);
        }
    } else {
        // Children from the last to the first, as the kernel iterates cg_child[].
        for &child in group.children.iter().rev() {
            let (cand, load) = cpu_search(t, child, mask, view, s, rnd, examine);
            total += load;
            consider(load, cand, &mut best);
        }
    }
    (best.map(|(_, cpu, key)| (cpu, key)), total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ryzen_tree_has_ccx_and_smt_groups() {
        let topo = Topology::parse("1x2x4x2").unwrap();
        let t = CpuTopo::build(&topo);
        let root = &t.groups[t.root()];
        assert_eq!(root.children.len(), 2, "two CCX (L3) groups under the root");
        for &ccx in &root.children {
            let g = &t.groups[ccx];
            assert_eq!((g.level, g.mask.count(), g.children.len()), (CG_SHARE_L3, 8, 4));
            for &core in &g.children {
                assert!(t.groups[core].smt);
                assert_eq!(t.groups[core].mask.count(), 2);
            }
        }
        // Each CPU's leaf is its core.
        for cpu in 0..16 {
            let leaf = &t.groups[t.leaf[cpu]];
            assert!(leaf.smt && leaf.mask.contains(cpu));
        }
    }

    #[test]
    fn flat_machine_is_one_group() {
        let topo = Topology::parse("1x1x4x1").unwrap();
        let t = CpuTopo::build(&topo);
        assert_eq!(t.groups.len(), 1);
        assert!(t.leaf.iter().all(|&g| g == 0));
    }

    #[test]
    fn lowest_prefers_the_least_loaded_path() {
        let topo = Topology::parse("1x2x2x1").unwrap();
        let t = CpuTopo::build(&topo);
        // LLC A = {0,1} loads 0 and 3; LLC B = {2,3} loads 1 and 1. The globally least
        // loaded CPU is 0, and its group (total 3) is heavier than B (2)... but CPU 0
        // is still chosen? No: the least loaded path is B, so 2 or 3.
        let loads = [0u32, 3, 1, 1];
        let view = |c: usize| TdqView { load: loads[c], lowpri: 255, transferable: 0 };
        let mut ex = 0;
        let (best, total) = cpu_search(
            &t,
            t.root(),
            &CpuSet::full(4),
            &view,
            Search::Lowest { pri: -1, limit: u32::MAX, prefer: None },
            &mut || 0,
            &mut |_| ex += 1,
        );
        assert_eq!(total, 5 * 256);
        assert!(matches!(best, Some((2, _)) | Some((3, _))), "{best:?}");
        assert_eq!(ex, 4);
    }

    #[test]
    fn highest_needs_transferable_and_threshold() {
        let topo = Topology::parse("1x1x4x1").unwrap();
        let t = CpuTopo::build(&topo);
        let views = [
            TdqView { load: 3, lowpri: 150, transferable: 0 },
            TdqView { load: 2, lowpri: 150, transferable: 1 },
            TdqView { load: 1, lowpri: 150, transferable: 1 },
            TdqView { load: 0, lowpri: 255, transferable: 0 },
        ];
        let view = |c: usize| views[c];
        let mut ex = 0;
        let (best, _) = cpu_search(&t, 0, &CpuSet::full(4), &view, Search::Highest { limit: 2 }, &mut || 0, &mut |_| ex += 1);
        assert_eq!(best.map(|b| b.0), Some(1));
        let (best1, _) = cpu_search(&t, 0, &CpuSet::full(4), &view, Search::Highest { limit: 1 }, &mut || 0, &mut |_| ex += 1);
        assert_eq!(best1.map(|b| b.0), Some(1), "load 2 beats load 1");
    }
}
