//! Pipes and AF_UNIX stream sockets with Linux's blocking and wakeup rules, and
//! wait queues. Pure data structures: they say who blocks and whom to wake; the
//! engine does the waking through `try_to_wake_up`.

use std::collections::VecDeque;

use crate::task::TaskId;

/// `PAGE_SIZE` on x86-64.
pub const PAGE_SIZE: u64 = 4096;
/// `PIPE_DEF_BUFFERS`: ring slots of a new pipe (include/linux/pipe_fs_i.h).
pub const PIPE_DEF_BUFFERS: usize = 16;
/// `SK_WMEM_MAX` = `net.core.wmem_default` on x86-64: 256 × SKB_TRUESIZE(256).
pub const SK_WMEM_MAX: u64 = 212_992;
/// sizeof(struct sk_buff) rounded by SKB_DATA_ALIGN (232 → 256 on x86-64, 4.19-5.x).
const SKB_STRUCT_ALIGNED: u64 = 256;
/// sizeof(struct skb_shared_info) rounded by SKB_DATA_ALIGN (MAX_SKB_FRAGS = 17 → 320).
const SKB_SHINFO_ALIGNED: u64 = 320;

/// A wait queue (`wait_queue_head_t`). Non-exclusive waiters sit at the head,
/// exclusive ones at the tail, as `add_wait_queue()`/`add_wait_queue_exclusive()` do.
#[derive(Clone, Debug, Default)]
pub struct WaitQueue {
    entries: VecDeque<(TaskId, bool)>,
}

impl WaitQueue {
    pub fn add(&mut self, task: TaskId, exclusive: bool) {
        if exclusive {
            self.entries.push_back((task, true));
        } else {
            self.entries.push_front((task, false));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn remove(&mut self, task: TaskId) {
        self.entries.retain(|&(t, _)| t != task);
    }

    /// Mirrors `__wake_up_common()` with autoremove: wakes every non-exclusive waiter
    /// met and stops after `nr_exclusive` exclusive ones. Woken entries leave the queue.
    pub fn wake(&mut self, nr_exclusive: usize, out: &mut Vec<TaskId>) {
        let mut left = nr_exclusive;
        while let Some((task, exclusive)) = self.entries.pop_front() {
            out.push(task);
            if exclusive {
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
    }

    /// Wakes everybody (`wake_up_all`).
    pub fn wake_all(&mut self, out: &mut Vec<TaskId>) {
        out.extend(self.entries.drain(..).map(|(t, _)| t));
    }
}

/// What a channel operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOutcome {
    /// Transferred this many bytes (for a write: this attempt's share).
    Done(u64),
    /// Nothing could be transferred; the caller was added to a wait queue.
    Blocked,
    /// A write transferred some bytes and must block for the rest.
    Partial(u64),
}

/// One ring slot: a page holding bytes `off..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PipeSlot {
    off: u64,
    end: u64,
}

/// A pipe (fs/pipe.c, Linux ≥ 5.5 head/tail ring).
#[derive(Clone, Debug, Default)]
pub struct Pipe {
    slots: VecDeque<PipeSlot>,
    pub rd_wait: WaitQueue,
    pub wr_wait: WaitQueue,
    /// Set once the pipe has been polled: writers then always wake readers.
    pub poll_usage: bool,
    /// The CPU whose cache holds the pipe's bookkeeping lines (mutex, ring
    /// indexes, the slot): the last one to read or write it.
    pub last_cpu: Option<usize>,
    /// When `pipe->mutex` is next free: the end of the last reserved read or write.
    pub mutex_free_ns: u64,
    /// Who wrote the bytes not yet read: (stream offset where the run ends, the
    /// writer's CPU), oldest first, adjacent runs of one CPU merged. A reader
    /// takes each run's data lines from the cache of the CPU that wrote them.
    writer_runs: VecDeque<(u64, usize)>,
    /// Bytes ever written into and read from the pipe (stream offsets).
    written_bytes: u64,
    read_bytes: u64,
    /// v6.14+ (`pipe_read()`, "don't wake up the writer if the pipe is still
    /// full", Oleg Nesterov, 2025): a read wakes a writer only when it freed a slot
    /// of a full ring; before, whenever the ring was full as the read began.
    pub wake_writer_on_freed_slot: bool,
    /// A call that moves data stamps the inode's times (`stamps_pipe_times()`:
    /// v6.12 and earlier).
    pub stamps_times: bool,
    /// Packet mode (`pipe2(O_DIRECT)`, v3.4+): writes never merge into the last
    /// slot, and a read takes one slot's packet whole (what the reader's buffer
    /// cannot hold is discarded) and returns (`is_packetized()` in `pipe_read()`).
    pub packet: bool,
    /// Spare pages the pipe keeps for its next slots (`pipe->tmp_page`): a slot
    /// released by a read goes here while there is room, and a write taking a new
    /// slot uses one before it allocates.
    pub tmp_pages: u8,
    /// How many spare pages it keeps: one until v6.15, two from v6.15 ("pipe:
    /// cache 2 pages instead of 1", `anon_pipe_get_page()` /
    /// `anon_pipe_put_page()`). 0: the pipe's pages are not modelled (a
    /// policy that is not Linux's; FreeBSD's pipes copy into one buffer).
    pub tmp_page_slots: u8,
}

/// The spare pages a Linux pipe of `release` keeps (`pipe->tmp_page`): one, two
/// from v6.15 ("pipe: cache 2 pages instead of 1"). None (not Linux): 0, the
/// pages are not modelled.
pub fn tmp_page_slots(release: Option<(u32, u32)>) -> u8 {
    match release {
        Some(v) if v >= (6, 15) => 2,
        Some(_) => 1,
        None => 0,
    }
}

/// Whether a Linux pipe call of `release` that moves data stamps the pipe
/// inode's times: `pipe_write()` calls `file_update_time()` and `pipe_read()`
/// `file_accessed()` on every pipe in v6.12 and earlier; v6.18 does it for FIFOs
/// only (`fifo_pipe_write()` / `fifo_pipe_read()` around the anonymous pipe's
/// `anon_pipe_write()` / `anon_pipe_read()`: "pipe: don't update {a,c,m}time
/// for anonymous pipes", taken here as v6.14; the modelled releases fall on
/// either side of it). Anonymous pipes are the only pipes modelled. None (not
/// Linux): false.
pub fn stamps_pipe_times(release: Option<(u32, u32)>) -> bool {
    release.is_some_and(|v| v < (6, 14))
}

impl Pipe {
    pub fn bytes(&self) -> u64 {
        self.slots.iter().map(|s| s.end - s.off).sum()
    }

    pub fn slots_used(&self) -> usize {
        self.slots.len()
    }

    /// How many pages a write of `bytes` would allocate if it ran now: the new
    /// slots it takes (none when it merges into the last page, as `write()`
    /// does) beyond the spare pages the pipe keeps (`anon_pipe_get_page()`:
    /// `alloc_page(GFP_HIGHUSER | __GFP_ACCOUNT)` only without a spare).
    pub fn write_page_allocs(&self, bytes: u64, had_waited: bool) -> u64 {
        let merges = !had_waited
            && !self.packet
            && bytes > 0
            && bytes <= PAGE_SIZE
            && self.slots.back().is_some_and(|last| last.end + bytes <= PAGE_SIZE);
        if merges {
            return 0;
        }
        let free_slots = PIPE_DEF_BUFFERS.saturating_sub(self.slots.len()) as u64;
        bytes.div_ceil(PAGE_SIZE).min(free_slots).saturating_sub(u64::from(self.tmp_pages))
    }

    /// How many pages a read of `bytes` would free if it ran now: the slots it
    /// empties beyond the room left for spares (`anon_pipe_put_page()` keeps a
    /// released page while a spare place is empty, else `put_page()`).
    pub fn read_page_frees(&self, bytes: u64) -> u64 {
        let released = if self.packet {
            u64::from(!self.slots.is_empty())
        } else {
            let mut want = bytes;
            let mut n = 0;
            for slot in &self.slots {
                let left = slot.end - slot.off;
                if want < left {
                    break;
                }
                want -= left;
                n += 1;
            }
            n
        };
        released.saturating_sub(u64::from(self.tmp_page_slots.saturating_sub(self.tmp_pages)))
    }

    /// A new slot's page: a spare if the pipe keeps one.
    fn take_page(&mut self) {
        self.tmp_pages = self.tmp_pages.saturating_sub(1);
    }

    /// A released slot's page: kept as a spare while there is room.
    fn release_page(&mut self) {
        if self.tmp_pages < self.tmp_page_slots {
            self.tmp_pages += 1;
        }
    }

    /// `pipe_full()`: every ring slot is taken (the last page may still have room).
    pub fn full(&self) -> bool {
        self.slots.len() >= PIPE_DEF_BUFFERS
    }

    pub fn readable(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Whether a read of `bytes` would leave the pipe empty if it ran now: it
    /// finds bytes and takes them all (a packet read takes its slot whole).
    pub fn read_empties(&self, bytes: u64) -> bool {
        match self.slots.len() {
            0 => false,
            1 if self.packet => true,
            _ if self.packet => false,
            _ => bytes >= self.bytes(),
        }
    }

    /// Records that `cpu` wrote the `bytes` a write just queued.
    fn note_writer(&mut self, cpu: usize, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.written_bytes += bytes;
        match self.writer_runs.back_mut() {
            Some((end, c)) if *c == cpu => *end = self.written_bytes,
            _ => self.writer_runs.push_back((self.written_bytes, cpu)),
        }
    }

    /// The writers of the next `bytes` unread bytes: (bytes, writer CPU) per run,
    /// oldest first.
    pub fn unread_writers(&self, bytes: u64) -> impl Iterator<Item = (u64, usize)> + '_ {
        let until = self.read_bytes + bytes;
        let mut from = self.read_bytes;
        self.writer_runs.iter().map_while(move |&(end, cpu)| {
            if from >= until {
                return None;
            }
            let take = end.min(until) - from;
            from = end.min(until);
            Some((take, cpu))
        })
    }

    /// The CPU that wrote the newest unread byte, if any is unread.
    pub fn last_writer(&self) -> Option<usize> {
        self.writer_runs.back().map(|&(_, cpu)| cpu)
    }

    /// Mirrors `pipe_write()`: merge a small write into the last page when it fits
    /// (`offset + len + chars <= PAGE_SIZE`), else take new slots page by page; block
    /// (exclusive) when the ring is full. Writes of at most a page are atomic. Wakes
    /// readers (sync) if the pipe was empty before the write or has been polled, and
    /// the next writer if this writer had slept and left room.
    ///
    /// A writer that has slept re-enters the loop, not the merge: its data goes to a
    /// new slot, and it sleeps again while the ring is full even if the last page has
    /// room (`pipe_writable()` looks at the slots only).
    /// `cpu` is where the writer runs: readers later take the data's lines from its cache.
    pub fn write(&mut self, task: TaskId, cpu: usize, bytes: u64, had_waited: bool, wake: &mut Vec<TaskId>) -> IoOutcome {
        let was_empty = self.slots.is_empty();
        let mut written = 0;
        let mut left = bytes;
        if !had_waited && !self.packet && left > 0 && left <= PAGE_SIZE {
            if let Some(last) = self.slots.back_mut() {
                if last.end + left <= PAGE_SIZE {
                    last.end += left;
                    written = left;
                    left = 0;
                }
            }
        }
        while left > 0 && !self.full() {
            // An atomic write (≤ PIPE_BUF) never splits across pages.
            let chunk = left.min(PAGE_SIZE);
            self.take_page();
            self.slots.push_back(PipeSlot { off: 0, end: chunk });
            written += chunk;
            left -= chunk;
        }
        self.note_writer(cpu, written);
        if written > 0 && (was_empty || self.poll_usage) {
            self.rd_wait.wake(1, wake);
        }
        if left > 0 {
            self.wr_wait.add(task, true);
            return if written > 0 { IoOutcome::Partial(written) } else { IoOutcome::Blocked };
        }
        if had_waited && !self.full() {
            self.wr_wait.wake(1, wake);
        }
        IoOutcome::Done(written)
    }

    /// Mirrors `pipe_read()`: take up to `bytes` from the front pages, freeing each page
    /// once consumed; block (exclusive) when empty. Wakes one writer (sync) if the pipe
    /// was full when the read began, and the next reader if data is left behind.
    ///
    /// Since v5.5 (the head/tail rework, kept through v5.15) the writer wakeup tests
    /// only `was_full`, taken before the copy: a 100-byte read that leaves the front
    /// page partly consumed still wakes a writer, who finds the ring full and sleeps
    /// again at the tail of `wr_wait` (`___wait_event()` re-checks `pipe_writable()`).
    /// v4.19 woke writers only when a buffer was released (`do_wakeup`); v6.14+
    /// only when the read freed a slot of a full ring (`wake_writer_on_freed_slot`).
    pub fn read(&mut self, task: TaskId, bytes: u64, wake: &mut Vec<TaskId>) -> IoOutcome {
        if self.slots.is_empty() {
            self.rd_wait.add(task, true);
            return IoOutcome::Blocked;
        }
        let mut wake_writer = self.full() && !self.wake_writer_on_freed_slot;
        let mut got = 0;
        while got < bytes {
            let full = self.full();
            let Some(front) = self.slots.front_mut() else { break };
            let take = (front.end - front.off).min(bytes - got);
            front.off += take;
            got += take;
            if self.packet {
                // The rest of the packet goes with it, and the read ends here.
                self.read_bytes += front.end - front.off;
                front.off = front.end;
                wake_writer |= self.wake_writer_on_freed_slot && full;
                self.slots.pop_front();
                self.release_page();
                break;
            }
            if front.off == front.end {
                wake_writer |= self.wake_writer_on_freed_slot && full;
                self.slots.pop_front();
                self.release_page();
            }
        }
        self.read_bytes += got;
        while self.writer_runs.front().is_some_and(|&(end, _)| end <= self.read_bytes) {
            self.writer_runs.pop_front();
        }
        if wake_writer {
            self.wr_wait.wake(1, wake);
        }
        if !self.slots.is_empty() && !self.rd_wait.is_empty() {
            self.rd_wait.wake(1, wake);
        }
        IoOutcome::Done(got)
    }
}

/// `skb->truesize` of a linear skb carrying `len` bytes, as `__alloc_skb()` computes
/// it: the head is kmalloc'ed for SKB_DATA_ALIGN(len) + shared info, so truesize =
/// ksize(head) + SKB_DATA_ALIGN(sizeof(struct sk_buff)). A 100-byte message lands in
/// kmalloc-512: truesize 768. Beyond 8 KiB the data goes to page fragments.
pub fn skb_truesize(len: u64) -> u64 {
    let head = len.div_ceil(64) * 64 + SKB_SHINFO_ALIGNED;
    let alloc = match head {
        0..=8 => 8,
        9..=16 => 16,
        17..=32 => 32,
        33..=64 => 64,
        65..=96 => 96,
        97..=128 => 128,
        129..=192 => 192,
        h if h <= 8192 => h.next_power_of_two(),
        _ => return len.div_ceil(PAGE_SIZE) * PAGE_SIZE + 512 + SKB_STRUCT_ALIGNED,
    };
    alloc + SKB_STRUCT_ALIGNED
}

/// One direction of an AF_UNIX SOCK_STREAM pair (net/unix/af_unix.c).
#[derive(Clone, Debug)]
pub struct UnixStream {
    /// Queued skbs in order, as runs of equal-sized ones (a sender's 100-byte
    /// messages are one run however many are queued): one entry to touch per
    /// read instead of one per message, so a receiver's queue stays in a line
    /// or two of the simulator's own cache.
    skbs: VecDeque<SkbRun>,
    /// Bytes already read from the first queued skb.
    head_read: u64,
    /// Queued skbs, all runs together.
    nr_skbs: usize,
    /// `sk_wmem_alloc` of the sending socket.
    pub wmem_alloc: u64,
    /// `sk_sndbuf` of the sending socket.
    pub sndbuf: u64,
    /// Readers and pollers of the receiving socket.
    pub rd_wait: WaitQueue,
    /// Senders waiting for send-buffer space.
    pub wr_wait: WaitQueue,
    /// CPUs of the last send and the last receive: the socket's, its queue's
    /// and its skbs' cache lines are where they were last used.
    pub last_send_cpu: Option<usize>,
    pub last_recv_cpu: Option<usize>,
}

/// `count` queued skbs of `len` bytes each.
#[derive(Clone, Copy, Debug)]
struct SkbRun {
    len: u64,
    count: u64,
}

impl Default for UnixStream {
    fn default() -> Self {
        UnixStream {
            skbs: VecDeque::new(),
            head_read: 0,
            nr_skbs: 0,
            wmem_alloc: 0,
            sndbuf: SK_WMEM_MAX,
            rd_wait: WaitQueue::default(),
            wr_wait: WaitQueue::default(),
            last_send_cpu: None,
            last_recv_cpu: None,
        }
    }
}

impl UnixStream {
    pub fn queued_skbs(&self) -> usize {
        self.nr_skbs
    }

    pub fn readable(&self) -> bool {
        !self.skbs.is_empty()
    }

    /// Largest skb `unix_stream_sendmsg()` builds: half the send buffer less 64, capped
    /// by SKB_MAX_ALLOC plus the page fragments.
    fn max_skb(&self) -> u64 {
        ((self.sndbuf >> 1) - 64).min(32768 + 16 * PAGE_SIZE)
    }

    /// Mirrors `unix_stream_sendmsg()`: one skb per chunk; `sock_alloc_send_pskb()`
    /// blocks (non-exclusive) while `sk_wmem_alloc >= sk_sndbuf`; every queued skb
    /// calls `sk_data_ready`, a sync wakeup of the receiver's waiters.
    pub fn write(&mut self, task: TaskId, bytes: u64, wake: &mut Vec<TaskId>) -> IoOutcome {
        let mut written = 0;
        while written < bytes {
            if self.wmem_alloc >= self.sndbuf {
                self.wr_wait.add(task, false);
                return if written > 0 { IoOutcome::Partial(written) } else { IoOutcome::Blocked };
            }
            let chunk = (bytes - written).min(self.max_skb());
            self.wmem_alloc += skb_truesize(chunk);
            match self.skbs.back_mut() {
                Some(run) if run.len == chunk => run.count += 1,
                _ => self.skbs.push_back(SkbRun { len: chunk, count: 1 }),
            }
            self.nr_skbs += 1;
            written += chunk;
            self.rd_wait.wake(1, wake);
        }
        IoOutcome::Done(written)
    }

    /// Mirrors `unix_stream_read_generic()`: copy up to `bytes` across queued skbs,
    /// freeing each one consumed; `sock_wfree()` → `unix_write_space()` wakes all
    /// blocked senders once `sk_wmem_alloc * 4 <= sk_sndbuf` (`unix_writable()`).
    /// Blocks (non-exclusive, `unix_stream_data_wait()`) when nothing is queued.
    pub fn read(&mut self, task: TaskId, bytes: u64, wake: &mut Vec<TaskId>) -> IoOutcome {
        if self.skbs.is_empty() {
            self.rd_wait.add(task, false);
            return IoOutcome::Blocked;
        }
        let mut got = 0;
        while got < bytes {
            let Some(front) = self.skbs.front_mut() else { break };
            let take = (front.len - self.head_read).min(bytes - got);
            self.head_read += take;
            got += take;
            if self.head_read == front.len {
                // The first skb is consumed and freed.
                self.head_read = 0;
                self.wmem_alloc -= skb_truesize(front.len);
                front.count -= 1;
                if front.count == 0 {
                    self.skbs.pop_front();
                }
                self.nr_skbs -= 1;
                if self.wmem_alloc * 4 <= self.sndbuf {
                    self.wr_wait.wake_all(wake);
                }
            }
        }
        IoOutcome::Done(got)
    }
}

/// A channel: one direction of a pipe or of a socket pair.
#[derive(Clone, Debug)]
pub enum Channel {
    Pipe(Pipe),
    Unix(UnixStream),
    /// One direction of a TCP connection over loopback. Its queueing and wakeups
    /// are the stream's (the receiver is woken synchronously from the sender's
    /// softirq, as `sock_def_readable` does); only its costs differ. Fine for
    /// request/response use, where one message at a time is in flight.
    Tcp(UnixStream),
}

impl Channel {
    pub fn readable(&self) -> bool {
        match self {
            Channel::Pipe(p) => p.readable(),
            Channel::Unix(u) | Channel::Tcp(u) => u.readable(),
        }
    }

    /// poll(): register a non-exclusive waiter on the read side.
    pub fn add_poller(&mut self, task: TaskId) {
        match self {
            Channel::Pipe(p) => {
                p.poll_usage = true;
                p.rd_wait.add(task, false);
            }
            Channel::Unix(u) | Channel::Tcp(u) => u.rd_wait.add(task, false),
        }
    }

    pub fn is_pipe(&self) -> bool {
        matches!(self, Channel::Pipe(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe holding `n` 100-byte messages from writer 1, with nobody woken.
    fn pipe_with(n: usize) -> Pipe {
        let mut p = Pipe::default();
        let mut wake = Vec::new();
        for i in 0..n {
            assert_eq!(p.write(1, 0, 100, false, &mut wake), IoOutcome::Done(100), "message {i}");
        }
        p
    }

    #[test]
    fn unread_bytes_remember_their_writers() {
        let mut p = Pipe::default();
        let mut wake = Vec::new();
        for cpu in [3, 3, 5, 3] {
            p.write(1, cpu, 100, false, &mut wake);
        }
        // CPU 3's first two messages are one run.
        assert_eq!(p.unread_writers(1000).collect::<Vec<_>>(), vec![(200, 3), (100, 5), (100, 3)]);
        assert_eq!(p.last_writer(), Some(3));
        // A read of 150 bytes leaves CPU 3's last 50 of the first run.
        p.read(2, 150, &mut wake);
        assert_eq!(p.unread_writers(100).collect::<Vec<_>>(), vec![(50, 3), (50, 5)]);
        p.read(2, 150, &mut wake);
        assert_eq!(p.unread_writers(1000).collect::<Vec<_>>(), vec![(100, 3)]);
        p.read(2, 100, &mut wake);
        assert_eq!(p.unread_writers(1000).count(), 0);
        assert_eq!(p.last_writer(), None);
    }

    #[test]
    fn pipe_holds_640_hundred_byte_messages() {
        let mut p = pipe_with(640);
        let mut wake = Vec::new();
        assert_eq!(p.slots_used(), 16);
        assert_eq!(p.bytes(), 64_000);
        assert_eq!(p.write(1, 0, 100, false, &mut wake), IoOutcome::Blocked);
        assert_eq!(p.wr_wait.len(), 1);
    }

    #[test]
    fn a_read_empties_a_pipe_when_it_takes_every_byte_or_the_last_packet() {
        let mut wake = Vec::new();
        let mut p = Pipe { tmp_page_slots: 1, ..Pipe::default() };
        assert!(!p.read_empties(100), "nothing to take");
        p.write(1, 0, 100, false, &mut wake);
        p.write(1, 0, 100, false, &mut wake);
        assert!(!p.read_empties(100));
        assert!(p.read_empties(200));
        assert!(p.read_empties(4096));
        let mut q = Pipe { packet: true, tmp_page_slots: 1, ..Pipe::default() };
        q.write(1, 0, 512, false, &mut wake);
        assert!(q.read_empties(100), "a packet read takes its slot whole");
        q.write(1, 0, 512, false, &mut wake);
        assert!(!q.read_empties(4096), "one packet per read");
    }

    #[test]
    fn pipe_wakes_reader_only_on_empty_to_nonempty() {
        let mut p = Pipe::default();
        let mut wake = Vec::new();
        assert_eq!(p.read(7, 100, &mut wake), IoOutcome::Blocked);
        p.write(1, 0, 100, false, &mut wake);
        assert_eq!(wake, vec![7]);
        wake.clear();
        p.rd_wait.add(7, true);
        p.write(2, 0, 100, false, &mut wake);
        assert!(wake.is_empty(), "pipe was not empty: no wakeup");
    }

    #[test]
    fn spare_pages_are_used_before_allocating_and_kept_before_freeing() {
        let mut p = Pipe { packet: true, tmp_page_slots: 2, ..Pipe::default() };
        let mut wake = Vec::new();
        // A new pipe has no spare: each packet's slot is a fresh page.
        assert_eq!(p.write_page_allocs(512, false), 1);
        for _ in 0..3 {
            p.write(1, 0, 512, false, &mut wake);
        }
        // The first two releases become spares, the third is freed.
        assert_eq!(p.read_page_frees(512), 0);
        p.read(2, 512, &mut wake);
        p.read(2, 512, &mut wake);
        assert_eq!(p.tmp_pages, 2);
        assert_eq!(p.read_page_frees(512), 1);
        p.read(2, 512, &mut wake);
        assert_eq!(p.tmp_pages, 2);
        // Writes use the spares first; a 12 KiB write needs three slots.
        assert_eq!(p.write_page_allocs(512, false), 0);
        assert_eq!(p.write_page_allocs(3 * PAGE_SIZE, false), 1);
        // A byte stream merges a small write into its last page: no slot, no page.
        let mut s = Pipe { tmp_page_slots: 1, ..Pipe::default() };
        assert_eq!(s.write_page_allocs(100, false), 1);
        s.write(1, 0, 100, false, &mut wake);
        assert_eq!(s.write_page_allocs(100, false), 0);
        // ... unless the writer had slept: it takes a new slot.
        assert_eq!(s.write_page_allocs(100, true), 1);
        // A read that leaves part of the page releases nothing; one that empties it
        // keeps it as the spare.
        assert_eq!(s.read_page_frees(50), 0);
        assert_eq!(s.read_page_frees(100), 0);
        s.read(2, 100, &mut wake);
        assert_eq!(s.tmp_pages, 1);
    }

    #[test]
    fn packet_mode_pipes_take_a_slot_per_write_and_return_one_packet_per_read() {
        let mut p = Pipe { packet: true, ..Pipe::default() };
        let mut wake = Vec::new();
        for i in 0..PIPE_DEF_BUFFERS {
            assert_eq!(p.write(1, 0, 512, false, &mut wake), IoOutcome::Done(512), "write {i}");
        }
        // 16 packets of 512 bytes fill the ring, though the pages have room.
        assert_eq!(p.write(1, 0, 512, false, &mut wake), IoOutcome::Blocked);
        // A 1024-byte read returns one packet.
        assert_eq!(p.read(2, 1024, &mut wake), IoOutcome::Done(512));
        assert_eq!(p.slots_used(), PIPE_DEF_BUFFERS - 1);
        // A short read takes its part and the rest of the packet is gone.
        assert_eq!(p.read(2, 100, &mut wake), IoOutcome::Done(100));
        assert_eq!(p.slots_used(), PIPE_DEF_BUFFERS - 2);
        assert_eq!(p.bytes(), 512 * (PIPE_DEF_BUFFERS as u64 - 2));
    }

    #[test]
    fn v614_pipe_read_wakes_a_writer_only_when_it_frees_a_slot_of_a_full_ring() {
        let mut p = pipe_with(640);
        p.wake_writer_on_freed_slot = true;
        let mut wake = Vec::new();
        assert_eq!(p.write(2, 0, 100, false, &mut wake), IoOutcome::Blocked);
        // 40 messages share a page: 39 reads leave the first page in the ring.
        for _ in 0..39 {
            p.read(9, 100, &mut wake);
        }
        assert!(wake.is_empty(), "the ring is still full: nobody to wake");
        // The 40th empties the page: a slot of the full ring is freed.
        p.read(9, 100, &mut wake);
        assert_eq!(wake, vec![2]);
        wake.clear();
        // Not full any more: freeing the next page wakes nobody.
        for _ in 0..40 {
            p.read(9, 100, &mut wake);
        }
        assert!(wake.is_empty());
    }

    #[test]
    fn pipe_read_from_full_ring_wakes_one_writer_even_without_freeing_a_slot() {
        let mut p = pipe_with(640);
        let mut wake = Vec::new();
        assert_eq!(p.write(2, 0, 100, false, &mut wake), IoOutcome::Blocked);
        assert_eq!(p.write(3, 0, 100, false, &mut wake), IoOutcome::Blocked);
        // A read that leaves the first page partly consumed: the ring was full when it
        // began, so one exclusive writer wakes (v5.5+ `was_full`), in queue order.
        assert_eq!(p.read(9, 100, &mut wake), IoOutcome::Done(100));
        assert_eq!(wake, vec![2]);
        wake.clear();
        // The woken writer finds the ring still full and sleeps again, at the tail.
        assert_eq!(p.write(2, 0, 100, true, &mut wake), IoOutcome::Blocked);
        assert!(wake.is_empty());
        p.read(9, 100, &mut wake);
        assert_eq!(wake, vec![3]);
        wake.clear();
        // 37 more reads leave one message on the page; each wakes the queue's head,
        // and only writer 2 is left waiting.
        for _ in 0..37 {
            p.read(9, 100, &mut wake);
        }
        assert_eq!(wake, vec![2]);
        wake.clear();
        // The 40th frees the page: no writer is waiting any more, and a retry fits.
        p.read(9, 100, &mut wake);
        assert!(wake.is_empty());
        assert_eq!(p.write(2, 0, 100, true, &mut wake), IoOutcome::Done(100));
        // The ring is full again, so the writer does not pass a wakeup on.
        assert!(wake.is_empty());
    }

    #[test]
    fn a_writer_that_slept_does_not_merge_into_the_last_page() {
        let mut p = Pipe::default();
        let mut wake = Vec::new();
        for _ in 0..16 {
            assert_eq!(p.write(1, 0, 3000, false, &mut wake), IoOutcome::Done(3000));
        }
        assert_eq!(p.slots_used(), 16, "3000 + 3000 > 4096: a slot each");
        // The last page has 1096 bytes of room: a fresh write merges into it...
        assert_eq!(p.write(2, 0, 100, false, &mut wake), IoOutcome::Done(100));
        // ...but a writer back from wr_wait re-checks pipe_writable() (slots only)
        // and sleeps again.
        assert_eq!(p.write(3, 0, 100, true, &mut wake), IoOutcome::Blocked);
        assert_eq!(p.wr_wait.len(), 1);
    }

    #[test]
    fn pipe_read_from_a_ring_not_full_wakes_no_writer() {
        let mut p = pipe_with(600);
        let mut wake = Vec::new();
        p.wr_wait.add(2, true);
        assert_eq!(p.read(9, 100, &mut wake), IoOutcome::Done(100));
        assert!(wake.is_empty(), "15 of 16 slots used: was_full is false");
    }

    #[test]
    fn pipe_merge_respects_page_end() {
        let mut p = Pipe::default();
        let mut wake = Vec::new();
        p.write(1, 0, 4000, false, &mut wake);
        p.write(1, 0, 100, false, &mut wake);
        assert_eq!(p.slots_used(), 2, "4000 + 100 > 4096: new slot");
        p.write(1, 0, 96, false, &mut wake);
        assert_eq!(p.slots_used(), 2, "100 + 96 fits in the second page");
    }

    #[test]
    fn truesize_of_small_skbs() {
        assert_eq!(skb_truesize(100), 768);
        assert_eq!(skb_truesize(1), 768);
        assert_eq!(skb_truesize(200), 1280);
    }

    #[test]
    fn unix_sender_blocks_at_sndbuf_and_resumes_at_quarter() {
        let mut u = UnixStream::default();
        let mut wake = Vec::new();
        // 212992 / 768 = 277.33: the 278th allocation still sees wmem < sndbuf.
        let mut sent = 0;
        while u.write(1, 100, &mut wake) == IoOutcome::Done(100) {
            sent += 1;
        }
        assert_eq!(sent, 278);
        assert_eq!(u.wr_wait.len(), 1);
        assert_eq!(u.write(2, 100, &mut wake), IoOutcome::Blocked);
        // Readers: wmem must fall to ≤ 53248 = 69 skbs of 768 before senders wake.
        wake.clear();
        let mut reads = 0;
        while wake.is_empty() {
            assert_eq!(u.read(9, 100, &mut wake), IoOutcome::Done(100));
            reads += 1;
        }
        assert_eq!(u.queued_skbs(), 69);
        assert_eq!(reads, 278 - 69);
        assert_eq!(wake.len(), 2, "non-exclusive: all blocked senders wake");
    }

    /// Reads cross skbs of different sizes in order, an skb read in part stays
    /// queued, and every freed skb gives back its own truesize.
    #[test]
    fn unix_reads_take_skbs_of_any_size_in_order() {
        let mut u = UnixStream::default();
        let mut wake = Vec::new();
        for bytes in [100, 100, 300, 100] {
            assert_eq!(u.write(1, bytes, &mut wake), IoOutcome::Done(bytes));
        }
        assert_eq!((u.queued_skbs(), u.wmem_alloc), (4, 3 * 768 + skb_truesize(300)));
        assert_eq!(u.read(9, 150, &mut wake), IoOutcome::Done(150));
        assert_eq!((u.queued_skbs(), u.wmem_alloc), (3, 2 * 768 + skb_truesize(300)));
        assert_eq!(u.read(9, 80, &mut wake), IoOutcome::Done(80));
        assert_eq!(u.queued_skbs(), 2, "the 300-byte skb is read in part: 270 of it left");
        assert_eq!(u.read(9, 1000, &mut wake), IoOutcome::Done(370));
        assert_eq!((u.queued_skbs(), u.wmem_alloc), (0, 0));
        assert!(!u.readable());
    }

    #[test]
    fn unix_every_message_wakes_a_sleeping_reader() {
        let mut u = UnixStream::default();
        let mut wake = Vec::new();
        assert_eq!(u.read(9, 100, &mut wake), IoOutcome::Blocked);
        u.write(1, 100, &mut wake);
        assert_eq!(wake, vec![9]);
        wake.clear();
        u.write(1, 100, &mut wake);
        assert!(wake.is_empty(), "nobody sleeping: waitqueue empty");
    }

    #[test]
    fn waitqueue_wakes_pollers_and_one_exclusive() {
        let mut q = WaitQueue::default();
        q.add(1, true);
        q.add(2, true);
        q.add(3, false);
        q.add(4, false);
        let mut out = Vec::new();
        q.wake(1, &mut out);
        assert_eq!(out, vec![4, 3, 1]);
        assert_eq!(q.len(), 1);
    }
}
