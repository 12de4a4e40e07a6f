//! What an agent is: its kind and settings, the measurement window every agent of a run
//! shares, the samples it records and why it can fail, and the shared start instant
//! (Unix milliseconds) agents in separate processes wait for.

mod error;

pub use error::{AgentError, BadAgent, NoDevice, Unsupported};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What an agent runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// Small complex FFTs (rustfft): latency-sensitive.
    Fft,
    /// Large single-precision matrix multiply (matrixmultiply): heavy and steady.
    Gemm,
    /// Streaming memory copies: bandwidth-bound.
    Membw,
    /// 2-D complex FFT on a CUDA device (cuFFT), timed with CUDA events.
    CudaFft,
    /// Square SGEMM on a CUDA device (cuBLAS), timed with CUDA events.
    CudaGemm,
    /// Requests to an OpenAI-compatible endpoint at a fixed rate (latency, TTFT, TPOT).
    Http,
    /// A tiny transformer's prefill over a prompt: compute-bound bursts (one iteration is
    /// one prompt, i.e. a time to first token).
    LlmPrefill,
    /// The same transformer's token loop over a growing key-value cache: bound by memory
    /// bandwidth (one iteration is one output token, i.e. a time per output token).
    LlmDecode,
    /// Model calls (a prefill, then output tokens) separated by think time; records time
    /// to first token and time per output token of every call.
    AgentLoop,
}

impl AgentKind {
    /// Every kind's name, in the order `--help` lists them.
    pub const NAMES: &'static str = "fft, gemm, membw, llm-prefill, llm-decode, agent-loop, cuda-fft, cuda-gemm or http";

    /// Parses `fft`, `gemm`, `membw`, `llm-prefill`, `llm-decode`, `agent-loop`,
    /// `cuda-fft`, `cuda-gemm`, `http`.
    pub fn parse(s: &str) -> Option<AgentKind> {
        Some(match s {
            "fft" => AgentKind::Fft,
            "gemm" => AgentKind::Gemm,
            "membw" => AgentKind::Membw,
            "cuda-fft" => AgentKind::CudaFft,
            "cuda-gemm" => AgentKind::CudaGemm,
            "http" => AgentKind::Http,
            "llm-prefill" => AgentKind::LlmPrefill,
            "llm-decode" => AgentKind::LlmDecode,
            "agent-loop" => AgentKind::AgentLoop,
            _ => return None,
        })
    }

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Fft => "fft",
            AgentKind::Gemm => "gemm",
            AgentKind::Membw => "membw",
            AgentKind::CudaFft => "cuda-fft",
            AgentKind::CudaGemm => "cuda-gemm",
            AgentKind::Http => "http",
            AgentKind::LlmPrefill => "llm-prefill",
            AgentKind::LlmDecode => "llm-decode",
            AgentKind::AgentLoop => "agent-loop",
        }
    }

    /// Default problem size: FFT points, matrix side, MiB copied, prompt tokens
    /// (llm-prefill), context length (llm-decode), output tokens per call (agent-loop), or 0.
    pub fn default_size(self) -> usize {
        match self {
            AgentKind::Fft => 4096,
            AgentKind::Gemm => 768,
            AgentKind::Membw => 16,
            AgentKind::CudaFft => 4096,
            AgentKind::CudaGemm => 8192,
            AgentKind::Http => 0,
            AgentKind::LlmPrefill => 32,
            AgentKind::LlmDecode => 512,
            AgentKind::AgentLoop => 16,
        }
    }

    /// Whether this kind needs a CUDA device.
    pub fn is_cuda(self) -> bool {
        matches!(self, AgentKind::CudaFft | AgentKind::CudaGemm)
    }
}

/// One agent's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// Workload.
    pub kind: AgentKind,
    /// Problem size (see [`AgentKind::default_size`]).
    pub size: usize,
    /// FFTs per iteration (fft only).
    pub batch: usize,
    /// CUDA device index or MIG/GPU UUID (CUDA kinds).
    pub device: Option<String>,
    /// Endpoint base URL (http).
    pub url: Option<String>,
    /// Model name sent to the endpoint (http).
    pub model: Option<String>,
    /// Requests per second (http).
    pub rate_per_s: f64,
    /// Think time between model calls, ms (agent-loop).
    #[serde(default)]
    pub think_ms: u64,
}

impl AgentSpec {
    /// Defaults for a kind.
    pub fn new(kind: AgentKind) -> AgentSpec {
        AgentSpec {
            kind,
            size: kind.default_size(),
            batch: if kind == AgentKind::Fft { 64 } else { 1 },
            device: None,
            url: None,
            model: None,
            rate_per_s: 5.0,
            think_ms: if kind == AgentKind::AgentLoop { 10 } else { 0 },
        }
    }

    /// Parses `kind`, `kind:size` or `kind:size x batch` (e.g. `gemm:512`, `fft:4096x8`).
    pub fn parse(text: &str) -> Result<AgentSpec, AgentError> {
        let (kind, rest) = text.split_once(':').map_or((text, None), |(k, r)| (k, Some(r)));
        let kind =
            AgentKind::parse(kind.trim()).ok_or_else(|| BadAgent::UnknownKind { text: text.to_string(), expected: AgentKind::NAMES })?;
        let mut spec = AgentSpec::new(kind);
        if let Some(rest) = rest {
            let (size, batch) = rest.split_once('x').map_or((rest, None), |(s, b)| (s, Some(b)));
            spec.size = size.trim().parse().map_err(|_| BadAgent::NotWhole { text: text.to_string(), field: "size" })?;
            if let Some(b) = batch {
                spec.batch = b.trim().parse().map_err(|_| BadAgent::NotWhole { text: text.to_string(), field: "batch" })?;
            }
        }
        Ok(spec)
    }
}

/// When to start and how long to measure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Unix time in ms at which every agent of a run starts its warm-up.
    pub start_at_unix_ms: u64,
    /// Warm-up (samples discarded).
    pub warmup: Duration,
    /// Measurement window.
    pub duration: Duration,
    /// Stop after this many measured iterations, if that comes first.
    #[serde(default)]
    pub max_iterations: Option<u64>,
}

impl Window {
    /// Sleeps until the start, runs `iteration` through the warm-up, then times each call
    /// until the window ends or `max_iterations` calls are measured: the samples (ns) and
    /// the measured window's length (ns).
    pub fn time_loop(&self, mut iteration: impl FnMut()) -> (Vec<u64>, u64) {
        sleep_until_unix_ms(self.start_at_unix_ms);
        let warm_end = Instant::now() + self.warmup;
        while Instant::now() < warm_end {
            iteration();
        }
        let start = Instant::now();
        let end = start + self.duration;
        let mut samples = Vec::with_capacity(4096);
        let cap = self.max_iterations.unwrap_or(u64::MAX) as usize;
        loop {
            let t0 = Instant::now();
            if t0 >= end || samples.len() >= cap {
                break;
            }
            iteration();
            samples.push(t0.elapsed().as_nanos() as u64);
        }
        (samples, start.elapsed().as_nanos() as u64)
    }
}

/// What an agent recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// Workload.
    pub kind: AgentKind,
    /// The spec it ran.
    pub spec: AgentSpec,
    /// CPU it was pinned to, if any.
    pub cpu: Option<usize>,
    /// Per-iteration latency, ns.
    pub samples_ns: Vec<u64>,
    /// Time to first token per request, ns (http only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_ns: Vec<u64>,
    /// Time per output token per model call, ns: (call latency − TTFT) / (tokens − 1)
    /// (http, agent-loop).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpot_ns: Vec<u64>,
    /// Length of the measurement window actually covered, ns.
    pub window_ns: u64,
    /// Failed iterations (http errors).
    #[serde(default)]
    pub errors: u64,
    /// Agent name within the experiment (set by the coordinator or `--name`).
    #[serde(default)]
    pub name: Option<String>,
    /// `solo` or `shared` (set by the coordinator or `--arm`).
    #[serde(default)]
    pub arm: Option<String>,
    /// Trial number.
    #[serde(default)]
    pub trial: Option<u32>,
}

/// Current Unix time in ms.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Sleeps until the Unix-ms instant (returns at once if it has passed).
pub fn sleep_until_unix_ms(t: u64) {
    let now = unix_ms();
    if t > now {
        std::thread::sleep(Duration::from_millis(t - now));
    }
}
