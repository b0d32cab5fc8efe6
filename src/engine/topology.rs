//! Between quota and nodes: turning a flavor assignment into a topology placement
//! request, testing it, and committing it to the inventory.

use super::flavor::Assignment;
use super::model::WorkloadSpec;
use super::queue::WlId;
use super::resources::Names;
use crate::placement::{
    Inventory, PlacementFailure, PodSetPlacement, PodSetPlacementRequest, Strategy,
};

/// Why a gang could not be placed: the first PodSet that did not fit, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pod set {pod_set} (flavor {flavor}): {source}")]
pub struct GangPlacementError {
    pub pod_set: String,
    pub flavor: String,
    #[source]
    pub source: PlacementFailure,
}

/// One PodSet that must be placed: its index, its TAS flavor and the request.
pub struct PlacementNeed {
    pub pod_set: usize,
    pub name: String,
    pub flavor: String,
    pub request: PodSetPlacementRequest,
}

/// The PodSets of `a` that landed on a TAS flavor, with their requests. A PodSet
/// without a topology request on a TAS flavor is placed unconstrained (packed).
pub fn needs(
    names: &Names,
    inv: &Inventory,
    wl: &WorkloadSpec,
    a: &Assignment,
) -> Vec<PlacementNeed> {
    let mut out = Vec::new();
    for (i, (ps, psa)) in wl.pod_sets.iter().zip(&a.pod_sets).enumerate() {
        let Some(flavor) = psa
            .flavors
            .iter()
            .map(|(_, f)| names.flavor_name(*f))
            .find(|f| inv.is_tas(f))
        else {
            continue;
        };
        out.push(PlacementNeed {
            pod_set: i,
            name: ps.name.clone(),
            flavor: flavor.to_string(),
            request: super::flavor::placement_request(ps, psa.count),
        });
    }
    out
}

/// A placed PodSet: its index, the named placement, and (node index, pod count) pairs.
pub type Placed = (usize, PodSetPlacement, Vec<(u32, i32)>);

/// Places every need, all or nothing, charging `owner` in the inventory.
/// On failure nothing stays charged and the first failure is returned.
pub fn place_all(
    names: &Names,
    inv: &mut Inventory,
    owner: WlId,
    needs: &[PlacementNeed],
    strategy: Strategy,
) -> Result<Vec<Placed>, GangPlacementError> {
    let mut placed = Vec::with_capacity(needs.len());
    for need in needs {
        match inv.find(names, &need.flavor, &need.request, strategy) {
            Ok(nodes) => {
                inv.assign(owner, &need.request.per_pod, &nodes);
                let named = nodes
                    .iter()
                    .map(|&(n, c)| (inv.node_name(n).to_string(), c))
                    .collect();
                placed.push((
                    need.pod_set,
                    PodSetPlacement {
                        flavor: need.flavor.clone(),
                        nodes: named,
                    },
                    nodes,
                ));
            }
            Err(source) => {
                inv.release(owner);
                return Err(GangPlacementError {
                    pod_set: need.name.clone(),
                    flavor: need.flavor.clone(),
                    source,
                });
            }
        }
    }
    Ok(placed)
}

/// Whether every need could be placed right now; leaves the inventory unchanged.
pub fn feasible(
    names: &Names,
    inv: &mut Inventory,
    owner: WlId,
    needs: &[PlacementNeed],
    strategy: Strategy,
) -> Result<(), GangPlacementError> {
    if needs.is_empty() {
        return Ok(());
    }
    let r = place_all(names, inv, owner, needs, strategy);
    inv.release(owner);
    r.map(|_| ())
}
