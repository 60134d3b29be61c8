//! NSKeyedArchiver, the encoding of DTX payloads and arguments: a binary plist
//! `{$archiver: NSKeyedArchiver, $version: 100000, $top: {root: UID}, $objects: [...]}`
//! whose objects refer to each other by UID, `$objects[0]` being `$null`. Values the phone
//! sends are encoded here (NSError has no plain-plist form); what the host sends is read
//! with the `ns-keyed-archive` crate (not part of idevice).

use std::collections::HashMap;
use std::io;

use plist::{Dictionary, Uid, Value};

/// An NSError as the process-control service returns it for a launch it refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct NsError {
    pub domain: String,
    pub code: i64,
    /// NSLocalizedDescription, NSLocalizedFailureReason, BSErrorCodeDescription, …
    pub info: Vec<(String, String)>,
    pub underlying: Option<Box<NsError>>,
}

/// A value to archive whose dictionaries may have NSNumber keys, as the phone's gauges
/// send (pids); `plist::Value` dictionaries have string keys only.
#[derive(Debug, Clone, PartialEq)]
pub enum Obj {
    Plain(Value),
    Array(Vec<Obj>),
    /// An NSDictionary, its keys (strings or numbers) in this order.
    Dict(Vec<(Obj, Obj)>),
}

impl From<Value> for Obj {
    fn from(v: Value) -> Self {
        Obj::Plain(v)
    }
}

impl Obj {
    pub fn int(n: u64) -> Obj {
        Obj::Plain(Value::Integer(n.into()))
    }

    pub fn real(x: f64) -> Obj {
        Obj::Plain(Value::Real(x))
    }

    pub fn str(s: &str) -> Obj {
        Obj::Plain(Value::String(s.into()))
    }
}

#[derive(Default)]
struct Archiver {
    objects: Vec<Value>,
    classes: HashMap<&'static str, Uid>,
}

impl Archiver {
    fn push(&mut self, v: Value) -> Uid {
        self.objects.push(v);
        Uid::new(self.objects.len() as u64 - 1)
    }

    fn class(&mut self, name: &'static str) -> Uid {
        if let Some(uid) = self.classes.get(name) {
            return *uid;
        }
        let chain = Value::Array(vec![name.into(), "NSObject".into()]);
        let uid = self.push(Value::Dictionary(
            [("$classes".to_string(), chain), ("$classname".to_string(), name.into())].into_iter().collect(),
        ));
        self.classes.insert(name, uid);
        uid
    }

    /// Scalars are stored as themselves (NSNumber, NSString); containers as NSDictionary
    /// and NSArray objects.
    fn value(&mut self, v: &Value) -> Uid {
        match v {
            Value::Dictionary(d) => {
                let pairs: Vec<(Uid, Uid)> =
                    d.iter().map(|(k, v)| (self.value(&Value::String(k.clone())), self.value(v))).collect();
                self.dictionary(pairs)
            }
            Value::Array(a) => {
                let items = a.iter().map(|v| self.value(v)).collect();
                self.array(items)
            }
            other => self.push(other.clone()),
        }
    }

    /// An NSNumber key is stored as itself, like any NSNumber.
    fn obj(&mut self, o: &Obj) -> Uid {
        match o {
            Obj::Plain(v) => self.value(v),
            Obj::Array(a) => {
                let items = a.iter().map(|o| self.obj(o)).collect();
                self.array(items)
            }
            Obj::Dict(pairs) => {
                let pairs = pairs.iter().map(|(k, v)| (self.obj(k), self.obj(v))).collect();
                self.dictionary(pairs)
            }
        }
    }

    fn array(&mut self, items: Vec<Uid>) -> Uid {
        let items = items.into_iter().map(Value::Uid).collect();
        let class = self.class("NSArray");
        self.push(Value::Dictionary(
            [("NS.objects".to_string(), Value::Array(items)), ("$class".to_string(), Value::Uid(class))]
                .into_iter()
                .collect(),
        ))
    }

    fn dictionary(&mut self, pairs: Vec<(Uid, Uid)>) -> Uid {
        let class = self.class("NSDictionary");
        let (keys, objects): (Vec<Value>, Vec<Value>) =
            pairs.into_iter().map(|(k, v)| (Value::Uid(k), Value::Uid(v))).unzip();
        self.push(Value::Dictionary(
            [
                ("NS.keys".to_string(), Value::Array(keys)),
                ("NS.objects".to_string(), Value::Array(objects)),
                ("$class".to_string(), Value::Uid(class)),
            ]
            .into_iter()
            .collect(),
        ))
    }

    /// NSError's coder keys: NSCode, NSDomain, NSUserInfo (NSUnderlyingError inside it).
    fn error(&mut self, e: &NsError) -> Uid {
        let mut pairs: Vec<(Uid, Uid)> = e
            .info
            .iter()
            .map(|(k, v)| (self.value(&Value::String(k.clone())), self.value(&Value::String(v.clone()))))
            .collect();
        if let Some(u) = &e.underlying {
            let key = self.value(&Value::String("NSUnderlyingError".into()));
            pairs.push((key, self.error(u)));
        }
        let info = self.dictionary(pairs);
        let domain = self.value(&Value::String(e.domain.clone()));
        let class = self.class("NSError");
        self.push(Value::Dictionary(
            [
                ("NSCode".to_string(), Value::Integer(e.code.into())),
                ("NSDomain".to_string(), Value::Uid(domain)),
                ("NSUserInfo".to_string(), Value::Uid(info)),
                ("$class".to_string(), Value::Uid(class)),
            ]
            .into_iter()
            .collect(),
        ))
    }

    fn finish(mut self, root: Uid) -> Vec<u8> {
        let objects = std::mem::take(&mut self.objects);
        let top: Dictionary = [("root".to_string(), Value::Uid(root))].into_iter().collect();
        let archive: Dictionary = [
            ("$version".to_string(), Value::Integer(100_000.into())),
            ("$archiver".to_string(), "NSKeyedArchiver".into()),
            ("$top".to_string(), Value::Dictionary(top)),
            ("$objects".to_string(), Value::Array(objects)),
        ]
        .into_iter()
        .collect();
        let mut out = Vec::new();
        plist::to_writer_binary(&mut out, &Value::Dictionary(archive)).expect("an archive serializes");
        out
    }

    fn new() -> Self {
        let mut a = Archiver::default();
        a.push("$null".into());
        a
    }
}

pub fn encode(v: &Value) -> Vec<u8> {
    let mut a = Archiver::new();
    let root = a.value(v);
    a.finish(root)
}

pub fn encode_obj(o: &Obj) -> Vec<u8> {
    let mut a = Archiver::new();
    let root = a.obj(o);
    a.finish(root)
}

pub fn encode_error(e: &NsError) -> Vec<u8> {
    let mut a = Archiver::new();
    let root = a.error(e);
    a.finish(root)
}

/// A value the host archived (strings, numbers, dictionaries, arrays).
pub fn decode(bytes: &[u8]) -> io::Result<Value> {
    ns_keyed_archive::decode::from_bytes(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_the_archive() {
        let env: Dictionary =
            [("A".to_string(), Value::from("1")), ("B".to_string(), Value::from("2"))].into_iter().collect();
        let v = Value::Array(vec![Value::Integer(1234.into()), Value::Dictionary(env), "x".into(), true.into()]);
        assert_eq!(decode(&encode(&v)).unwrap(), v);
        assert_eq!(decode(&encode(&Value::Integer(7.into()))).unwrap(), Value::Integer(7.into()));
    }

    #[test]
    fn number_keys_stay_numbers_and_the_crates_decoders_read_them() {
        let inner = Obj::Dict(vec![(Obj::str("energy.cost"), Obj::real(12.0))]);
        let o = Obj::Dict(vec![(Obj::int(1001), inner), (Obj::int(7), Obj::Array(vec![Obj::int(1), Obj::str("x")]))]);
        let bytes = encode_obj(&o);
        let archive: Dictionary = plist::from_bytes(&bytes).unwrap();
        let objects = archive["$objects"].as_array().unwrap();
        let Value::Uid(root) = archive["$top"].as_dictionary().unwrap()["root"] else { panic!("no root") };
        let keys = objects[root.get() as usize].as_dictionary().unwrap()["NS.keys"].as_array().unwrap().clone();
        let Value::Uid(first) = keys[0] else { panic!("a key is a UID") };
        assert_eq!(objects[first.get() as usize], Value::Integer(1001.into()), "an NSNumber, not a string");
        // The host side: ns-keyed-archive (the DTX reader's) and the energy client's own decoder.
        let decoded = decode(&bytes).unwrap();
        assert_eq!(decoded.as_dictionary().unwrap()["7"].as_array().unwrap()[1].as_string(), Some("x"));
        // (It reads only the entries whose value is a dictionary.)
        let samples = idevice::dvt::energy_monitor::EnergySample::from_bytes(&bytes).unwrap();
        assert_eq!(samples.iter().map(|s| (s.pid, s.total_energy)).collect::<Vec<_>>(), [(1001, 12.0)]);
    }

    #[test]
    fn an_ns_error_is_an_object_of_class_nserror_with_its_user_info() {
        let e = NsError {
            domain: "outer".into(),
            code: 1,
            info: vec![("NSLocalizedDescription".into(), "it failed".into())],
            underlying: Some(Box::new(NsError { domain: "inner".into(), code: 4, info: vec![], underlying: None })),
        };
        let archive: Dictionary = plist::from_bytes(&encode_error(&e)).unwrap();
        let objects = archive["$objects"].as_array().unwrap();
        let at = |v: &Value| match v {
            Value::Uid(u) => objects[u.get() as usize].clone(),
            other => panic!("not a UID: {other:?}"),
        };
        let root = at(&archive["$top"].as_dictionary().unwrap()["root"]);
        let root = root.as_dictionary().unwrap();
        assert_eq!(at(&root["$class"]).as_dictionary().unwrap()["$classname"].as_string(), Some("NSError"));
        assert_eq!(at(&root["NSDomain"]).as_string(), Some("outer"));
        assert_eq!(root["NSCode"].as_signed_integer(), Some(1));
        let info = at(&root["NSUserInfo"]);
        let info = info.as_dictionary().unwrap();
        let keys: Vec<String> =
            info["NS.keys"].as_array().unwrap().iter().map(|k| at(k).as_string().unwrap().to_string()).collect();
        assert_eq!(keys, ["NSLocalizedDescription", "NSUnderlyingError"]);
        let inner = at(&info["NS.objects"].as_array().unwrap()[1]);
        assert_eq!(at(&inner.as_dictionary().unwrap()["NSDomain"]).as_string(), Some("inner"));
    }
}
