//! The ordered set a runqueue keeps its queued entities in: the kernel's
//! `tasks_timeline` rbtree (`struct rb_root_cached`), ordered by a key with a
//! unique tie-breaker.
//!
//! Most runqueues hold a few entities, and with the running one kept out of the
//! tree (`__dequeue_entity()` at `set_next_entity()`) many go empty and fill
//! again at every switch, so the entities sit in a sorted vector, which keeps its
//! storage, until the queue grows long; then in a B-tree, until it is short again.
//! Either way the order, and so every decision made from it, is the key's.

use std::collections::BTreeSet;

/// Entities at which a growing queue moves from the vector to the B-tree.
const VEC_MAX: usize = 64;
/// Entities at which a shrinking queue moves back (below `VEC_MAX`, so that a
/// queue hovering at the boundary does not move at every step).
const VEC_BACK: usize = 16;

#[derive(Clone, Debug)]
pub struct EntityTree<K: Ord + Copy> {
    /// Sorted; all the members while `large` is empty.
    small: Vec<K>,
    /// All the members once the queue outgrew `small`.
    large: BTreeSet<K>,
}

impl<K: Ord + Copy> Default for EntityTree<K> {
    fn default() -> Self {
        EntityTree { small: Vec::new(), large: BTreeSet::new() }
    }
}

impl<K: Ord + Copy> EntityTree<K> {
    /// Adds `key` (keys are unique).
    pub fn insert(&mut self, key: K) {
        if self.large.is_empty() {
            if self.small.len() < VEC_MAX {
                let at = self.small.partition_point(|k| *k < key);
                self.small.insert(at, key);
                return;
            }
            self.large.extend(self.small.drain(..));
        }
        self.large.insert(key);
    }

    /// Removes `key`; true if it was there.
    pub fn remove(&mut self, key: &K) -> bool {
        if self.large.is_empty() {
            return match self.small.binary_search(key) {
                Ok(at) => {
                    self.small.remove(at);
                    true
                }
                Err(_) => false,
            };
        }
        let removed = self.large.remove(key);
        if self.large.len() <= VEC_BACK {
            self.small.extend(std::mem::take(&mut self.large));
        }
        removed
    }

    /// The leftmost member (`rb_first_cached()`).
    pub fn first(&self) -> Option<&K> {
        self.small.first().or_else(|| self.large.first())
    }

    /// The members in order.
    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.small.iter().chain(self.large.iter())
    }

    pub fn len(&self) -> usize {
        self.small.len() + self.large.len()
    }

    pub fn is_empty(&self) -> bool {
        self.small.is_empty() && self.large.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same operations on the tree and on a plain B-tree set leave the same
    /// members in the same order, through growth past the vector and back.
    #[test]
    fn keeps_the_order_of_a_btree_set_at_every_size() {
        let mut tree = EntityTree::default();
        let mut reference = BTreeSet::new();
        let mut rng = schedlab_core::rng::SimRng::new(7, schedlab_core::rng::Stream::Workload);
        let mut next = move || rng.next_u64();
        for step in 0..20_000u64 {
            // Phases that grow to ~200 entities, shrink to 0, and hover.
            let grow = match (step / 2_000) % 3 {
                0 => 75,
                1 => 25,
                _ => 50,
            };
            if next() % 100 < grow || reference.is_empty() {
                let key = (next() % 1_000, step);
                tree.insert(key);
                reference.insert(key);
            } else {
                let nth = (next() % reference.len() as u64) as usize;
                let key = *reference.iter().nth(nth).unwrap();
                assert!(tree.remove(&key));
                reference.remove(&key);
            }
            assert!(!tree.remove(&(u64::MAX, step)));
            assert_eq!(tree.len(), reference.len());
            assert_eq!(tree.first(), reference.first());
            if step % 97 == 0 {
                assert!(tree.iter().eq(reference.iter()), "step {step}");
            }
        }
    }
}
