//! `kuota_unknown_fields_total{kind}`: the fields of objects read from the cluster that
//! this kuota does not know, ignored while decoding. The count lives with the decoder
//! ([`crate::api::lenient`]); this collector serves it from every registry built by
//! `Metrics::new`, reading it at scrape time.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::labels::Value;

/// The metric's name (the exposition adds `_total`).
pub const NAME: &str = "kuota_unknown_fields";
const HELP: &str = "Fields of objects read from the cluster that this kuota does not know (a newer Kueue's), ignored while decoding, by kind";

/// The `kind` label of `kuota_unknown_fields_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: Value,
}

/// Encodes the process-wide counts on each scrape.
#[derive(Debug, Default)]
pub struct UnknownFieldsCollector;

impl Collector for UnknownFieldsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let family = Family::<KindLabel, Counter>::default();
        for (kind, n) in crate::api::lenient::unknown_fields_by_kind() {
            family
                .get_or_create(&KindLabel {
                    kind: Value::from(kind),
                })
                .inc_by(n);
        }
        let metric = encoder.encode_descriptor(NAME, HELP, None, family.metric_type())?;
        family.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use crate::api::LocalQueue;
    use crate::api::lenient::from_value;

    #[test]
    fn fields_the_decoder_ignored_are_served_by_kind() {
        let kind = "LocalQueueExposedTest";
        let _: LocalQueue = from_value(
            kind,
            &serde_json::json!({
                "metadata": {"name": "lq", "namespace": "ns"},
                "spec": {"clusterQueue": "cq", "newKnob": 1, "otherKnob": 2}
            }),
        )
        .expect("decodes");
        let text = crate::telemetry::Metrics::new().encode();
        assert!(
            text.contains("# TYPE kuota_unknown_fields counter"),
            "{text}"
        );
        assert!(
            text.contains("kuota_unknown_fields_total{kind=\"LocalQueueExposedTest\"} 2"),
            "{text}"
        );
    }
}
