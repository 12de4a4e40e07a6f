//! The benchmark's configurations: nginx's instant upstream and its `proxy_pass`
//! baseline, and the gateway's (timer hedges, or learned `auto` routes).

use super::{Path, CHAT, SSE};

/// The instant upstream: JSON completions everywhere, an SSE stream under /sse/.
pub(crate) fn upstream_conf(dir: &Path, port: u16) -> String {
    let sse: String = SSE.iter().map(|l| format!("{l}\\n\\n")).collect();
    format!(
        "worker_processes 1;\nevents {{ worker_connections 16384; }}\n\
         http {{ access_log off; client_body_temp_path {d};\n\
           server {{ listen 127.0.0.1:{port} backlog=4096; keepalive_requests 10000000;\n\
             location /sse/ {{ default_type text/event-stream; return 200 '{sse}'; }}\n\
             location / {{ default_type application/json; return 200 '{CHAT}'; }} }} }}\n",
        d = dir.display()
    )
}

/// The baseline: nginx `proxy_pass` with upstream keep-alive, one worker per core.
pub(crate) fn proxy_conf(dir: &Path, port: u16, upstream: u16) -> String {
    format!(
        "worker_processes auto;\nevents {{ worker_connections 16384; }}\n\
         http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d};\n\
           upstream up {{ server 127.0.0.1:{upstream}; keepalive 1024; keepalive_requests 10000000; }}\n\
           server {{ listen 127.0.0.1:{port} backlog=4096; keepalive_requests 10000000;\n\
             location / {{ proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }} }} }}\n",
        d = dir.display()
    )
}

/// The gateway's configuration: timer hedges, or (`auto`) learned `auto` routes over the
/// same providers (priced, so that a second attempt costs something, with nothing
/// projected per submission: the ledger never stops the bench).
pub(crate) fn gateway_toml(upstream: &str, auto: bool) -> String {
    let toml = fixed_toml(upstream);
    if !auto {
        return toml;
    }
    let learned = |p: &str, a: &str, b: &str| {
        format!("[policies.{p}]\nkind = \"auto\"\nproviders = [\"{a}\", \"{b}\"]\ndeadline_ms = 500\ntarget_miss = 0.01\n")
    };
    let toml = toml.replace("rate_usd_per_s = 0.0\n", "rate_usd_per_s = 0.001\nexpected_run_s = 0\n");
    let cut = toml.find("[policies.h]").expect("the policies");
    let routes = &toml[toml.find("[routes.chat]").expect("the routes")..];
    format!("{}{}{}{routes}", &toml[..cut], learned("h", "a", "b"), learned("hs", "sa", "sb"))
}

fn fixed_toml(upstream: &str) -> String {
    let mut toml = String::from(
        "[budget]\nledger = \":memory:\"\n[gateway]\nauth = \"none\"\nstore = \":memory:\"\nmax_in_flight = 100000\ntotal_timeout_s = 60\n\
         hedge_budget_percent = 1000\nhedge_budget_burst = 100000\n",
    );
    for (p, base) in [
        ("a", format!("{upstream}/v1")),
        ("b", format!("{upstream}/v1")),
        ("sa", format!("{upstream}/sse/v1")),
        ("sb", format!("{upstream}/sse/v1")),
    ] {
        toml.push_str(&format!("[providers.{p}]\nadapter = \"openai\"\nbase_url = \"{base}\"\nrate_usd_per_s = 0.0\n"));
    }
    toml.push_str(
        "[policies.h]\nkind = \"hedge\"\nprimary = \"a\"\nhedge = \"b\"\ndelay_ms = 500\n\
         [policies.hs]\nkind = \"hedge\"\nprimary = \"sa\"\nhedge = \"sb\"\ndelay_ms = 500\n\
         [routes.chat]\nkind = \"openai\"\nmodels = [\"m\"]\npolicy = \"h\"\nfirst_token_hedge_ms = 500\n\
         [routes.stream]\nkind = \"openai\"\nmodels = [\"s\"]\npolicy = \"hs\"\nfirst_token_hedge_ms = 500\n",
    );
    toml
}
