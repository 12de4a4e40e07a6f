//! Why an agent could not run: [`AgentError`], and [`BadAgent`] for settings that name
//! what is wrong with which value.

/// Why an agent could not run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No CUDA device or driver.
    #[error("no CUDA device available: {0}")]
    NoDevice(NoDevice),
    /// This build or this runner cannot run the agent.
    #[error("{0}")]
    Unsupported(Unsupported),
    /// A CUDA call failed.
    #[error("CUDA error: {reason}")]
    Cuda {
        /// The driver's error, as cudarc reports it.
        reason: String,
    },
    /// Bad settings.
    #[error("invalid agent settings: {0}")]
    Invalid(#[from] BadAgent),
}

/// Why no CUDA device can be used.
#[derive(Debug, thiserror::Error)]
pub enum NoDevice {
    /// The driver library is missing.
    #[error("the CUDA driver library (libcuda.so) could not be loaded")]
    NoDriver,
    /// The driver could not count its devices.
    #[error("{reason}")]
    Driver {
        /// The driver's error, as cudarc reports it.
        reason: String,
    },
    /// The driver sees none.
    #[error("the driver reports no CUDA devices")]
    NoDevices,
    /// The requested ordinal is past the last device.
    #[error("device {ordinal} requested, {count} present")]
    Missing {
        /// The requested device.
        ordinal: usize,
        /// How many there are.
        count: i32,
    },
}

/// An agent this runner or build does not run.
#[derive(Debug, thiserror::Error)]
pub enum Unsupported {
    /// The agent is of another runner's kind.
    #[error("{kind} is not {runner}")]
    WrongRunner {
        /// The agent's kind.
        kind: &'static str,
        /// `a CPU agent`, `a CUDA agent`, `an LLM agent`.
        runner: &'static str,
    },
    /// A CUDA agent in a build without CUDA.
    #[error("the {kind} agent needs a build with CUDA support: cargo build --release --features cuda")]
    NoCudaBuild {
        /// The agent's kind.
        kind: &'static str,
    },
}

/// Agent settings that cannot run, naming the value.
#[derive(Debug, thiserror::Error)]
pub enum BadAgent {
    /// The kind is not one tailcut runs.
    #[error("agent `{text}`: unknown kind (expected {expected})")]
    UnknownKind {
        /// The agent as given.
        text: String,
        /// The kinds there are.
        expected: &'static str,
    },
    /// A size or batch that is not a whole number.
    #[error("agent `{text}`: {field} must be a whole number")]
    NotWhole {
        /// The agent as given.
        text: String,
        /// `size` or `batch`.
        field: &'static str,
    },
    /// A CPU agent's size (or batch) of zero.
    #[error("{kind} needs {needs} of at least 1")]
    TooSmall {
        /// The agent's kind.
        kind: &'static str,
        /// The flags that must be at least 1 (`--size`, `--size and --batch`).
        needs: &'static str,
    },
    /// A CUDA agent's size of zero.
    #[error("--size must be at least 1")]
    CudaSize,
    /// An LLM agent of size zero.
    #[error("{kind} needs a size of at least 1")]
    NoSize {
        /// The agent's kind.
        kind: &'static str,
    },
    /// The CPU asked for does not exist.
    #[error("no CPU {cpu} on this machine")]
    NoCpu {
        /// The CPU's id.
        cpu: usize,
    },
    /// The thread could not be pinned.
    #[error("could not pin to CPU {cpu}")]
    Pin {
        /// The CPU's id.
        cpu: usize,
    },
    /// The http agent has no URL.
    #[error("the http agent needs --url (the server's base URL)")]
    NoUrl,
    /// The http agent's rate is not positive.
    #[error("--rate must be a positive number of requests per second")]
    Rate,
    /// `--device` is neither an index nor a UUID.
    #[error("--device `{device}`: expected an index or a GPU-/MIG- UUID")]
    Device {
        /// The value given.
        device: String,
    },
}
