//! The cluster facts admission needs, kept in memory and fed by watch events, so that no
//! request ever waits on the API server.
//!
//! [`ClusterIndex`] stores namespaces (their labels), LocalQueues, WorkloadPriorityClasses,
//! ClusterQueues' namespace selectors and admission checks, and which AdmissionChecks
//! MultiKueue runs. The controller's watches call [`ClusterIndex::apply`];
//! tests call it directly. Derived answers ("is namespace X managed", "does namespace X have a
//! LocalQueue named `default`", "is there a default WorkloadPriorityClass") are memoised in a
//! moka cache and invalidated by the events that can change them.
//!
//! Consistency: the store sits behind a `RwLock`. Answers are computed and cached while the
//! read lock is held, and events mutate the store and invalidate the cache while the write
//! lock is held, so a stale answer computed just before an event is always invalidated by it.
//!
//! A re-list never shows through: the feed collects a kind's whole list and hands it over as
//! one [`IndexEvent::Replace`], which swaps that kind's set under the write lock. Until then
//! every lookup answers from the previous complete set, never from a half-filled one.
//!
//! Until [`IndexEvent::Synced`] arrives (the initial lists are done) the index is cold:
//! [`ClusterIndex::is_synced`] is false, `/readyz` reports not ready, and the handlers skip
//! any defaulting that needs the index (with a warning) rather than guess.

use crate::api::selector::{Labels, label_selector_matches};
use crate::api::{
    AdmissionCheck, ClusterQueue, LocalQueue, MULTIKUEUE_CONTROLLER, WorkloadPriorityClass,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use moka::Equivalent;
use moka::sync::Cache;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// Name of the LocalQueue a namespace uses for jobs without a queue name.
pub const DEFAULT_LOCAL_QUEUE_NAME: &str = "default";
/// Name of the WorkloadPriorityClass given to jobs without a priority class.
pub const DEFAULT_PRIORITY_CLASS_NAME: &str = "default";
/// Label the API server sets on every namespace, holding its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Object kinds the index holds, for [`IndexEvent::Replace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// Namespaces.
    Namespace,
    /// LocalQueues.
    LocalQueue,
    /// WorkloadPriorityClasses.
    PriorityClass,
    /// ClusterQueues.
    ClusterQueue,
    /// AdmissionChecks (which controller runs each).
    AdmissionCheck,
}

/// A change seen by a watch.
#[derive(Debug, Clone)]
pub enum IndexEvent {
    /// A namespace was added or changed.
    NamespaceApplied {
        /// Namespace name.
        name: String,
        /// Its labels.
        labels: Labels,
    },
    /// A namespace was deleted.
    NamespaceDeleted {
        /// Namespace name.
        name: String,
    },
    /// A LocalQueue was added or changed.
    LocalQueueApplied(Box<LocalQueue>),
    /// A LocalQueue was deleted.
    LocalQueueDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A WorkloadPriorityClass was added or changed.
    PriorityClassApplied(Box<WorkloadPriorityClass>),
    /// A WorkloadPriorityClass was deleted.
    PriorityClassDeleted {
        /// Its name.
        name: String,
    },
    /// A ClusterQueue was added or changed.
    ClusterQueueApplied(Box<ClusterQueue>),
    /// A ClusterQueue was deleted.
    ClusterQueueDeleted {
        /// Its name.
        name: String,
    },
    /// An AdmissionCheck was added or changed.
    AdmissionCheckApplied(Box<AdmissionCheck>),
    /// An AdmissionCheck was deleted.
    AdmissionCheckDeleted {
        /// Its name.
        name: String,
    },
    /// A complete (re-)list of one kind: the objects it holds (`*Applied` events of that
    /// kind) replace every object of the kind at once. Events of other kinds are ignored.
    Replace(IndexKind, Vec<IndexEvent>),
    /// Every watch has delivered its initial list: the index reflects the cluster.
    Synced,
}

/// How the index decides which namespaces Kueue manages.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexConfig {
    /// Kueue's `managedJobsNamespaceSelector`; `None` manages every namespace.
    pub managed_jobs_namespace_selector: Option<LabelSelector>,
}

impl Default for IndexConfig {
    /// Like Kueue's default configuration: every namespace but the system ones.
    fn default() -> Self {
        Self {
            managed_jobs_namespace_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: NAMESPACE_NAME_LABEL.to_string(),
                    operator: "NotIn".to_string(),
                    values: Some(vec!["kube-system".to_string(), "kuota-system".to_string()]),
                }]),
                match_labels: None,
            }),
        }
    }
}

#[derive(Debug, Default)]
struct Store {
    namespaces: HashMap<String, Arc<Labels>>,
    /// Namespace -> LocalQueue name -> ClusterQueue name.
    local_queues: HashMap<String, BTreeMap<String, String>>,
    priority_classes: HashMap<String, i32>,
    cluster_queues: HashMap<String, QueueFacts>,
    /// AdmissionChecks run by MultiKueue.
    multikueue_checks: HashSet<String>,
}

/// What admission needs of a ClusterQueue.
#[derive(Debug, Default)]
struct QueueFacts {
    namespace_selector: Option<LabelSelector>,
    /// The AdmissionChecks it names.
    checks: Vec<String>,
}

impl Store {
    /// A store holding only the `kind` objects of a list.
    fn from_list(kind: IndexKind, objects: Vec<IndexEvent>) -> Self {
        let mut store = Store::default();
        for e in objects {
            match e {
                IndexEvent::NamespaceApplied { name, labels } if kind == IndexKind::Namespace => {
                    store.namespaces.insert(name, Arc::new(labels));
                }
                IndexEvent::LocalQueueApplied(lq) if kind == IndexKind::LocalQueue => {
                    store.insert_local_queue(&lq);
                }
                IndexEvent::PriorityClassApplied(pc) if kind == IndexKind::PriorityClass => {
                    let name = pc.metadata.name.clone().unwrap_or_default();
                    store.priority_classes.insert(name, pc.value);
                }
                IndexEvent::ClusterQueueApplied(cq) if kind == IndexKind::ClusterQueue => {
                    store.insert_cluster_queue(&cq);
                }
                IndexEvent::AdmissionCheckApplied(ac) if kind == IndexKind::AdmissionCheck => {
                    store.insert_admission_check(&ac);
                }
                _ => {}
            }
        }
        store
    }

    fn insert_local_queue(&mut self, lq: &LocalQueue) {
        let ns = lq.metadata.namespace.clone().unwrap_or_default();
        let name = lq.metadata.name.clone().unwrap_or_default();
        self.local_queues
            .entry(ns)
            .or_default()
            .insert(name, lq.spec.cluster_queue.clone());
    }

    fn insert_cluster_queue(&mut self, cq: &ClusterQueue) {
        let name = cq.metadata.name.clone().unwrap_or_default();
        let checks = cq
            .spec
            .admission_checks_strategy
            .iter()
            .flat_map(|s| s.admission_checks.iter().map(|r| r.name.clone()))
            .collect();
        let facts = QueueFacts {
            namespace_selector: cq.spec.namespace_selector.clone(),
            checks,
        };
        self.cluster_queues.insert(name, facts);
    }

    fn insert_admission_check(&mut self, ac: &AdmissionCheck) {
        let name = ac.metadata.name.clone().unwrap_or_default();
        if ac.spec.controller_name == MULTIKUEUE_CONTROLLER {
            self.multikueue_checks.insert(name);
        } else {
            self.multikueue_checks.remove(&name);
        }
    }
}

/// Questions whose answers are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Question {
    NamespaceManaged,
    DefaultLocalQueue,
    DefaultPriorityClass,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    question: Question,
    namespace: String,
}

/// Borrowed form of [`Key`], so lookups do not allocate. Hashes like `Key` (a `String`
/// hashes like its `str`).
#[derive(Hash)]
struct KeyRef<'a> {
    question: Question,
    namespace: &'a str,
}

impl Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.question == key.question && self.namespace == key.namespace
    }
}

/// In-memory, watch-fed view of the cluster objects admission depends on.
pub struct ClusterIndex {
    config: IndexConfig,
    store: RwLock<Store>,
    derived: Cache<Key, bool>,
    synced: AtomicBool,
}

impl std::fmt::Debug for ClusterIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterIndex")
            .field("config", &self.config)
            .field("synced", &self.is_synced())
            .finish_non_exhaustive()
    }
}

impl Default for ClusterIndex {
    fn default() -> Self {
        Self::new(IndexConfig::default())
    }
}

/// Bound on cached answers; two per namespace plus one is plenty for large clusters.
const CACHE_CAPACITY: u64 = 100_000;

impl ClusterIndex {
    /// An empty, not yet synced index.
    pub fn new(config: IndexConfig) -> Self {
        Self {
            config,
            store: RwLock::new(Store::default()),
            derived: Cache::builder().max_capacity(CACHE_CAPACITY).build(),
            synced: AtomicBool::new(false),
        }
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Whether the initial lists have been applied; `/readyz` should fail until then.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that
        // matters more than refusing to answer, so keep serving.
        self.store.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies one watch event.
    pub fn apply(&self, event: IndexEvent) {
        if matches!(event, IndexEvent::Synced) {
            self.synced.store(true, Ordering::Release);
            return;
        }
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        let invalidate = |q: Question, ns: &str| {
            self.derived.invalidate(&KeyRef {
                question: q,
                namespace: ns,
            })
        };
        match event {
            IndexEvent::NamespaceApplied { name, labels } => {
                invalidate(Question::NamespaceManaged, &name);
                store.namespaces.insert(name, Arc::new(labels));
            }
            IndexEvent::NamespaceDeleted { name } => {
                invalidate(Question::NamespaceManaged, &name);
                store.namespaces.remove(&name);
            }
            IndexEvent::LocalQueueApplied(lq) => {
                let ns = lq.metadata.namespace.as_deref().unwrap_or_default();
                invalidate(Question::DefaultLocalQueue, ns);
                store.insert_local_queue(&lq);
            }
            IndexEvent::LocalQueueDeleted { namespace, name } => {
                invalidate(Question::DefaultLocalQueue, &namespace);
                if let Some(m) = store.local_queues.get_mut(&namespace) {
                    m.remove(&name);
                    if m.is_empty() {
                        store.local_queues.remove(&namespace);
                    }
                }
            }
            IndexEvent::PriorityClassApplied(pc) => {
                invalidate(Question::DefaultPriorityClass, "");
                let name = pc.metadata.name.clone().unwrap_or_default();
                store.priority_classes.insert(name, pc.value);
            }
            IndexEvent::PriorityClassDeleted { name } => {
                invalidate(Question::DefaultPriorityClass, "");
                store.priority_classes.remove(&name);
            }
            IndexEvent::ClusterQueueApplied(cq) => store.insert_cluster_queue(&cq),
            IndexEvent::ClusterQueueDeleted { name } => {
                store.cluster_queues.remove(&name);
            }
            IndexEvent::AdmissionCheckApplied(ac) => store.insert_admission_check(&ac),
            IndexEvent::AdmissionCheckDeleted { name } => {
                store.multikueue_checks.remove(&name);
            }
            IndexEvent::Replace(kind, objects) => {
                // Built outside the live maps, then swapped in: readers see the old set
                // or the new one, never a mixture.
                let fresh = Store::from_list(kind, objects);
                match kind {
                    IndexKind::Namespace => store.namespaces = fresh.namespaces,
                    IndexKind::LocalQueue => store.local_queues = fresh.local_queues,
                    IndexKind::PriorityClass => store.priority_classes = fresh.priority_classes,
                    IndexKind::ClusterQueue => store.cluster_queues = fresh.cluster_queues,
                    IndexKind::AdmissionCheck => store.multikueue_checks = fresh.multikueue_checks,
                }
                self.derived.invalidate_all();
            }
            IndexEvent::Synced => {}
        }
    }

    /// A namespace's labels. An unknown namespace (not seen yet) still gets the
    /// `kubernetes.io/metadata.name` label the API server puts on every namespace, so
    /// selectors on the name keep working.
    pub fn namespace_labels(&self, namespace: &str) -> Arc<Labels> {
        Self::labels_in(&self.read(), namespace)
    }

    fn labels_in(store: &Store, namespace: &str) -> Arc<Labels> {
        store.namespaces.get(namespace).cloned().unwrap_or_else(|| {
            Arc::new(Labels::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                namespace.to_string(),
            )]))
        })
    }

    /// Every namespace seen, with its labels, sorted by name.
    pub fn namespaces(&self) -> Vec<(String, Arc<Labels>)> {
        let mut out: Vec<(String, Arc<Labels>)> = self
            .read()
            .namespaces
            .iter()
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Whether Kueue manages jobs in the namespace (`managedJobsNamespaceSelector`).
    pub fn is_namespace_managed(&self, namespace: &str) -> bool {
        let Some(sel) = &self.config.managed_jobs_namespace_selector else {
            return true;
        };
        self.cached(Question::NamespaceManaged, namespace, |store| {
            label_selector_matches(sel, &Self::labels_in(store, namespace))
        })
    }

    /// Whether the namespace has a LocalQueue named `default`.
    pub fn has_default_local_queue(&self, namespace: &str) -> bool {
        self.cached(Question::DefaultLocalQueue, namespace, |store| {
            store
                .local_queues
                .get(namespace)
                .is_some_and(|m| m.contains_key(DEFAULT_LOCAL_QUEUE_NAME))
        })
    }

    /// Whether a WorkloadPriorityClass named `default` exists.
    pub fn has_default_priority_class(&self) -> bool {
        self.cached(Question::DefaultPriorityClass, "", |store| {
            store
                .priority_classes
                .contains_key(DEFAULT_PRIORITY_CLASS_NAME)
        })
    }

    /// The ClusterQueue a LocalQueue points at, if the LocalQueue exists.
    pub fn cluster_queue_of(&self, namespace: &str, local_queue: &str) -> Option<String> {
        self.read()
            .local_queues
            .get(namespace)
            .and_then(|m| m.get(local_queue))
            .cloned()
    }

    /// Whether the LocalQueue exists.
    pub fn local_queue_exists(&self, namespace: &str, local_queue: &str) -> bool {
        self.cluster_queue_of(namespace, local_queue).is_some()
    }

    /// The value of a WorkloadPriorityClass, if it exists.
    pub fn priority_class_value(&self, name: &str) -> Option<i32> {
        self.read().priority_classes.get(name).copied()
    }

    /// Whether a ClusterQueue admits workloads from the namespace (its `namespaceSelector`;
    /// `None` if the ClusterQueue is unknown).
    pub fn cluster_queue_admits(&self, cluster_queue: &str, namespace: &str) -> Option<bool> {
        let store = self.read();
        let facts = store.cluster_queues.get(cluster_queue)?;
        let labels = Self::labels_in(&store, namespace);
        Some(crate::api::selector::namespace_selector_matches(
            facts.namespace_selector.as_ref(),
            &labels,
        ))
    }

    /// Whether LocalQueue `namespace/local_queue` feeds a ClusterQueue with a MultiKueue
    /// check (Kueue's `ApplyDefaultForManagedBy` looks the same way).
    pub fn uses_multikueue(&self, namespace: &str, local_queue: &str) -> bool {
        let store = self.read();
        let Some(cq) = store
            .local_queues
            .get(namespace)
            .and_then(|m| m.get(local_queue))
        else {
            return false;
        };
        store.cluster_queues.get(cq).is_some_and(|facts| {
            facts
                .checks
                .iter()
                .any(|c| store.multikueue_checks.contains(c))
        })
    }

    /// Answers from the cache, or computes under the read lock and caches (see module docs).
    fn cached(&self, question: Question, namespace: &str, f: impl FnOnce(&Store) -> bool) -> bool {
        let key = KeyRef {
            question,
            namespace,
        };
        if let Some(v) = self.derived.get(&key) {
            return v;
        }
        let store = self.read();
        let v = f(&store);
        self.derived.insert(
            Key {
                question,
                namespace: namespace.to_string(),
            },
            v,
        );
        drop(store);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LocalQueueSpec;

    fn lq(ns: &str, name: &str) -> IndexEvent {
        let mut q = LocalQueue::new(
            name,
            LocalQueueSpec {
                cluster_queue: "cq".into(),
                ..Default::default()
            },
        );
        q.metadata.namespace = Some(ns.into());
        IndexEvent::LocalQueueApplied(Box::new(q))
    }

    #[test]
    fn answers_follow_events() {
        let idx = ClusterIndex::default();
        assert!(!idx.is_synced());
        assert!(!idx.has_default_local_queue("team-a"));
        idx.apply(lq("team-a", "default"));
        assert!(idx.has_default_local_queue("team-a"), "cache invalidated");
        assert_eq!(
            idx.cluster_queue_of("team-a", "default").as_deref(),
            Some("cq")
        );
        idx.apply(IndexEvent::LocalQueueDeleted {
            namespace: "team-a".into(),
            name: "default".into(),
        });
        assert!(!idx.has_default_local_queue("team-a"));

        assert!(idx.is_namespace_managed("team-a"));
        assert!(!idx.is_namespace_managed("kube-system"), "default selector");
        idx.apply(IndexEvent::NamespaceApplied {
            name: "team-a".into(),
            labels: Labels::from([(NAMESPACE_NAME_LABEL.into(), "kube-system".into())]),
        });
        assert!(!idx.is_namespace_managed("team-a"), "labels changed");

        assert!(!idx.has_default_priority_class());
        idx.apply(IndexEvent::PriorityClassApplied(Box::new(
            WorkloadPriorityClass::new("default", 10),
        )));
        assert!(idx.has_default_priority_class());
        assert_eq!(idx.priority_class_value("default"), Some(10));
        idx.apply(IndexEvent::Replace(IndexKind::PriorityClass, Vec::new()));
        assert!(!idx.has_default_priority_class());

        let mut cq = ClusterQueue::new("cq", Default::default());
        cq.spec.namespace_selector = Some(LabelSelector::default());
        idx.apply(IndexEvent::ClusterQueueApplied(Box::new(cq)));
        assert_eq!(idx.cluster_queue_admits("cq", "x"), Some(true));
        assert_eq!(idx.cluster_queue_admits("nope", "x"), None);

        idx.apply(IndexEvent::Synced);
        assert!(idx.is_synced());
    }

    #[test]
    fn no_selector_manages_everything() {
        let idx = ClusterIndex::new(IndexConfig {
            managed_jobs_namespace_selector: None,
        });
        assert!(idx.is_namespace_managed("kube-system"));
    }
}
