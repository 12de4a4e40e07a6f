//! The gateway as an attacker meets it: every jobs and OpenAI route authenticates before
//! it reveals anything, a job is visible only to its tenant, webhooks cannot reach
//! private addresses, slow or idle clients cannot hold connections, the connection cap
//! keeps `/healthz` answering, every refusal (405, 414, 431, malformed heads) is JSON,
//! and a streaming client that hangs up closes the upstream stream at once.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use serde_json::Value;
use std::time::{Duration, Instant};
use tailcut_testkit::config::{MEMORY_GATEWAY, SIM_PROVIDERS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ALICE: &str = "alice-secret-key";
const BOB: &str = "bob-secret-key";

fn config(gateway: &str) -> String {
    format!(
        r#"{MEMORY_GATEWAY}{gateway}
{SIM_PROVIDERS}{}{}[policies.fast]
kind = "single"
provider = "fastsim"
[policies.slow]
kind = "single"
provider = "slowsim"
[routes.jobs]
kind = "jobs"
policy = "fast"
[routes.slowjobs]
kind = "jobs"
policy = "slow"
"#,
        tailcut_testkit::config::openai_provider("up", "http://127.0.0.1:9/v1"),
        tailcut_testkit::config::single_chat_route("chat", "up")
    )
}

fn keyed() -> String {
    config(&format!(
        "keys = [{{ name = \"alice\", sha256 = \"{}\" }}, {{ name = \"bob\", sha256 = \"{}\" }}]",
        tailcut_gateway::tenancy::sha256_hex(ALICE),
        tailcut_gateway::tenancy::sha256_hex(BOB)
    ))
}

/// Serves `toml`; returns the gateway's base URL.
async fn gateway(toml: &str) -> String {
    common::serve_config(toml).await.trim_end_matches("/v1/chat/completions").to_string()
}

async fn json(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text:?}")))
}

#[tokio::test]
async fn jobs_need_a_key_and_are_visible_only_to_their_tenant() {
    let base = gateway(&keyed()).await;
    let http = reqwest::Client::new();
    let job = serde_json::json!({"route": "slowjobs", "input": {}});

    let (s, body) = json(http.post(format!("{base}/v1/jobs")).json(&job).send().await.unwrap()).await;
    assert_eq!(s, 401, "{body}");
    let (s, _) = json(http.post(format!("{base}/v1/jobs")).bearer_auth("wrong").json(&job).send().await.unwrap()).await;
    assert_eq!(s, 401);

    let (s, created) = json(http.post(format!("{base}/v1/jobs")).bearer_auth(ALICE).json(&job).send().await.unwrap()).await;
    assert_eq!(s, 202, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let hex = id.strip_prefix("job-").unwrap();
    assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "128 random bits: {id}");

    let url = format!("{base}/v1/jobs/{id}");
    for key in [None, Some("wrong")] {
        let mut get = http.get(&url);
        let mut del = http.delete(&url);
        if let Some(k) = key {
            get = get.bearer_auth(k);
            del = del.bearer_auth(k);
        }
        assert_eq!(json(get.send().await.unwrap()).await.0, 401, "GET with {key:?}");
        assert_eq!(json(del.send().await.unwrap()).await.0, 401, "DELETE with {key:?}");
    }
    // Another tenant: the same answer as for a job that does not exist.
    let (s, foreign) = json(http.get(&url).bearer_auth(BOB).send().await.unwrap()).await;
    let (s2, missing) = json(http.get(format!("{base}/v1/jobs/job-{}", "0".repeat(32))).bearer_auth(BOB).send().await.unwrap()).await;
    assert_eq!((s, s2), (404, 404));
    assert_eq!(foreign["error"]["code"], missing["error"]["code"]);
    let (s, _) = json(http.delete(&url).bearer_auth(BOB).send().await.unwrap()).await;
    assert_eq!(s, 404);
    let (_, row) = json(http.get(&url).bearer_auth(ALICE).send().await.unwrap()).await;
    assert_eq!(row["state"], "running", "bob's DELETE must not cancel alice's job");

    let (s, row) = json(http.delete(&url).bearer_auth(ALICE).send().await.unwrap()).await;
    assert_eq!((s, row["state"].as_str()), (200, Some("cancelled")), "{row}");

    // Ids are not sequential.
    let new_job = || async {
        let post = http.post(format!("{base}/v1/jobs")).bearer_auth(ALICE).json(&serde_json::json!({"route": "jobs", "input": {}}));
        json(post.send().await.unwrap()).await.1
    };
    let (a, b) = (new_job().await, new_job().await);
    assert_ne!(a["id"], b["id"]);
    assert_ne!(a["id"].as_str().unwrap()[..12], b["id"].as_str().unwrap()[..12]);
}

#[tokio::test]
async fn the_key_is_checked_before_the_route_and_a_second_authorization_header_is_refused() {
    let base = gateway(&keyed()).await;
    let http = reqwest::Client::new();
    let chat = |model: &str| serde_json::json!({"model": model, "messages": []});
    // No key and an unknown model: 401, not 404 (nothing is revealed without a key).
    let (s, body) = json(http.post(format!("{base}/v1/chat/completions")).json(&chat("nope")).send().await.unwrap()).await;
    assert_eq!(s, 401, "{body}");
    let (s, _) = json(http.get(format!("{base}/v1/models")).send().await.unwrap()).await;
    assert_eq!(s, 401);
    let (s, _) = json(http.post(format!("{base}/v1/chat/completions")).bearer_auth(ALICE).json(&chat("nope")).send().await.unwrap()).await;
    assert_eq!(s, 404);
    let body = r#"{"model":"nope","messages":[]}"#;
    let reply = raw(
        &base,
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ALICE}\r\nauthorization: Bearer {BOB}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("more than one Authorization header"), "{reply}");
}

#[tokio::test]
async fn no_keys_without_an_explicit_auth_none_does_not_serve() {
    let parsed = tailcut_config::Config::parse(&config(""), "test").unwrap();
    let refused = tailcut_gateway::AppState::new(parsed, None).unwrap_err().to_string();
    assert!(refused.contains("auth = \"none\""), "{refused}");
    let http = reqwest::Client::new();
    let open = gateway(&config("auth = \"none\"")).await;
    let (s, _) =
        json(http.post(format!("{open}/v1/jobs")).json(&serde_json::json!({"route": "jobs", "input": {}})).send().await.unwrap()).await;
    assert_eq!(s, 202);
}

/// A server that counts the POSTs it receives.
async fn counting_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().fallback(move || {
        h.fetch_add(1, Ordering::SeqCst);
        async { "ok" }
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    (format!("http://{addr}"), hits)
}

#[tokio::test]
async fn webhooks_to_private_addresses_or_other_schemes_are_refused_unless_allowed() {
    use std::sync::atomic::Ordering;
    let (admin, hits) = counting_server().await;
    let base = gateway(&config("auth = \"none\"")).await;
    let http = reqwest::Client::new();
    for hook in ["file:///etc/passwd".to_string(), format!("{admin}/internal/admin"), "http://169.254.169.254/latest".into()] {
        let (s, body) = json(
            http.post(format!("{base}/v1/jobs?wait=5"))
                .json(&serde_json::json!({"route": "jobs", "input": {}, "webhook": hook}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 400, "{hook}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("webhook"), "{body}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing reached the internal server");

    let allowed = gateway(&config("auth = \"none\"\nwebhook_allow_private = true")).await;
    let (s, row) = json(
        http.post(format!("{allowed}/v1/jobs?wait=5"))
            .json(&serde_json::json!({"route": "jobs", "input": {}, "webhook": format!("{admin}/hook")}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, row["state"].as_str()), (200, Some("succeeded")), "{row}");
    let until = Instant::now() + Duration::from_secs(5);
    while hits.load(Ordering::SeqCst) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1, "explicitly allowed: delivered");
}

/// A webhook is looked up only for a caller authorized for the route, and a refusal
/// names no address (nor whether the host resolved): the check is no oracle of the
/// gateway's internal DNS.
#[tokio::test]
async fn a_webhook_is_checked_after_authorization_and_its_refusal_names_no_address() {
    let base = gateway(&config(&format!(
        "keys = [{{ name = \"alice\", sha256 = \"{}\", routes = [\"jobs\"] }}]",
        tailcut_gateway::tenancy::sha256_hex(ALICE)
    )))
    .await;
    let http = reqwest::Client::new();
    let post = |route: &str, hook: &str| {
        http.post(format!("{base}/v1/jobs")).bearer_auth(ALICE).json(&serde_json::json!({"route": route, "input": {}, "webhook": hook}))
    };
    // A route the key may not use: 403, whatever the webhook.
    for hook in ["http://localhost:9/hook", "http://127.0.0.1:9/hook", "http://no-such-host.invalid/hook"] {
        let (s, body) = json(post("slowjobs", hook).send().await.unwrap()).await;
        assert_eq!(s, 403, "{hook}: the route is refused before the webhook is looked up: {body}");
    }
    // Its own route: a refusal that says what, and nothing of where.
    for hook in ["http://localhost:9/hook", "http://[::1]:9/hook", "http://10.1.2.3/hook", "http://no-such-host.invalid/hook"] {
        let (s, body) = json(post("jobs", hook).send().await.unwrap()).await;
        assert_eq!(s, 400, "{hook}: {body}");
        assert_eq!(body["error"]["message"], "`webhook`: refused: not a public address", "{hook}");
    }
}

#[tokio::test]
async fn deleting_a_missing_job_answers_at_once() {
    let base = gateway(&config("auth = \"none\"")).await;
    let t = Instant::now();
    let r = reqwest::Client::new().delete(format!("{base}/v1/jobs/job-missing")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
}

/// Sends `request` on a new connection and reads until the server closes it (or 10 s).
async fn raw(base: &str, request: &str) -> String {
    let mut tcp = TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The JSON body of a raw reply.
fn raw_body(reply: &str) -> Value {
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not a JSON body: {reply:?}"))
}

#[tokio::test]
async fn every_refusal_has_a_json_body() {
    let base = gateway(&config("auth = \"none\"")).await;
    let cases = [
        ("GET /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".to_string(), "405"),
        (format!("GET /{} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n", "a".repeat(9000)), "414"),
        (
            format!(
                "GET /healthz HTTP/1.1\r\nhost: x\r\n{}connection: close\r\n\r\n",
                (0..150).map(|i| format!("x-h{i}: v\r\n")).collect::<String>()
            ),
            "431",
        ),
        (format!("GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: {}\r\nconnection: close\r\n\r\n", "v".repeat(40_000)), "431"),
        ("GARBAGE\r\n\r\n".to_string(), "400"),
        ("GET /healthz HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n".to_string(), "400"),
        ("GET /healthz HTTP/1.1\r\nconnection: close\r\n\r\n".to_string(), "400"),
        (format!("GET /healthz HTTP/1.1\r\nhost: x\r\nx-huge: {}\r\n\r\n", "v".repeat(500_000)), "431"),
        ("POST /v1/jobs?wait=abc HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_string(), "400"),
    ];
    for (request, status) in cases {
        let reply = raw(&base, &request).await;
        assert!(reply.starts_with(&format!("HTTP/1.1 {status}")), "{status}: {}", &reply[..reply.len().min(200)]);
        let body = raw_body(&reply);
        assert!(body["error"]["message"].is_string(), "{body}");
    }
}

/// Waits until the server closes `tcp` (a read returns 0 or fails); how long it took.
async fn time_to_close(tcp: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit.saturating_sub(t.elapsed()), tcp.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(t.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn a_head_dribbled_a_byte_at_a_time_is_cut_off_at_the_head_timeout() {
    let base = gateway(&config("auth = \"none\"\nheader_read_timeout_s = 1\nidle_timeout_s = 30")).await;
    let mut tcp = TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    let started = Instant::now();
    let head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut cut = None;
    for b in head {
        if tcp.write_all(&[*b]).await.is_err() {
            cut = Some(started.elapsed());
            break;
        }
        let mut probe = [0u8; 64];
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(100), tcp.read(&mut probe)).await {
            if matches!(r, Ok(0) | Err(_)) {
                cut = Some(started.elapsed());
                break;
            }
        }
    }
    let cut = cut.expect("the connection was still open after the whole dribble");
    assert!(cut >= Duration::from_millis(900) && cut < Duration::from_secs(3), "cut after {cut:?}");
}

#[tokio::test]
async fn idle_connections_close_after_the_idle_timeout_and_slow_bodies_get_a_408() {
    let base = gateway(&config("auth = \"none\"\nidle_timeout_s = 1\nbody_read_timeout_s = 1")).await;
    let mut idle = TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    let closed = time_to_close(&mut idle, Duration::from_secs(5)).await.expect("an idle connection was kept");
    assert!(closed >= Duration::from_millis(900), "{closed:?}");

    // A connection that was used is idle again after its reply.
    let mut used = TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    used.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let closed = time_to_close(&mut used, Duration::from_secs(5)).await.expect("a used idle connection was kept");
    assert!(closed >= Duration::from_millis(900), "{closed:?}");

    let mut slow = TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    slow.write_all(b"POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"ro")
        .await
        .unwrap();
    let t = Instant::now();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut out)).await;
    let reply = String::from_utf8_lossy(&out);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(raw_body(&reply)["error"]["code"], "body_timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_idle_connections_make_room_and_healthz_answers() {
    let base = gateway(&config("auth = \"none\"\nmax_connections = 20\nidle_timeout_s = 60")).await;
    let addr = base.trim_start_matches("http://").to_string();
    // Hold far more idle connections than the cap.
    let mut idle = Vec::new();
    for _ in 0..60 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let mut answered = 0;
    for _ in 0..10 {
        if let Ok(r) = http.get(format!("{base}/healthz")).timeout(Duration::from_secs(2)).send().await {
            if r.status().is_success() {
                answered += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(answered >= 9, "/healthz answered {answered} of 10 times with 60 idle connections held");
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    let open: usize = metrics.lines().find_map(|l| l.strip_prefix("tailcut_connections ")).unwrap().trim().parse().unwrap();
    assert!(open <= 20 + 8, "open connections {open} over the ceiling");
    assert!(metrics.contains("tailcut_connections_limit 20"), "{metrics}");
    drop(idle);
}

/// An upstream that streams one content token, then waits 3 s before the next; reports
/// when the gateway closed the connection.
async fn slow_token_upstream() -> (String, tokio::sync::oneshot::Receiver<Instant>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut tcp, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got = Vec::new();
        // Read the head and the body (content-length).
        loop {
            let n = tcp.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_lowercase();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
                if body.len() >= len {
                    break;
                }
            }
        }
        let chunk = |text: &str| {
            let data = format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n");
            format!("{:x}\r\n{data}\r\n", data.len())
        };
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        tcp.write_all(format!("{head}{}", chunk("tok0")).as_bytes()).await.unwrap();
        // Wait for the next token's time, watching for the gateway hanging up.
        let closed = tokio::time::timeout(Duration::from_secs(3), async {
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return Instant::now(),
                    Ok(_) => {}
                }
            }
        })
        .await;
        if let Ok(at) = closed {
            let _ = tx.send(at);
        } else {
            let _ = tcp.write_all(chunk("tok1").as_bytes()).await;
            let closed_late = loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break Instant::now(),
                    Ok(_) => {}
                }
            };
            let _ = tx.send(closed_late);
        }
    });
    (format!("http://{addr}/v1"), rx)
}

/// On the fast path, and on hyper's (a query string hands the request over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_client_that_hangs_up_closes_the_upstream_stream_at_once() {
    use futures::StreamExt;
    for query in ["", "?via=hyper"] {
        let (upstream, closed) = slow_token_upstream().await;
        let toml = tailcut_testkit::config::one_provider_gateway(&upstream, "");
        let url = common::serve_config(&toml).await;
        let resp = reqwest::Client::new()
            .post(format!("{url}{query}"))
            .json(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let mut stream = resp.bytes_stream();
        let first = stream.next().await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("tok0"));
        drop(stream);
        let hung_up = Instant::now();
        let closed = tokio::time::timeout(Duration::from_secs(10), closed).await.unwrap().unwrap();
        let late = closed.saturating_duration_since(hung_up);
        assert!(late < Duration::from_secs(1), "{query}: the upstream stream was closed {late:?} after the client hung up");
    }
}
