//! The scan held to `serde_json`: a property test over generated documents, edge cases,
//! and the members handed to `object_members`.

use super::{top_level_keys, top_level_present, Scan};
use proptest::prelude::*;

/// The scan agrees with serde_json wherever it decides.
fn agrees(bytes: &[u8], keys: &[String]) -> Result<Scan, TestCaseError> {
    let scan = top_level_keys(bytes, keys);
    let oracle = top_level_present(bytes, keys);
    let text = String::from_utf8_lossy(bytes);
    match scan {
        Scan::Present(mask) => {
            let seen = oracle.map_err(|e| TestCaseError::fail(format!("scan accepted, serde refused ({e}): {text}")))?;
            let seen = seen.ok_or_else(|| TestCaseError::fail(format!("scan found an object, serde did not: {text}")))?;
            for (i, s) in seen.iter().enumerate() {
                prop_assert_eq!(mask >> i & 1 == 1, *s, "key {} in {}", keys[i], text);
            }
        }
        Scan::Invalid => prop_assert!(oracle.is_err(), "scan refused, serde accepted: {}", text),
        Scan::Unsure => {}
    }
    Ok(scan)
}

fn json() -> impl Strategy<Value = String> {
    let ws = prop::sample::select(vec!["", " ", "\n", "\t", "\r\n  "]);
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| serde_json::to_string(&f).unwrap()),
        prop::sample::select(vec!["0", "-0", "1e5", "1E+2", "-3.25e-7", "0.5"]).prop_map(str::to_string),
        ".{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        prop::sample::select(vec![r#""a\"b""#, r#""\u00e9\n""#, r#""\ud83d\ude00""#, r#""\/\b\f\r\t\\""#]).prop_map(str::to_string),
    ];
    leaf.prop_recursive(5, 48, 6, move |inner| {
        let ws = ws.clone();
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..5), ws.clone()).prop_map(|(v, w)| format!("[{w}{}{w}]", v.join(&format!("{w},{w}")))),
            (prop::collection::vec(("[a-c]{1,2}", inner), 0..5), ws).prop_map(|(v, w)| {
                let members: Vec<String> = v.into_iter().map(|(k, x)| format!("\"{k}\"{w}:{w}{x}")).collect();
                format!("{{{w}{}{w}}}", members.join(","))
            }),
        ]
    })
}

fn keys() -> Vec<String> {
    ["a", "b", "choices", "c"].iter().map(|s| s.to_string()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Objects with plain keys are always decided here, as serde_json decides them.
    #[test]
    fn objects_are_decided_as_serde_json_decides(members in prop::collection::vec(("[a-c]|choices", json()), 0..6), pad in "[ \n]{0,2}") {
        let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{pad}{v}")).collect();
        let doc = format!("{pad}{{{pad}{}}}{pad}", body.join(&format!("{pad},")));
        let scan = agrees(doc.as_bytes(), &keys())?;
        prop_assert!(matches!(scan, Scan::Present(_)), "{} -> {:?}", doc, scan);
    }

    /// Damaged documents: refused or accepted exactly as serde_json would.
    #[test]
    fn damaged_documents_agree_with_serde_json(
        members in prop::collection::vec(("[a-c]|choices", json()), 1..5),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(b"{}[]\",:\\ .-0e9nu\x01\xff".to_vec())), 1..4),
    ) {
        let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let mut doc = format!("{{{}}}", body.join(",")).into_bytes();
        for (at, kind, byte) in edits {
            let i = at.index(doc.len() + 1);
            match kind {
                0 if i < doc.len() => { doc.remove(i); }
                1 if i < doc.len() => doc[i] = byte,
                _ => doc.insert(i, byte),
            }
        }
        agrees(&doc, &keys())?;
    }
}

#[test]
fn edge_cases_agree_with_serde_json() {
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(300), "]".repeat(300));
    let mixed = format!("{{\"a\":{}1{}}}", "[{\"k\":".repeat(70), "}]".repeat(70));
    let unbalanced = format!("{{\"a\":{}1{}}}", "[{\"k\":".repeat(70), "]}".repeat(70));
    let deep_objects = format!("{{\"a\":{}1{}}}", "{\"k\":".repeat(200), "}".repeat(200));
    let cases: Vec<&[u8]> = vec![
        b"{}",
        b" { } ",
        b"{\"a\":null}",
        b"{\"a\":1,\"a\":null}",
        b"{\"a\":null,\"a\":[]}",
        b"{\"a\":nul}",
        b"{\"a\":1,}",
        b"{\"a\":[1,]}",
        b"{\"a\":[,1]}",
        b"{\"a\":{\"b\":1,}}",
        b"{\"a\":01}",
        b"{\"a\":-}",
        b"{\"a\":1.}",
        b"{\"a\":1e}",
        b"{\"a\":\"\x01\"}",
        b"{\"a\":\"\\x\"}",
        b"{\"a\":\"\\u12g4\"}",
        b"{\"a\":\"\xff\"}",
        b"{\"\xff\":1}",
        b"{\"a\":1} x",
        b"{\"a\":1}}",
        b"{\"a\" 1}",
        b"{a:1}",
        b"{\"a\":\"12345678\\\"9012345678\"}",
        b"{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}]}",
        deep.as_bytes(),
        deep_objects.as_bytes(),
        mixed.as_bytes(),
        unbalanced.as_bytes(),
    ];
    for c in cases {
        agrees(c, &keys()).unwrap();
    }
    assert_eq!(top_level_keys(b"[1]", &keys()), Scan::Unsure);
    assert_eq!(top_level_keys(b"{\"\\u0061\":1}", &keys()), Scan::Unsure);
    assert_eq!(top_level_keys(b"{\"a\":1,\"a\":null}", &keys()), Scan::Present(0));
    assert_eq!(top_level_keys(b"{\"choices\":[],\"b\":{}}", &keys()), Scan::Present(0b110));
    assert_eq!(top_level_keys(b"{\"a\":1,}", &keys()), Scan::Invalid);
    assert_eq!(top_level_keys(deep.as_bytes(), &keys()), Scan::Present(1));
    assert_eq!(top_level_keys(mixed.as_bytes(), &keys()), Scan::Present(1));
    assert_eq!(top_level_keys(unbalanced.as_bytes(), &keys()), Scan::Invalid);
}

#[test]
fn members_come_with_their_value_text() {
    let doc = br#" { "a" : [1, {"b":2}] ,"skip":{"a":1}, "c":"x\"y", "d":null }  "#;
    let mut got = Vec::new();
    let found = super::object_members(
        doc,
        |k| ["a", "c", "d"].iter().position(|n| n.as_bytes() == k),
        |slot, v| got.push((slot, String::from_utf8_lossy(v).into_owned())),
    );
    assert_eq!(found, super::Members::Object);
    assert_eq!(got, vec![(0, r#"[1, {"b":2}]"#.to_string()), (1, r#""x\"y""#.to_string()), (2, "null".to_string())]);
    assert_eq!(super::object_members(b"[]", |_| None, |_, _| ()), super::Members::Unsure);
    assert_eq!(super::object_members(b"{\"a\":}", |_| Some(0), |_, _| panic!("no value")), super::Members::Invalid);
}
