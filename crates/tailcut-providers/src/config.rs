//! What every provider module shares to be configured: the error naming a key
//! ([`Invalid`]), why a credential check failed ([`CheckError`]), the keys every HTTP kind takes ([`SharedKeys`] → [`HttpSettings`]),
//! and what building a provider ([`Build`]) and checking its credential ([`Check`]) are
//! given. Each kind's own keys, factory and credential check live in its provider module
//! (`runpod.rs`, ...) behind [`ProviderModule`]; [`crate::kind`] holds the list of kinds
//! that dispatches to them, and [`crate::kind::HttpConfig`], a configured HTTP provider.

use crate::bounds::{self, Lo};
pub use crate::invalid::Invalid;
use crate::polling::{PollSettings, PollingApi, PollingProvider};
use crate::{HttpClient, Secret};
use async_trait::async_trait;
use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::{ProviderApi, ProviderError, RateNanoUsdPerSec};

/// What a provider module gives configuration: its keys, their validation, its factory
/// and its read-only credential check. Implemented by each module's `Settings`.
#[async_trait]
pub trait ProviderModule: Sized + Send + Sync {
    /// The keys as written in `[providers.NAME]` (besides `adapter`, the pricing keys and
    /// [`SharedKeys`]), with `#[serde(deny_unknown_fields)]`.
    type Config: DeserializeOwned;
    /// The fewest keys (TOML lines, without `adapter` and the pricing keys) that
    /// configure this kind: what `docs/configuration.md` shows first, and what the
    /// config tests load, build and then break one key at a time.
    const MINIMAL_TABLE: &'static str;
    /// Checks the keys and fills in defaults.
    fn from_config(config: Self::Config) -> Result<Self, Invalid>;
    /// The URL submissions go to (whether it is loopback decides whether it is paid).
    fn base(&self) -> &str;
    /// The environment variable holding the credential, if the kind has one.
    fn key_env(&self) -> Option<&str>;
    /// Builds the provider.
    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid>;
    /// A read-only credential check (never submits work): `Ok(detail)` when the provider
    /// accepted the credential, `Err(why)` otherwise; `Ok("unverifiable: ...")` where no
    /// read-only call exists.
    async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError>;
}

/// Why a read-only credential check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A paid provider's credential is not in the environment.
    #[error("credential missing: set {var}")]
    Missing {
        /// The environment variable it is read from.
        var: String,
    },
    /// The provider answered that the credential is not accepted.
    #[error("credential rejected (HTTP {status})")]
    Rejected {
        /// The reply's status (401 or 403).
        status: u16,
    },
    /// The check's call failed: transport, an error status, a malformed reply, or the
    /// client could not be built.
    #[error(transparent)]
    Call(#[from] ProviderError),
}

/// The keys every HTTP kind takes: polling cadence, cancel window, request timeout.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedKeys {
    /// Time between status polls, ms (default 1000).
    pub poll_interval_ms: Option<i64>,
    /// How long a cancel is followed to a terminal state, ms (default 20000).
    pub cancel_window_ms: Option<i64>,
    /// Per-request timeout, s (default 30).
    pub timeout_s: Option<f64>,
}

/// [`SharedKeys`], checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpSettings {
    /// Polling.
    pub poll: PollSettings,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl SharedKeys {
    /// Checks the ranges and fills in defaults.
    pub fn settings(&self) -> Result<HttpSettings, Invalid> {
        let poll = PollSettings {
            interval: bounds::millis("poll_interval_ms", self.poll_interval_ms, 1000, 1, 3_600_000)?,
            cancel_window: bounds::millis("cancel_window_ms", self.cancel_window_ms, 20_000, 1, 3_600_000)?,
            max_poll_failures: 5,
        };
        let timeout = bounds::seconds("timeout_s", self.timeout_s, 30.0, Lo::Excl(0.0), 86_400.0)?;
        Ok(HttpSettings { poll, timeout })
    }
}

/// The keys a config struct takes, read from its `Deserialize` impl (so that no list
/// is kept by hand): the field names a derived impl passes to `deserialize_struct`.
pub fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

/// A deserializer that only records the fields a struct asks for, then stops.
struct FieldProbe<'a>(&'a mut &'static [&'static str]);

/// The probe's stop signal.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field probe")
    }
}

impl std::error::Error for Stop {}

impl serde::de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Stop {
        Stop
    }
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(self, _: &'static str, fields: &'static [&'static str], _: V) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit unit_struct
        newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// Whether submitting to `base` costs money: anything not on a loopback address.
pub fn is_paid(base: &str) -> bool {
    let host = base.split("://").nth(1).unwrap_or(base).split(['/', ':']).next().unwrap_or("");
    !(host == "127.0.0.1" || host == "localhost" || host == "[" || host.starts_with("[::1") || base.contains("://[::1]"))
}

/// What a provider module's factory is given.
#[derive(Debug)]
pub struct Build<'a> {
    /// The provider's name (its key in `[providers]`).
    pub name: &'a str,
    /// Its kind's config name (for messages).
    pub kind: &'static str,
    /// Its billed rate (for cost estimates).
    pub rate: RateNanoUsdPerSec,
    /// Whether a paid provider's missing credential is an error (live use) or is
    /// replaced by an empty one (validation, dry runs).
    pub strict: bool,
    /// Whether it is paid (not on loopback).
    pub paid: bool,
    /// The shared HTTP settings.
    pub settings: HttpSettings,
    /// The client, built with the configured timeout.
    pub http: HttpClient,
}

impl Build<'_> {
    /// The credential in environment variable `var` (or from `fallback`, e.g. a provider
    /// CLI's config file). Missing: an error naming `api_key_env` when strict and paid,
    /// else an empty credential (a local server needs none).
    pub fn secret(&self, var: &str, fallback: fn() -> Option<Secret>) -> Result<Secret, Invalid> {
        if let Some(s) = Secret::from_env(var).or_else(fallback) {
            return Ok(s);
        }
        if self.strict && self.paid {
            return Err(Invalid::new("api_key_env", format!("environment variable `{var}` is not set (the {} credential)", self.kind)));
        }
        Ok(Secret::new(""))
    }

    /// A job-queue provider speaking `api` with the configured polling.
    pub fn polling<A: PollingApi>(&self, api: A) -> Arc<dyn ProviderApi> {
        Arc::new(PollingProvider::new(api, self.http.clone(), self.settings.poll, self.rate))
    }
}

/// What a provider module's credential check is given.
#[derive(Debug)]
pub struct Check<'a> {
    /// The provider's name.
    pub name: &'a str,
    /// Whether it is paid (not on loopback).
    pub paid: bool,
    /// A client with a short timeout and one retry.
    pub http: HttpClient,
}

impl Check<'_> {
    /// The credential in `var` (or from `fallback`); missing is an error for a paid
    /// provider and an empty credential for a local one.
    pub fn secret(&self, var: &str, fallback: fn() -> Option<Secret>) -> Result<Secret, CheckError> {
        match Secret::from_env(var).or_else(fallback) {
            Some(s) => Ok(s),
            None if self.paid => Err(CheckError::Missing { var: var.to_string() }),
            None => Ok(Secret::new("")),
        }
    }
}

/// A base URL as configured, without its trailing slashes.
pub fn trimmed(url: &str) -> String {
    url.trim_end_matches('/').to_string()
}

/// No fallback for a credential missing from the environment.
pub fn no_fallback() -> Option<Secret> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_from_the_derive() {
        assert_eq!(fields::<SharedKeys>(), ["poll_interval_ms", "cancel_window_ms", "timeout_s"]);
    }

    #[test]
    fn the_gateway_reads_openai_replies_itself() {
        use crate::client::RetryPolicy;
        use crate::openai::{Endpoint, Reader, Settings};
        let s =
            Settings { base: "http://127.0.0.1:1/v1".into(), model: None, key_env: None, endpoint: Endpoint::Completions, stream: true };
        let http = HttpClient::new(Duration::from_secs(1), RetryPolicy::default()).unwrap();
        let engine = s.provider("p", s.endpoint, Reader::Engine, http.clone());
        assert!(engine.stream && engine.check_json);
        assert_eq!(engine.endpoint, Endpoint::Completions);
        let gateway = s.provider("p", Endpoint::Chat, Reader::Gateway, http);
        assert!(!gateway.stream && !gateway.check_json, "the gateway streams and validates by itself");
        assert_eq!((gateway.endpoint, gateway.key.is_none()), (Endpoint::Chat, true));
    }

    #[test]
    fn a_missing_credential_is_an_error_naming_its_variable_only_when_paid() {
        use crate::client::RetryPolicy;
        let http = HttpClient::new(Duration::from_secs(1), RetryPolicy::default()).unwrap();
        let var = "TAILCUT_TEST_CHECK_UNSET_0b7e";
        let paid = Check { name: "p", paid: true, http: http.clone() };
        let e = paid.secret(var, no_fallback).unwrap_err();
        assert!(matches!(&e, CheckError::Missing { var: v } if v == var), "{e:?}");
        assert_eq!(e.to_string(), format!("credential missing: set {var}"));
        let local = Check { name: "p", paid: false, http };
        assert_eq!(local.secret(var, no_fallback).unwrap().expose(), "");
        let rejected: CheckError = ProviderError::Rejected { status: 401, message: "no".into() }.into();
        assert_eq!(rejected.to_string(), ProviderError::Rejected { status: 401, message: "no".into() }.to_string());
        assert_eq!(CheckError::Rejected { status: 403 }.to_string(), "credential rejected (HTTP 403)");
    }

    #[test]
    fn loopback_is_free() {
        assert!(!is_paid("http://127.0.0.1:8000/v1"));
        assert!(!is_paid("http://localhost/v1"));
        assert!(!is_paid("http://[::1]:9/x"));
        assert!(is_paid("https://api.runpod.ai/v2/e"));
    }
}
