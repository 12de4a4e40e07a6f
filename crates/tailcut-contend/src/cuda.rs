//! CUDA agents (feature `cuda`): a 2-D complex FFT through cuFFT and a square SGEMM
//! through cuBLAS, each iteration timed on the GPU with CUDA events and a synchronize —
//! kernel retirement time, not launch time. cudarc loads the driver and libraries at run
//! time, so this builds without a CUDA toolkit; without a device it reports so clearly.
#![allow(unsafe_code)]

use crate::agent::{sleep_until_unix_ms, AgentError, AgentKind, AgentSpec, BadAgent, NoDevice, Unsupported, Window};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::cufft::{result as cufft, sys as cufft_sys};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use std::time::Instant;

fn cuda_err(e: impl std::fmt::Debug) -> AgentError {
    AgentError::Cuda { reason: format!("{e:?}") }
}

/// Picks the device: an index, or a GPU/MIG UUID (made visible as device 0).
fn ordinal(spec: &AgentSpec) -> Result<usize, AgentError> {
    match spec.device.as_deref() {
        None => Ok(0),
        Some(d) if d.starts_with("MIG-") || d.starts_with("GPU-") => {
            // Before any CUDA call in this process: expose only that device.
            std::env::set_var("CUDA_VISIBLE_DEVICES", d);
            Ok(0)
        }
        Some(d) => d.parse().map_err(|_| AgentError::from(BadAgent::Device { device: d.to_string() })),
    }
}

fn open(spec: &AgentSpec) -> Result<Arc<CudaStream>, AgentError> {
    let ordinal = ordinal(spec)?;
    // A missing driver library makes cudarc's loader panic; turn that into an error.
    let count = std::panic::catch_unwind(CudaContext::device_count)
        .map_err(|_| AgentError::NoDevice(NoDevice::NoDriver))?
        .map_err(|e| AgentError::NoDevice(NoDevice::Driver { reason: format!("{e:?}") }))?;
    if count <= 0 {
        return Err(AgentError::NoDevice(NoDevice::NoDevices));
    }
    if ordinal >= count as usize {
        return Err(AgentError::NoDevice(NoDevice::Missing { ordinal, count }));
    }
    let ctx = CudaContext::new(ordinal).map_err(cuda_err)?;
    Ok(ctx.default_stream())
}

fn timed(
    stream: &Arc<CudaStream>,
    window: &Window,
    mut launch: impl FnMut() -> Result<(), AgentError>,
) -> Result<(Vec<u64>, u64), AgentError> {
    let mut one = || -> Result<u64, AgentError> {
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err)?;
        launch()?;
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err)?;
        end.synchronize().map_err(cuda_err)?;
        let ms = start.elapsed_ms(&end).map_err(cuda_err)?;
        Ok((f64::from(ms) * 1e6) as u64)
    };
    sleep_until_unix_ms(window.start_at_unix_ms);
    let warm_end = Instant::now() + window.warmup;
    while Instant::now() < warm_end {
        one()?;
    }
    let started = Instant::now();
    let end = started + window.duration;
    let mut samples = Vec::with_capacity(4096);
    let cap = window.max_iterations.unwrap_or(u64::MAX) as usize;
    while Instant::now() < end && samples.len() < cap {
        samples.push(one()?);
    }
    Ok((samples, started.elapsed().as_nanos() as u64))
}

/// Runs a CUDA agent.
pub fn run(spec: &AgentSpec, window: &Window) -> Result<(Vec<u64>, u64), AgentError> {
    let stream = open(spec)?;
    let n = spec.size;
    if n == 0 {
        return Err(BadAgent::CudaSize.into());
    }
    match spec.kind {
        AgentKind::CudaGemm => {
            let a = stream.alloc_zeros::<f32>(n * n).map_err(cuda_err)?;
            let b = stream.alloc_zeros::<f32>(n * n).map_err(cuda_err)?;
            let mut c = stream.alloc_zeros::<f32>(n * n).map_err(cuda_err)?;
            let blas = CudaBlas::new(stream.clone()).map_err(cuda_err)?;
            let side = n as i32;
            let cfg = GemmConfig {
                transa: cublasOperation_t::CUBLAS_OP_N,
                transb: cublasOperation_t::CUBLAS_OP_N,
                m: side,
                n: side,
                k: side,
                alpha: 1.0f32,
                lda: side,
                ldb: side,
                beta: 0.0f32,
                ldc: side,
            };
            timed(&stream, window, || {
                // SAFETY: a, b and c are n×n device buffers on this stream, matching the
                // config's dimensions and leading dimensions.
                unsafe { blas.gemm(cfg, &a, &b, &mut c) }.map_err(cuda_err)
            })
        }
        AgentKind::CudaFft => {
            let mut data = stream.alloc_zeros::<f32>(2 * n * n).map_err(cuda_err)?;
            let plan = cufft::plan_2d(n as i32, n as i32, cufft_sys::cufftType::CUFFT_C2C).map_err(cuda_err)?;
            // SAFETY: plan is a live cuFFT handle and the stream belongs to the current context.
            unsafe { cufft::set_stream(plan, stream.cu_stream() as cufft_sys::cudaStream_t) }.map_err(cuda_err)?;
            let result = timed(&stream, window, || {
                let (ptr, _guard) = data.device_ptr_mut(&stream);
                let p = ptr as *mut cufft_sys::cufftComplex;
                // SAFETY: the buffer holds n×n complex values (2·n·n f32), as the plan
                // expects; the transform runs in place on the plan's stream.
                unsafe { cufft::exec_c2c(plan, p, p, -1) }.map_err(cuda_err)
            });
            // SAFETY: the plan is not used after this point.
            let _ = unsafe { cufft::destroy(plan) };
            let _ = data.device_ptr(&stream);
            result
        }
        other => Err(AgentError::Unsupported(Unsupported::WrongRunner { kind: other.name(), runner: "a CUDA agent" })),
    }
}
