//! Memory bandwidth per NUMA node, shared by the tasks streaming from it.
//!
//! A streaming segment (`Op::Stream`) is work that would take `alone_ns` on an
//! otherwise idle machine while moving `bytes` through one node's memory, i.e. it
//! asks for `demand = bytes / alone_ns`. While the demands of every stream on a
//! node add up to more than the node's bandwidth `bw`, each of them progresses at
//! `bw / Σdemand` of its own speed (fair sharing of the memory controllers, as
//! STREAM-like loads see it). Whenever a stream starts or stops on a node, the
//! others on that node are re-timed. Integer arithmetic only: rates are kept as
//! the ratio `max(Σdemand, bw) : bw`.

/// One CPU's running stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stream {
    node: usize,
    /// Bytes per second this stream asks for.
    demand_bps: u64,
    /// Work left, in ns of running alone.
    alone_left_ns: u64,
    /// When `alone_left_ns` was last brought up to date.
    since_ns: u64,
}

/// The per-node bandwidth model.
#[derive(Clone, Debug)]
pub struct MemoryModel {
    /// Bytes per second each node's memory delivers.
    bw_bps: Vec<u64>,
    /// Sum of the demands of the streams on each node.
    demand_bps: Vec<u64>,
    /// The stream running on each CPU, if any.
    streams: Vec<Option<Stream>>,
}

impl MemoryModel {
    /// `node_bw_bps` 0 (a profile without `node_mem_bw_mbps`) means unlimited:
    /// streams never slow each other.
    pub fn new(nodes: usize, ncpus: usize, node_bw_bps: u64) -> MemoryModel {
        let bw = if node_bw_bps == 0 { u64::MAX } else { node_bw_bps };
        MemoryModel { bw_bps: vec![bw; nodes], demand_bps: vec![0; nodes], streams: vec![None; ncpus] }
    }

    /// Wall time per unit of alone time on `node`, as (numerator, denominator).
    fn slowdown(&self, node: usize) -> (u64, u64) {
        let bw = self.bw_bps[node];
        (self.demand_bps[node].max(bw), bw)
    }

    /// Brings every stream on `node` up to `now` at the current rate.
    fn advance(&mut self, node: usize, now: u64) {
        let (num, den) = self.slowdown(node);
        for s in self.streams.iter_mut().flatten().filter(|s| s.node == node) {
            let done = ((now - s.since_ns) as u128 * den as u128 / num as u128) as u64;
            s.alone_left_ns = s.alone_left_ns.saturating_sub(done);
            s.since_ns = now;
        }
    }

    /// The finish times of every stream on `node` at the current rate, by CPU.
    fn ends(&self, node: usize, now: u64, out: &mut Vec<(usize, u64)>) {
        let (num, den) = self.slowdown(node);
        for (cpu, s) in self.streams.iter().enumerate() {
            if let Some(s) = s.filter(|s| s.node == node) {
                let wall = (s.alone_left_ns as u128 * num as u128).div_ceil(den as u128).min(u64::MAX as u128) as u64;
                out.push((cpu, now.saturating_add(wall)));
            }
        }
    }

    /// `cpu` starts a stream of `alone_ns` asking `demand_bps` from `node`. Returns
    /// in `out` the new finish time of every stream on that node, this one included.
    pub fn start(&mut self, cpu: usize, node: usize, alone_ns: u64, demand_bps: u64, now: u64, out: &mut Vec<(usize, u64)>) {
        self.advance(node, now);
        self.streams[cpu] = Some(Stream { node, demand_bps, alone_left_ns: alone_ns, since_ns: now });
        // Saturating: an absurd demand just means "far beyond any bandwidth".
        self.demand_bps[node] = self.demand_bps[node].saturating_add(demand_bps);
        self.ends(node, now, out);
    }

    /// `cpu`'s stream stops (finished or preempted). Returns the alone time it has
    /// left, and in `out` the new finish times of the streams still on its node.
    pub fn stop(&mut self, cpu: usize, now: u64, out: &mut Vec<(usize, u64)>) -> u64 {
        let Some(s) = self.streams[cpu] else { return 0 };
        self.advance(s.node, now);
        let left = self.streams[cpu].take().map_or(0, |s| s.alone_left_ns);
        self.demand_bps[s.node] = self.demand_bps[s.node].saturating_sub(s.demand_bps);
        self.ends(s.node, now, out);
        left
    }

    /// True while `cpu` runs a stream.
    pub fn streaming(&self, cpu: usize) -> bool {
        self.streams[cpu].is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_share_a_saturated_node_and_speed_up_when_one_leaves() {
        // 10 GB/s node; each stream asks 8 GB/s for 1 ms alone.
        let mut m = MemoryModel::new(2, 4, 10_000_000_000);
        let mut out = Vec::new();
        m.start(0, 0, 1_000_000, 8_000_000_000, 0, &mut out);
        assert_eq!(out, vec![(0, 1_000_000)], "alone: its own speed");
        out.clear();
        m.start(1, 0, 1_000_000, 8_000_000_000, 0, &mut out);
        // 16 GB/s asked of 10: both run at 10/16 speed.
        assert_eq!(out, vec![(0, 1_600_000), (1, 1_600_000)]);
        out.clear();
        // A stream on the other node changes nothing here.
        m.start(2, 1, 1_000_000, 8_000_000_000, 0, &mut out);
        assert_eq!(out, vec![(2, 1_000_000)]);
        out.clear();
        // At 0.8 ms CPU 1 is preempted with 0.5 ms of alone work left; CPU 0 then
        // finishes its remaining 0.5 ms alone.
        let left = m.stop(1, 800_000, &mut out);
        assert_eq!(left, 500_000);
        assert_eq!(out, vec![(0, 1_300_000)]);
        assert!(!m.streaming(1) && m.streaming(0));
    }

    #[test]
    fn no_bandwidth_figure_means_unlimited_and_huge_demands_do_not_overflow() {
        let mut m = MemoryModel::new(1, 2, 0);
        let mut out = Vec::new();
        m.start(0, 0, 1_000, u64::MAX / 2, 0, &mut out);
        m.start(1, 0, 1_000, u64::MAX / 2, 0, &mut out);
        assert_eq!(out.last(), Some(&(1, 1_000)), "unlimited: alone speed");
        let mut m = MemoryModel::new(1, 3, 1_000_000_000);
        for cpu in 0..3 {
            out.clear();
            m.start(cpu, 0, 1_000, u64::MAX / 2, 0, &mut out);
        }
        assert!(out.iter().all(|&(_, end)| end > 1_000));
        out.clear();
        assert!(m.stop(2, 10, &mut out) > 0);
    }
}
