//! `kuota pending` (and `kubectl kuota pending`): a queue's pending workloads as a table,
//! read from Kueue's visibility API through the API server with the user's kubeconfig, so
//! the user's own RBAC decides what they see. The reason column comes from each Workload's
//! `QuotaReserved` condition, where the user may read Workloads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use http_body_util::BodyExt;
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::api::Workload;
use crate::visibility::api::{GROUP, KUOTA_GROUP};

/// Output formats, as kubectl names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Wide,
    Json,
    Yaml,
}

/// `kuota pending (--cluster-queue CQ | --local-queue NS/LQ)`.
#[derive(Clone, Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("queue").required(true))]
pub struct PendingArgs {
    /// The ClusterQueue whose pending workloads to list.
    #[arg(long, value_name = "CQ", group = "queue")]
    pub cluster_queue: Option<String>,
    /// The LocalQueue (NAMESPACE/NAME) whose pending workloads to list.
    #[arg(long, value_name = "NS/LQ", group = "queue")]
    pub local_queue: Option<String>,
    /// Output format: a wider table, or the visibility API's own object.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    /// Position of the first workload listed (the API's `offset`).
    #[arg(long, default_value_t = 0)]
    pub offset: i64,
    /// How many to list at most (the API's `limit`; its default is 1000).
    #[arg(long)]
    pub limit: Option<i64>,
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Why `kuota pending` printed no list.
#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    #[error("--local-queue {0:?}: expected NAMESPACE/NAME")]
    LocalQueueName(String),
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error("{what}: {message}")]
    Api { what: String, message: String },
    #[error(
        "{what}: the API server does not serve visibility.kueue.x-k8s.io (is kuota's \
         visibility APIService installed and Available? `kubectl get apiservice \
         v1beta2.visibility.kueue.x-k8s.io`)"
    )]
    NotServed { what: String },
    /// kuota's group refused (the user's roles grant only Kueue's): Kueue's is asked.
    #[error("{what}: {message}")]
    Forbidden { what: String, message: String },
    #[error("{what}: {source}")]
    Request {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: the answer is not a PendingWorkloadsSummary: {reason}")]
    Decode { what: String, reason: String },
}

/// The queue asked about, as a user names it.
pub(super) enum Queue {
    Cluster(String),
    Local { namespace: String, name: String },
}

impl Queue {
    fn from_args(args: &PendingArgs) -> Result<Self, PendingError> {
        match (&args.cluster_queue, &args.local_queue) {
            (Some(cq), _) => Ok(Queue::Cluster(cq.clone())),
            (None, Some(lq)) => match lq.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                    Ok(Queue::Local {
                        namespace: ns.into(),
                        name: name.into(),
                    })
                }
                _ => Err(PendingError::LocalQueueName(lq.clone())),
            },
            (None, None) => Err(PendingError::LocalQueueName(String::new())),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Queue::Cluster(name) => format!("ClusterQueue {name:?}"),
            Queue::Local { namespace, name } => format!("LocalQueue \"{namespace}/{name}\""),
        }
    }

    /// The page's path in `group_version` (kuota's, with estimates, or Kueue's).
    fn path(&self, group_version: &str, offset: i64, limit: Option<i64>) -> String {
        let base = match self {
            Queue::Cluster(name) => {
                format!("/apis/{group_version}/clusterqueues/{name}/pendingworkloads")
            }
            Queue::Local { namespace, name } => format!(
                "/apis/{group_version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"
            ),
        };
        let mut q = format!("{base}?offset={offset}");
        if let Some(l) = limit {
            let _ = write!(q, "&limit={l}");
        }
        q
    }
}

/// A client from the kubeconfig, as kubectl picks it: `kubeconfig`, else $KUBECONFIG, else
/// ~/.kube/config; `context`, else the current one.
pub(super) async fn client(args: &super::ClusterArgs) -> Result<kube::Client, PendingError> {
    let context = args.context.as_deref();
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match args.kubeconfig.as_deref() {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| PendingError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options).await,
        None => {
            return kube::Client::try_default()
                .await
                .map_err(|e| PendingError::Config(e.to_string()));
        }
    }
    .map_err(|e| PendingError::Config(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| PendingError::Config(e.to_string()))
}

/// Reads one page (`offset`, `limit`) from kuota's group, whose items carry their start
/// estimates, or from Kueue's where kuota's is not served (an older install) or not
/// granted to the user: the summary, or an error that names the queue.
pub(super) async fn fetch(
    client: &kube::Client,
    queue: &Queue,
    offset: i64,
    limit: Option<i64>,
) -> Result<Value, PendingError> {
    let kuota = format!("{KUOTA_GROUP}/v1alpha1");
    match fetch_from(client, queue, &kuota, KUOTA_GROUP, offset, limit).await {
        Err(PendingError::NotServed { .. } | PendingError::Forbidden { .. }) => {
            let kueue = format!("{GROUP}/v1beta2");
            fetch_from(client, queue, &kueue, GROUP, offset, limit).await
        }
        other => other,
    }
}

async fn fetch_from(
    client: &kube::Client,
    queue: &Queue,
    group_version: &str,
    group: &str,
    offset: i64,
    limit: Option<i64>,
) -> Result<Value, PendingError> {
    let what = queue.describe();
    let req = http::Request::get(queue.path(group_version, offset, limit))
        .body(Vec::new())
        .map_err(|e| PendingError::Config(e.to_string()))?;
    let resp = client
        .send(req.map(Into::into))
        .await
        .map_err(|source| PendingError::Request {
            what: what.clone(),
            source,
        })?;
    let code = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|source| PendingError::Request {
            what: what.clone(),
            source,
        })?
        .to_bytes();
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if code == 200 {
        return if value["kind"] == "PendingWorkloadsSummary" {
            Ok(value)
        } else {
            Err(PendingError::Decode {
                what,
                reason: String::from_utf8_lossy(&body).chars().take(200).collect(),
            })
        };
    }
    let message = value["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_string());
    // The aggregator's 404 for a group nobody serves, not a queue kuota does not know.
    if code == 404 && value["details"]["group"] != group {
        return Err(PendingError::NotServed { what });
    }
    if code == 403 && group == KUOTA_GROUP {
        return Err(PendingError::Forbidden { what, message });
    }
    Err(PendingError::Api { what, message })
}

/// Each listed workload's pending reason and message (its `QuotaReserved=False` condition),
/// from the namespaces the user may list Workloads in.
async fn reasons(
    client: &kube::Client,
    summary: &Value,
) -> BTreeMap<(String, String), (String, String)> {
    let namespaces: BTreeSet<String> = items(summary)
        .iter()
        .filter_map(|i| i["metadata"]["namespace"].as_str().map(str::to_string))
        .collect();
    let mut out = BTreeMap::new();
    for ns in namespaces {
        let Ok(list) = Api::<Workload>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await
        else {
            continue;
        };
        for wl in list {
            let name = wl.metadata.name.clone().unwrap_or_default();
            let reserved = wl
                .status
                .as_ref()
                .and_then(|s| s.condition(crate::api::constants::WORKLOAD_QUOTA_RESERVED));
            if let Some(c) = reserved.filter(|c| c.status == "False") {
                out.insert((ns.clone(), name), (c.reason.clone(), c.message.clone()));
            }
        }
    }
    out
}

pub(super) fn items(summary: &Value) -> &[Value] {
    summary["items"].as_array().map_or(&[], Vec::as_slice)
}

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration), for the AGE column.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        match s % 60 {
            0 => format!("{m}m"),
            r => format!("{m}m{r}s"),
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        match m % 60 {
            0 => format!("{h}h"),
            r => format!("{h}h{r}m"),
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        match h % 24 {
            0 => format!("{d}d"),
            r => format!("{d}d{r}h"),
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        match d % 365 {
            0 => format!("{}y", d / 365),
            r => format!("{}y{r}d", d / 365),
        }
    } else {
        format!("{}y", d / 365)
    }
}

/// A workload's `startEstimate` (kuota's group) as the table shows it.
pub(super) struct Estimate {
    /// `in 25m`, `now`, or `<unknown>`.
    pub start: String,
    /// `10m-1h` (the earliest and latest starts), or `<none>`.
    pub range: String,
    /// Where the runtimes it rests on came from, or why there is no estimate.
    pub source: String,
}

impl Estimate {
    pub(super) fn of(item: &Value, now_secs: i64) -> Self {
        let e = &item["startEstimate"];
        let at = |field: &str| {
            e[field]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_second() - now_secs)
        };
        let rel = |secs: i64| {
            if secs <= 0 {
                "now".to_string()
            } else {
                format!("in {}", human_duration(secs))
            }
        };
        let Some(start) = at("time") else {
            let why = e["unknown"].as_str();
            return Self {
                start: "<unknown>".into(),
                range: "<none>".into(),
                source: why.unwrap_or("<not served>").to_string(),
            };
        };
        let range = match (at("earliest"), at("latest")) {
            (Some(lo), Some(hi)) => format!(
                "{}-{}",
                human_duration(lo.max(0)),
                human_duration(hi.max(0))
            ),
            _ => "<none>".into(),
        };
        Self {
            start: rel(start),
            range,
            source: e["source"].as_str().unwrap_or("<unknown>").to_string(),
        }
    }
}

/// The table kubectl-style: left-aligned columns two spaces apart.
pub fn table(
    summary: &Value,
    reasons: &BTreeMap<(String, String), (String, String)>,
    local: bool,
    wide: bool,
    now_secs: i64,
) -> String {
    let mut header = vec!["POSITION"];
    if !local {
        header.push("NAMESPACE");
    }
    header.extend(["NAME", "PRIORITY", "AGE", "ESTIMATE", "REASON"]);
    if wide {
        header.extend([
            "RANGE",
            "SOURCE",
            "LOCAL QUEUE",
            "IN CLUSTERQUEUE",
            "IN LOCALQUEUE",
            "MESSAGE",
        ]);
    }
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for i in items(summary) {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Null => "<none>".into(),
            other => other.to_string(),
        };
        let ns = text(&i["metadata"]["namespace"]);
        let name = text(&i["metadata"]["name"]);
        let created = i["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
        let age = created.map_or("<unknown>".into(), |t| {
            human_duration(now_secs - t.as_second())
        });
        let (reason, message) = reasons
            .get(&(ns.clone(), name.clone()))
            .cloned()
            .unwrap_or_else(|| ("<unknown>".into(), String::new()));
        let position = if local {
            &i["positionInLocalQueue"]
        } else {
            &i["positionInClusterQueue"]
        };
        let mut row = vec![text(position)];
        if !local {
            row.push(ns);
        }
        let estimate = Estimate::of(i, now_secs);
        row.extend([name, text(&i["priority"]), age, estimate.start, reason]);
        if wide {
            row.extend([
                estimate.range,
                estimate.source,
                text(&i["localQueueName"]),
                text(&i["positionInClusterQueue"]),
                text(&i["positionInLocalQueue"]),
                message,
            ]);
        }
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == columns {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}   ", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Runs `kuota pending`; what to print on stdout, or the error.
pub async fn run(args: &PendingArgs) -> Result<String, PendingError> {
    let queue = Queue::from_args(args)?;
    let client = client(&args.cluster).await?;
    let summary = fetch(&client, &queue, args.offset, args.limit).await?;
    match args.output {
        Some(Output::Json) => Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        )),
        Some(Output::Yaml) => Ok(serde_norway::to_string(&summary).unwrap_or_default()),
        wide => {
            if items(&summary).is_empty() {
                return Ok(format!("No pending workloads in {}.\n", queue.describe()));
            }
            let reasons = reasons(&client, &summary).await;
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let local = matches!(queue, Queue::Local { .. });
            Ok(table(
                &summary,
                &reasons,
                local,
                wide == Some(Output::Wide),
                now,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ages_read_as_kubectls() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 1200, "3h20m"),
            (30 * 3600, "30h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (40 * 86_400, "40d"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn the_table_has_position_name_priority_age_and_reason() {
        let summary = json!({"items": [
            {"metadata": {"name": "w1", "namespace": "team",
                          "creationTimestamp": "2026-01-01T00:00:00Z"},
             "priority": 10, "localQueueName": "lq",
             "positionInClusterQueue": 4, "positionInLocalQueue": 1}
        ]});
        let t0 = "2026-01-01T00:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let mut reasons = BTreeMap::new();
        reasons.insert(
            ("team".to_string(), "w1".to_string()),
            ("Pending".to_string(), "couldn't assign flavors".to_string()),
        );
        let local = table(&summary, &reasons, true, false, t0 + 90);
        assert_eq!(
            local,
            "POSITION   NAME   PRIORITY   AGE   ESTIMATE    REASON\n1          w1     10         90s   <unknown>   Pending\n"
        );
        let cq = table(&summary, &BTreeMap::new(), false, true, t0 + 90);
        let lines: Vec<&str> = cq.lines().collect();
        assert!(lines[0].starts_with("POSITION   NAMESPACE   NAME"), "{cq}");
        assert!(lines[1].starts_with("4          team        w1"), "{cq}");
        assert!(lines[1].contains("<unknown>"), "{cq}");
    }

    /// kuota's group: the estimate relative to now, its range and its source; or why
    /// there is none.
    #[test]
    fn the_estimate_column_reads_kuotas_start_estimate() {
        let t0 = "2026-01-01T00:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let item = json!({"startEstimate": {"time": "2026-01-01T00:25:00Z",
            "earliest": "2026-01-01T00:10:00Z", "latest": "2026-01-01T01:00:00Z",
            "waitSeconds": 1500, "source": "learned"}});
        let e = Estimate::of(&item, t0);
        assert_eq!((e.start.as_str(), e.range.as_str()), ("in 25m", "10m-60m"));
        assert_eq!(e.source, "learned");
        let late = Estimate::of(&item, t0 + 3600);
        assert_eq!(late.start, "now");
        let none = Estimate::of(
            &json!({"startEstimate": {"unknown": "no runtime knowledge"}}),
            t0,
        );
        assert_eq!(
            (none.start.as_str(), none.source.as_str()),
            ("<unknown>", "no runtime knowledge")
        );
        assert_eq!(Estimate::of(&json!({}), t0).source, "<not served>");
    }

    #[test]
    fn a_local_queue_is_named_namespace_slash_name() {
        let args = |lq: &str| PendingArgs {
            cluster_queue: None,
            local_queue: Some(lq.into()),
            output: None,
            offset: 0,
            limit: None,
            cluster: crate::cli::ClusterArgs::default(),
        };
        assert!(Queue::from_args(&args("team/lq")).is_ok());
        for bad in ["lq", "/lq", "team/", "a/b/c"] {
            let e = Queue::from_args(&args(bad)).err().expect(bad);
            assert!(e.to_string().contains(bad), "{e}");
        }
    }
}
