//! The agents' workloads, timing every iteration, and the dispatcher that runs an agent of
//! any kind (CPU kernels here; the LLM-like agents, `http` and the CUDA agents in their
//! own modules).
//!
//! Each agent runs in its own OS process (so sharing is real), optionally pinned to a
//! CPU, waits for a common start instant, runs a warm-up whose samples are discarded,
//! then records the wall time of every iteration until the measurement window closes.

use rustfft::num_complex::Complex32;
use std::hint::black_box;
use std::time::Instant;

use crate::agent::{AgentError, AgentKind, AgentSpec, BadAgent, Samples, Unsupported, Window};

/// Mean cost of one `Instant::now()` reading, ns (median of 21 batches of 10,000 pairs).
pub fn timer_overhead_ns() -> f64 {
    let mut batches: Vec<f64> = (0..21)
        .map(|_| {
            let n = 10_000u32;
            let t0 = Instant::now();
            for _ in 0..n {
                black_box(Instant::now());
            }
            t0.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

/// Runs a CPU agent (fft, gemm, membw) and returns its samples.
pub fn run_cpu(spec: &AgentSpec, window: &Window) -> Result<(Vec<u64>, u64), AgentError> {
    match spec.kind {
        AgentKind::Fft => {
            if spec.size == 0 || spec.batch == 0 {
                return Err(BadAgent::TooSmall { kind: "fft", needs: "--size and --batch" }.into());
            }
            let fft = rustfft::FftPlanner::<f32>::new().plan_fft_forward(spec.size);
            let mut buf: Vec<Complex32> = (0..spec.size * spec.batch).map(|i| Complex32::new((i % 7) as f32, (i % 3) as f32)).collect();
            let mut scratch = vec![Complex32::new(0.0, 0.0); fft.get_inplace_scratch_len()];
            Ok(window.time_loop(|| {
                fft.process_with_scratch(&mut buf, &mut scratch);
                // Keep magnitudes bounded so repeated transforms never overflow.
                let scale = 1.0 / (spec.size as f32).sqrt();
                buf[0] *= scale;
                black_box(&buf);
            }))
        }
        AgentKind::Gemm => {
            let n = spec.size;
            if n == 0 {
                return Err(BadAgent::TooSmall { kind: "gemm", needs: "--size" }.into());
            }
            let a: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32 * 0.01).collect();
            let b: Vec<f32> = (0..n * n).map(|i| (i % 17) as f32 * 0.01).collect();
            let mut c = vec![0f32; n * n];
            Ok(window.time_loop(|| {
                gemm_f32(n, &a, &b, &mut c);
                black_box(&c);
            }))
        }
        AgentKind::Membw => {
            let len = spec.size.max(1) * (1 << 20) / 8;
            let src: Vec<u64> = (0..len as u64).collect();
            let mut dst = vec![0u64; len];
            Ok(window.time_loop(|| {
                dst.copy_from_slice(black_box(&src));
                black_box(&dst);
            }))
        }
        other => Err(AgentError::Unsupported(Unsupported::WrongRunner { kind: other.name(), runner: "a CPU agent" })),
    }
}

#[allow(unsafe_code)]
fn gemm_f32(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= n * n && b.len() >= n * n && c.len() >= n * n);
    let s = n as isize;
    // SAFETY: a, b and c each hold at least n×n elements (asserted above), are laid out
    // row-major with row stride n and column stride 1, and c does not alias a or b.
    unsafe {
        matrixmultiply::sgemm(n, n, n, 1.0, a.as_ptr(), s, 1, b.as_ptr(), s, 1, 0.0, c.as_mut_ptr(), s, 1);
    }
}

/// Runs any agent, pinned to `cpu` when given.
pub fn run(spec: &AgentSpec, window: &Window, cpu: Option<usize>) -> Result<Samples, AgentError> {
    if let Some(cpu) = cpu {
        let ids = core_affinity::get_core_ids().unwrap_or_default();
        let id = ids.iter().find(|c| c.id == cpu).copied().ok_or_else(|| AgentError::from(BadAgent::NoCpu { cpu }))?;
        if !core_affinity::set_for_current(id) {
            return Err(BadAgent::Pin { cpu }.into());
        }
    }
    let mut ttft_ns = Vec::new();
    let mut tpot_ns = Vec::new();
    let mut errors = 0;
    let (samples_ns, window_ns) = match spec.kind {
        AgentKind::Fft | AgentKind::Gemm | AgentKind::Membw => run_cpu(spec, window)?,
        AgentKind::CudaFft | AgentKind::CudaGemm => run_cuda(spec, window)?,
        AgentKind::Http => {
            let r = crate::http::run(spec, window)?;
            ttft_ns = r.ttft_ns;
            tpot_ns = r.tpot_ns;
            errors = r.errors;
            (r.latency_ns, r.window_ns)
        }
        AgentKind::LlmPrefill | AgentKind::LlmDecode | AgentKind::AgentLoop => {
            let r = crate::llm::run(spec, window)?;
            ttft_ns = r.ttft_ns;
            tpot_ns = r.tpot_ns;
            (r.samples_ns, r.window_ns)
        }
    };
    Ok(Samples {
        kind: spec.kind,
        spec: spec.clone(),
        cpu,
        samples_ns,
        ttft_ns,
        tpot_ns,
        window_ns,
        errors,
        name: None,
        arm: None,
        trial: None,
    })
}

#[cfg(feature = "cuda")]
fn run_cuda(spec: &AgentSpec, window: &Window) -> Result<(Vec<u64>, u64), AgentError> {
    crate::cuda::run(spec, window)
}

#[cfg(not(feature = "cuda"))]
fn run_cuda(spec: &AgentSpec, _window: &Window) -> Result<(Vec<u64>, u64), AgentError> {
    Err(AgentError::Unsupported(Unsupported::NoCudaBuild { kind: spec.kind.name() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn window(ms: u64) -> Window {
        Window { start_at_unix_ms: 0, warmup: Duration::from_millis(5), duration: Duration::from_millis(ms), max_iterations: None }
    }

    #[test]
    fn cpu_agents_record_samples() {
        for kind in [AgentKind::Fft, AgentKind::Gemm, AgentKind::Membw] {
            let mut spec = AgentSpec::new(kind);
            if kind == AgentKind::Gemm {
                spec.size = 64;
            }
            let s = run(&spec, &window(60), None).unwrap();
            assert!(!s.samples_ns.is_empty(), "{kind:?}");
            assert!(s.window_ns >= 60_000_000);
            assert!(s.samples_ns.iter().all(|&x| x > 0));
        }
    }

    #[test]
    fn iteration_cap_stops_early() {
        // A ten-minute window: only the cap can end the run within a minute, however
        // loaded the machine (a 2 s bound against a 5 s window failed under load).
        let w = Window { max_iterations: Some(7), ..window(600_000) };
        let t = Instant::now();
        let s = run(&AgentSpec::new(AgentKind::Fft), &w, None).unwrap();
        assert_eq!(s.samples_ns.len(), 7);
        assert!(t.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn timer_overhead_is_small() {
        let t = timer_overhead_ns();
        assert!(t > 0.0 && t < 2_000.0, "{t}");
    }

    #[test]
    fn parse_kinds() {
        for k in ["fft", "gemm", "membw", "cuda-fft", "cuda-gemm", "http"] {
            assert_eq!(AgentKind::parse(k).unwrap().name(), k);
        }
        assert!(AgentKind::parse("tpu").is_none());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_agent_without_feature_says_so() {
        let e = run(&AgentSpec::new(AgentKind::CudaFft), &window(1), None).unwrap_err();
        assert!(e.to_string().contains("--features cuda"), "{e}");
    }
}
