//! Which owners hold pods in each topology domain of one level: what a preemption
//! search needs to aim its victims at a single domain.

use std::collections::BTreeMap;

use super::Inventory;

/// The owners with pods in one domain of a level, sorted, without repeats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainOwners {
    /// The domain's index in its flavor's tree (stable until the tree is rebuilt).
    pub domain: u32,
    pub owners: Vec<u32>,
}

impl Inventory {
    /// For each domain of `level` in `flavor`'s tree that holds at least one owner's
    /// pods: those owners, fewest first (then by domain index, for determinism).
    /// `None` when the flavor has no tree or the tree has no such level.
    pub fn owners_by_domain(&mut self, flavor: &str, level: &str) -> Option<Vec<DomainOwners>> {
        self.ensure_trees();
        let tree = self.trees.get(flavor)?;
        let depth = tree.level_index(level)?;
        let mut by_domain: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (&owner, charges) in &self.owners {
            for (_, nodes) in charges {
                for &(node, count) in nodes {
                    if count <= 0 {
                        continue;
                    }
                    let Some(mut d) = tree.leaf(node) else {
                        continue;
                    };
                    // Climb from the node's leaf to its ancestor at `depth`.
                    while tree.doms[d as usize].level > depth {
                        match tree.doms[d as usize].parent {
                            Some(p) => d = p,
                            None => break,
                        }
                    }
                    if tree.doms[d as usize].level == depth {
                        by_domain.entry(d).or_default().push(owner);
                    }
                }
            }
        }
        let mut out: Vec<DomainOwners> = by_domain
            .into_iter()
            .map(|(domain, mut owners)| {
                owners.sort_unstable();
                owners.dedup();
                DomainOwners { domain, owners }
            })
            .collect();
        out.sort_by_key(|d| (d.owners.len(), d.domain));
        Some(out)
    }
}
