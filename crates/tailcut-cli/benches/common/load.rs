//! What the HTTP benchmarks share about load: one pooled client, JSON POSTs (with a
//! bearer key where the gateway wants one), the paced open loop whose latencies count
//! from each request's scheduled send time, the closed loop, and percentiles.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::{Duration, Instant};

/// The load generator's HTTP client.
pub(crate) type Http = Client<HttpConnector, Full<Bytes>>;

/// A pooled client with `TCP_NODELAY`, keeping up to 4,096 idle connections.
pub(crate) fn client() -> Http {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new()).pool_timer(TokioTimer::new()).pool_max_idle_per_host(4096).build(c)
}

/// What one request sends: a JSON body, and `Authorization: Bearer <key>` when a key is set.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Post {
    pub(crate) body: &'static str,
    pub(crate) key: Option<&'static str>,
}

impl Post {
    /// The request to `url`.
    pub(crate) fn request(self, url: &str) -> http::Request<Full<Bytes>> {
        let mut req = http::Request::post(url).header("content-type", "application/json");
        if let Some(key) = self.key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        req.body(Full::new(Bytes::from_static(self.body.as_bytes()))).expect("a valid request")
    }

    /// One request; true when it answered 2xx and its body was read.
    pub(crate) async fn exchange(self, http: &Http, url: &str) -> bool {
        match http.request(self.request(url)).await {
            Ok(r) if r.status().is_success() => r.into_body().collect().await.is_ok(),
            _ => false,
        }
    }
}

/// Connections the open-loop client may use, like a service's client pool (and wrk2's
/// fixed connection count): a request waits for one, and its wait counts in its latency.
/// Unbounded, a short stall would turn into a storm of new connections.
const OPEN_LOOP_CONNECTIONS: usize = 64;

/// Open loop at `rate` req/s for `secs`: latencies (ms) from the scheduled send times, and
/// the number of failed requests. A dedicated thread paces the sends with `thread::sleep`
/// (tokio's timer rounds up to whole milliseconds, which would blur sub-millisecond
/// differences).
pub(crate) async fn open_loop(http: &Http, url: &str, post: Post, rate: u32, secs: f64) -> (Vec<f64>, usize) {
    let total = (f64::from(rate) * secs) as usize;
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let handle = tokio::runtime::Handle::current();
    let (http, url) = (http.clone(), url.to_string());
    let connections = std::sync::Arc::new(tokio::sync::Semaphore::new(OPEN_LOOP_CONNECTIONS));
    let pacer = std::thread::spawn(move || {
        let start = Instant::now() + Duration::from_millis(5);
        let mut tasks = Vec::with_capacity(total);
        for i in 0..total {
            let at = start + interval.mul_f64(i as f64);
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            let (http, url, connections) = (http.clone(), url.clone(), connections.clone());
            tasks.push(handle.spawn(async move {
                let _connection = connections.acquire_owned().await;
                let ok = post.exchange(&http, &url).await;
                (at.elapsed().as_secs_f64() * 1000.0, ok)
            }));
        }
        tasks
    });
    let tasks = loop {
        if pacer.is_finished() {
            break pacer.join().expect("the pacer thread");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (mut lat, mut errors) = (Vec::with_capacity(total), 0);
    for t in tasks {
        match t.await {
            Ok((ms, true)) => lat.push(ms),
            _ => errors += 1,
        }
    }
    (lat, errors)
}

/// Closed loop over `urls` (connection `c` sends to `urls[c % urls.len()]`), `conns`
/// connections, for `secs`: the requests that succeeded.
pub(crate) async fn closed_loop(http: &Http, urls: &[String], post: Post, conns: usize, secs: f64) -> u64 {
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..conns)
        .map(|c| {
            let (http, url) = (http.clone(), urls[c % urls.len()].clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < until {
                    n += u64::from(post.exchange(&http, &url).await);
                }
                n
            })
        })
        .collect();
    let mut n = 0;
    for t in tasks {
        n += t.await.unwrap_or(0);
    }
    n
}

/// The `q` quantile of `v` (nearest rank; sorts `v`); NaN when `v` is empty.
pub(crate) fn pct(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}

/// The median of `v`.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    pct(&mut v, 0.5)
}
