//! Spans reach an OTLP receiver: an in-process HTTP/protobuf endpoint (what an
//! OpenTelemetry Collector's `otlphttp` receiver accepts) decodes what kuota exports.
//! Its own test binary: it installs the process-wide tracing subscriber.

mod webhook_common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use kuota::sim::{Scenario, SimConfig, SourceFile, simulate};
use kuota::telemetry::trace::{LogFormat, Otlp, init};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

async fn receive(State(got): State<Received>, body: Bytes) -> &'static str {
    let req = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    got.lock().expect("lock").push(req);
    ""
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn string(v: Option<&any_value::Value>) -> Option<&str> {
    match v {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int(v: Option<&any_value::Value>) -> Option<i64> {
    match v {
        Some(any_value::Value::IntValue(i)) => Some(*i),
        _ => None,
    }
}

const PREEMPT: &str = include_str!("fixtures/preempt-generator.yaml");

#[test]
fn cycles_and_reviews_arrive_as_otlp_spans() {
    let got: Received = Arc::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("binds");
    let addr = listener.local_addr().expect("addr");
    let app = Router::new()
        .route("/v1/traces", post(receive))
        .with_state(got.clone());
    rt.spawn(async move { axum::serve(listener, app).await });

    let guard = init(
        LogFormat::Json,
        Otlp::Endpoint(format!("http://{addr}/v1/traces")),
        "warn",
    )
    .expect("installs");

    // Scheduling cycles: admit, preempt, admit, admit.
    let scenario = Scenario {
        name: "t".into(),
        manifests: vec![],
        generator: Some(SourceFile::new("generator.yaml", PREEMPT)),
    };
    let report = simulate(
        &scenario,
        SimConfig {
            eviction_delay_ms: 50,
            ..SimConfig::default()
        },
    )
    .expect("runs");
    assert_eq!(report.totals.preemptions, 1);

    // One admission review through the router.
    let state = webhook_common::synced_state();
    let job = webhook_common::small_job(
        "team-a",
        serde_json::json!({"kueue.x-k8s.io/queue-name": "lq"}),
        2,
        1,
    );
    let review = webhook_common::review(webhook_common::JOB, "CREATE", Some(&job), None);
    rt.block_on(webhook_common::post(
        &state,
        "/mutate-batch-v1-job",
        &review,
    ));

    guard.flush();
    let deadline = Instant::now() + Duration::from_secs(20);
    let spans: Vec<Span> = loop {
        let spans: Vec<Span> = got
            .lock()
            .expect("lock")
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|rs| &rs.scope_spans)
            .flat_map(|ss| ss.spans.clone())
            .collect();
        let has = |n: &str| spans.iter().any(|s| s.name == n);
        if (has("scheduling_cycle") && has("admission_review")) || Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(50));
    };

    // Every export names the service.
    for r in got.lock().expect("lock").iter() {
        for rs in &r.resource_spans {
            let res = rs.resource.as_ref().expect("resource");
            assert_eq!(string(attr(&res.attributes, "service.name")), Some("kuota"));
        }
    }

    let cycles: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "scheduling_cycle")
        .collect();
    assert!(!cycles.is_empty(), "no scheduling_cycle span in {spans:?}");
    let admitted: i64 = cycles
        .iter()
        .filter_map(|s| int(attr(&s.attributes, "admitted")))
        .sum();
    assert_eq!(
        admitted, 3,
        "admissions recorded on cycle spans: {:?}",
        cycles[0]
    );
    let preempting = cycles
        .iter()
        .find(|s| int(attr(&s.attributes, "preempted")) == Some(1))
        .expect("a cycle that preempted");
    assert!(int(attr(&preempting.attributes, "now_ms")).is_some());
    let event = preempting
        .events
        .iter()
        .find(|e| string(attr(&e.attributes, "decision")) == Some("preempt"))
        .expect("the preemption as a span event");
    assert_eq!(
        string(attr(&event.attributes, "reason")),
        Some("InClusterQueue")
    );
    assert!(string(attr(&event.attributes, "workload")).is_some_and(|w| w.contains('/')));
    let admit_events = cycles
        .iter()
        .flat_map(|s| &s.events)
        .filter(|e| string(attr(&e.attributes, "decision")) == Some("admit"))
        .count();
    assert_eq!(admit_events, 3);

    let review_span = spans
        .iter()
        .find(|s| s.name == "admission_review")
        .expect("an admission_review span");
    assert_eq!(
        string(attr(&review_span.attributes, "path")),
        Some("/mutate-batch-v1-job")
    );
    assert_eq!(
        string(attr(&review_span.attributes, "uid")),
        Some("0b1c2d3e-0000-4000-8000-000000000001")
    );
    assert!(matches!(
        attr(&review_span.attributes, "allowed"),
        Some(any_value::Value::BoolValue(_))
    ));
    drop(guard);
}
