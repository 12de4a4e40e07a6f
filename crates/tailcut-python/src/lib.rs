//! `tailcut._tailcut`: the native half of the `tailcut` Python package.
//!
//! Three entry points, each a thin shell over the CLI's own library (`tailcut_cli`), so
//! that Python and the command line cannot drift apart:
//! - `cli`: the `tailcut` command itself (the wheel's `[project.scripts]` entry);
//! - `json_of`: a command's `--json` document, the exact text the CLI prints;
//! - `Hedger` and `Race`: `tailcut run`'s engine on one shared Tokio runtime, a race
//!   running with the GIL released and stoppable from Python (Ctrl-C, asyncio
//!   cancellation), every loser cancelled with a receipt before the result is handed back.
//!
//! Failures become the exception classes of `tailcut.errors`, carrying the CLI's message.

// Only maturin's build (feature `extension-module`) has a module to build.
#![cfg(feature = "extension-module")]
// PyO3's macros expand to `unsafe` FFI glue; this crate itself writes no unsafe code.
#![allow(unsafe_code)]

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;
use tailcut_cli::embed::{json_of as cli_json_of, Failure, FailureKind, Hedging, Ran};

/// The one Tokio runtime every race of this process runs on (started on first use).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().thread_name("tailcut").enable_all().build())
        .as_ref()
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("cannot start the Tokio runtime: {e}")))
}

/// The `tailcut.errors` exception for `f`, with its message, exit code and (for a race
/// without a valid result) the raw outcome that `tailcut` turns into `.outcome`.
fn raise(py: Python<'_>, f: Failure) -> PyErr {
    let class = match f.kind {
        FailureKind::BadInput => "ConfigError",
        FailureKind::Budget => "BudgetExceeded",
        FailureKind::Provider => "ProviderError",
        FailureKind::Runtime => "TailcutError",
    };
    let built = || -> PyResult<PyErr> {
        let exc = py.import("tailcut.errors")?.getattr(class)?.call1((f.message.clone(),))?;
        exc.setattr("exit_code", if f.kind == FailureKind::BadInput { 2 } else { 1 })?;
        if let Some(ran) = f.outcome {
            exc.setattr("_raw_outcome", raw(py, ran))?;
        }
        Ok(PyErr::from_value(exc))
    };
    built().unwrap_or_else(|e| e)
}

/// A settled race as `(document, payload)`: the outcome's JSON text and the winner's bytes.
fn raw(py: Python<'_>, ran: Ran) -> (String, Option<Py<PyBytes>>) {
    (ran.document, ran.payload.map(|b| PyBytes::new(py, &b).unbind()))
}

/// Runs the `tailcut` command line `argv` (program name first) and returns its exit
/// status. The GIL is released for the whole command.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| tailcut_cli::main_with_status(argv))
}

/// The `--json` document of the command `argv` (program name first), as the CLI prints
/// it. Raises `tailcut.errors.ConfigError` for bad input (the CLI's exit 2).
#[pyfunction]
fn json_of(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    py.detach(|| cli_json_of(argv)).map_err(|f| raise(py, f))
}

/// `tailcut run`'s engine for one configuration.
#[pyclass(frozen, module = "tailcut._tailcut")]
struct Hedger {
    inner: Arc<Hedging>,
}

#[pymethods]
impl Hedger {
    /// Loads the configuration at `path` (`None`: the built-in one).
    #[staticmethod]
    #[pyo3(signature = (path=None))]
    fn from_config(py: Python<'_>, path: Option<PathBuf>) -> PyResult<Hedger> {
        let rt = runtime()?;
        let loaded = py.detach(|| {
            let _entered = rt.enter();
            Hedging::load(path.as_deref())
        });
        loaded.map(|h| Hedger { inner: Arc::new(h) }).map_err(|f| raise(py, f))
    }

    /// The configured policies' names.
    fn policies(&self) -> Vec<String> {
        self.inner.policy_names()
    }

    /// Starts a race of `input` (JSON text) under `policy` and returns at once.
    #[pyo3(signature = (input, policy=None, go=false))]
    fn start(&self, py: Python<'_>, input: &str, policy: Option<String>, go: bool) -> PyResult<Race> {
        let input: serde_json::Value = serde_json::from_str(input).map_err(|e| {
            raise(py, Failure { kind: FailureKind::BadInput, message: format!("input is not valid JSON: {e}"), outcome: None })
        })?;
        self.inner.check(policy.as_deref(), go).map_err(|f| raise(py, f))?;
        let rt = runtime()?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let slot: Arc<Slot> = Arc::default();
        let (hedging, done) = (self.inner.clone(), slot.clone());
        rt.spawn(async move {
            let stop = Box::pin(async move {
                let _ = stop_rx.await;
            });
            let r = hedging.run(input, policy.as_deref(), go, stop).await;
            done.put(r);
        });
        Ok(Race { stop: Mutex::new(Some(stop_tx)), slot })
    }
}

/// Where a race's task leaves its end, and who waits for it.
#[derive(Default)]
struct Slot {
    end: Mutex<Option<Result<Ran, Failure>>>,
    ready: Condvar,
}

impl Slot {
    fn put(&self, r: Result<Ran, Failure>) {
        *self.end.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(r);
        self.ready.notify_all();
    }

    /// The end, once there is one (waiting at most `timeout`; `None`: for ever).
    // A Python thread blocked on a condition variable, not async code: std's clock is the
    // one `wait_timeout` measures against.
    #[allow(clippy::disallowed_methods)]
    fn wait(&self, timeout: Option<Duration>) -> Option<Result<Ran, Failure>> {
        let mut end = self.end.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let until = timeout.map(|t| std::time::Instant::now() + t);
        while end.is_none() {
            match until {
                None => end = self.ready.wait(end).unwrap_or_else(std::sync::PoisonError::into_inner),
                Some(u) => {
                    let left = u.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return None;
                    }
                    end = self.ready.wait_timeout(end, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
                }
            }
        }
        end.clone()
    }
}

/// One running race.
#[pyclass(frozen, module = "tailcut._tailcut")]
struct Race {
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    slot: Arc<Slot>,
}

#[pymethods]
impl Race {
    /// Stops the race: every live attempt is cancelled with a receipt (wait for them).
    fn cancel(&self) {
        if let Some(tx) = self.stop.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            let _ = tx.send(());
        }
    }

    /// Whether the race has settled (every receipt in).
    fn done(&self) -> bool {
        self.slot.wait(Some(Duration::ZERO)).is_some()
    }

    /// Waits (GIL released) at most `timeout` seconds (`None`: until it settles) and
    /// returns `(document, payload)`, or `None` if it has not settled yet. Raises the
    /// race's failure.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(String, Option<Py<PyBytes>>)>> {
        let timeout = match timeout {
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t.min(86_400.0))),
            Some(t) => return Err(pyo3::exceptions::PyValueError::new_err(format!("timeout {t}: expected seconds ≥ 0"))),
            None => None,
        };
        let slot = self.slot.clone();
        match py.detach(move || slot.wait(timeout)) {
            None => Ok(None),
            Some(Ok(ran)) => Ok(Some(raw(py, ran))),
            Some(Err(f)) => Err(raise(py, f)),
        }
    }
}

/// The module.
#[pymodule]
fn _tailcut(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(json_of, m)?)?;
    m.add_class::<Hedger>()?;
    m.add_class::<Race>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
