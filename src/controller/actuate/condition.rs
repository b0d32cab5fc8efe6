//! One condition on a cluster-scoped object's status (an AdmissionCheck's or a
//! MultiKueueCluster's `Active`), written as Kueue's check controllers write it: only when
//! it changed, by their rule of what a change is, in a merge patch guarded by the
//! `resourceVersion` it was read at.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::Writer;
use crate::api::AdmissionCheck;
use crate::api::constants::ADMISSION_CHECK_ACTIVE;
use crate::controller::conditions::set_condition;

/// What counts as a change worth a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The status flips (Kueue's ProvisioningRequest check controller).
    Status,
    /// The status, reason or message changes (Kueue's `cmpConditionState`).
    State,
}

/// The condition wanted: its type, status, reason and message.
pub struct Wanted<'a> {
    pub type_: &'a str,
    pub active: bool,
    pub reason: &'a str,
    pub message: &'a str,
}

/// Writes `wanted` on `obj` (whose conditions are `current`) unless it is there already by
/// `change`'s rule; whether it wrote. `kind` names the write in kuota's counters.
pub async fn write<K>(
    writer: &Writer,
    obj: &K,
    current: &[Condition],
    wanted: &Wanted<'_>,
    change: Change,
    kind: &str,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let status = if wanted.active { "True" } else { "False" };
    let there = current.iter().any(|c| {
        c.type_ == wanted.type_
            && c.status == status
            && (change == Change::Status
                || (c.reason == wanted.reason && c.message == wanted.message))
    });
    if there {
        return Ok(false);
    }
    let mut conditions = current.to_vec();
    let now = (writer.clock)();
    let (active, reason, message) = (wanted.active, wanted.reason, wanted.message);
    let generation = obj.meta().generation;
    set_condition(
        &mut conditions,
        wanted.type_,
        active,
        reason,
        message,
        generation,
        &now,
    );
    let patch = json!({
        "metadata": {"resourceVersion": obj.resource_version()},
        "status": {"conditions": conditions}
    });
    Api::<K>::all(writer.client.clone())
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    writer.wrote(kind);
    Ok(true)
}

/// Writes AdmissionCheck `ac`'s `Active` condition, as [`write`] does.
pub async fn write_check_active(
    writer: &Writer,
    ac: &AdmissionCheck,
    (active, reason, message): (bool, &str, &str),
    change: Change,
) -> Result<bool, kube::Error> {
    let current = ac.status.as_ref().map(|s| s.conditions.as_slice());
    let wanted = Wanted {
        type_: ADMISSION_CHECK_ACTIVE,
        active,
        reason,
        message,
    };
    let current = current.unwrap_or_default();
    write(
        writer,
        ac,
        current,
        &wanted,
        change,
        "AdmissionCheck status",
    )
    .await
}
