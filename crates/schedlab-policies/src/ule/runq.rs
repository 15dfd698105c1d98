//! Run queues (sys/sys/runq.h, sys/kern/kern_switch.c): RQ_NQS FIFO lists with an
//! occupancy bitmap, and ULE's use of three of them per CPU (sched_ule.c:
//! tdq_runq_add(), tdq_runq_rem(), tdq_choose()), including the time-sharing
//! calendar whose insertion (`tdq_idx`) and removal (`tdq_ridx`) points rotate.

use std::collections::VecDeque;

use schedlab_core::task::TaskId;

use super::prio::{PRI_BATCH_RANGE, PRI_MAX_BATCH, PRI_MIN_BATCH};

/// RQ_NQS: lists per run queue; RQ_PPQ: priorities per list.
pub const RQ_NQS: usize = 64;
pub const RQ_PPQ: i32 = 4;

/// `struct runq`.
#[derive(Clone, Debug)]
pub struct RunQ {
    lists: Vec<VecDeque<TaskId>>,
    bits: u64,
}

impl Default for RunQ {
    fn default() -> Self {
        RunQ { lists: vec![VecDeque::new(); RQ_NQS], bits: 0 }
    }
}

impl RunQ {
    /// runq_add_pri(): at the tail of list `idx`, or at its head for a preempted thread.
    pub fn add_idx(&mut self, idx: usize, p: TaskId, head: bool) {
        if head {
            self.lists[idx].push_front(p);
        } else {
            self.lists[idx].push_back(p);
        }
        self.bits |= 1 << idx;
    }

    /// runq_remove_idx(): take `p` out of list `idx`. Returns whether the list emptied.
    pub fn remove_idx(&mut self, idx: usize, p: TaskId) -> bool {
        let list = &mut self.lists[idx];
        if let Some(i) = list.iter().position(|&t| t == p) {
            list.remove(i);
        }
        if list.is_empty() {
            self.bits &= !(1 << idx);
            return true;
        }
        false
    }

    pub fn list(&self, idx: usize) -> &VecDeque<TaskId> {
        &self.lists[idx]
    }

    /// runq_findbit(): the lowest non-empty list.
    pub fn findbit(&self) -> Option<usize> {
        (self.bits != 0).then(|| self.bits.trailing_zeros() as usize)
    }

    /// runq_findbit_from(): the first non-empty list at or after `start`, wrapping.
    pub fn findbit_from(&self, start: usize) -> Option<usize> {
        if self.bits == 0 {
            return None;
        }
        let upper = self.bits & (!0u64 << start);
        Some(if upper != 0 { upper.trailing_zeros() } else { self.bits.trailing_zeros() } as usize)
    }

    /// runq_choose(): head of the lowest non-empty list.
    pub fn choose(&self) -> Option<TaskId> {
        self.findbit().map(|i| self.lists[i][0])
    }

    /// runq_choose_from(): head of the first non-empty list from `start`.
    pub fn choose_from(&self, start: usize) -> Option<TaskId> {
        self.findbit_from(start).map(|i| self.lists[i][0])
    }

    /// Non-empty lists from `start` to the end, then (if `start` > 0) from 0 to the end
    /// again, as runq_steal_from() walks them.
    pub fn lists_from(&self, start: usize) -> impl Iterator<Item = usize> + '_ {
        let first = (start..RQ_NQS).filter(move |&i| self.bits & (1 << i) != 0);
        let again = (0..RQ_NQS).filter(move |&i| start != 0 && self.bits & (1 << i) != 0);
        first.chain(again)
    }
}

/// Which of a CPU's three queues a thread is on (`ts_runq`), and its list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnQueue {
    Realtime(usize),
    Timeshare(usize),
    Idle(usize),
}

/// The three queues of one `struct tdq` with the calendar indexes.
#[derive(Clone, Debug, Default)]
pub struct TdqQueues {
    /// Priorities below PRI_MIN_BATCH: interrupt, realtime, kernel and interactive.
    pub realtime: RunQ,
    /// The batch band as a calendar.
    pub timeshare: RunQ,
    /// The idle class.
    pub idle: RunQ,
    /// `tdq_idx`: insertion point; `tdq_ridx`: removal point.
    pub idx: usize,
    pub ridx: usize,
}

impl TdqQueues {
    /// Mirrors sched_ule.c:tdq_runq_add(). `preempted` is SRQ_PREEMPTED (run next,
    /// at the head); `borrowing` is SRQ_BORROWING (a priority loan: run next).
    pub fn add(&mut self, p: TaskId, pri: i32, preempted: bool, borrowing: bool) -> OnQueue {
        if pri < PRI_MIN_BATCH {
            let idx = (pri / RQ_PPQ) as usize;
            self.realtime.add_idx(idx, p, preempted);
            OnQueue::Realtime(idx)
        } else if pri <= PRI_MAX_BATCH {
            let slot = if !preempted && !borrowing {
                // How far ahead of the insertion point: better priority, sooner.
                let ahead = RQ_NQS * (pri - PRI_MIN_BATCH) as usize / PRI_BATCH_RANGE as usize;
                let mut slot = (ahead + self.idx) % RQ_NQS;
                // Never add to the slot being drained unless it is also the insertion point.
                if self.ridx != self.idx && slot == self.ridx {
                    slot = (slot + RQ_NQS - 1) % RQ_NQS;
                }
                slot
            } else {
                self.ridx
            };
            self.timeshare.add_idx(slot, p, preempted);
            OnQueue::Timeshare(slot)
        } else {
            let idx = (pri / RQ_PPQ) as usize;
            self.idle.add_idx(idx, p, preempted);
            OnQueue::Idle(idx)
        }
    }

    /// Mirrors sched_ule.c:tdq_runq_rem(): when the calendar slot being drained
    /// empties, the removal point moves on (runq_remove_idx()).
    pub fn remove(&mut self, p: TaskId, on: OnQueue) {
        match on {
            OnQueue::Realtime(i) => {
                self.realtime.remove_idx(i, p);
            }
            OnQueue::Timeshare(i) => {
                let emptied = self.timeshare.remove_idx(i, p);
                if emptied && self.idx != self.ridx && self.ridx == i {
                    self.ridx = (i + 1) % RQ_NQS;
                }
            }
            OnQueue::Idle(i) => {
                self.idle.remove_idx(i, p);
            }
        }
    }

    /// Mirrors sched_ule.c:tdq_choose(): realtime first, then the calendar from
    /// the removal point, then the idle class.
    pub fn choose(&self) -> Option<TaskId> {
        self.realtime.choose().or_else(|| self.timeshare.choose_from(self.ridx)).or_else(|| self.idle.choose())
    }

    /// The calendar's per-stat-tick advance in sched_ule.c:sched_clock(): once the
    /// removal point has caught up, the insertion point moves one slot.
    pub fn advance_calendar(&mut self) {
        if self.idx == self.ridx {
            self.idx = (self.idx + 1) % RQ_NQS;
            if self.timeshare.list(self.ridx).is_empty() {
                self.ridx = self.idx;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interactive_threads_run_before_batch() {
        let mut q = TdqQueues::default();
        q.add(1, 200, false, false);
        q.add(2, 140, false, false);
        assert_eq!(q.choose(), Some(2));
    }

    #[test]
    fn calendar_slot_by_priority_and_rotation() {
        let mut q = TdqQueues::default();
        // 152 lands at the insertion point, 223 at 64 * 71 / 72 = 63 slots ahead.
        assert_eq!(q.add(1, 152, false, false), OnQueue::Timeshare(0));
        assert_eq!(q.add(2, 223, false, false), OnQueue::Timeshare(63));
        // Removal drains from ridx = 0: thread 1 first.
        assert_eq!(q.choose(), Some(1));
        q.remove(1, OnQueue::Timeshare(0));
        // Two stat ticks: idx moves to 1 (ridx follows, slot 0 empty), then to 2.
        q.advance_calendar();
        assert_eq!((q.idx, q.ridx), (1, 1));
        // A new 152 thread now lands at slot 1; the 223 one in slot 63 waits its turn.
        assert_eq!(q.add(3, 152, false, false), OnQueue::Timeshare(1));
        assert_eq!(q.choose(), Some(3));
        // A preempted thread goes to the removal point, at the head.
        assert_eq!(q.add(4, 200, true, false), OnQueue::Timeshare(1));
        assert_eq!(q.choose(), Some(4));
    }

    #[test]
    fn drained_slot_advances_removal_point() {
        let mut q = TdqQueues::default();
        q.add(1, 152, false, false);
        q.advance_calendar(); // idx 1, ridx stays 0 (slot 0 busy)
        assert_eq!((q.idx, q.ridx), (1, 0));
        // A 152 thread would land at idx 1; not ridx, so no adjustment.
        assert_eq!(q.add(2, 152, false, false), OnQueue::Timeshare(1));
        q.remove(1, OnQueue::Timeshare(0));
        assert_eq!(q.ridx, 1);
        assert_eq!(q.choose(), Some(2));
    }

    #[test]
    fn findbit_from_wraps() {
        let mut r = RunQ::default();
        r.add_idx(3, 7, false);
        assert_eq!(r.findbit_from(10), Some(3));
        assert_eq!(r.findbit_from(3), Some(3));
        assert_eq!(r.lists_from(10).collect::<Vec<_>>(), vec![3]);
    }
}
