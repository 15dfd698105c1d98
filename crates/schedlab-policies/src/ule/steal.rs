//! ULE's idle stealing and periodic balancer, before and after D12130
//! (sched_ule.c: sched_idletd(), tdq_idled(), tdq_trysteal(), sched_balance(),
//! sched_balance_group(), sched_balance_pair()).
//!
//! Where the kernel runs with interrupts disabled the cost is charged with
//! `charge_irq_off`, so the engine measures the sections: pre-D12130 `tdq_idled()`
//! (the whole search under spinlock_enter()), `tdq_trysteal()` (inside
//! sched_switch()), the balancer (statclock context), and post-D12130 only the
//! locked re-check and move of `tdq_idled()`.

use schedlab_core::cpuset::CpuSet;
use schedlab_core::sched::{Charge, System};
use schedlab_core::task::TaskId;

use super::{IdledSearch, Ule, Variant};

impl Ule {
    /// All CPUs but `cpu`.
    fn others(&self, cpu: usize) -> CpuSet {
        let mut mask = CpuSet::full(self.tdq.len());
        mask.clear(cpu);
        mask
    }

    /// The first pass of sched_idletd() after `cpu` switched to its idle thread:
    /// steal only if something happened on this CPU since the last attempt (its
    /// switch counters moved), or always with `kern.sched.always_steal` (post).
    /// `after_switch`: a thread just switched out here, so a successful steal costs
    /// a second context switch (thread -> idle thread -> stolen thread).
    pub(super) fn idle_pass(&mut self, sys: &mut System, cpu: usize, after_switch: bool) -> Option<TaskId> {
        if !self.tun.steal_idle || self.tdq.len() < 2 {
            return None;
        }
        let sw = self.tdq[cpu].switchcnt + self.tdq[cpu].oldswitchcnt;
        let always = self.variant == Variant::Post && self.tun.always_steal;
        if !always && sw == self.tdq[cpu].idle_oldsw {
            return None;
        }
        self.tdq[cpu].idle_oldsw = sw;
        match self.variant {
            Variant::Pre => {
                if self.tdq_idled_pre(sys, cpu) {
                    if after_switch {
                        sys.charge(cpu, Charge::Sched, sys.cost.context_switch_ns);
                    }
                    return self.sched_choose(sys, cpu);
                }
                None
            }
            Variant::Post => {
                // The search proceeds in steps with interrupts enabled, while the CPU
                // looks idle to everyone else (its tdq_lowpri is PRI_MAX_IDLE).
                let leaf = self.topo().leaf[cpu];
                self.tdq[cpu].idled = Some(IdledSearch { mask: self.others(cpu), cg: leaf, victim: None });
                self.tdq_idled_step(sys, cpu);
                None
            }
        }
    }

    /// Mirrors pre-D12130 sched_ule.c:tdq_idled(): from the CPU's own group up to
    /// the root, ask sched_highest() for a victim (threshold 1 inside SMT groups,
    /// `steal_thresh` elsewhere), lock both queues and move one thread; a failed
    /// victim is dropped from the mask and the same level searched again. All of
    /// it inside spinlock_enter(). True = a thread was moved here.
    fn tdq_idled_pre(&mut self, sys: &mut System, cpu: usize) -> bool {
        let mut mask = self.others(cpu);
        let mut cg = Some(self.topo().leaf[cpu]);
        let mut ns = 0;
        let mut moved = false;
        while let Some(g) = cg {
            let thresh = if self.topo().groups[g].smt { 1 } else { self.tun.steal_thresh };
            let (best, search_ns) = self.sched_highest(sys, cpu, g, &mask, thresh);
            ns += search_ns;
            let Some(victim) = best else {
                cg = self.topo().groups[g].parent;
                continue;
            };
            mask.clear(victim);
            ns += Self::lock_pair_ns(sys, cpu, victim);
            let v = &self.tdq[victim];
            if v.load < thresh || v.transferable == 0 {
                continue;
            }
            let (p, move_ns) = self.tdq_move(sys, victim, cpu);
            ns += move_ns;
            if p.is_some() {
                sys.stats[cpu].steals += 1;
                moved = true;
                break;
            }
        }
        if !moved {
            sys.stats[cpu].steal_fails += 1;
        }
        sys.charge_irq_off(cpu, Charge::Find, "tdq_idled", ns);
        moved
    }

    /// One step of post-D12130 sched_ule.c:tdq_idled() on idle `cpu`, with
    /// interrupts enabled: either one sched_highest() at the current level (no
    /// victim: go up a level; none left: give up), or, for the victim the last step
    /// found, the unlocked stale check (stale: restart from the CPU's own group,
    /// because what the search saw is out of date), then the locked move (failed:
    /// drop the victim, stay at this level). The poll for threads assigned to this
    /// CPU meanwhile is the engine's: a wakeup ends the search. True = a thread was
    /// moved here.
    pub(super) fn tdq_idled_step(&mut self, sys: &mut System, cpu: usize) -> bool {
        let Some(mut st) = self.tdq[cpu].idled.take() else { return false };
        let thresh = self.tun.steal_thresh;
        if let Some(victim) = st.victim.take() {
            let v = &self.tdq[victim];
            if v.load < thresh || v.transferable == 0 {
                sys.stats[cpu].steal_restarts += 1;
                st.cg = self.topo().leaf[cpu];
            } else {
                // tdq_lock_pair(), the locked re-check (nothing can change between
                // the two in the model), tdq_move(): interrupts off.
                let (p, move_ns) = self.tdq_move(sys, victim, cpu);
                let ns = Self::lock_pair_ns(sys, cpu, victim) + move_ns;
                sys.charge_irq_off(cpu, Charge::Find, "tdq_idled", ns);
                if p.is_some() {
                    sys.stats[cpu].steals += 1;
                    return true;
                }
                st.mask.clear(victim);
            }
        }
        let (best, ns) = self.sched_highest(sys, cpu, st.cg, &st.mask, thresh);
        sys.charge(cpu, Charge::Find, ns);
        match best {
            Some(victim) => st.victim = Some(victim),
            None => match self.topo().groups[st.cg].parent {
                Some(parent) => st.cg = parent,
                None => {
                    sys.stats[cpu].steal_fails += 1;
                    return false;
                }
            },
        }
        sys.idle_poll_at(cpu, sys.now_ns + ns.max(1));
        self.tdq[cpu].idled = Some(st);
        false
    }

    /// Mirrors post-D12130 sched_ule.c:tdq_trysteal(), called from sched_switch()
    /// when the CPU's last thread blocked: search the CPU's own group and its
    /// parents up to `trysteal_limit` levels, make one locked attempt, never
    /// restart; the idle thread's fuller search follows if this finds nothing.
    /// Runs in the switch's spin lock section.
    pub(super) fn tdq_trysteal(&mut self, sys: &mut System, cpu: usize) {
        let limit = self.tun.trysteal_limit;
        if limit == 0 || self.tdq.len() < 2 {
            return;
        }
        let mask = self.others(cpu);
        let mut cg = self.topo().leaf[cpu];
        let mut level = 1;
        let mut ns = 0;
        loop {
            let (best, search_ns) = self.sched_highest(sys, cpu, cg, &mask, self.tun.steal_thresh);
            ns += search_ns;
            let Some(victim) = best else {
                level += 1;
                match self.topo().groups[cg].parent {
                    Some(parent) if level <= limit => {
                        cg = parent;
                        continue;
                    }
                    _ => break,
                }
            };
            // sched_highest() just read the victim's counters and nothing ran since,
            // so the kernel's unlocked stale check cannot fire here.
            ns += Self::lock_pair_ns(sys, cpu, victim);
            let (p, move_ns) = self.tdq_move(sys, victim, cpu);
            ns += move_ns;
            if p.is_some() {
                sys.stats[cpu].steals += 1;
                sys.stats[cpu].switch_steals += 1;
            }
            break;
        }
        sys.charge_irq_off(cpu, Charge::Find, "tdq_trysteal", ns);
    }

    /// Mirrors sched_ule.c:sched_balance() + sched_balance_group(): on the boot
    /// CPU's stat clock every 0.5-1.5 balance intervals, pair the most loaded CPU
    /// having a transferable thread with the least loaded one below it and move one
    /// thread; each CPU gives or receives at most once per pass.
    pub(super) fn sched_balance(&mut self, sys: &mut System, cpu: usize) {
        let interval = self.tun.balance_interval;
        let r = self.random(cpu) as i64;
        self.balance_ticks = (interval / 2).max(1) + r % interval;
        // The donor minimum: 1 before D12130, 2 after.
        let minload = match self.variant {
            Variant::Pre => 1,
            Variant::Post => 2,
        };
        let root = self.topo().root();
        sys.stats[cpu].lb_count += 1;
        let mut hmask = CpuSet::full(self.tdq.len());
        let mut ns = 0;
        'high: loop {
            let (high, search_ns) = self.sched_highest(sys, cpu, root, &hmask, minload);
            ns += search_ns;
            let Some(high) = high else { break };
            hmask.clear(high);
            let mut lmask = hmask.clone();
            if lmask.is_empty() {
                break;
            }
            let mut anylow = true;
            loop {
                let limit = self.tdq[high].load.saturating_sub(1);
                let (low, search_ns) = self.sched_lowest(sys, cpu, root, &lmask, -1, limit, high);
                ns += search_ns;
                let Some(low) = low else {
                    if anylow {
                        break 'high;
                    }
                    continue 'high;
                };
                // tdq_lock_pair(high, low), taken from the balancing CPU.
                ns += Self::lock_ns(sys, cpu, high) + Self::lock_ns(sys, cpu, low);
                let (h, l) = (&self.tdq[high], &self.tdq[low]);
                let (p, move_ns) = if h.transferable != 0 && h.load > l.load { self.tdq_move(sys, high, low) } else { (None, 0) };
                ns += move_ns;
                if let Some(p) = p {
                    sys.stats[low].lb_gained += 1;
                    self.balance_notify(sys, cpu, low, p);
                    hmask.clear(low);
                    continue 'high;
                }
                lmask.clear(low);
                anylow = false;
            }
        }
        sys.charge_irq_off(cpu, Charge::Find, "sched_balance", ns);
    }

    /// After sched_balance_pair() moved `p` to `low`: before D12130 an
    /// IPI_PREEMPT, whose handler (sched_preempt()) switches if the running thread
    /// is worse than the queue's best; after, tdq_notify().
    fn balance_notify(&mut self, sys: &mut System, cpu: usize, low: usize, p: TaskId) {
        if low == cpu {
            return;
        }
        match self.variant {
            Variant::Pre => {
                let cpri = self.tdq[low].curr.map_or(super::PRI_MAX_IDLE, |c| self.ts[c].pri);
                if self.tdq[low].lowpri < cpri {
                    sys.resched_cpu(low, cpu);
                }
            }
            Variant::Post => self.tdq_notify(sys, low, p),
        }
    }
}
