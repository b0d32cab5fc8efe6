//! Fixed-point resource vectors indexed by interned (flavor, resource) pairs.

pub use crate::names::{FlavorId, FrId, Names, ResourceId};

/// A dense vector of milli-unit amounts indexed by [`FrId`]; missing entries read as 0.
#[derive(Clone, Debug, Default)]
pub struct FrVec(Vec<i64>);

/// Equality by value: trailing zeros (never-touched entries) do not matter.
impl PartialEq for FrVec {
    fn eq(&self, other: &Self) -> bool {
        let n = self.0.len().max(other.0.len()) as FrId;
        (0..n).all(|i| self.get(i) == other.get(i))
    }
}

impl Eq for FrVec {}

impl FrVec {
    #[inline]
    pub fn get(&self, fr: FrId) -> i64 {
        self.0.get(fr as usize).copied().unwrap_or(0)
    }

    #[inline]
    pub fn add(&mut self, fr: FrId, v: i64) {
        let i = fr as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = self.0[i].saturating_add(v);
    }

    #[inline]
    pub fn set(&mut self, fr: FrId, v: i64) {
        let i = fr as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = v;
    }

    /// Non-zero entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = (FrId, i64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(i, v)| (i as FrId, *v))
    }
}

/// A sparse list of (fr, amount), used for one workload's usage: short and cache-friendly.
/// Amounts per (flavor, resource); inline, as a workload rarely uses more than two.
pub type FrAmounts = smallvec::SmallVec<[(FrId, i64); 2]>;

/// Adds `v` at `fr` in a sparse list, keeping it sorted by fr.
pub fn add_amount(list: &mut FrAmounts, fr: FrId, v: i64) {
    match list.binary_search_by_key(&fr, |(f, _)| *f) {
        Ok(i) => list[i].1 = list[i].1.saturating_add(v),
        Err(i) => list.insert(i, (fr, v)),
    }
}
