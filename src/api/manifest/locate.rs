//! Field paths and their lines in the YAML text.
//!
//! The line of a field is found by walking the document along the field's path with the
//! YAML parser itself (so flow style, comments and repeated key names elsewhere in the
//! document do not confuse it), never by searching the text for the key.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// Formats a path as Kubernetes does: `spec.resourceGroups[0].flavors`.
pub(super) fn display(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Parses a path in the form [`display`] writes (validation errors carry it as text).
/// A bracketed non-number (`labels[team]`) is a map key.
pub(super) fn parse(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else { break };
            let inner = &after[..end];
            out.push(match inner.parse() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Key(inner.to_string()),
            });
            rest = &after[end + 1..];
        } else {
            let rest_trimmed = rest.strip_prefix('.').unwrap_or(rest);
            let end = rest_trimmed.find(['.', '[']).unwrap_or(rest_trimmed.len());
            out.push(Seg::Key(rest_trimmed[..end].to_string()));
            rest = &rest_trimmed[end..];
        }
    }
    out
}

/// The path serde_ignored reports for an ignored field.
pub(super) fn from_ignored(path: &serde_ignored::Path<'_>) -> Vec<Seg> {
    use serde_ignored::Path as P;
    let mut out = match path {
        P::Root => return Vec::new(),
        P::Seq { parent, .. }
        | P::Map { parent, .. }
        | P::Some { parent }
        | P::NewtypeStruct { parent }
        | P::NewtypeVariant { parent } => from_ignored(parent),
    };
    match path {
        P::Seq { index, .. } => out.push(Seg::Index(*index)),
        P::Map { key, .. } => out.push(Seg::Key(key.clone())),
        _ => {}
    }
    out
}

/// The path serde_path_to_error reports for a failed field.
pub(super) fn from_error_path(path: &serde_path_to_error::Path) -> Vec<Seg> {
    use serde_path_to_error::Segment as S;
    path.iter()
        .filter_map(|s| match s {
            S::Seq { index } => Some(Seg::Index(*index)),
            S::Map { key } => Some(Seg::Key(key.clone())),
            S::Enum { .. } | S::Unknown => None,
        })
        .collect()
}

/// The 1-based line of `path` in document `doc` (1-based) of `yaml`: of its last key, or
/// of its last element. When the path does not occur in the text (a field that is
/// missing, or one that came in through a merge key), the line of its longest prefix
/// that does.
pub(super) fn line_of(yaml: &str, doc: usize, path: &[Seg]) -> Option<usize> {
    (1..=path.len())
        .rev()
        .find_map(|n| exact_line(yaml, doc, &path[..n]))
}

fn exact_line(yaml: &str, doc: usize, path: &[Seg]) -> Option<usize> {
    let de = serde_norway::Deserializer::from_str(yaml).nth(doc.checked_sub(1)?)?;
    let hit = Cell::new(false);
    let err = Walk { path, hit: &hit }.deserialize(de).err()?;
    if hit.get() {
        err.location().map(|l| l.line())
    } else {
        None
    }
}

/// Walks along `path`; reaching its end fails on purpose, so that the parser's error
/// carries the position, and sets `hit`.
struct Walk<'p> {
    path: &'p [Seg],
    hit: &'p Cell<bool>,
}

fn found<E: de::Error>(hit: &Cell<bool>) -> E {
    hit.set(true);
    E::custom("found")
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.path.first() {
            // deserialize_any, not ignored_any: the latter reports errors at the enclosing
            // sequence's position, not the element's.
            None => d.deserialize_any(self),
            Some(Seg::Key(_)) => d.deserialize_map(self),
            Some(Seg::Index(_)) => d.deserialize_seq(self),
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the next step of a field path")
    }

    // The end of the path (an element): any value is the one.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(found(self.hit))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.path.is_empty() {
            return Err(found(self.hit));
        }
        let Some((Seg::Key(want), rest)) = self.path.split_first() else {
            return Err(de::Error::custom("not a key"));
        };
        let last = rest.is_empty();
        while let Some(matched) = map.next_key_seed(Key {
            want,
            last,
            hit: self.hit,
        })? {
            if matched {
                return map.next_value_seed(Walk {
                    path: rest,
                    hit: self.hit,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Err(de::Error::custom("no such key"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.path.is_empty() {
            return Err(found(self.hit));
        }
        let Some((Seg::Index(want), rest)) = self.path.split_first() else {
            return Err(de::Error::custom("not an index"));
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(de::Error::custom("no such element"));
            }
        }
        seq.next_element_seed(Walk {
            path: rest,
            hit: self.hit,
        })?;
        Err(de::Error::custom("no such element"))
    }
}

/// A mapping key: whether it is the wanted one; the last key of the path fails on purpose
/// while the parser is on it, so the error carries the key's line.
struct Key<'a> {
    want: &'a str,
    last: bool,
    hit: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match (v == self.want, self.last) {
            (true, true) => Err(found(self.hit)),
            (matched, _) => Ok(matched),
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.visit_str(if v { "true" } else { "false" })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}
