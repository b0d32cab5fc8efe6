//! Kubernetes Quantity parsing into fixed-point integers and canonical formatting.
//!
//! The engine counts resources the way Kueue does (`resources.ResourceValue`): cpu in
//! milli-cores, everything else in whole units rounded up (1Gi of memory = 1073741824), so
//! memory up to 8Ei fits an `i64`. Every Quantity is translated once, here, at the edge,
//! with [`resource_value`] and back with [`resource_quantity`].

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

/// Why a quantity string could not be turned into milli-units.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// Not a Kubernetes quantity at all.
    #[error(
        "invalid quantity {0:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTPE]*[-+]?[0-9]*)$'"
    )]
    Format(String),
    /// Valid syntax, but the milli-value does not fit in an i64.
    #[error("invalid quantity {0:?}: value out of range")]
    Overflow(String),
    /// Valid syntax, but too many significant digits to evaluate exactly.
    #[error("invalid quantity {0:?}: too many significant digits")]
    Precision(String),
}

/// Significant digits we evaluate exactly; real manifests use a handful.
const MAX_DIGITS: usize = 38;
/// Bound on `e` exponents, far past anything that fits in an i64 either way.
const MAX_EXPONENT: i64 = 1000;

/// Parses a Quantity into milli-units, rounding any sub-milli remainder up (away from zero).
pub fn parse_milli(q: &Quantity) -> Result<i64, QuantityError> {
    parse_milli_str(&q.0)
}

/// Parses a quantity string into milli-units, rounding any sub-milli remainder up.
pub fn parse_milli_str(s: &str) -> Result<i64, QuantityError> {
    let parsed = split(s).ok_or_else(|| QuantityError::Format(s.to_string()))?;
    let magnitude = evaluate(&parsed, s, 3)?;
    let signed = if parsed.negative {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    i64::try_from(signed).map_err(|_| QuantityError::Overflow(s.to_string()))
}

/// The resource Kueue counts in milli-units; every other resource is counted in whole units.
pub const MILLI_RESOURCE: &str = "cpu";

/// Parses a request, limit or quota of `resource` into the engine's unit for it, like
/// Kueue's `resources.ResourceValue`: milli-units for cpu, whole units (rounded up) for
/// everything else. Magnitudes beyond `i64` clamp to `i64::MAX`/`i64::MIN`, as Kueue's
/// `SafeValue` does, so `100Ei` of memory is "unlimited" rather than an error.
pub fn resource_value(resource: &str, q: &Quantity) -> Result<i64, QuantityError> {
    resource_value_str(resource, &q.0)
}

/// String form of [`resource_value`].
pub fn resource_value_str(resource: &str, s: &str) -> Result<i64, QuantityError> {
    let parsed = split(s).ok_or_else(|| QuantityError::Format(s.to_string()))?;
    let scale = if resource == MILLI_RESOURCE { 3 } else { 0 };
    let magnitude = match evaluate(&parsed, s, scale) {
        Ok(m) => i128::from(m),
        Err(QuantityError::Overflow(_)) => i128::from(u64::MAX),
        Err(e) => return Err(e),
    };
    let signed = if parsed.negative {
        -magnitude
    } else {
        magnitude
    };
    Ok(i64::try_from(signed).unwrap_or(if parsed.negative { i64::MIN } else { i64::MAX }))
}

/// Formats an engine amount of `resource` (see [`resource_value`]) as a Quantity:
/// `500m` for cpu, `9Pi` or `1500` for everything else.
pub fn resource_quantity(resource: &str, value: i64) -> Quantity {
    Quantity(resource_quantity_string(resource, value))
}

/// String form of [`resource_quantity`].
pub fn resource_quantity_string(resource: &str, value: i64) -> String {
    if resource == MILLI_RESOURCE {
        format_milli_string(value)
    } else {
        format_units_string(value)
    }
}

/// Parses a Quantity into milli-units as an `i128`, clamping beyond it: validation compares
/// quantities of any resource (a lendingLimit with its nominalQuota, a sign) without
/// knowing the unit the engine will count them in, and must not reject what Kueue accepts.
pub fn parse_milli_wide(q: &Quantity) -> Result<i128, QuantityError> {
    parse_scaled_wide(&q.0, 3)
}

/// `s` in units of 10^-`scale`, rounded up (away from zero) and clamped at i128 bounds, as
/// [`parse_milli_wide`] does for milli-units; validation compares weights in nano-units.
pub fn parse_scaled_wide(s: &str, scale: i64) -> Result<i128, QuantityError> {
    let parsed = split(s).ok_or_else(|| QuantityError::Format(s.to_string()))?;
    let magnitude = match evaluate_wide(&parsed, s, scale) {
        Ok(m) => i128::try_from(m).unwrap_or(i128::MAX),
        Err(QuantityError::Overflow(_)) => i128::MAX,
        Err(e) => return Err(e),
    };
    Ok(if parsed.negative {
        -magnitude
    } else {
        magnitude
    })
}

/// Parses a Quantity into whole units, rounding up (e.g. `500m` is 1).
pub fn parse_units(q: &Quantity) -> Result<i64, QuantityError> {
    let m = parse_milli(q)?;
    Ok(m.div_euclid(1000) + i64::from(m.rem_euclid(1000) != 0))
}

/// Formats milli-units canonically: `1500m`, `2`, `0`, and binary suffixes (`1Gi`) for exact
/// multiples of 1Mi and above, where a plain integer would be unreadable.
pub fn format_milli(milli: i64) -> Quantity {
    Quantity(format_milli_string(milli))
}

/// String form of [`format_milli`].
pub fn format_milli_string(milli: i64) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    format_units_string(milli / 1000)
}

/// Formats whole units canonically: binary suffixes (`1Gi`) for exact multiples of 1Mi and
/// above, a plain integer otherwise.
pub fn format_units_string(units: i64) -> String {
    let mag = units.unsigned_abs();
    const SUFFIXES: [(&str, u32); 5] = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20)];
    for (suffix, shift) in SUFFIXES {
        let unit = 1u64 << shift;
        if mag >= unit && mag.is_multiple_of(unit) {
            let sign = if units < 0 { "-" } else { "" };
            return format!("{sign}{}{suffix}", mag / unit);
        }
    }
    units.to_string()
}

struct Parsed<'a> {
    negative: bool,
    int_digits: &'a str,
    frac_digits: &'a str,
    /// Power of ten from the suffix or exponent.
    exp10: i64,
    /// Power of two from a binary suffix.
    exp2: u32,
}

/// Splits `[+-]digits[.digits]suffix` following apimachinery's grammar.
fn split(s: &str) -> Option<Parsed<'_>> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let int_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let int_digits = &rest[..int_end];
    let mut rest = &rest[int_end..];
    let mut frac_digits = "";
    if let Some(after_dot) = rest.strip_prefix('.') {
        let frac_end = after_dot
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after_dot.len());
        frac_digits = &after_dot[..frac_end];
        rest = &after_dot[frac_end..];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return None;
    }
    let (exp10, exp2) = suffix(rest)?;
    Some(Parsed {
        negative,
        int_digits,
        frac_digits,
        exp10,
        exp2,
    })
}

fn suffix(s: &str) -> Option<(i64, u32)> {
    Some(match s {
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
        _ => {
            let exp = s.strip_prefix(['e', 'E'])?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Long digit strings would overflow i64 parsing; they are out of range anyway,
            // so clamp them to a bound that yields overflow (or rounds to the smallest unit).
            let v: i64 = digits
                .parse()
                .unwrap_or(MAX_EXPONENT + 1)
                .min(MAX_EXPONENT + 1);
            (if exp.starts_with('-') { -v } else { v }, 0)
        }
    })
}

/// Magnitude in units of `10^-scale` (3: milli-units, 0: whole units), rounded up.
fn evaluate(p: &Parsed<'_>, src: &str, scale: i64) -> Result<u64, QuantityError> {
    u64::try_from(evaluate_wide(p, src, scale)?)
        .ok()
        .filter(|v| *v <= 1u64 << 63)
        .ok_or_else(|| QuantityError::Overflow(src.to_string()))
}

/// [`evaluate`] up to `u128::MAX`.
fn evaluate_wide(p: &Parsed<'_>, src: &str, scale: i64) -> Result<u128, QuantityError> {
    let overflow = || QuantityError::Overflow(src.to_string());
    let frac = p.frac_digits.trim_end_matches('0');
    let int = p.int_digits.trim_start_matches('0');
    // Digits of the mantissa D; value = D * 10^(exp10 - frac.len()) * 2^exp2.
    let digits: String = if int.is_empty() {
        frac.trim_start_matches('0').to_string()
    } else {
        format!("{int}{frac}")
    };
    if digits.is_empty() {
        return Ok(0);
    }
    if digits.len() > MAX_DIGITS {
        return Err(QuantityError::Precision(src.to_string()));
    }
    // Bounded by MAX_DIGITS and MAX_EXPONENT, so these casts cannot wrap.
    let frac_len = frac.len() as i64;
    let n10 = p.exp10 + scale - frac_len;
    let d: u128 = digits
        .parse()
        .map_err(|_| QuantityError::Format(src.to_string()))?;
    let value: u128 = if n10 >= 0 {
        let pow = u32::try_from(n10).map_err(|_| overflow())?;
        10u128
            .checked_pow(pow)
            .and_then(|p10| d.checked_mul(p10))
            .and_then(|x| x.checked_mul(1u128 << p.exp2))
            .ok_or_else(overflow)?
    } else {
        let k = u32::try_from(-n10).map_err(|_| overflow())?;
        ceil_scaled(d, p.exp2, k).ok_or_else(|| QuantityError::Precision(src.to_string()))?
    };
    Ok(value)
}

/// `ceil(d * 2^b / 10^k)` without overflowing, for `d < 10^38`, `b <= 60`.
///
/// `None` only when the divisor does not fit in u128 and the answer is not trivially 1.
fn ceil_scaled(d: u128, b: u32, k: u32) -> Option<u128> {
    let Some(div) = 10u128.checked_pow(k) else {
        // d * 2^b < 10^38 * 2^60 < 10^57, so for k >= 57 the value lies in (0, 1).
        return (b == 0 || k >= 57).then_some(1);
    };
    let (q, mut r) = (d / div, d % div);
    let mut acc = q.checked_mul(1u128 << b)?;
    // Long division of r * 2^b by div one bit at a time: r < div <= 10^38, so 2r fits.
    let mut frac: u128 = 0;
    for _ in 0..b {
        r *= 2;
        frac *= 2;
        if r >= div {
            r -= div;
            frac += 1;
        }
    }
    acc = acc.checked_add(frac)?;
    if r > 0 {
        acc = acc.checked_add(1)?;
    }
    Some(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(s: &str) -> Result<i64, QuantityError> {
        parse_milli_str(s)
    }

    #[test]
    fn decimal_suffixes() {
        assert_eq!(m("1"), Ok(1000));
        assert_eq!(m("500m"), Ok(500));
        assert_eq!(m("1.5"), Ok(1500));
        assert_eq!(m(".5"), Ok(500));
        assert_eq!(m("5."), Ok(5000));
        assert_eq!(m("2k"), Ok(2_000_000));
        assert_eq!(m("1M"), Ok(1_000_000_000));
        assert_eq!(m("1G"), Ok(1_000_000_000_000));
        assert_eq!(m("1T"), Ok(1_000_000_000_000_000));
        assert_eq!(m("1P"), Ok(1_000_000_000_000_000_000));
        assert_eq!(m("1E"), Err(QuantityError::Overflow("1E".into())));
        assert_eq!(m("0.001E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(m("1000000u"), Ok(1000));
        assert_eq!(m("1000000000n"), Ok(1000));
        assert_eq!(m("+3"), Ok(3000));
        assert_eq!(m("-3"), Ok(-3000));
        assert_eq!(m("0"), Ok(0));
        assert_eq!(m("000"), Ok(0));
        assert_eq!(m("0.000"), Ok(0));
    }

    #[test]
    fn binary_suffixes() {
        assert_eq!(m("1Ki"), Ok(1024 * 1000));
        assert_eq!(m("1Mi"), Ok(1 << 20).map(|v: i64| v * 1000));
        assert_eq!(m("36Gi"), Ok(36 * (1i64 << 30) * 1000));
        assert_eq!(m("1Ti"), Ok((1i64 << 40) * 1000));
        assert_eq!(m("1Pi"), Ok((1i64 << 50) * 1000));
        assert_eq!(m("1.5Gi"), Ok(1536 * (1i64 << 20) * 1000));
        assert!(matches!(m("1Ei"), Err(QuantityError::Overflow(_))));
        // 1.0001Ki = 1024.1024 -> 1024102.4m -> rounds up
        assert_eq!(m("1.0001Ki"), Ok(1_024_103));
    }

    #[test]
    fn exponents() {
        assert_eq!(m("1e3"), Ok(1_000_000));
        assert_eq!(m("1E3"), Ok(1_000_000));
        assert_eq!(m("1.5e+2"), Ok(150_000));
        assert_eq!(m("1e-3"), Ok(1));
        assert_eq!(m("15e-4"), Ok(2));
        assert!(matches!(
            m("1e99999999999999999999"),
            Err(QuantityError::Overflow(_))
        ));
        assert_eq!(m("1e-99999999999999999999"), Ok(1));
    }

    #[test]
    fn rounds_sub_milli_up() {
        assert_eq!(m("0.1m"), Ok(1));
        assert_eq!(m("1n"), Ok(1));
        assert_eq!(m("1001u"), Ok(2));
        assert_eq!(m("-0.1m"), Ok(-1));
        assert_eq!(m("0.0000000000000000000000000000000000000000001"), Ok(1));
    }

    #[test]
    fn garbage_is_an_error() {
        for s in [
            "", "abc", "1x", "1 ", " 1", "--1", "1.2.3", ".", "-", "1e", "1Kii", "K", "1K", "e3",
            "1e+", "1.5.Gi", "1mi",
        ] {
            assert!(
                matches!(m(s), Err(QuantityError::Format(_))),
                "{s:?} should be a format error"
            );
        }
    }

    #[test]
    fn overflow_edges() {
        assert_eq!(m("9223372036854775807m"), Ok(i64::MAX));
        assert_eq!(m("-9223372036854775808m"), Ok(i64::MIN));
        assert!(matches!(
            m("9223372036854775808m"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            m("9223372036854776"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            m("123456789012345678901234567890123456789012"),
            Err(QuantityError::Precision(_))
        ));
    }

    #[test]
    fn error_message_names_the_input() {
        let e = m("abc").expect_err("garbage");
        assert!(e.to_string().starts_with("invalid quantity \"abc\""));
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(format_milli_string(1500), "1500m");
        assert_eq!(format_milli_string(2000), "2");
        assert_eq!(format_milli_string(0), "0");
        assert_eq!(format_milli_string(-2500), "-2500m");
        assert_eq!(format_milli_string(1024 * 1000), "1024");
        assert_eq!(format_milli_string((1i64 << 30) * 1000), "1Gi");
        assert_eq!(format_milli_string(-(3i64 << 20) * 1000), "-3Mi");
        assert_eq!(format_milli_string(1536 * (1i64 << 20) * 1000), "1536Mi");
        assert_eq!(format_milli_string(i64::MIN), "-9223372036854775808m");
    }

    #[test]
    fn whole_units_round_up() {
        assert_eq!(parse_units(&Quantity("500m".into())), Ok(1));
        assert_eq!(parse_units(&Quantity("2".into())), Ok(2));
        assert_eq!(parse_units(&Quantity("-500m".into())), Ok(0));
    }

    #[test]
    fn resources_count_in_kueue_units() {
        let v = |r: &str, s: &str| resource_value_str(r, s);
        assert_eq!(v("cpu", "500m"), Ok(500));
        assert_eq!(v("cpu", "2"), Ok(2000));
        assert_eq!(v("memory", "1Gi"), Ok(1 << 30));
        // Quotas a milli-unit i64 could not hold, which Kueue accepts.
        assert_eq!(v("memory", "9Pi"), Ok(9 * (1i64 << 50)));
        assert_eq!(v("memory", "1E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(v("nvidia.com/gpu", "8"), Ok(8));
        // Whole units round up, like Kueue's Value().
        assert_eq!(v("memory", "500m"), Ok(1));
        assert_eq!(v("pods", "1.5"), Ok(2));
        // Beyond i64: clamped like Kueue's SafeValue, not an error.
        assert_eq!(v("memory", "8Ei"), Ok(i64::MAX));
        assert_eq!(v("cpu", "1E"), Ok(i64::MAX));
        assert_eq!(v("memory", "-10E"), Ok(i64::MIN));
        assert_eq!(v("memory", "1e99999999999"), Ok(i64::MAX));
        assert!(matches!(v("memory", "1Gb"), Err(QuantityError::Format(_))));
    }

    #[test]
    fn validation_compares_quantities_beyond_i64() {
        let w = |s: &str| parse_milli_wide(&Quantity(s.into()));
        assert_eq!(w("9Pi"), Ok(9 * (1i128 << 50) * 1000));
        assert!(w("9Ei").unwrap_or(0) > w("8Ei").unwrap_or(i128::MAX));
        assert_eq!(w("-1"), Ok(-1000));
        assert_eq!(w("1e99999"), Ok(i128::MAX));
        assert!(matches!(w("x"), Err(QuantityError::Format(_))));
    }

    #[test]
    fn resource_amounts_print_as_quantities() {
        assert_eq!(resource_quantity_string("cpu", 500), "500m");
        assert_eq!(resource_quantity_string("cpu", 2000), "2");
        assert_eq!(resource_quantity_string("memory", 9 * (1i64 << 50)), "9Pi");
        assert_eq!(resource_quantity_string("memory", 1500), "1500");
        assert_eq!(resource_quantity_string("nvidia.com/gpu", 8), "8");
    }

    proptest! {
        #[test]
        fn resource_amounts_round_trip(x in any::<i64>(), cpu in any::<bool>()) {
            let r = if cpu { "cpu" } else { "memory" };
            prop_assert_eq!(resource_value(r, &resource_quantity(r, x)), Ok(x));
        }

        #[test]
        fn format_then_parse_round_trips(x in any::<i64>()) {
            prop_assert_eq!(parse_milli(&format_milli(x)), Ok(x));
        }

        #[test]
        fn binary_multiples_round_trip(n in -2000i64..2000, shift in 20u32..41) {
            let x = n * (1i64 << shift) * 1000;
            prop_assert_eq!(parse_milli_str(&format_milli_string(x)), Ok(x));
        }

        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = parse_milli_str(&s);
        }

        #[test]
        fn never_panics_on_quantity_like(s in "[+-]?[0-9]{0,45}(\\.[0-9]{0,45})?([eE][+-]?[0-9]{1,25}|[numkMGTPE]|[KMGTPE]i)?") {
            let _ = parse_milli_str(&s);
        }
    }
}
