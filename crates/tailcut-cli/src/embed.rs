//! The command line as an embedded library: what the Python package
//! (`crates/tailcut-python`) calls besides [`crate::main_with`].
//!
//! - [`json_of`] runs a command that takes `--json` (`replay`, `report`, `scenario run`,
//!   `demo`) and returns the exact text the CLI would print, so the Python records and
//!   the CLI's output cannot disagree.
//! - [`Hedging`] is `tailcut run`'s engine for one configuration: the same providers,
//!   validator, budget ledger (`[budget] ledger`, the file the gateway charges too), trace
//!   and policies, run one request at a time by a caller that may stop the race.
//!
//! Every failure is a [`Failure`] carrying the message the CLI would print after
//! `tailcut: ` and whether it is bad input (the CLI's exit 2).

use crate::commands;
use crate::output::{capture_json, chain_message};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tailcut_config::{spec_providers, Config};
use tailcut_core::engine::{Hedger, RaceError};
use tailcut_core::JobRequest;
use tokio::time::Instant;

/// What kind of failure, as the CLI's exit status tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// Bad input: flags, configuration, trace lines (the CLI exits 2).
    BadInput,
    /// The budget ledger refused the request's charge (exit 1).
    Budget,
    /// No provider returned a valid result (exit 1).
    Provider,
    /// Any other runtime failure (exit 1).
    Runtime,
}

/// A failure with the message the CLI prints (without its `tailcut: ` prefix).
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which kind.
    pub kind: FailureKind,
    /// The CLI's message.
    pub message: String,
    /// For a race that ended without a valid result: its outcome document (as
    /// [`Ran::document`]), receipts included.
    pub outcome: Option<Ran>,
}

impl Failure {
    fn of(e: &anyhow::Error) -> Failure {
        let kind = if commands::is_bad_input(e) { FailureKind::BadInput } else { FailureKind::Runtime };
        Failure { kind, message: chain_message(e), outcome: None }
    }

    fn bad(message: String) -> Failure {
        Failure { kind: FailureKind::BadInput, message, outcome: None }
    }
}

/// Runs the command `args` (the program name first; `--json` is added when missing) and
/// returns the JSON text the CLI prints for it.
pub fn json_of(mut args: Vec<String>) -> Result<String, Failure> {
    if !args.iter().any(|a| a == "--json") {
        args.push("--json".into());
    }
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(&args).map_err(|e| Failure::bad(e.render().to_string()))?;
    let (done, text) = capture_json(|| commands::dispatch(cli));
    match (done, text) {
        (Err(e), _) => Err(Failure::of(&e)),
        (Ok(_), Some(text)) => Ok(text),
        (Ok(_), None) => Err(Failure::bad(format!("`{}` prints no JSON document", args[1..].join(" ")))),
    }
}

/// A settled race: the outcome document and the winner's payload.
#[derive(Debug, Clone)]
pub struct Ran {
    /// `{"request_id", "policy", "winner", "latency_s", "projected_cost_usd",
    /// "content_type", "output", "record"}`: `output` is the payload when it is JSON,
    /// `record` the request's full trace record (attempts, decisions, every receipt).
    pub document: String,
    /// The winner's payload bytes, when there is a winner.
    pub payload: Option<Vec<u8>>,
}

use crate::commands::run::Built;

/// `tailcut run`'s engine for one configuration.
pub struct Hedging {
    config: Config,
    hedger: Hedger,
    policies: Mutex<HashMap<String, Built>>,
}

impl std::fmt::Debug for Hedging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hedging").field("config", &self.config.source).finish_non_exhaustive()
    }
}

impl Hedging {
    /// Loads and checks the configuration at `path` (the built-in one for `None`) and
    /// builds its providers, ledger and trace as `tailcut run` does. Call it inside a
    /// Tokio runtime.
    pub fn load(path: Option<&std::path::Path>) -> Result<Hedging, Failure> {
        // The engine's and the ledger's events reach stderr as `tailcut run` writes them
        // (`TAILCUT_LOG=off` silences them).
        crate::logger::install();
        let build = || -> anyhow::Result<Hedging> {
            let config = commands::load_config(path)?;
            let entries = config.live_entries()?;
            let validator = tailcut_core::validate::ValidatorRegistry::default().build(&config.validator)?;
            let trace = match &config.trace_path {
                Some(p) => Some(Arc::new(commands::open_trace(p)?)),
                None => None,
            };
            let hedger = Hedger::new(entries, validator, commands::run::ledger(&config)?, config.race, trace);
            Ok(Hedging { config, hedger, policies: Mutex::new(HashMap::new()) })
        };
        build().map_err(|e| Failure::of(&e))
    }

    /// The configured policies' names, in file order.
    pub fn policy_names(&self) -> Vec<String> {
        self.config.policies.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The policy `name` (`None`: the only one configured), built once and kept, so a
    /// learned policy keeps learning across calls. Refuses a paid provider without `go`.
    fn policy(&self, name: Option<&str>, go: bool) -> Result<Built, Failure> {
        let known = || self.policy_names().join(", ");
        let name = match name {
            Some(n) => n.to_string(),
            None if self.config.policies.len() == 1 => self.config.policies[0].0.clone(),
            None => return Err(Failure::bad(format!("{}: name a policy (known: {})", self.config.source, known()))),
        };
        let spec = self
            .config
            .policy(&name)
            .cloned()
            .ok_or_else(|| Failure::bad(format!("{}: no policy `{name}` (known: {})", self.config.source, known())))?;
        commands::run::guard_spend(&self.config, &spec_providers(&spec), go).map_err(|e| Failure::of(&e))?;
        let mut cache = self.policies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(b) = cache.get(&name) {
            return Ok(b.clone());
        }
        let built = commands::run::build_policy(&self.config, &spec, &self.hedger, None).map_err(|e| Failure::of(&e))?;
        cache.insert(name, built.clone());
        Ok(built)
    }

    /// Checks `policy` (and the spending guard) without running anything.
    pub fn check(&self, policy: Option<&str>, go: bool) -> Result<(), Failure> {
        self.policy(policy, go).map(|_| ())
    }

    /// Races `input` under `policy` until it settles or `stop` resolves (then every live
    /// attempt is cancelled with a receipt), and waits for every loser's receipt.
    /// A race without a valid result is a [`FailureKind::Provider`] failure carrying
    /// the outcome; a refused charge a [`FailureKind::Budget`] one.
    pub async fn run(&self, input: Value, policy: Option<&str>, go: bool, stop: BoxFuture<'static, ()>) -> Result<Ran, Failure> {
        let (policy, learned) = self.policy(policy, go)?;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("py-{}-{n}", tailcut_core::trace::now_rfc3339());
        let request = JobRequest::new(id.clone(), input);
        let t0 = Instant::now();
        let outcome = match self.hedger.run_until(policy.as_ref(), request, stop).await {
            Ok(o) => o,
            Err(e @ RaceError::Budget(_)) => {
                let e = anyhow::Error::new(e).context(format!("request {id} refused"));
                return Err(Failure { kind: FailureKind::Budget, message: chain_message(&e), outcome: None });
            }
            Err(e) => {
                let e = anyhow::Error::new(e).context(format!("request {id} refused"));
                return Err(Failure { kind: FailureKind::Runtime, message: chain_message(&e), outcome: None });
            }
        };
        let latency_s = outcome.latency.map(|d| d.as_secs_f64());
        let result = outcome.result.clone();
        let record = outcome.settled.wait().await.ok_or_else(|| Failure {
            kind: FailureKind::Runtime,
            message: "loser cleanup failed".into(),
            outcome: None,
        })?;
        if let Some(l) = &learned {
            l.observe_trace(&record, t0);
        }
        let payload = result.as_ref().and_then(|r| r.payload.as_ref());
        let content_type = payload.map(|p| p.content_type.clone());
        let output: Value = payload.and_then(|p| serde_json::from_slice(&p.bytes).ok()).unwrap_or(Value::Null);
        let document = json!({
            "request_id": record.request_id,
            "policy": record.policy,
            "winner": record.winner,
            "latency_s": latency_s,
            "projected_cost_usd": record.projected_cost_micro_usd.as_usd(),
            "content_type": content_type,
            "output": output,
            "record": record,
        });
        let ran = Ran { document: document.to_string(), payload: payload.map(|p| p.bytes.to_vec()) };
        if record.winner.is_none() {
            let message = commands::run::failed_attempts(&record).join("\n");
            return Err(Failure { kind: FailureKind::Provider, message, outcome: Some(ran) });
        }
        Ok(ran)
    }
}
