//! Sharing of equal values behind one `Arc` (name interning lives in `crate::names`).

use super::FastMap;

/// Equal values behind one shared `Arc`, found by a caller-supplied hash and
/// confirmed by equality. Values nobody else holds any more are dropped in sweeps
/// that run as the pool doubles, so the cost stays amortised constant.
#[derive(Debug)]
pub struct Shared<T: ?Sized> {
    by_hash: FastMap<u64, smallvec::SmallVec<[std::sync::Arc<T>; 1]>>,
    len: usize,
    sweep_at: usize,
}

/// The pool size below which it never sweeps.
const MIN_SWEEP: usize = 1024;

// Cloning the pool clones its `Arc`s, never the values: `derive` would demand `T: Clone`.
impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self {
            by_hash: self.by_hash.clone(),
            len: self.len,
            sweep_at: self.sweep_at,
        }
    }
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Self {
            by_hash: FastMap::default(),
            len: 0,
            sweep_at: MIN_SWEEP,
        }
    }
}

impl<T: ?Sized + PartialEq> Shared<T> {
    /// The pooled value equal to `value` (whose hash is `hash`), pooling `value` if
    /// there is none.
    pub fn share(&mut self, hash: u64, value: std::sync::Arc<T>) -> std::sync::Arc<T> {
        let list = self.by_hash.entry(hash).or_default();
        if let Some(found) = list.iter().find(|v| **v == value) {
            return std::sync::Arc::clone(found);
        }
        list.push(std::sync::Arc::clone(&value));
        self.len += 1;
        if self.len >= self.sweep_at {
            self.sweep();
        }
        value
    }

    /// Drops values only the pool still holds.
    fn sweep(&mut self) {
        self.by_hash.retain(|_, list| {
            list.retain(|v| std::sync::Arc::strong_count(v) > 1);
            !list.is_empty()
        });
        self.len = self.by_hash.values().map(|l| l.len()).sum();
        self.sweep_at = (self.len * 2).max(MIN_SWEEP);
    }

    /// How many distinct values are pooled.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn equal_values_share_one_allocation_and_collisions_stay_apart() {
        let mut pool: Shared<[i32]> = Shared::default();
        let a = pool.share(1, Arc::from(vec![1, 2]));
        let b = pool.share(1, Arc::from(vec![1, 2]));
        assert!(Arc::ptr_eq(&a, &b));
        // Same hash, different value: a hash collision must not merge them.
        let c = pool.share(1, Arc::from(vec![3]));
        assert_eq!(&*c, &[3]);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(pool.len(), 2);
    }

    #[test]
    fn unused_values_are_swept() {
        let mut pool: Shared<[u64]> = Shared::default();
        let kept = pool.share(0, Arc::from(vec![0]));
        for i in 1..5000u64 {
            // Each is dropped by the caller at once: only the pool holds it.
            pool.share(i, Arc::from(vec![i]));
        }
        assert!(pool.len() < 2 * MIN_SWEEP, "pool kept {}", pool.len());
        let again = pool.share(0, Arc::from(vec![0]));
        assert!(
            Arc::ptr_eq(&kept, &again),
            "a value still in use survives sweeps"
        );
    }
}
