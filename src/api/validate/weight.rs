//! Kueue's rules for `fairSharing.weight` (ClusterQueue, Cohort, LocalQueue): not negative,
//! and, when not 0, greater than 1n, because a smaller weight collapses to 0 in Kueue's
//! share arithmetic.

use super::{FieldError, IS_NEGATIVE_MSG, Path, quantity};
use crate::api::common::FairSharing;
use crate::api::quantity::parse_scaled_wide;

/// Kueue's message for a positive weight of at most 1n.
pub const WEIGHT_TOO_SMALL_MSG: &str = "When not 0, weight must be > 10e-9";

/// Validates `fairSharing.weight`, reporting at `path` (the `fairSharing` field).
pub(super) fn fair_sharing(errs: &mut Vec<FieldError>, fs: Option<&FairSharing>, path: &Path) {
    let Some(w) = fs.and_then(|f| f.weight.as_ref()) else {
        return;
    };
    let p = path.child("weight");
    let Some(milli) = quantity(w, &p, errs) else {
        return;
    };
    if milli < 0 {
        errs.push(FieldError::invalid(&p, &w.0, IS_NEGATIVE_MSG));
    }
    // Milli-units round up, so every weight in (0, 1m] reads as 1; only those need the
    // exact nano-unit comparison.
    if milli == 1 && at_most_one_nano(&w.0) {
        errs.push(FieldError::invalid(&p, &w.0, WEIGHT_TOO_SMALL_MSG));
    }
}

/// Whether a positive, well-formed quantity is at most 1n, exactly: in nano-units rounded
/// up, such a weight reads as 1.
fn at_most_one_nano(s: &str) -> bool {
    parse_scaled_wide(s, 9) == Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn msgs(weight: &str) -> Vec<String> {
        let fs = FairSharing {
            weight: Some(Quantity(weight.into())),
        };
        let mut errs = Vec::new();
        fair_sharing(
            &mut errs,
            Some(&fs),
            &Path::new("spec").child("fairSharing"),
        );
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn positive_weights_must_exceed_one_nano() {
        for tiny in [
            "1n",
            "0.5n",
            "1e-9",
            "0.000000001",
            "1e-12",
            "0.0000000000001Ki",
        ] {
            assert_eq!(
                msgs(tiny),
                vec![format!(
                    "spec.fairSharing.weight: Invalid value: {tiny:?}: When not 0, weight must be > 10e-9"
                )],
                "{tiny}"
            );
        }
        for fine in [
            "0",
            "2n",
            "1.5n",
            "1u",
            "1m",
            "0.001",
            "1",
            "1Ki",
            "1e-8",
            "0.000000002",
        ] {
            assert!(msgs(fine).is_empty(), "{fine}: {:?}", msgs(fine));
        }
    }

    #[test]
    fn negative_and_malformed_weights() {
        assert_eq!(
            msgs("-1"),
            vec![
                "spec.fairSharing.weight: Invalid value: \"-1\": must be greater than or equal to 0"
                    .to_string()
            ]
        );
        let m = msgs("heavy");
        assert_eq!(m.len(), 1);
        assert!(m[0].contains("quantities must match"), "{m:?}");
    }

    #[test]
    fn binary_suffixes_are_multiplied_out_exactly() {
        // 0.0000000000009765625 × 1024 is exactly 1e-9; one more in the last digit is above.
        assert!(at_most_one_nano("0.0000000000009765625Ki"));
        assert!(!at_most_one_nano("0.0000000000009765626Ki"));
    }
}
