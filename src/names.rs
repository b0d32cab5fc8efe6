//! Interned resource and flavor names, shared by the engine and placement.
//!
//! A leaf module: it imports nothing from the rest of the crate, so placement can name
//! resources without depending on the engine.

use std::hash::Hash;

/// Interned resource name (cpu, memory, nvidia.com/gpu, ...).
pub type ResourceId = u32;
/// Interned ResourceFlavor name; a name gets an id as soon as anything refers to it.
pub type FlavorId = u32;
/// Interned (flavor, resource) pair: the unit of quota accounting.
pub type FrId = u32;

/// Lookup-only: ids come from insertion order (kept in `values`), never from iterating
/// the map, so a fixed-seed hasher is enough and nothing depends on its order.
type IdMap<T> = std::collections::HashMap<T, u32, foldhash::fast::FixedState>;

/// A bidirectional map between values and dense `u32` ids, assigned in first-seen order.
#[derive(Clone, Debug)]
pub struct Interner<T: Eq + Hash + Clone> {
    ids: IdMap<T>,
    values: Vec<T>,
}

impl<T: Eq + Hash + Clone> Default for Interner<T> {
    fn default() -> Self {
        Self {
            ids: IdMap::default(),
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

/// Name tables shared by every part of the engine and by placement.
#[derive(Clone, Debug, Default)]
pub struct Names {
    pub resources: Interner<String>,
    pub flavors: Interner<String>,
    pub frs: Interner<(FlavorId, ResourceId)>,
}

impl Names {
    pub fn resource(&mut self, name: &str) -> ResourceId {
        self.resources.intern(&name.to_string())
    }
    pub fn flavor(&mut self, name: &str) -> FlavorId {
        self.flavors.intern(&name.to_string())
    }
    pub fn fr(&mut self, flavor: FlavorId, resource: ResourceId) -> FrId {
        self.frs.intern(&(flavor, resource))
    }
    pub fn fr_parts(&self, fr: FrId) -> (FlavorId, ResourceId) {
        *self.frs.value(fr)
    }
    pub fn resource_name(&self, id: ResourceId) -> &str {
        self.resources.value(id)
    }
    pub fn flavor_name(&self, id: FlavorId) -> &str {
        self.flavors.value(id)
    }
    /// "flavor/resource", for messages.
    pub fn fr_name(&self, fr: FrId) -> String {
        let (f, r) = self.fr_parts(fr);
        format!("{}/{}", self.flavor_name(f), self.resource_name(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_in_first_seen_order_and_stable() {
        let mut n = Names::default();
        let gpu = n.resource("nvidia.com/gpu");
        let cpu = n.resource("cpu");
        assert_eq!((gpu, cpu), (0, 1));
        assert_eq!(n.resource("nvidia.com/gpu"), gpu);
        let a100 = n.flavor("a100");
        let fr = n.fr(a100, cpu);
        assert_eq!(n.fr_parts(fr), (a100, cpu));
        assert_eq!(n.fr_name(fr), "a100/cpu");
        assert_eq!(n.resources.get(&"memory".to_string()), None);
    }
}
