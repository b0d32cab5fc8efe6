//! The generation each job had after kuota's own last write to it, kept for a short while.
//!
//! A reconcile reads the job from the watch's store. Right after kuota patched the job's
//! spec (its start or stop), a trigger that arrives before the watch delivers the patched
//! job (its Workload's watch, most often) would read the job as it was and take the same
//! decision again; the API server then refuses that second write as stale. The patch's
//! answer carries the job's new `metadata.generation`, which only grows with spec
//! changes: until the store shows at least that generation, the job is left alone, and the
//! watch event that delivers it triggers the next reconcile.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How long a write is remembered: well past a watch's usual delay, short enough that a
/// watch that lost the event (and relisted) costs at most this wait.
const MEMORY: Duration = Duration::from_secs(30);
/// Jobs remembered at once (each entry is a few dozen bytes).
const CAPACITY: u64 = 100_000;

/// Namespace, name and uid of a job.
type JobId = (String, String, String);

fn id(meta: &ObjectMeta) -> Option<JobId> {
    Some((
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone()?,
        meta.uid.clone()?,
    ))
}

/// The generations kuota's own writes left, per job.
#[derive(Clone)]
pub struct OwnWrites(moka::sync::Cache<JobId, i64>);

impl Default for OwnWrites {
    fn default() -> Self {
        Self(
            moka::sync::Cache::builder()
                .time_to_live(MEMORY)
                .max_capacity(CAPACITY)
                .build(),
        )
    }
}

impl OwnWrites {
    /// Records the job as a write of kuota's answered it.
    pub fn wrote(&self, answered: &ObjectMeta) {
        if let (Some(id), Some(generation)) = (id(answered), answered.generation) {
            self.0.insert(id, generation);
        }
    }

    /// Whether `seen` (the store's copy) predates a write of kuota's to the same job.
    pub fn predates_own_write(&self, seen: &ObjectMeta) -> bool {
        let (Some(id), Some(seen_generation)) = (id(seen), seen.generation) else {
            return false;
        };
        self.0.get(&id).is_some_and(|wrote| seen_generation < wrote)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(uid: &str, generation: i64) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("j".into()),
            uid: Some(uid.into()),
            generation: Some(generation),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_copy_older_than_kuotas_own_write_is_stale_and_later_ones_are_not() {
        let own = OwnWrites::default();
        assert!(
            !own.predates_own_write(&meta("u1", 1)),
            "nothing written yet"
        );
        own.wrote(&meta("u1", 2));
        assert!(
            own.predates_own_write(&meta("u1", 1)),
            "the store still shows the old spec"
        );
        assert!(!own.predates_own_write(&meta("u1", 2)), "caught up");
        assert!(
            !own.predates_own_write(&meta("u1", 3)),
            "changed again since"
        );
        // The same name with another uid is another job.
        assert!(!own.predates_own_write(&meta("u2", 1)));
    }
}
