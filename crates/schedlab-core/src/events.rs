//! The event queue: a binary heap ordered by `(time_ns, seq)`. `seq` is a global
//! insertion counter, so events at the same time pop first-in first-out and a run is
//! bit-for-bit reproducible. Cancellation is lazy: timers carry a generation that the
//! handler compares with the owner's current one.

use std::collections::BinaryHeap;

/// What happens. Generations (`gen`) make stale timers no-ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// The running segment (compute or system call) of `cpu`'s current task ends.
    SegmentDone { cpu: u32, gen: u32 },
    /// A reschedule IPI (or idle wakeup) reaches `cpu`.
    Resched { cpu: u32 },
    /// A jiffy boundary: the tick of every busy CPU.
    Jiffy,
    /// A sleeping task's timer expires.
    Timer { task: u32, gen: u32 },
    /// The idle thread of `cpu` takes its next step (`SchedClass::idle_poll`).
    IdlePoll { cpu: u32 },
}

impl EventKind {
    /// A stable code for the digest.
    pub fn code(&self) -> (u64, u64, u64) {
        match *self {
            EventKind::SegmentDone { cpu, gen } => (1, cpu as u64, gen as u64),
            EventKind::Resched { cpu } => (2, cpu as u64, 0),
            EventKind::Jiffy => (3, 0, 0),
            EventKind::Timer { task, gen } => (4, task as u64, gen as u64),
            EventKind::IdlePoll { cpu } => (5, cpu as u64, 0),
        }
    }
}

/// A queued event. Ordered by `(time_ns, seq)` alone, packed into one integer so
/// that the heap's sifting does one comparison per level (`seq` is unique, so the
/// kind never decides).
#[derive(Clone, Copy, Debug)]
struct Queued {
    key: u128,
    kind: EventKind,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    /// Reversed: the std heap is a max-heap and the earliest event must come first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.key.cmp(&self.key)
    }
}

/// The pending events, earliest first.
///
/// A popped event stays at the heap's root, marked taken, until the queue is next
/// used: the usual next use is the handler pushing the event that follows (the
/// segment after a segment), which then replaces the root and sifts down once,
/// instead of a removal's sift to the bottom and the push's sift up. The order
/// events pop in is the same either way: keys are unique.
#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Queued>,
    seq: u64,
    /// The root is the event last popped, not yet removed.
    root_taken: bool,
}

impl EventQueue {
    /// Always inlined: called out of line, the kind (written by the caller field
    /// by field) is read back whole through memory, a stall the profile showed.
    #[inline(always)]
    pub fn push(&mut self, time_ns: u64, kind: EventKind) {
        self.seq += 1;
        let queued = Queued { key: (time_ns as u128) << 64 | self.seq as u128, kind };
        if self.root_taken {
            self.root_taken = false;
            // Dropping the `PeekMut` sifts the new root down.
            if let Some(mut root) = self.heap.peek_mut() {
                *root = queued;
                return;
            }
        }
        self.heap.push(queued);
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(u64, EventKind)> {
        if self.root_taken {
            self.heap.pop();
        }
        let root = self.heap.peek().map(|q| ((q.key >> 64) as u64, q.kind));
        self.root_taken = root.is_some();
        root
    }

    pub fn len(&self) -> usize {
        self.heap.len() - self.root_taken as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The run digest: an Fx-style multiply-rotate hash over 64-bit words. One multiply
/// per word keeps it off the profile; it is the same on every platform.
#[derive(Clone, Copy, Debug)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    pub fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    pub fn value(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::default();
        let mut want = Vec::new();
        // A deterministic shuffle of times with many ties.
        let mut x = 12345u64;
        for i in 0..1000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = (x >> 33) % 50;
            q.push(t, EventKind::Resched { cpu: i });
            want.push((t, i));
        }
        want.sort_by_key(|&(t, i)| (t, i));
        let got: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop())
            .map(|(t, k)| match k {
                EventKind::Resched { cpu } => (t, cpu),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, want);
    }

    /// Pushes made between pops (as handlers make them) take the popped root's
    /// place: events still pop in (time, insertion) order.
    #[test]
    fn pushes_between_pops_keep_the_order() {
        let mut x = 99u64;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut q = EventQueue::default();
        // The expected queue: (time, insertion number), kept sorted.
        let mut model: Vec<(u64, u32)> = Vec::new();
        let mut id = 0u32;
        for _ in 0..64 {
            let t = next() % 100;
            q.push(t, EventKind::Resched { cpu: id });
            model.push((t, id));
            id += 1;
        }
        let mut popped = 0;
        while let Some((t, k)) = q.pop() {
            let EventKind::Resched { cpu } = k else { unreachable!() };
            model.sort();
            assert_eq!((t, cpu), model.remove(0), "pop {popped}");
            popped += 1;
            assert_eq!(q.len(), model.len());
            // Push 0, 1 or 2 events at or after now, as a handler does.
            let pushes = if popped < 500 { next() % 3 } else { 0 };
            for _ in 0..pushes {
                let at = t + next() % 50;
                q.push(at, EventKind::Resched { cpu: id });
                model.push((at, id));
                id += 1;
            }
        }
        assert!(model.is_empty() && q.is_empty() && popped > 500);
    }

    #[test]
    fn same_time_pops_fifo() {
        let mut q = EventQueue::default();
        q.push(10, EventKind::Resched { cpu: 2 });
        q.push(5, EventKind::Resched { cpu: 9 });
        q.push(10, EventKind::Resched { cpu: 1 });
        assert_eq!(q.pop(), Some((5, EventKind::Resched { cpu: 9 })));
        assert_eq!(q.pop(), Some((10, EventKind::Resched { cpu: 2 })));
        assert_eq!(q.pop(), Some((10, EventKind::Resched { cpu: 1 })));
    }
}
