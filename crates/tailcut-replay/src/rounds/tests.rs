use super::*;
use std::io::Write;
use std::path::PathBuf;

fn providers() -> Vec<String> {
    vec!["runpod".into(), "modal".into(), "cerebrium".into()]
}

fn write(lines: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(lines.as_bytes()).unwrap();
    f
}

#[test]
fn reads_latency_billed_and_queue() {
    let f = write(concat!(
        r#"{"kind":"round","round_id":1,"providers":{"runpod":{"wall_s":6.5,"valid":true,"metrics":{"x":1,"runpod_delay_ms":1200}},"modal":{"wall_s":300.0,"valid":false}}}"#,
        "\n\n",
        r#"{"kind":"charge","providers":{"aws":{}}}"#,
        "\n",
        r#"{"kind":"tailcut_round","round_id":2,"block":1,"providers":{"cerebrium":{"wall_s":19.0,"valid":true,"queue_delay_ms":500}}}"#,
        "\n"
    ));
    let l = load_file(f.path(), &providers()).unwrap();
    let r = &l.rounds;
    assert_eq!(r.round_ids, vec![1, 2]);
    assert_eq!(l.other_records, 1);
    assert_eq!(r.lat(0, 0), 6.5);
    assert_eq!(r.queue[0], 1.2);
    assert_eq!(r.lat(0, 1), f64::INFINITY);
    assert_eq!(r.billed[1], 300.0);
    assert!(r.billed[2].is_nan(), "absent provider");
    assert_eq!(r.lat(1, 2), 19.0);
    assert_eq!(r.queue[5], 0.5);
    assert_eq!(r.blocks, vec![0, 1]);
    assert!(r.has_queue_signal(0) && !r.has_queue_signal(1));
}

#[test]
fn malformed_line_names_file_and_line() {
    let f = write("{\"kind\":\"round\",\"round_id\":1,\"providers\":{}}\n\n{\"kind\": oops}\n");
    let e = load_file(f.path(), &providers()).unwrap_err().to_string();
    assert!(e.contains(&format!("{}:3: malformed record", f.path().display())), "{e}");
    let l =
        load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: true, threads: 1, ..LoadOptions::default() }, &|_| {})
            .unwrap();
    assert_eq!(l.skipped, 1);
    assert_eq!(l.rounds.len(), 1);
}

#[test]
fn unknown_provider_is_an_error_naming_it() {
    let f = write("{\"kind\":\"round\",\"round_id\":1,\"providers\":{\"fal\":{\"wall_s\":1,\"valid\":true}}}\n");
    let e = load_file(f.path(), &providers()).unwrap_err().to_string();
    assert!(e.contains("provider `fal` has no rate"), "{e}");
}

#[test]
fn missing_round_id_is_malformed() {
    let f = write("{\"kind\":\"round\",\"providers\":{}}\n");
    assert!(load_file(f.path(), &providers()).unwrap_err().to_string().contains("round_id"));
}

#[test]
fn many_blocks_keep_order_and_line_numbers() {
    let mut text = String::new();
    for i in 1..=60_000 {
        text.push_str(&format!(
            "{{\"kind\":\"round\",\"round_id\":{i},\"providers\":{{\"runpod\":{{\"wall_s\":{i}.5,\"valid\":true}}}}}}\n"
        ));
    }
    text.push_str("not json\n");
    let f = write(&text);
    let e =
        load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: false, threads: 3, ..LoadOptions::default() }, &|_| {})
            .unwrap_err();
    assert!(e.to_string().contains(":60001: malformed"), "{e}");
    let l =
        load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: true, threads: 3, ..LoadOptions::default() }, &|_| {})
            .unwrap();
    assert_eq!(l.rounds.len(), 60_000);
    assert!(l.rounds.round_ids.windows(2).all(|w| w[1] == w[0] + 1));
    assert_eq!(l.rounds.lat(59_999, 0), 60_000.5);
}

/// Runs `load` on a thread and fails (instead of hanging) when it takes over `secs`.
fn load_within(secs: u64, paths: Vec<PathBuf>, opts: LoadOptions) -> Result<Loaded, ReplayError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load(&paths, &providers(), opts, &|_| {}));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).expect("the reader did not finish in time")
}

fn round_line(id: i64, pad: usize) -> String {
    format!(
        "{{\"kind\":\"round\",\"round_id\":{id},\"pad\":\"{}\",\"providers\":{{\"runpod\":{{\"wall_s\":{id}.5,\"valid\":true}}}}}}\n",
        "x".repeat(pad)
    )
}

#[test]
fn lines_longer_than_a_block_are_read() {
    // 5 MiB and 9 MiB lines: longer than one 4 MiB block, and than two.
    let text = [round_line(1, 10), round_line(2, 5 << 20), round_line(3, 9 << 20), round_line(4, 10), "oops\n".to_string()].concat();
    let f = write(&text);
    let opts = LoadOptions { skip_bad_lines: false, threads: 2, ..LoadOptions::default() };
    let e = load_within(60, vec![f.path().to_path_buf()], opts).unwrap_err().to_string();
    assert!(e.contains(":5: malformed"), "line numbers after the long lines: {e}");
    let l = load_within(60, vec![f.path().to_path_buf()], LoadOptions { skip_bad_lines: true, ..opts }).unwrap();
    assert_eq!(l.rounds.round_ids, vec![1, 2, 3, 4]);
    assert_eq!(l.rounds.lat(2, 0), 3.5);
}

#[test]
fn a_line_over_the_cap_is_an_error_naming_it_or_skipped() {
    let text = [round_line(1, 10), round_line(2, 6 << 20), round_line(3, 10), "oops\n".to_string(), round_line(4, 3 << 20)].concat();
    let f = write(&text);
    let opts = LoadOptions { skip_bad_lines: false, threads: 2, max_line_bytes: 1 << 20 };
    let e = load_within(60, vec![f.path().to_path_buf()], opts).unwrap_err().to_string();
    assert!(e.contains(":2: line longer than 1048576 bytes"), "{e}");
    let l = load_within(60, vec![f.path().to_path_buf()], LoadOptions { skip_bad_lines: true, ..opts }).unwrap();
    assert_eq!(l.rounds.round_ids, vec![1, 3]);
    assert_eq!(l.skipped, 3, "{:?}", l.skipped_examples);
    let examples = l.skipped_examples.join("\n");
    assert!(examples.contains(":4: malformed") && examples.contains(":5: line longer"), "{examples}");
    // The last line, without a newline and over the cap.
    let f = write(&round_line(1, 10).to_string().add(&"y".repeat(3 << 20)));
    let e = load_within(60, vec![f.path().to_path_buf()], opts).unwrap_err().to_string();
    assert!(e.contains(":2: line longer"), "{e}");
}

trait Add {
    fn add(self, s: &str) -> String;
}
impl Add for String {
    fn add(mut self, s: &str) -> String {
        self.push_str(s);
        self
    }
}

#[test]
fn values_are_range_checked_naming_line_and_key() {
    let cases = [
        (r#""runpod":{"wall_s":-5,"valid":true}"#, "`providers.runpod.wall_s` is -5"),
        (r#""runpod":{"wall_s":1e308,"valid":true}"#, "`providers.runpod.wall_s` is 1e308"),
        (r#""runpod":{"wall_s":"6.5","valid":true}"#, "invalid type: string \"6.5\", expected a number or null for `wall_s`"),
        (r#""modal":{"wall_s":6,"valid":true,"queue_delay_ms":-1}"#, "`providers.modal.queue_delay_ms` is -1"),
        (r#""modal":{"wall_s":6,"valid":true,"metrics":{"modal_delay_ms":-1e308}}"#, "`providers.modal.metrics.modal_delay_ms`"),
    ];
    for (arm, expected) in cases {
        let f = write(&format!("{}{{\"kind\":\"round\",\"round_id\":2,\"providers\":{{{arm}}}}}\n", round_line(1, 0)));
        let e = load_file(f.path(), &providers()).unwrap_err().to_string();
        assert!(e.contains(&format!("{}:2: malformed record: ", f.path().display())) && e.contains(expected), "{arm}: {e}");
        assert!(!e.contains("line 1 column"), "serde's own line number would contradict the file's: {e}");
    }
    let f = write("{\"kind\":\"round\",\"round_id\":-3,\"providers\":{}}\n");
    assert!(load_file(f.path(), &providers()).unwrap_err().to_string().contains(":1: malformed record: `round_id` is -3"));
}

#[test]
fn a_repeated_round_id_is_an_error_naming_both_places() {
    let a = write(&[round_line(1, 0), round_line(2, 0)].concat());
    let b = write(&[round_line(3, 0), round_line(2, 0), round_line(2, 0), round_line(1, 0)].concat());
    let paths = vec![a.path().to_path_buf(), b.path().to_path_buf()];
    let e = load(&paths, &providers(), LoadOptions::default(), &|_| {}).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("{}:2: duplicate round_id 2 (first at {}:2); a repeated round would count twice", b.path().display(), a.path().display())
    );
    let l = load(&paths, &providers(), LoadOptions { skip_bad_lines: true, ..LoadOptions::default() }, &|_| {}).unwrap();
    assert_eq!(l.rounds.round_ids, vec![1, 2, 3]);
    assert_eq!(l.skipped, 3);
    assert_eq!(l.rounds.latency.len(), 9);
}

#[test]
fn non_utf8_lines_name_the_line_and_can_be_skipped() {
    let mut bytes = round_line(1, 0).into_bytes();
    bytes.extend_from_slice(b"{\"kind\":\"round\",\"round_id\":2,\"note\":\"\xff\xfe\",\"providers\":{}}\n");
    bytes.extend_from_slice(round_line(3, 0).as_bytes());
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(&bytes).unwrap();
    let e = load_file(f.path(), &providers()).unwrap_err().to_string();
    assert!(e.contains(":2: malformed record: not valid UTF-8 (invalid byte at column 38)"), "{e}");
    let l = load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: true, ..LoadOptions::default() }, &|_| {}).unwrap();
    assert_eq!((l.rounds.round_ids.clone(), l.skipped), (vec![1, 3], 1));
}

#[test]
fn a_number_out_of_range_is_a_typed_problem_naming_provider_and_field() {
    use crate::error::{ArmField, LineError};
    let f = write("{\"kind\":\"round\",\"round_id\":2,\"providers\":{\"modal\":{\"wall_s\":6,\"valid\":true,\"queue_delay_ms\":-1}}}\n");
    let e = load_file(f.path(), &providers()).unwrap_err();
    let Some(LineError::ArmOutOfRange { provider, field, value, max }) = e.problem() else { panic!("{e:?}") };
    assert_eq!((provider.as_str(), *field, *value, *max), ("modal", ArmField::QueueDelayMs, -1.0, MAX_QUEUE_MS));
    assert!(
        e.to_string().ends_with(":1: malformed record: `providers.modal.queue_delay_ms` is -1: expected milliseconds between 0 and 1e9"),
        "{e}"
    );
    let f = write("{\"kind\":\"round\",\"round_id\":-3,\"providers\":{}}\n");
    let e = load_file(f.path(), &providers()).unwrap_err();
    assert!(matches!(e.problem(), Some(LineError::IdOutOfRange { field: "round_id", id: -3, max: MAX_ID })), "{e:?}");
}
