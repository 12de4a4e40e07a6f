//! Hostile model files (issue 27 item 9): every number is range-checked on load, as a
//! config's are, and the error names the field; a model that could not be loaded back
//! is never saved; the file's size and provider count are bounded before anything is
//! built from it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use serde_json::Value;
use tailcut_model::{FieldError, Model, ModelCheckError, ModelConfig, ModelFormatError, Observation, Outcome};

fn saved() -> Value {
    let mut m = Model::new(&[("a".into(), 0.0003, 60.0), ("b".into(), 0.0007, 0.0)], ModelConfig::default());
    let valid = |p, l| Observation {
        provider: p,
        outcome: Outcome::Valid { latency_s: l },
        queue_s: Some(1.0),
        idle_gap_s: Some(30.0),
        warm: Some(true),
    };
    for _ in 0..20 {
        m.observe_request(&[valid(0, 6.0), valid(1, 19.0)]);
    }
    serde_json::to_value(&m).unwrap()
}

/// The error loading `saved()` with `edit` applied.
fn refused(edit: impl FnOnce(&mut Value)) -> ModelFormatError {
    let mut v = saved();
    edit(&mut v);
    match Model::from_json(&v.to_string()) {
        Ok(_) => panic!("accepted: {}", v.to_string().chars().take(300).collect::<String>()),
        Err(e) => e,
    }
}

#[test]
fn out_of_range_numbers_are_refused_naming_the_field() {
    for (edit, field) in [
        (
            Box::new(|v: &mut Value| v["providers"][1]["rate_usd_per_s"] = (-1.0).into()) as Box<dyn FnOnce(&mut Value)>,
            "providers[1].rate_usd_per_s",
        ),
        (Box::new(|v: &mut Value| v["providers"][0]["idle_s"] = (-5.0).into()), "providers[0].idle_s"),
        (Box::new(|v: &mut Value| v["config"]["half_life"] = 0.0.into()), "config.half_life"),
        (Box::new(|v: &mut Value| v["config"]["half_life"] = (-3.0).into()), "config.half_life"),
        (Box::new(|v: &mut Value| v["config"]["slow_quantile"] = 2.0.into()), "config.slow_quantile"),
        (Box::new(|v: &mut Value| v["providers"][0]["latency"]["half_life"] = 0.0.into()), "providers[0].latency.half_life"),
        (Box::new(|v: &mut Value| v["providers"][0]["latency"]["total"] = 1e308.into()), "providers[0].latency.total"),
        (Box::new(|v: &mut Value| v["providers"][0]["slow_threshold_s"] = 1e308.into()), "providers[0].slow_threshold_s"),
        (Box::new(|v: &mut Value| v["providers"][0]["failed"]["trials"] = (-1.0).into()), "providers[0].failed.trials"),
        (Box::new(|v: &mut Value| v["pairs"][0]["a_slow"]["half_life"] = (-1.0).into()), "pairs[0].a_slow.half_life"),
    ] {
        let e = refused(edit).to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
}

#[test]
fn a_latency_of_1e308_is_refused_on_load_and_a_model_that_cannot_load_is_never_saved() {
    // 1e308 in a bucket's value sum loaded, then overflowed to inf and was saved as null.
    let e = refused(|v| {
        let sums = v["providers"][0]["latency"]["sums"].as_array_mut().unwrap();
        sums[0][1] = 1e308.into();
    });
    let ModelFormatError::Invalid { source: ModelCheckError::Field(FieldError::OutOfRange { field, found, .. }) } = &e else {
        panic!("{e:?}")
    };
    assert!(field.to_string().starts_with("providers[0].latency.sums[") && *found == 1e308, "{e}");
    assert!(e.to_string().starts_with(&format!("bad model: {field} must be a number from 0 to ")), "{e}");
    // Whatever a model holds, what `save` writes loads back.
    let dir = tempfile_dir();
    let path = dir.join("m.json");
    let mut m: Model = serde_json::from_value(saved()).unwrap();
    m.config.cutover_poll_s = f64::INFINITY;
    let err = m.save(&path).unwrap_err().to_string();
    assert!(err.contains("config.cutover_poll_s") && !path.exists(), "{err}");
    m.config.cutover_poll_s = 2.5;
    m.save(&path).unwrap();
    assert_eq!(Model::load(&path).unwrap(), m);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn huge_files_and_provider_counts_are_refused_before_they_are_built() {
    let mut v = saved();
    let one = v["providers"][0].clone();
    v["providers"] = Value::Array(vec![one; tailcut_model::model::MAX_PROVIDERS + 1]);
    v["pairs"] = Value::Array(vec![]);
    let Err(e) = Model::from_json(&v.to_string()) else { panic!("accepted") };
    let count = tailcut_model::model::MAX_PROVIDERS + 1;
    assert!(matches!(e, ModelFormatError::Invalid { source: ModelCheckError::TooManyProviders { count: c } } if c == count), "{e}");
    assert_eq!(e.to_string(), format!("bad model: providers: {count} of them, expected at most {}", count - 1));
    let big = format!("{{\"format\":\"tailcut-model\",\"pad\":\"{}\"}}", "x".repeat(tailcut_model::model::MAX_MODEL_BYTES));
    let Err(e) = Model::from_json(&big) else { panic!("accepted") };
    assert!(matches!(e, ModelFormatError::TooBig { .. }) && e.to_string().contains("bytes"), "{e}");
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tailcut-model-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
