//! The objects a job's pod sets are built from (its integration's
//! [`JobIntegration::dependencies`], e.g. a TrainJob's training runtime): read from the
//! API server when they matter, and handed to the integration's pure
//! [`JobIntegration::resolve`].

use kube::Client;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::SyncError;
use crate::integrations::{Dependency, IntegrationError, JobIntegration};

/// The job as its pod-set rules read it, or why no Workload can be built for it; `None`
/// for a kind whose pod sets depend on nothing else (the job itself is read then).
pub(super) async fn resolve(
    client: &Client,
    integration: &dyn JobIntegration,
    job: &Value,
    name: &str,
) -> Result<Option<Result<Value, IntegrationError>>, SyncError> {
    let deps = match integration.dependencies(job) {
        Ok(deps) if deps.is_empty() => return Ok(None),
        Ok(deps) => deps,
        Err(e) => return Ok(Some(Err(e))),
    };
    let mut found = Vec::with_capacity(deps.len());
    for dep in &deps {
        found.push(get(client, dep, name).await?);
    }
    Ok(Some(integration.resolve(job, &found)))
}

/// One dependency, `None` when it does not exist.
async fn get(client: &Client, dep: &Dependency, name: &str) -> Result<Option<Value>, SyncError> {
    let api: Api<DynamicObject> = match &dep.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &dep.resource),
        None => Api::all_with(client.clone(), &dep.resource),
    };
    let obj = api
        .get_opt(&dep.name)
        .await
        .map_err(|source| SyncError::Api {
            name: name.to_string(),
            source,
        })?;
    obj.map(serde_json::to_value)
        .transpose()
        .map_err(|source| SyncError::Decode {
            name: name.to_string(),
            source,
        })
}
