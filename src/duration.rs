//! Durations as Go writes them: Go's `time.ParseDuration`, which Kubernetes and Kueue use
//! for every `metav1.Duration` (`leaseDuration: 15s`, `timeout: 1.5h`), ported rule for
//! rule, and the same syntax plus days for kuota's own flags.
//!
//! A leaf module: the configuration loader and the command line both parse with it.
//!
//! Go's rules (src/time/format.go, `ParseDuration`): an optional sign, then one or more
//! decimal numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`,
//! `s`, `m`, `h`); a lone `0` needs no unit; the value is an `int64` of nanoseconds, so
//! anything beyond about 292 years is an error. Fractions are scaled in floating point as
//! Go does, so `0.3333333333333333333h` is exactly 20 minutes in both.

use std::time::Duration;

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;
/// `1 << 63`: one past the largest positive Go duration, the magnitude of the most negative.
const LIMIT: u64 = 1 << 63;

/// Why a duration does not parse; the message is Go's (`time: invalid duration "1d"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit { input: String, unit: String },
    /// Valid in Go, but negative where only a length of time makes sense.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
}

/// Go's `time.ParseDuration`: nanoseconds, negative when the text starts with `-`.
pub fn parse_go(s: &str) -> Result<i64, DurationError> {
    parse_with(s, go_unit)
}

/// Go's `time.ParseDuration` for a length of time: as [`parse_go`], and a negative value
/// is an error.
pub fn parse_go_non_negative(s: &str) -> Result<Duration, DurationError> {
    to_std(s, parse_go(s)?)
}

/// kuota's duration flags (`--rotate-before=720h`, `--validity=365d`): Go's syntax, plus
/// `d` for days of 24 hours; never negative.
pub fn parse_flag(s: &str) -> Result<Duration, DurationError> {
    let nanos = parse_with(s, |u| go_unit(u).or((u == "d").then_some(DAY)))?;
    to_std(s, nanos)
}

fn to_std(s: &str, nanos: i64) -> Result<Duration, DurationError> {
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| DurationError::Negative(s.to_string()))
}

fn go_unit(u: &str) -> Option<u64> {
    Some(match u {
        "ns" => NANOSECOND,
        // U+00B5 (micro sign) and U+03BC (Greek mu), as Go accepts both.
        "us" | "\u{b5}s" | "\u{3bc}s" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => MINUTE,
        "h" => HOUR,
        _ => return None,
    })
}

/// Go's algorithm, byte for byte, with the unit table passed in.
fn parse_with(orig: &str, unit_of: impl Fn(&str) -> Option<u64>) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(orig.to_string());
    let mut s = orig.as_bytes();
    let mut d: u64 = 0;
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    // Special case: if all that is left is "0", this is zero.
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    while !s.is_empty() {
        // The next character must be [0-9.].
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // Consume [0-9]*.
        let before = s.len();
        let (mut v, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();
        // Consume (\.[0-9]*)?.
        let mut post = false;
        let (mut f, mut scale) = (0u64, 1f64);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before = s.len();
            (f, scale, s) = leading_fraction(s);
            post = before != s.len();
        }
        if !pre && !post {
            // No digits (e.g. ".s" or "-.s").
            return Err(invalid());
        }
        // Consume the unit: every byte up to the next '.' or digit.
        let i = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if i == 0 {
            return Err(DurationError::MissingUnit(orig.to_string()));
        }
        let (u, rest) = s.split_at(i);
        s = rest;
        let unit_text = String::from_utf8_lossy(u);
        let unit = std::str::from_utf8(u)
            .ok()
            .and_then(&unit_of)
            .ok_or_else(|| DurationError::UnknownUnit {
                input: orig.to_string(),
                unit: unit_text.into_owned(),
            })?;
        if v > LIMIT / unit {
            return Err(invalid()); // overflow
        }
        v *= unit;
        if f > 0 {
            // Floating point is needed to be nanosecond accurate for fractions of hours:
            // f * unit / scale <= 3.6e12 (ns per hour, the largest unit). Go converts the
            // float back with truncation, as `as` does.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(invalid()); // overflow
            }
        }
        d += v;
        if d > LIMIT {
            return Err(invalid()); // overflow
        }
    }
    if neg {
        // d <= 1 << 63: its negation fits (1 << 63 itself is i64::MIN).
        return Ok((d as i64).wrapping_neg());
    }
    i64::try_from(d).map_err(|_| invalid())
}

/// Consumes the leading `[0-9]*`; `None` on overflow past `1 << 63`.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > LIMIT {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// Consumes the leading `[0-9]*` of a fraction. It never fails: past what a u64 holds it
/// stops accumulating precision (and still consumes the digits), as Go does.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let mut x: u64 = 0;
    let mut scale = 1f64;
    let mut overflow = false;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        let digit = u64::from(s[i] - b'0');
        i += 1;
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            // It's possible for overflow to give a positive number, so take care.
            overflow = true;
            continue;
        }
        let y = x * 10 + digit;
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// Go's own table (src/time/time_test.go, parseDurationTests), every row.
    #[test]
    fn parses_every_case_of_gos_table() {
        let cases: &[(&str, i64)] = &[
            // simple
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            // sign
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            // decimal
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            // different units
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            // composite durations
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            // large value
            ("52763797000ns", 52_763_797_000 * NS),
            // more than 9 digits after the decimal point
            ("0.3333333333333333333h", 20 * M),
            // 1<<53+1 cannot be stored precisely in a float64
            ("9007199254740993ns", (1 << 53) + 1),
            // the largest duration an int64 of nanoseconds holds
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            // the largest negative round-trip value
            ("-2562047h47m16.854775808s", i64::MIN),
            // huge string
            ("0.100000000000000000000h", 6 * M),
            // the first overflow check in leadingFraction
            (
                "0.830103483285477580700h",
                49 * M + 48 * S + 372_539_827 * NS,
            ),
            // the examples Kueue's and Kubernetes' documentation use
            ("1.5h", 90 * M),
            ("300ms", 300 * MS),
            ("2us", 2 * US),
            ("1h30m", 90 * M),
            ("-1s", -S),
        ];
        for &(text, want) in cases {
            assert_eq!(parse_go(text), Ok(want), "{text}");
        }
    }

    /// Go's error table (parseDurationErrorTests), every row a Rust string can hold (its
    /// invalid UTF-8 rows cannot reach a `&str`), with Go's messages.
    #[test]
    fn refuses_every_case_of_gos_error_table() {
        let invalid = [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{FFFD}",
            "\u{FFFD} hello \u{FFFD} world",
            "9223372036854775810ns",
            "9223372036854775808ns",
            "-9223372036854775809ns",
            "9223372036854775.808us",
            "9223372036s854ms775us808ns",
            "-9223372036854775.809us",
            "-9223372036s854ms775us809ns",
        ];
        for text in invalid {
            assert!(parse_go(text).is_err(), "{text:?} parsed");
        }
        assert_eq!(
            parse_go("3").unwrap_err().to_string(),
            r#"time: missing unit in duration "3""#
        );
        assert_eq!(
            parse_go("1d").unwrap_err().to_string(),
            r#"time: unknown unit "d" in duration "1d""#
        );
        assert_eq!(
            parse_go(".s").unwrap_err().to_string(),
            r#"time: invalid duration ".s""#
        );
        assert_eq!(
            parse_go("9223372036854775808ns").unwrap_err().to_string(),
            r#"time: invalid duration "9223372036854775808ns""#
        );
        // Go does not trim: a space is an unknown unit or an invalid start.
        assert!(parse_go(" 5s").is_err());
        assert!(parse_go("5s ").is_err());
    }

    #[test]
    fn lengths_of_time_refuse_a_negative_value_and_flags_add_days() {
        assert_eq!(parse_go_non_negative("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_non_negative("-0"), Ok(Duration::ZERO));
        assert_eq!(
            parse_go_non_negative("-1s").unwrap_err().to_string(),
            r#"invalid duration "-1s": must not be negative"#
        );
        assert!(parse_go_non_negative("365d").is_err());
        assert_eq!(parse_flag("365d"), Ok(Duration::from_secs(365 * 86_400)));
        assert_eq!(parse_flag("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_flag("720h"), Ok(Duration::from_secs(720 * 3600)));
        assert_eq!(parse_flag("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_flag("0"), Ok(Duration::ZERO));
        for bad in ["", "5", "h", "5y", "-5s"] {
            assert!(parse_flag(bad).is_err(), "{bad:?}");
        }
    }
}
