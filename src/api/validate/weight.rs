//! Kueue's rules for `fairSharing.weight` (ClusterQueue, Cohort, LocalQueue): not negative,
//! and, when not 0, greater than 1n, because a smaller weight collapses to 0 in Kueue's
//! share arithmetic.

use super::{FieldError, IS_NEGATIVE_MSG, Path, quantity};
use crate::api::common::FairSharing;
use crate::api::quantity::parse_milli_str;

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

/// Whether a positive, well-formed quantity is at most 1n, exactly.
///
/// The quantity is rewritten as `digits e exponent` scaled up by 10^6, so that
/// `parse_milli_str`, which rounds up to whole milli-units, yields whole nano-units of the
/// original; binary suffixes are first multiplied out into the digits.
fn at_most_one_nano(s: &str) -> bool {
    let split = s
        .find(|c: char| !matches!(c, '0'..='9' | '.' | '+' | '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let (exp10, exp2) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => match other[1..].parse::<i64>() {
            Ok(e) if other.starts_with(['e', 'E']) => (e, 0),
            _ => return false,
        },
    };
    let negative = number.starts_with('-');
    let unsigned = number.trim_start_matches(['+', '-']);
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let Some(digits) = times_power_of_two(&format!("{int}{frac}"), exp2) else {
        return false;
    };
    let Ok(frac_len) = i64::try_from(frac.len()) else {
        return false;
    };
    let sign = if negative { "-" } else { "" };
    let scaled = format!("{sign}{digits}e{}", exp10 - frac_len + 6);
    parse_milli_str(&scaled) == Ok(1)
}

/// The decimal digit string `digits` multiplied by 2^`exp2` (exp2 ≤ 60), or None if
/// `digits` is not all ASCII digits.
fn times_power_of_two(digits: &str, exp2: u32) -> Option<String> {
    let factor = 1u128 << exp2;
    let mut out: Vec<u8> = Vec::with_capacity(digits.len() + 19);
    let mut carry = 0u128;
    for c in digits.bytes().rev() {
        let d = u128::from(c.checked_sub(b'0').filter(|d| *d <= 9)?);
        let v = d * factor + carry;
        out.push(b'0' + (v % 10) as u8);
        carry = v / 10;
    }
    while carry > 0 {
        out.push(b'0' + (carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    String::from_utf8(out).ok()
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
        assert_eq!(times_power_of_two("15", 10).as_deref(), Some("15360"));
        assert_eq!(
            times_power_of_two("1", 60).as_deref(),
            Some("1152921504606846976")
        );
        assert_eq!(times_power_of_two("1x", 10), None);
    }
}
