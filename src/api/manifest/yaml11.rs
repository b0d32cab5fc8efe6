//! Reads a parsed YAML value the way kubectl reads YAML: YAML 1.1 booleans.
//!
//! kubectl converts YAML to JSON with YAML 1.1 resolution, so `suspend: yes` or `on` is a
//! boolean there, while serde_norway (YAML 1.2) reads them as strings. This deserializer
//! wraps a [`Value`] and accepts those spellings only where the target asks for a bool;
//! everything else is delegated unchanged, so a string field still refuses an unquoted
//! number or boolean (`name: 123`), as the API server would.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_norway::{Error, Mapping, Value};

/// YAML 1.1 spellings of true and false (those of go-yaml v2, which kubectl uses).
const TRUE: &[&str] = &["y", "Y", "yes", "Yes", "YES", "on", "On", "ON"];
const FALSE: &[&str] = &["n", "N", "no", "No", "NO", "off", "Off", "OFF"];

/// A YAML value read with YAML 1.1 booleans.
pub(super) struct Yaml11<'a>(pub &'a Value);

fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => untag(&t.value),
        v => v,
    }
}

macro_rules! delegate {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.0.$method(visitor)
        }
    )*};
}

impl<'de> Deserializer<'de> for Yaml11<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match untag(self.0) {
            Value::Mapping(m) => visitor.visit_map(Map::new(m)),
            Value::Sequence(s) => visitor.visit_seq(Seq(s.iter())),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if let Value::String(s) = untag(self.0) {
            if TRUE.contains(&s.as_str()) {
                return visitor.visit_bool(true);
            }
            if FALSE.contains(&s.as_str()) {
                return visitor.visit_bool(false);
            }
        }
        self.0.deserialize_bool(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match untag(self.0) {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match untag(self.0) {
            Value::Sequence(s) => visitor.visit_seq(Seq(s.iter())),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match untag(self.0) {
            Value::Mapping(m) => visitor.visit_map(Map::new(m)),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match untag(self.0) {
            Value::Mapping(m) => visitor.visit_map(Map::new(m)),
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    delegate! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64 deserialize_char deserialize_str deserialize_string
        deserialize_bytes deserialize_byte_buf deserialize_unit deserialize_identifier
        deserialize_ignored_any
    }
}

struct Seq<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Yaml11(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Map<'a> {
    entries: serde_norway::mapping::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'a> Map<'a> {
    fn new(m: &'a Mapping) -> Self {
        Self {
            entries: m.iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Map<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.entries.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(Yaml11(k)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(Yaml11(v)),
            None => Err(de::Error::custom("a map value was read before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.entries.size_hint().1
    }
}
