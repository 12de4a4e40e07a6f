//! The LLM-like CPU agents: a tiny, randomly initialised decoder-only transformer (no
//! weights to download) whose two phases have the compute and bandwidth profile of real
//! inference.
//!
//! - **Prefill** (`llm-prefill`) pushes a whole prompt through every layer at once: matrix
//!   multiplies over `tokens × d_model` activations (matrixmultiply's SGEMM) plus causal
//!   attention, about `2 · tokens` floating-point operations per weight read — compute-bound.
//!   One iteration is one prompt: a time to first token.
//! - **Decode** (`llm-decode`) produces one token at a time: every layer is a
//!   vector × matrix product that reads all its weights for two operations per weight, and
//!   attention reads the whole key-value cache, which grows by one position per token —
//!   bound by memory bandwidth. One iteration is one output token. When the cache is full
//!   a new sequence starts (after a prefill of one token).
//! - **Agent loop** (`agent-loop`): model calls — a prefill of a short prompt, then
//!   `size` output tokens — separated by think time, recording each call's time to first
//!   token (the prefill and the first token) and time per output token.
//!
//! The model has [`LAYERS`] layers of width [`D_MODEL`] and feed-forward width [`D_FF`]:
//! about 25 MB of f32 weights, more than a core's L2, so decode streams them from the
//! shared cache or memory every token.

use matrixmultiply::sgemm;
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::agent::{sleep_until_unix_ms, AgentError, AgentKind, AgentSpec, BadAgent, Unsupported, Window};

/// Model width.
pub const D_MODEL: usize = 512;
/// Feed-forward width.
pub const D_FF: usize = 2048;
/// Layers.
pub const LAYERS: usize = 2;
/// Prompt tokens of an agent-loop call.
pub const AGENT_PROMPT: usize = 32;

struct Layer {
    /// d × 3d: queries, keys and values.
    wqkv: Vec<f32>,
    /// d × d.
    wo: Vec<f32>,
    /// d × ff.
    w1: Vec<f32>,
    /// ff × d.
    w2: Vec<f32>,
    /// Key cache, ctx × d.
    k: Vec<f32>,
    /// Value cache, ctx × d.
    v: Vec<f32>,
}

/// The tiny transformer with its key-value cache.
pub struct Model {
    layers: Vec<Layer>,
    ctx: usize,
    /// Positions filled in the cache.
    pos: usize,
    seed: u64,
}

fn random(seed: &mut u64, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (((*seed >> 40) as f32) / ((1u64 << 24) as f32) - 0.5) * 2.0 * scale
        })
        .collect()
}

/// `c (m×n) = a (m×k) · b (k×n)`, all row-major with their natural strides, or with `b`
/// read transposed from a row-major `n × k` buffer when `b_transposed`.
#[allow(unsafe_code)]
fn matmul(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], b_transposed: bool, c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let (rsb, csb) = if b_transposed { (1, k as isize) } else { (n as isize, 1) };
    // SAFETY: the asserts above guarantee each buffer holds the m×k, k×n and m×n elements
    // the strides address (b transposed: row j of the n×k buffer is column j of b), and c
    // is a distinct mutable buffer.
    unsafe {
        sgemm(m, k, n, 1.0, a.as_ptr(), k as isize, 1, b.as_ptr(), rsb, csb, 0.0, c.as_mut_ptr(), n as isize, 1);
    }
}

/// `y (n) = x (k) · w (k×n)`: one pass over `w`, two operations per weight.
fn vecmat(x: &[f32], w: &[f32], n: usize, y: &mut [f32]) {
    y[..n].iter_mut().for_each(|v| *v = 0.0);
    for (xi, row) in x.iter().zip(w.chunks_exact(n)) {
        for (yj, wij) in y[..n].iter_mut().zip(row) {
            *yj += xi * wij;
        }
    }
}

/// RMS normalisation in place (keeps activations bounded over any number of steps).
fn rms_norm(x: &mut [f32]) {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len().max(1) as f32;
    let inv = 1.0 / (ms + 1e-6).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("layers", &self.layers.len()).field("ctx", &self.ctx).field("pos", &self.pos).finish()
    }
}

impl Model {
    /// A model with a key-value cache of `ctx` positions (at least 2).
    pub fn new(ctx: usize) -> Model {
        let ctx = ctx.max(2);
        let mut seed = 0x07a1_1c07_u64;
        let d = D_MODEL;
        let scale = 1.0 / (d as f32).sqrt();
        let layers = (0..LAYERS)
            .map(|_| Layer {
                wqkv: random(&mut seed, d * 3 * d, scale),
                wo: random(&mut seed, d * d, scale),
                w1: random(&mut seed, d * D_FF, scale),
                w2: random(&mut seed, D_FF * d, 1.0 / (D_FF as f32).sqrt()),
                k: vec![0.0; ctx * d],
                v: vec![0.0; ctx * d],
            })
            .collect();
        Model { layers, ctx, pos: 0, seed }
    }

    /// Cache capacity.
    pub fn context(&self) -> usize {
        self.ctx
    }

    /// Positions in the cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Starts a new sequence: pushes `tokens` prompt tokens (at most the context) through
    /// every layer at once and fills the cache with their keys and values.
    pub fn prefill(&mut self, tokens: usize) -> f32 {
        let d = D_MODEL;
        let p = tokens.clamp(1, self.ctx);
        let mut x = random(&mut self.seed, p * d, 1.0);
        let mut qkv = vec![0f32; p * 3 * d];
        let mut q = vec![0f32; p * d];
        let mut scores = vec![0f32; p * p];
        let mut attn = vec![0f32; p * d];
        let mut proj = vec![0f32; p * d];
        let mut hidden = vec![0f32; p * D_FF];
        let scale = 1.0 / (d as f32).sqrt();
        for layer in &mut self.layers {
            x.chunks_exact_mut(d).for_each(rms_norm);
            matmul(p, d, 3 * d, &x, &layer.wqkv, false, &mut qkv);
            for t in 0..p {
                let row = &qkv[t * 3 * d..(t + 1) * 3 * d];
                q[t * d..(t + 1) * d].copy_from_slice(&row[..d]);
                layer.k[t * d..(t + 1) * d].copy_from_slice(&row[d..2 * d]);
                layer.v[t * d..(t + 1) * d].copy_from_slice(&row[2 * d..]);
            }
            // Causal attention: scores = Q·Kᵀ, masked, softmax, then · V.
            matmul(p, d, p, &q, &layer.k[..p * d], true, &mut scores);
            for (t, row) in scores.chunks_exact_mut(p).enumerate() {
                row.iter_mut().for_each(|s| *s *= scale);
                row[t + 1..].iter_mut().for_each(|s| *s = f32::NEG_INFINITY);
                softmax(row);
            }
            matmul(p, p, d, &scores, &layer.v[..p * d], false, &mut attn);
            matmul(p, d, d, &attn, &layer.wo, false, &mut proj);
            x.iter_mut().zip(&proj).for_each(|(a, b)| *a += b);
            matmul(p, d, D_FF, &x, &layer.w1, false, &mut hidden);
            hidden.iter_mut().for_each(|h| *h = h.max(0.0));
            matmul(p, D_FF, d, &hidden, &layer.w2, false, &mut proj);
            x.iter_mut().zip(&proj).for_each(|(a, b)| *a += b);
        }
        self.pos = p;
        black_box(x[0])
    }

    /// Produces one token: a vector through every layer, attention over the cache, and
    /// the new position appended. Starts a new one-token sequence when the cache is full.
    pub fn decode(&mut self) -> f32 {
        if self.pos >= self.ctx {
            self.prefill(1);
        }
        let d = D_MODEL;
        let t = self.pos;
        let mut x = random(&mut self.seed, d, 1.0);
        let mut qkv = vec![0f32; 3 * d];
        let mut scores = vec![0f32; t + 1];
        let mut attn = vec![0f32; d];
        let mut proj = vec![0f32; d];
        let mut hidden = vec![0f32; D_FF];
        let scale = 1.0 / (d as f32).sqrt();
        for layer in &mut self.layers {
            rms_norm(&mut x);
            vecmat(&x, &layer.wqkv, 3 * d, &mut qkv);
            layer.k[t * d..(t + 1) * d].copy_from_slice(&qkv[d..2 * d]);
            layer.v[t * d..(t + 1) * d].copy_from_slice(&qkv[2 * d..]);
            let q = &qkv[..d];
            for (s, key) in scores.iter_mut().zip(layer.k.chunks_exact(d)) {
                *s = key.iter().zip(q).map(|(a, b)| a * b).sum::<f32>() * scale;
            }
            softmax(&mut scores);
            attn.iter_mut().for_each(|a| *a = 0.0);
            for (w, value) in scores.iter().zip(layer.v.chunks_exact(d)) {
                attn.iter_mut().zip(value).for_each(|(a, v)| *a += w * v);
            }
            vecmat(&attn, &layer.wo, d, &mut proj);
            x.iter_mut().zip(&proj).for_each(|(a, b)| *a += b);
            vecmat(&x, &layer.w1, D_FF, &mut hidden);
            hidden.iter_mut().for_each(|h| *h = h.max(0.0));
            vecmat(&hidden, &layer.w2, d, &mut proj);
            x.iter_mut().zip(&proj).for_each(|(a, b)| *a += b);
        }
        self.pos += 1;
        black_box(x[0])
    }
}

/// What an LLM-like agent recorded.
#[derive(Debug, Default)]
pub struct LlmSamples {
    /// Per iteration, ns: prompts (prefill), tokens (decode) or calls (agent-loop).
    pub samples_ns: Vec<u64>,
    /// Time to first token per call, ns (agent-loop).
    pub ttft_ns: Vec<u64>,
    /// Time per output token per call, ns (agent-loop).
    pub tpot_ns: Vec<u64>,
    /// Window covered, ns.
    pub window_ns: u64,
}

/// Runs an LLM-like agent over the window.
pub fn run(spec: &AgentSpec, window: &Window) -> Result<LlmSamples, AgentError> {
    if spec.size == 0 {
        return Err(BadAgent::NoSize { kind: spec.kind.name() }.into());
    }
    let cap = window.max_iterations.unwrap_or(u64::MAX) as usize;
    let mut out = LlmSamples::default();
    match spec.kind {
        AgentKind::LlmPrefill => {
            let mut m = Model::new(spec.size);
            let (s, w) = window.time_loop(|| {
                m.prefill(spec.size);
            });
            (out.samples_ns, out.window_ns) = (s, w);
        }
        AgentKind::LlmDecode => {
            let mut m = Model::new(spec.size);
            m.prefill(1);
            let (s, w) = window.time_loop(|| {
                m.decode();
            });
            (out.samples_ns, out.window_ns) = (s, w);
        }
        AgentKind::AgentLoop => {
            let tokens = spec.size;
            let mut m = Model::new(AGENT_PROMPT + tokens + 1);
            let think = Duration::from_millis(spec.think_ms);
            let mut call = |record: bool, out: &mut LlmSamples| {
                let t0 = Instant::now();
                m.prefill(AGENT_PROMPT);
                m.decode();
                let ttft = t0.elapsed();
                for _ in 1..tokens {
                    m.decode();
                }
                let total = t0.elapsed();
                if record {
                    out.samples_ns.push(total.as_nanos() as u64);
                    out.ttft_ns.push(ttft.as_nanos() as u64);
                    let per = if tokens > 1 { (total - ttft).as_nanos() as u64 / (tokens as u64 - 1) } else { 0 };
                    out.tpot_ns.push(per);
                }
                std::thread::sleep(think);
            };
            sleep_until_unix_ms(window.start_at_unix_ms);
            let warm_end = Instant::now() + window.warmup;
            while Instant::now() < warm_end {
                call(false, &mut out);
            }
            let start = Instant::now();
            let end = start + window.duration;
            while Instant::now() < end && out.samples_ns.len() < cap {
                call(true, &mut out);
            }
            out.window_ns = start.elapsed().as_nanos() as u64;
        }
        other => return Err(AgentError::Unsupported(Unsupported::WrongRunner { kind: other.name(), runner: "an LLM agent" })),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(n: u64) -> Window {
        Window { start_at_unix_ms: 0, warmup: Duration::ZERO, duration: Duration::from_secs(600), max_iterations: Some(n) }
    }

    #[test]
    fn decode_grows_the_cache_and_starts_over_when_full() {
        let mut m = Model::new(4);
        m.prefill(2);
        assert_eq!(m.position(), 2);
        m.decode();
        m.decode();
        assert_eq!(m.position(), 4);
        let y = m.decode();
        assert_eq!(m.position(), 2, "a full cache starts a new sequence: prefill of 1, then the token");
        assert!(y.is_finite());
    }

    #[test]
    fn activations_stay_finite_over_a_long_sequence() {
        let mut m = Model::new(64);
        assert!(m.prefill(16).is_finite());
        for _ in 0..100 {
            assert!(m.decode().is_finite());
        }
    }

    #[test]
    fn matmul_matches_a_naive_product_both_layouts() {
        let (m, k, n) = (3, 4, 5);
        let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
        let mut c = vec![0f32; m * n];
        matmul(m, k, n, &a, &b, false, &mut c);
        let bt: Vec<f32> = (0..n * k).map(|idx| b[(idx % k) * n + idx / k]).collect();
        let mut ct = vec![0f32; m * n];
        matmul(m, k, n, &a, &bt, true, &mut ct);
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                assert!((c[i * n + j] - want).abs() < 1e-4);
                assert!((ct[i * n + j] - want).abs() < 1e-4);
            }
        }
        let mut y = vec![0f32; n];
        vecmat(&a[..k], &b, n, &mut y);
        for (j, yj) in y.iter().enumerate() {
            let want: f32 = (0..k).map(|l| a[l] * b[l * n + j]).sum();
            assert!((yj - want).abs() < 1e-4);
        }
    }

    #[test]
    fn agents_record_their_iterations_and_the_loop_its_tokens() {
        let s = run(&AgentSpec::new(AgentKind::LlmPrefill), &window(3)).unwrap();
        assert_eq!(s.samples_ns.len(), 3);
        let s = run(&AgentSpec::new(AgentKind::LlmDecode), &window(20)).unwrap();
        assert_eq!(s.samples_ns.len(), 20);
        let spec = AgentSpec { size: 4, think_ms: 1, ..AgentSpec::new(AgentKind::AgentLoop) };
        let s = run(&spec, &window(3)).unwrap();
        assert_eq!((s.samples_ns.len(), s.ttft_ns.len(), s.tpot_ns.len()), (3, 3, 3));
        for i in 0..3 {
            assert!(s.ttft_ns[i] < s.samples_ns[i] && s.tpot_ns[i] > 0, "{s:?}");
        }
    }

    #[test]
    fn decode_weights_exceed_a_cores_l2() {
        let weight_bytes = 4 * LAYERS * (D_MODEL * 3 * D_MODEL + D_MODEL * D_MODEL + 2 * D_MODEL * D_FF);
        assert!(weight_bytes > 20 << 20, "decode streams more than a core's L2 every token: {weight_bytes}");
    }

    #[test]
    fn zero_size_is_invalid() {
        let spec = AgentSpec { size: 0, ..AgentSpec::new(AgentKind::LlmPrefill) };
        assert!(run(&spec, &window(1)).unwrap_err().to_string().contains("size"));
    }
}
