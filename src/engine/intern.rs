//! Interning of names to dense ids, so the hot path compares integers, not strings.

use super::FastMap;
use std::hash::Hash;

/// A bidirectional map between values and dense `u32` ids, assigned in first-seen order.
#[derive(Clone, Debug)]
pub struct Interner<T: Eq + Hash + Clone> {
    ids: FastMap<T, u32>,
    values: Vec<T>,
}

impl<T: Eq + Hash + Clone> Default for Interner<T> {
    fn default() -> Self {
        Self {
            ids: FastMap::default(),
            values: Vec::new(),
        }
    }
}

impl<T: Eq + Hash + Clone> Interner<T> {
    /// Returns the id of `value`, assigning the next one if it is new.
    pub fn intern(&mut self, value: &T) -> u32 {
        if let Some(&id) = self.ids.get(value) {
            return id;
        }
        let id = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
        self.ids.insert(value.clone(), id);
        self.values.push(value.clone());
        id
    }

    /// The id of `value`, if it was interned.
    pub fn get(&self, value: &T) -> Option<u32> {
        self.ids.get(value).copied()
    }

    /// The value behind `id`. Ids only come from `intern`, so it is always present.
    pub fn value(&self, id: u32) -> &T {
        &self.values[id as usize]
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}
