//! A fixed-capacity CPU bitmap, like the kernel's `struct cpumask`.

/// Set of CPU ids. Word-scanning keeps "first idle CPU after X" O(ncpus/64).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// An empty set able to hold CPUs `0..ncpus`.
    pub fn new(ncpus: usize) -> Self {
        CpuSet { words: vec![0; ncpus.div_ceil(64).max(1)] }
    }

    /// The set `0..ncpus`.
    pub fn full(ncpus: usize) -> Self {
        let mut s = CpuSet::new(ncpus);
        for cpu in 0..ncpus {
            s.set(cpu);
        }
        s
    }

    pub fn set(&mut self, cpu: usize) {
        self.words[cpu / 64] |= 1 << (cpu % 64);
    }

    pub fn clear(&mut self, cpu: usize) {
        self.words[cpu / 64] &= !(1 << (cpu % 64));
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.words.get(cpu / 64).is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Lowest member `>= from`, if any.
    pub fn next_from(&self, from: usize) -> Option<usize> {
        let mut wi = from / 64;
        if wi >= self.words.len() {
            return None;
        }
        let mut w = self.words[wi] & (!0u64 << (from % 64));
        loop {
            if w != 0 {
                return Some(wi * 64 + w.trailing_zeros() as usize);
            }
            wi += 1;
            if wi >= self.words.len() {
                return None;
            }
            w = self.words[wi];
        }
    }

    /// First member at or after `from`, wrapping around to 0 (the kernel's
    /// `for_each_cpu_wrap` start).
    pub fn next_wrap(&self, from: usize) -> Option<usize> {
        self.next_from(from).or_else(|| self.next_from(0))
    }

    /// Members from `start` upwards, then from 0 up to `start`: the kernel's
    /// `for_each_cpu_wrap(cpu, mask, start)` order. Walks the words from
    /// `start`'s onwards and round to it again, each word once (twice for
    /// `start`'s own: its high bits first, its low bits last).
    pub fn iter_wrap(&self, start: usize) -> WrapIter<'_> {
        let n = self.words.len();
        // A start beyond the set: nothing at or above it, all of it below.
        let (first, bit) = if start / 64 < n { (start / 64, start % 64) } else { (0, 0) };
        WrapIter { words: &self.words, bit, k: 0, wi: first, word: self.words[first] & (!0u64 << bit) }
    }

    /// The kernel's bounded `for_each_cpu_wrap(cpu, self, start)` search (as in
    /// `select_idle_cpu()`), word by word: the members in `among` (all of them
    /// when None; the others are skipped uncounted) are looked at in wrap order
    /// from `start`, at most `budget` of them, for the first that is in `hits` and
    /// that `accept` takes. Members outside `hits` are looked at and counted
    /// without a call.
    pub fn wrap_search(
        &self,
        start: usize,
        among: Option<&CpuSet>,
        hits: &CpuSet,
        budget: u64,
        mut accept: impl FnMut(usize) -> bool,
    ) -> WrapSearch {
        let n = self.words.len();
        // Only the words from the set's first member's to its last one's can
        // hold members (a domain span of a large machine is a few words of many).
        let Some(lo) = self.words.iter().position(|&w| w != 0) else {
            return WrapSearch::Exhausted { looked: 0 };
        };
        let hi = self.words.iter().rposition(|&w| w != 0).unwrap_or(lo);
        let (first, bit) = if start / 64 < n { (start / 64, start % 64) } else { (0, 0) };
        let mut scan = WordScan { set: self, among, hits, budget, seen: 0 };
        // The start word's bits from `bit` first, then the words above it, those
        // below it, and its bits below `bit` last.
        let start_in = (lo..=hi).contains(&first);
        if start_in {
            if let Some(end) = scan.word(first, !0u64 << bit, &mut accept) {
                return end;
            }
        }
        for wi in (first + 1).max(lo)..=hi {
            if let Some(end) = scan.word(wi, !0, &mut accept) {
                return end;
            }
        }
        for wi in lo..first.min(hi + 1) {
            if let Some(end) = scan.word(wi, !0, &mut accept) {
                return end;
            }
        }
        if start_in && bit != 0 {
            if let Some(end) = scan.word(first, (1u64 << bit) - 1, &mut accept) {
                return end;
            }
        }
        WrapSearch::Exhausted { looked: scan.seen }
    }

    /// [`Self::wrap_search`] the way the kernel's loop goes, one member at a
    /// time (each member of `among` takes one unit of the budget before it is
    /// looked at): the reference the word-wise search is checked against.
    pub fn wrap_search_each(
        &self,
        start: usize,
        among: Option<&CpuSet>,
        hits: &CpuSet,
        budget: u64,
        mut accept: impl FnMut(usize) -> bool,
    ) -> WrapSearch {
        let mut nr = budget.saturating_add(1);
        let mut looked = 0;
        for cpu in self.iter_wrap(start) {
            if among.is_some_and(|a| !a.contains(cpu)) {
                continue;
            }
            nr -= 1;
            if nr == 0 {
                return WrapSearch::OutOfBudget;
            }
            looked += 1;
            if hits.contains(cpu) && accept(cpu) {
                return WrapSearch::Found { cpu, looked };
            }
        }
        WrapSearch::Exhausted { looked }
    }

    /// `cpumask_copy(self, other)`, reusing this set's storage.
    pub fn copy_from(&mut self, other: &CpuSet) {
        self.words.clear();
        self.words.extend_from_slice(&other.words);
    }

    /// `cpumask_or(self, self, other)`.
    pub fn union_with(&mut self, other: &CpuSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// `cpumask_subset(self, other)`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words.iter().enumerate().all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + bit)
            })
        })
    }

    /// The kernel's `%*pbl` list form, e.g. `0-3,8`.
    pub fn to_list(&self) -> String {
        let cpus: Vec<usize> = self.iter().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < cpus.len() {
            let start = cpus[i];
            let mut end = start;
            while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
                i += 1;
                end = cpus[i];
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
            i += 1;
        }
        out
    }
}

/// How a [`CpuSet::wrap_search`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrapSearch {
    /// `cpu` taken, the `looked`-th member looked at.
    Found { cpu: usize, looked: u64 },
    /// The budget's members looked at and none taken, with more to look at.
    OutOfBudget,
    /// All `looked` members looked at, none taken, within the budget.
    Exhausted { looked: u64 },
}

/// One [`CpuSet::wrap_search`] in progress: the members looked at so far.
struct WordScan<'a> {
    set: &'a CpuSet,
    among: Option<&'a CpuSet>,
    hits: &'a CpuSet,
    budget: u64,
    seen: u64,
}

impl WordScan<'_> {
    /// Looks at the members of word `wi` under `part`, in order; `Some` ends the
    /// search.
    #[inline]
    fn word(&mut self, wi: usize, part: u64, accept: &mut impl FnMut(usize) -> bool) -> Option<WrapSearch> {
        let mut cand = self.set.words[wi] & part;
        if let Some(a) = self.among {
            cand &= a.words.get(wi).copied().unwrap_or(0);
        }
        let mut hit = cand & self.hits.words.get(wi).copied().unwrap_or(0);
        while hit != 0 {
            let b = hit.trailing_zeros();
            let looked = self.seen + u64::from((cand & ((1u64 << b) - 1)).count_ones()) + 1;
            if looked > self.budget {
                return Some(WrapSearch::OutOfBudget);
            }
            if accept(wi * 64 + b as usize) {
                return Some(WrapSearch::Found { cpu: wi * 64 + b as usize, looked });
            }
            hit &= hit - 1;
        }
        self.seen += u64::from(cand.count_ones());
        if self.seen > self.budget {
            return Some(WrapSearch::OutOfBudget);
        }
        None
    }
}

/// [`CpuSet::iter_wrap`]'s walk: word `first + k` (mod the word count) for k
/// from 0 to the count, the first word's bits from `bit` up and, at k equal to
/// the count, its bits below `bit`.
pub struct WrapIter<'a> {
    words: &'a [u64],
    bit: usize,
    k: usize,
    /// The current word's index (`first + k` wrapped, kept without a division).
    wi: usize,
    /// What is left of the current word.
    word: u64,
}

impl Iterator for WrapIter<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let n = self.words.len();
        while self.word == 0 {
            if self.k == n {
                return None;
            }
            self.k += 1;
            self.wi += 1;
            if self.wi == n {
                self.wi = 0;
            }
            let w = self.words[self.wi];
            self.word = if self.k == n { w & (1u64 << self.bit).wrapping_sub(1) } else { w };
        }
        let b = self.word.trailing_zeros() as usize;
        self.word &= self.word - 1;
        Some(self.wi * 64 + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_search_looks_where_the_loop_looks() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..3000 {
            let ncpus = [3, 64, 130, 256][round % 4];
            let density = [2, 8, 50, 90][(round / 4) % 4];
            let make = |r: &mut dyn FnMut() -> u64, pct: u64| {
                let mut s = CpuSet::new(ncpus);
                for c in 0..ncpus {
                    if r() % 100 < pct {
                        s.set(c);
                    }
                }
                s
            };
            let mut set = make(&mut rand, 70);
            // Every other round the set is a window of the CPUs (a domain span of
            // a larger machine), so whole words of it are empty.
            if round % 2 == 1 {
                let a = (rand() % ncpus as u64) as usize;
                let b = a + (rand() % (ncpus - a) as u64) as usize;
                for c in (0..ncpus).filter(|&c| c < a || c > b) {
                    set.clear(c);
                }
            }
            let among = make(&mut rand, 85);
            let hits = make(&mut rand, density);
            let start = (rand() % (ncpus as u64 + 2)) as usize;
            let budget = [0, 1, 3, 17, u64::MAX - 1][(rand() % 5) as usize];
            let reject = (rand() % ncpus as u64) as usize;
            let accept = |c: usize| c != reject;
            for among in [None, Some(&among)] {
                assert_eq!(
                    set.wrap_search(start, among, &hits, budget, accept),
                    set.wrap_search_each(start, among, &hits, budget, accept),
                    "round {round}: start {start} budget {budget} set {} hits {}",
                    set.to_list(),
                    hits.to_list()
                );
            }
        }
    }

    #[test]
    fn next_wrap_and_list() {
        let mut s = CpuSet::new(130);
        for c in [1, 2, 3, 64, 129] {
            s.set(c);
        }
        assert_eq!(s.next_from(4), Some(64));
        assert_eq!(s.next_wrap(65), Some(129));
        s.clear(129);
        assert_eq!(s.next_wrap(65), Some(1));
        assert_eq!(s.to_list(), "1-3,64");
        assert_eq!(s.count(), 4);
        assert_eq!(s.iter_wrap(3).collect::<Vec<_>>(), vec![3, 64, 1, 2]);
        // Every start, inside a word, on a word boundary and past the end: the
        // members at or above it, then those below, each once.
        for start in 0..200 {
            let want: Vec<usize> = s.iter().filter(|&c| c >= start).chain(s.iter().filter(|&c| c < start)).collect();
            assert_eq!(s.iter_wrap(start).collect::<Vec<_>>(), want, "start {start}");
        }
        let mut t = CpuSet::new(130);
        t.set(5);
        assert!(!t.is_subset(&s));
        t.union_with(&s);
        assert!(s.is_subset(&t));
        assert_eq!(t.to_list(), "1-3,5,64");
        // Sets of different capacities (an empty default one) still combine.
        let mut u = CpuSet::default();
        u.union_with(&t);
        assert_eq!(u, t);
        assert!(CpuSet::default().is_subset(&t) && !t.is_subset(&CpuSet::default()));
    }
}
