//! The plain-HTTP client against real local servers: keep-alive, bodies, timeouts,
//! stale connections, and errors that say why in words and in type.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A one-connection HTTP/1.1 server that answers every request with `reply`.
async fn server(reply: &'static [u8]) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let mut seen = Vec::new();
        loop {
            let n = s.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
            // Headers and a small body arrive together here; answer once per request.
            if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                seen.clear();
                s.write_all(reply).await.unwrap();
            }
        }
    });
    format!("http://{addr}/v1/chat/completions")
}

#[tokio::test]
async fn posts_and_reads_the_reply_over_one_kept_alive_connection() {
    let url = server(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    let c = PlainHttp::new(Duration::from_secs(5));
    for _ in 0..3 {
        let (status, body) = c.post(url.parse().unwrap(), &[], Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!((status.as_u16(), &body[..]), (200, &b"ok"[..]));
    }
}

#[tokio::test]
async fn streams_a_chunked_reply_as_it_arrives() {
    let url = server(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n").await;
    let c = PlainHttp::new(Duration::from_secs(5));
    let (status, mut body) = c.post_streaming(url.parse().unwrap(), &[], Bytes::from_static(b"{}")).await.unwrap();
    assert_eq!(status.as_u16(), 200);
    let mut all = Vec::new();
    while let Some(chunk) = futures::StreamExt::next(&mut body).await {
        all.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(all, b"hello world");
}

#[tokio::test]
async fn a_replaced_client_s_pool_is_dropped_when_the_thread_opens_the_next() {
    let url = server(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    let old = PlainHttp::new(Duration::from_secs(5));
    old.post(url.parse().unwrap(), &[], Bytes::new()).await.unwrap();
    let before = pool::pools_here();
    drop(old);
    let url2 = server(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    let new = PlainHttp::new(Duration::from_secs(5));
    new.post(url2.parse().unwrap(), &[], Bytes::new()).await.unwrap();
    assert_eq!(pool::pools_here(), before, "the retired pool was replaced, not kept beside the new one");
}

#[tokio::test]
async fn refused_connections_name_the_cause_but_not_the_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let c = PlainHttp::new(Duration::from_secs(5));
    let uri: Uri = format!("http://127.0.0.1:{port}/v1/secret-endpoint").parse().unwrap();
    let e = c.post(uri, &[], Bytes::new()).await.unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.starts_with("error sending request") && e.to_lowercase().contains("refused"), "{e}");
    assert!(!e.contains("secret-endpoint") && !e.contains(&port.to_string()), "{e}");
}

#[tokio::test]
async fn a_silent_upstream_times_out() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let _held = tokio::spawn(async move {
        let (_s, _) = l.accept().await.unwrap();
        std::future::pending::<()>().await;
    });
    let c = PlainHttp::new(Duration::from_millis(200));
    let e = c.post(format!("http://{addr}/x").parse().unwrap(), &[], Bytes::new()).await.unwrap_err();
    assert!(matches!(e, ClientError::TimedOut { after } if after == Duration::from_millis(200)), "{e:?}");
    assert_eq!(e.to_string(), "operation timed out after 0.2 s");
}

/// What a scripted server saw: connections accepted and the requests' raw bytes.
#[derive(Default)]
struct Seen {
    connections: std::sync::atomic::AtomicUsize,
    requests: std::sync::Mutex<Vec<Vec<u8>>>,
}

/// An HTTP/1.1 server answering the n-th request (over all connections) with
/// `replies[n]` (the last one repeats), written in two pieces with a pause between so
/// the client must read more than once; closes a connection after a reply when
/// `close_after` holds. Reads a request up to its blank line plus content-length.
async fn scripted(replies: Vec<&'static [u8]>, close_after: bool) -> (String, Arc<Seen>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let (replies, seen2) = (Arc::new(replies), seen.clone());
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else { return };
            seen2.connections.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (replies, seen, served) = (replies.clone(), seen2.clone(), served.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 65536];
                loop {
                    let n = s.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if buf.len() < end + 4 + len {
                        continue;
                    }
                    seen.requests.lock().unwrap().push(buf.drain(..end + 4 + len).collect());
                    let i = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let reply = replies[i.min(replies.len() - 1)];
                    let cut = reply.len() / 2;
                    s.write_all(&reply[..cut]).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    s.write_all(&reply[cut..]).await.unwrap();
                    if close_after {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}/v1/chat/completions"), seen)
}

async fn post_once(c: &PlainHttp, url: &str, body: &'static [u8]) -> Result<(u16, String), ClientError> {
    let (status, bytes) = c.post(url.parse().unwrap(), &[], Bytes::from_static(body)).await?;
    Ok((status.as_u16(), String::from_utf8_lossy(&bytes).into_owned()))
}

#[tokio::test]
async fn reads_each_framing_and_skips_interim_replies() {
    let cases: [(&'static [u8], &str); 5] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", "hello world"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: t\r\n\r\n",
            "hello world",
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", "ok"),
        (b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the close", "until the close"),
        (b"HTTP/1.0 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy", "busy"),
    ];
    for (reply, body) in cases {
        let (url, _) = scripted(vec![reply], true).await;
        let c = PlainHttp::new(Duration::from_secs(5));
        let (status, got) = post_once(&c, &url, b"{}").await.unwrap();
        assert_eq!(got, body, "{}", String::from_utf8_lossy(reply));
        assert!(status == 200 || status == 503);
    }
}

#[tokio::test]
async fn keeps_connections_alive_and_sends_the_request_as_given() {
    let (url, seen) = scripted(vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"], false).await;
    let c = PlainHttp::new(Duration::from_secs(5));
    let headers = json_post_headers(Some("req-7"), None);
    let big: &'static [u8] = Box::leak(vec![b'x'; COALESCE_BODY + 10].into_boxed_slice());
    for body in [&b"{\"a\":1}"[..], big, b"{}"] {
        let (status, got) = c.post(url.parse().unwrap(), &headers, Bytes::from_static(body)).await.unwrap();
        assert_eq!((status.as_u16(), &got[..]), (200, &b"ok"[..]));
    }
    assert_eq!(seen.connections.load(std::sync::atomic::Ordering::SeqCst), 1, "one kept-alive connection");
    let requests = seen.requests.lock().unwrap();
    let first = String::from_utf8_lossy(&requests[0]).to_string();
    assert!(first.starts_with("POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:"), "{first}");
    assert!(first.contains("\r\ncontent-type: application/json\r\n") && first.contains("\r\nx-request-id: req-7\r\n"), "{first}");
    assert!(first.ends_with("content-length: 7\r\n\r\n{\"a\":1}"), "{first}");
    assert!(requests[1].ends_with(big), "a large body follows its head whole");
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_replaced_without_an_error() {
    // The server closes after every reply, without saying so: once the runtime has
    // seen the close, the pooled connection is passed over for a new one.
    let (url, seen) = scripted(vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"], true).await;
    let c = PlainHttp::new(Duration::from_secs(5));
    for _ in 0..3 {
        assert_eq!(post_once(&c, &url, b"{}").await.unwrap(), (200, "ok".to_string()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.connections.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(seen.requests.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_request_that_reached_the_server_is_never_sent_twice() {
    // The server reads each request and hangs up without a reply: on a fresh
    // connection and on a pooled one, the request fails and is not sent again.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        // The first connection answers once, then hangs up on its next request.
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let _ = s.read(&mut buf).await;
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
        let _ = s.read(&mut buf).await;
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop(s);
        // Any later connection: read the request, hang up.
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.read(&mut buf).await;
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let url = format!("http://{addr}/v1/chat/completions");
    let c = PlainHttp::new(Duration::from_secs(5));
    assert_eq!(post_once(&c, &url, b"{}").await.unwrap(), (200, "ok".to_string()));
    let e = post_once(&c, &url, b"{}").await.unwrap_err();
    assert!(matches!(e, ClientError::Reply { source: HeadError::ClosedBeforeReply }), "{e:?}");
    assert_eq!(e.to_string(), "error sending request: connection closed before message completed");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2, "the hung-up request was not resent");
    let e = post_once(&c, &url, b"{}").await.unwrap_err().to_string();
    assert!(e.contains("closed before message completed"), "{e}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn replies_that_do_not_close_cleanly_are_not_reused() {
    let (url, seen) = scripted(vec![b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"], false).await;
    let c = PlainHttp::new(Duration::from_secs(5));
    for _ in 0..2 {
        assert_eq!(post_once(&c, &url, b"{}").await.unwrap(), (200, "ok".to_string()));
    }
    assert_eq!(seen.connections.load(std::sync::atomic::Ordering::SeqCst), 2, "`connection: close` is honoured");
    assert_eq!(pool::idle_here(), 0);
}

#[tokio::test]
async fn malformed_replies_are_errors_not_panics() {
    let cases: [(&'static [u8], &str); 5] = [
        (b"garbage\r\n\r\n", "error sending request: malformed reply head: invalid HTTP version"),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok",
            "error sending request: conflicting content-length values in reply",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
            "error reading response body: reply ended 5 bytes before its declared length",
        ),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "error reading response body: invalid chunk size"),
        (b"HTTP/1.1 200 OK\r\ncontent-len", "error sending request: connection closed before the reply head ended"),
    ];
    for (reply, expected) in cases {
        let (url, _) = scripted(vec![reply], true).await;
        let c = PlainHttp::new(Duration::from_secs(5));
        let e = post_once(&c, &url, b"{}").await.unwrap_err();
        assert_eq!(e.to_string(), expected);
    }
    let (url, _) = scripted(vec![b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"], true).await;
    let e = post_once(&PlainHttp::new(Duration::from_secs(5)), &url, b"{}").await.unwrap_err();
    assert!(matches!(e, ClientError::Body { source: BodyError::Short { left: 5 } }), "{e:?}");
}

#[tokio::test]
async fn a_stream_read_to_its_end_returns_its_connection_and_a_dropped_one_closes_it() {
    let reply: &'static [u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let (url, seen) = scripted(vec![reply], false).await;
    let c = PlainHttp::new(Duration::from_secs(5));
    let (_, mut body) = c.post_streaming(url.parse().unwrap(), &[], Bytes::new()).await.unwrap();
    while futures::StreamExt::next(&mut body).await.is_some() {}
    assert_eq!(pool::idle_here(), 1);
    let (_, body) = c.post_streaming(url.parse().unwrap(), &[], Bytes::new()).await.unwrap();
    assert_eq!(pool::idle_here(), 0, "the idle connection was reused");
    drop(body);
    assert_eq!(pool::idle_here(), 0, "a stream dropped midway is closed, not pooled");
    assert_eq!(seen.connections.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_stream_that_breaks_off_says_where() {
    let reply: &'static [u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n5\r\nab";
    let (url, _) = scripted(vec![reply], true).await;
    let c = PlainHttp::new(Duration::from_secs(5));
    let (_, mut body) = c.post_streaming(url.parse().unwrap(), &[], Bytes::new()).await.unwrap();
    let mut items = Vec::new();
    while let Some(item) = futures::StreamExt::next(&mut body).await {
        items.push(item);
    }
    let e = items.pop().unwrap().unwrap_err();
    assert!(matches!(e, ClientError::Stream { source: BodyError::Ended { at: "inside a chunk" } }), "{e:?}");
    assert_eq!(e.to_string(), "error reading a body from connection: reply ended inside a chunk");
    assert!(items.iter().all(Result::is_ok));
}

#[test]
fn splits_plain_base_urls_and_refuses_what_a_request_line_cannot_carry() {
    assert_eq!(split_http_base("http://10.0.0.7:8000/v1/"), Some(("10.0.0.7:8000", "/v1")));
    assert_eq!(split_http_base("http://vllm.svc"), Some(("vllm.svc", "")));
    assert_eq!(split_http_base("http://[::1]:8000/v1"), Some(("[::1]:8000", "/v1")));
    for refused in ["https://a/v1", "http://", "http://user@a/v1", "http://a/v1?x=1", "http://a/v 1", "ftp://a"] {
        assert_eq!(split_http_base(refused), None, "{refused}");
    }
}
