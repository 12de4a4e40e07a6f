//! # tailcut-contend
//!
//! Measures what sharing a processor costs co-located agents, generates the Kubernetes
//! configuration to run the same experiment on GPUs, and plans placements.
//!
//! - [`agent`]: what an agent is (kind, settings, window, samples);
//! - [`workload`]: the agents — CPU `fft`, `gemm`, `membw`; LLM-like `llm-prefill`,
//!   `llm-decode`, `agent-loop` ([`llm`]: a tiny random transformer); CUDA `cuda-fft`, `cuda-gemm`
//!   (feature `cuda`); `http` (an OpenAI-compatible endpoint at a fixed rate) — each
//!   timing every iteration;
//! - [`protocol`]: the coordinator — warm-up, each agent solo, then all together,
//!   repeated over interleaved trials, every agent in its own OS process;
//! - [`stats`]: p50/p95/p99/p99.9, jitter, throughput, degradation factors with
//!   intervals over trials, the "hidden tail damage" verdict read from the intervals
//!   ("unstable" when one straddles a threshold);
//! - [`matrix`]: the interference matrix — every agent solo, every ordered pair (and
//!   triple), bootstrap intervals, the planner's table and the fitted composition model;
//! - [`verify`]: runs a plan's co-locations and checks measured p99 against objective,
//!   prediction and stated band; scores repeated runs against the plan's confidence;
//! - [`report`]: tables, JSON and side-by-side comparison of runs;
//! - [`plot`]: SVG ECDFs (solo vs shared) and degradation bars;
//! - [`mig`]: MIG profiles and placement rules for A100 40/80 GB, H100 80 GB, H200 141 GB;
//! - [`k8s`]: device-plugin sharing ConfigMaps, mig-parted layouts and agent Jobs;
//! - [`plan`]: placements that meet every agent's p99 objective, at a stated confidence,
//!   with the fewest GPUs.

#![warn(missing_docs)]
// clippy.toml's disallowed methods (bare `tokio::spawn`, `std::time::Instant::now`) are
// allowed here: contend measures wall time of real GPU work and HTTP load (never under tokio's
// paused clock) and starts no gateway task.
#![allow(clippy::disallowed_methods)]

pub mod agent;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod http;
pub mod k8s;
pub mod llm;
pub mod matrix;
pub mod mig;
pub mod plan;
pub mod plot;
pub mod protocol;
pub mod report;
pub mod stats;
pub mod verify;
pub mod workload;
