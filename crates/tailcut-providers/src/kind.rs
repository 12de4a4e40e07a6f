//! The one list of provider kinds — which HTTP API a provider speaks — and the dispatch
//! from a kind to its provider module. Configuration, the gateway and the mock servers
//! all read this list (`for_each_provider_kind!` in `lib.rs`); adding a kind is one line there
//! plus its module (`docs/adding-a-provider.md`). [`HttpConfig`] is a configured HTTP provider of any kind.

use crate::client::RetryPolicy;
use crate::config::{is_paid, Build, Check, CheckError, HttpSettings, Invalid, ProviderModule, SharedKeys};
use crate::HttpClient;
use serde::de::{DeserializeSeed, Deserializer, Error as _};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::{ProviderApi, RateNanoUsdPerSec};

/// Generates [`ProviderKind`], [`KindConfig`] and [`KindSettings`] from one list:
/// variant, config spelling, provider module.
macro_rules! provider_kinds {
    ($($(#[doc = $doc:literal])* $kind:ident = $name:literal => $module:ident,)*) => {
        /// Which API a provider speaks (`adapter = "..."` in `[providers.NAME]`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ProviderKind {
            /// The in-process simulator (configured by `tailcut-config`, served over
            /// HTTP by `tailcut-simserver`).
            Sim,
            $($(#[doc = $doc])* $kind,)*
        }

        impl ProviderKind {
            /// Every kind.
            pub const ALL: &'static [ProviderKind] = &[ProviderKind::Sim, $(ProviderKind::$kind,)*];
            /// The kinds spoken over HTTP by a provider module of this crate (and by a
            /// mock server of `tailcut-mockproviders`).
            pub const HTTP: &'static [ProviderKind] = &[$(ProviderKind::$kind,)*];

            /// The config spelling.
            pub fn name(self) -> &'static str {
                match self {
                    $(ProviderKind::$kind => $name,)*
                    ProviderKind::Sim => "sim",
                }
            }

            /// The fewest keys that configure this kind
            /// ([`ProviderModule::MINIMAL_TABLE`]; none for the simulator).
            pub fn minimal_table(self) -> &'static str {
                match self {
                    $(ProviderKind::$kind => <crate::$module::Settings as ProviderModule>::MINIMAL_TABLE,)*
                    ProviderKind::Sim => "",
                }
            }

            /// The keys its provider module takes (none for the simulator, whose keys
            /// `tailcut-config` reads).
            pub fn fields(self) -> &'static [&'static str] {
                match self {
                    $(ProviderKind::$kind => crate::config::fields::<<crate::$module::Settings as ProviderModule>::Config>(),)*
                    ProviderKind::Sim => &[],
                }
            }
        }

        /// A provider's kind-specific keys as written: one variant per provider module,
        /// selected by `adapter` (see [`KindSeed`]).
        #[derive(Debug, Clone)]
        pub enum KindConfig {
            $($(#[doc = $doc])* $kind(<crate::$module::Settings as ProviderModule>::Config),)*
        }

        impl<'de> DeserializeSeed<'de> for KindSeed {
            type Value = KindConfig;

            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<KindConfig, D::Error> {
                match self.0 {
                    $(ProviderKind::$kind => Deserialize::deserialize(d).map(KindConfig::$kind),)*
                    ProviderKind::Sim => Err(D::Error::custom("the simulator has no provider module here")),
                }
            }
        }

        /// A provider's kind-specific settings, checked: one variant per provider module.
        #[derive(Debug, Clone)]
        pub enum KindSettings {
            $($(#[doc = $doc])* $kind(crate::$module::Settings),)*
        }

        impl KindConfig {
            /// Checks the keys and fills in defaults (the provider module's `from_config`).
            pub fn settings(self) -> Result<KindSettings, Invalid> {
                match self {
                    $(KindConfig::$kind(c) => ProviderModule::from_config(c).map(KindSettings::$kind),)*
                }
            }
        }

        impl KindSettings {
            /// Which kind.
            pub fn kind(&self) -> ProviderKind {
                match self {
                    $(KindSettings::$kind(_) => ProviderKind::$kind,)*
                }
            }

            /// The URL submissions go to.
            pub fn base(&self) -> &str {
                match self {
                    $(KindSettings::$kind(s) => s.base(),)*
                }
            }

            /// The environment variable holding the credential, if any.
            pub fn key_env(&self) -> Option<&str> {
                match self {
                    $(KindSettings::$kind(s) => s.key_env(),)*
                }
            }

            /// Builds the provider (the module's factory).
            pub fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
                match self {
                    $(KindSettings::$kind(s) => s.build(cx),)*
                }
            }

            /// The module's read-only credential check.
            pub async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError> {
                match self {
                    $(KindSettings::$kind(s) => s.check_credentials(cx).await,)*
                }
            }
        }
    };
}

crate::for_each_provider_kind!(provider_kinds);

impl ProviderKind {
    /// The kind with config spelling `s`.
    pub fn parse(s: &str) -> Option<ProviderKind> {
        ProviderKind::ALL.iter().copied().find(|k| k.name() == s)
    }

    /// The config spellings of every kind, for an error message (`a, b or c`).
    pub fn expected() -> String {
        let names: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.name()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads the keys of one kind's provider module (a [`DeserializeSeed`], so that the
/// caller's deserializer, and with it its key-path tracking, reads them).
#[derive(Debug, Clone, Copy)]
pub struct KindSeed(pub ProviderKind);

impl KindConfig {
    /// Checks the keys with the shared ones into a configured HTTP provider.
    pub fn http(self, shared: &SharedKeys) -> Result<HttpConfig, Invalid> {
        let settings = shared.settings()?;
        Ok(HttpConfig { kind: self.settings()?, settings })
    }
}

/// A configured HTTP provider: its kind's settings and the settings every HTTP kind
/// shares. Credentials are resolved only when it is built or checked.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The kind's settings.
    pub kind: KindSettings,
    /// The shared settings.
    pub settings: HttpSettings,
}

impl HttpConfig {
    /// Which kind.
    pub fn kind(&self) -> ProviderKind {
        self.kind.kind()
    }

    /// Whether submitting here costs money: anything not on a loopback address.
    pub fn is_paid(&self) -> bool {
        is_paid(self.kind.base())
    }

    /// The environment variable holding the credential, if any.
    pub fn key_env(&self) -> Option<&str> {
        self.kind.key_env()
    }

    /// The OpenAI-compatible settings, for a provider of that kind.
    pub fn openai(&self) -> Option<&crate::openai::Settings> {
        match &self.kind {
            KindSettings::OpenAi(s) => Some(s),
            _ => None,
        }
    }

    /// Builds the provider named `name`. `strict` requires a paid provider's credential.
    pub fn build(&self, name: &str, rate: RateNanoUsdPerSec, strict: bool) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let http = HttpClient::new(self.settings.timeout, RetryPolicy::default())
            .map_err(|e| Invalid::new("", format!("cannot build the HTTP client: {e}")))?;
        let cx = Build { name, kind: self.kind().name(), rate, strict, paid: self.is_paid(), settings: self.settings, http };
        self.kind.build(&cx)
    }

    /// A read-only credential check (never submits work); see
    /// [`ProviderModule::check_credentials`].
    pub async fn check_credentials(&self, name: &str) -> Result<String, CheckError> {
        let http = HttpClient::new(self.settings.timeout.min(Duration::from_secs(20)), RetryPolicy { attempts: 2, ..Default::default() })?;
        self.kind.check_credentials(&Check { name, paid: self.is_paid(), http }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_every_module_has_keys() {
        for k in ProviderKind::ALL {
            assert_eq!(ProviderKind::parse(k.name()), Some(*k));
        }
        for k in ProviderKind::HTTP {
            assert!(!k.fields().is_empty(), "{k}");
        }
        assert_eq!(ProviderKind::parse("generic"), None, "the generic job API is spelled `http` in config");
        assert_eq!(ProviderKind::expected(), "sim, runpod, replicate, fal, baseten, modal, cerebrium, openai, vast or http");
    }
}
