//! Configuration text the gateway and CLI tests share: the open test gateway (no
//! authentication, everything in memory), an OpenAI-compatible provider, and the
//! one-model routes most tests serve. Each piece is a TOML fragment; a test joins the
//! ones it needs and adds its own lines, so a change of configuration shape is made here
//! once.

/// `[budget]` with an in-memory ledger, then `[gateway]` with authentication off and an
/// in-memory job store. Lines that follow it land in `[gateway]`.
pub const OPEN_GATEWAY: &str = r#"
[budget]
ledger = ":memory:"
[gateway]
auth = "none"
store = ":memory:"
"#;

/// `[budget]` with an in-memory ledger, then `[gateway]` with an in-memory job store and
/// authentication on (the test adds its `keys`). Lines that follow it land in `[gateway]`.
pub const MEMORY_GATEWAY: &str = r#"
[budget]
ledger = ":memory:"
[gateway]
store = ":memory:"
"#;

/// Two simulated providers: `fastsim` answers at once (profile `instant`); `slowsim` is
/// RunPod-like and always cold (tens of seconds), so a job on it runs long enough to be
/// cancelled or to lose a hedge.
pub const SIM_PROVIDERS: &str = r#"
[providers.fastsim]
adapter = "sim"
sim = { profile = "instant" }
[providers.slowsim]
adapter = "sim"
sim = { profile = "runpod", cold_fast_p = 0.0 }
"#;

/// Policy `jobs` hedging [`SIM_PROVIDERS`]' always-cold `slowsim` with the instant
/// `fastsim` after 200 ms, served as the jobs route `jobs`: a job through it is hedged,
/// won by `fastsim`, and its loser cancelled with a receipt.
pub const SIM_HEDGED_JOBS: &str = r#"[policies.jobs]
kind = "hedge"
primary = "slowsim"
hedge = "fastsim"
delay_ms = 200
[routes.jobs]
kind = "jobs"
policy = "jobs"
"#;

/// `[providers.NAME]`: an OpenAI-compatible provider at `base_url` (ending in `/v1`)
/// that charges nothing.
pub fn openai_provider(name: &str, base_url: &str) -> String {
    format!("[providers.{name}]\nadapter = \"openai\"\nbase_url = \"{base_url}\"\nrate_usd_per_s = 0.0\n")
}

/// Policy `policy` sending each request to `provider` alone, served as the OpenAI route
/// `chat` for model `m`.
pub fn single_chat_route(policy: &str, provider: &str) -> String {
    format!("[policies.{policy}]\nkind = \"single\"\nprovider = \"{provider}\"\n{}", chat_route(policy))
}

/// Policy `policy` hedging `primary` with `hedge` after `delay_ms`, served as the OpenAI
/// route `chat` for model `m`; `route_lines` are added to `[routes.chat]`.
pub fn hedged_chat_route(policy: &str, primary: &str, hedge: &str, delay_ms: u64, route_lines: &str) -> String {
    format!(
        "[policies.{policy}]\nkind = \"hedge\"\nprimary = \"{primary}\"\nhedge = \"{hedge}\"\ndelay_ms = {delay_ms}\n{}{route_lines}\n",
        chat_route(policy)
    )
}

/// The OpenAI route `chat` serving model `m` through `policy`.
fn chat_route(policy: &str) -> String {
    format!("[routes.chat]\nkind = \"openai\"\nmodels = [\"m\"]\npolicy = \"{policy}\"\n")
}

/// The open test gateway ([`OPEN_GATEWAY`] plus `gateway_lines`) serving model `m` from
/// one provider, `up`, at `base_url`, through policy `one`.
pub fn one_provider_gateway(base_url: &str, gateway_lines: &str) -> String {
    format!("{OPEN_GATEWAY}{gateway_lines}\n{}{}", openai_provider("up", base_url), single_chat_route("one", "up"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_join_into_the_configuration_the_tests_wrote_by_hand() {
        let joined = one_provider_gateway("http://127.0.0.1:9/v1", "max_in_flight = 1");
        let table: toml::Table = joined.parse().unwrap();
        assert_eq!(table["gateway"]["auth"].as_str(), Some("none"));
        assert_eq!(table["gateway"]["max_in_flight"].as_integer(), Some(1));
        assert_eq!(table["providers"]["up"]["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(table["policies"]["one"]["provider"].as_str(), Some("up"));
        assert_eq!(table["routes"]["chat"]["models"][0].as_str(), Some("m"));
        let hedged: toml::Table =
            format!("{}{}", OPEN_GATEWAY, hedged_chat_route("h", "a", "b", 100, "first_token_hedge_ms = 5")).parse().unwrap();
        assert_eq!(hedged["policies"]["h"]["delay_ms"].as_integer(), Some(100));
        assert_eq!(hedged["routes"]["chat"]["first_token_hedge_ms"].as_integer(), Some(5));
    }
}
