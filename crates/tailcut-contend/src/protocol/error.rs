//! Why a run failed: [`ProtocolError`], and [`BadRun`] for settings (of a run, a matrix
//! or a plan's verification) that cannot be measured, naming the values.

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// Bad settings.
    #[error("{0}")]
    Invalid(#[from] BadRun),
    /// An agent process failed.
    #[error("agent `{agent}` ({arm}, trial {trial}) failed: {message}")]
    Agent {
        /// Agent name.
        agent: String,
        /// Arm.
        arm: String,
        /// Trial.
        trial: u32,
        /// What it said.
        message: String,
    },
}

/// Settings that cannot be measured.
#[derive(Debug, thiserror::Error)]
pub enum BadRun {
    /// No agent given.
    #[error("give at least one --agent")]
    NoAgents,
    /// Zero trials.
    #[error("--trials must be at least 1")]
    NoTrials,
    /// separate-cores with more agents than cores.
    #[error("separate-cores needs one core per agent: {agents} agents, {cpus} cores")]
    TooFewCores {
        /// Agents in the run.
        agents: usize,
        /// Cores of this machine.
        cpus: usize,
    },
    /// mig or dedicated with fewer devices than agents.
    #[error("{mode} needs one device per agent (--devices {example}), got {devices}")]
    TooFewDevices {
        /// The mode.
        mode: &'static str,
        /// What `--devices` looks like for it.
        example: &'static str,
        /// Devices given.
        devices: usize,
    },
    /// A GPU mode with CPU agents.
    #[error("{mode} is a GPU sharing mode: use CUDA agents (cuda-fft, cuda-gemm), or same-core / separate-cores for CPU agents")]
    CpuAgentsInGpuMode {
        /// The mode.
        mode: &'static str,
    },
    /// mps without its control daemon.
    #[error("mps: no MPS control daemon found (start it with `nvidia-cuda-mps-control -d`, or set CUDA_MPS_PIPE_DIRECTORY)")]
    NoMpsDaemon,
    /// The matrix does not measure this mode.
    #[error("--mode {mode}: the matrix measures same-core or separate-cores (CPU), time-slicing or mps (CUDA)")]
    MatrixMode {
        /// The mode.
        mode: &'static str,
    },
    /// A matrix of fewer than two agents.
    #[error("the matrix needs at least two --agent")]
    MatrixTooFewAgents,
    /// Names and agents differ in number.
    #[error("one name per agent")]
    NamesPerAgent,
    /// `--triples` with fewer than three agents.
    #[error("--triples needs at least three --agent")]
    TriplesTooFewAgents,
    /// A plan seat's kind is not an agent.
    #[error("plan seat `{seat}`: kind `{kind}` is not an agent tailcut can run: {source}")]
    SeatKind {
        /// The seat's agent.
        seat: String,
        /// Its kind.
        kind: String,
        /// Why it does not parse.
        source: crate::agent::AgentError,
    },
    /// A plan seat's agent does not match `--gpu`.
    #[error("plan seat `{seat}` is a {kind} agent: {}", if *gpu { "--gpu verifies CUDA agents only" } else { "CUDA agents need --gpu" })]
    SeatRunner {
        /// The seat's agent.
        seat: String,
        /// Its kind.
        kind: &'static str,
        /// Whether `--gpu` was given.
        gpu: bool,
    },
    /// A MIG group verified on a GPU without UUIDs.
    #[error("GPU {gpu}: MIG groups need one MIG UUID per seat; verify them with `contend run --mode mig`")]
    MigNeedsUuids {
        /// The plan's GPU.
        gpu: usize,
    },
    /// An mps group verified on CPUs with more seats than cores.
    #[error("GPU {gpu} (mps) runs its {seats} agents on separate cores: this machine has {cpus}")]
    MpsTooFewCores {
        /// The plan's GPU.
        gpu: usize,
        /// Its seats.
        seats: usize,
        /// Cores of this machine.
        cpus: usize,
    },
    /// A MIG group verified on CPUs.
    #[error("GPU {gpu}: a MIG group has no CPU analogue to verify")]
    MigOnCpu {
        /// The plan's GPU.
        gpu: usize,
    },
    /// A plan without seats.
    #[error("the plan places no agents")]
    EmptyPlan,
}
