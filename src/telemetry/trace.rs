//! Tracing: where spans and logs go, and the spans kuota emits.
//!
//! Spans: `scheduling_cycle` for each engine cycle (its decisions as span events) and
//! `admission_review` for each webhook review. With `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! they are exported over OTLP (HTTP/protobuf) as well as logged; otherwise they are
//! only logged, as text or JSON (`--log-format`), at the levels `RUST_LOG` selects.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::engine::{Decision, Millis};

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// Where spans go besides the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Otlp {
    /// Nowhere.
    #[default]
    Off,
    /// The endpoint the standard `OTEL_EXPORTER_OTLP_*` variables name.
    FromEnv,
    /// This traces endpoint (the full URL, e.g. `http://127.0.0.1:4318/v1/traces`).
    Endpoint(String),
}

impl Otlp {
    /// `FromEnv` when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-specific variable) is set.
    pub fn from_env() -> Self {
        let set = |k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
        if set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Self::FromEnv
        } else {
            Self::Off
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot build the OTLP span exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps the OTLP pipeline alive; dropping it flushes and stops the exporter.
#[derive(Debug, Default)]
pub struct TraceGuard {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl TraceGuard {
    /// Exports every finished span now.
    pub fn flush(&self) {
        if let Some(p) = &self.provider
            && let Err(e) = p.force_flush()
        {
            eprintln!("warning: OTLP flush failed: {e}");
        }
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("warning: OTLP shutdown failed: {e}");
        }
    }
}

/// Installs the global subscriber: logs in `format` filtered by `RUST_LOG` (default
/// `default_level`), plus an OTLP exporter of spans (filtered by `RUST_LOG`, default
/// `info`) when `otlp` is not `Off`. Call it outside any async runtime (the exporter's
/// HTTP client runs its own).
pub fn init(format: LogFormat, otlp: Otlp, default_level: &str) -> Result<TraceGuard, TraceError> {
    let log_filter =
        || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_filter(log_filter())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(true)
            .with_filter(log_filter())
            .boxed(),
    };
    let builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    let exporter = match otlp {
        Otlp::Off => None,
        Otlp::FromEnv => Some(builder.build()?),
        Otlp::Endpoint(url) => Some(builder.with_endpoint(url).build()?),
    };
    let provider = exporter.map(|e| {
        opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(e)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("kuota")
                    .build(),
            )
            .build()
    });
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("kuota"))
            .with_filter(filter())
    });
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()?;
    Ok(TraceGuard { provider })
}

/// The span of one scheduling cycle at engine time `now` (Unix milliseconds).
pub fn cycle_span(now: Millis) -> tracing::Span {
    tracing::info_span!(
        "scheduling_cycle",
        now_ms = now,
        decisions = tracing::field::Empty,
        admitted = tracing::field::Empty,
        preempted = tracing::field::Empty,
        evicted = tracing::field::Empty
    )
}

/// Records a cycle's decisions in the current span: counts as attributes, each
/// admission, preemption and eviction as an event (pending ones at debug level:
/// a cycle can leave thousands pending).
pub fn decision_events(decisions: &[Decision]) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    // i64, not u64: OTLP has no unsigned integers and tracing-opentelemetry exports
    // a u64 as a string.
    let (mut admitted, mut preempted, mut evicted) = (0i64, 0i64, 0i64);
    for d in decisions {
        match d {
            Decision::Admit {
                workload,
                admission,
                ..
            } => {
                admitted += 1;
                tracing::info!(
                    decision = "admit",
                    workload = %workload,
                    cluster_queue = %admission.cluster_queue,
                    "admit"
                );
            }
            Decision::Preempt {
                victim,
                preemptor,
                reason,
                ..
            } => {
                preempted += 1;
                tracing::info!(
                    decision = "preempt",
                    workload = %victim,
                    preemptor = %preemptor,
                    reason = reason.as_str(),
                    "preempt"
                );
            }
            Decision::Evict {
                workload, reason, ..
            } => {
                evicted += 1;
                tracing::info!(decision = "evict", workload = %workload, reason = %reason, "evict");
            }
            Decision::RequeueState {
                workload,
                count,
                requeue_at,
            } => {
                tracing::debug!(decision = "requeue_state", workload = %workload, count, requeue_at, "requeue state");
            }
            Decision::Pending {
                workload, reason, ..
            } => {
                tracing::debug!(
                    decision = "pending",
                    workload = %workload,
                    reason = reason.as_str(),
                    "pending"
                );
            }
        }
    }
    span.record("decisions", decisions.len() as i64);
    span.record("admitted", admitted);
    span.record("preempted", preempted);
    span.record("evicted", evicted);
}

/// The span of one admission review on `path`.
pub fn review_span(path: &str) -> tracing::Span {
    tracing::info_span!(
        "admission_review",
        path = %path,
        uid = tracing::field::Empty,
        allowed = tracing::field::Empty,
        patch_ops = tracing::field::Empty
    )
}
