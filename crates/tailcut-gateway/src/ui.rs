//! The gateway's status page, `GET /ui`: one server-rendered HTML page (no script, no
//! external asset) with the routes (policy and providers), spend against every budget,
//! and the last [`RECENT`] requests (winner, latency, attempts, each receipt's evidence).
//!
//! This module owns the page and its admin check; the bounded buffer of recent requests
//! it shows is [`crate::observe::Recent`], which handlers record into when a race settles.
//!
//! The page shows every tenant's routes, spend and requests, so only a key with
//! `admin = true` may open it (any caller when `auth = "none"`). It takes the key as
//! `Authorization: Bearer KEY` or, so that a browser can ask for it, as the password of
//! HTTP Basic authentication (a 401 carries the `WWW-Authenticate: Basic` challenge).

use crate::error::{ApiError, BadRequest, Forbidden, Unauthorized};
use crate::observe::hedge_reason;
use crate::state::{AppState, Runtime};
use crate::tenancy::sha256_hex;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::fmt::Write;
use std::sync::Arc;
use tailcut_config::{AuthMode, RouteKind};
use tailcut_core::trace::{RequestTrace, Role};
use tailcut_core::MicroUsd;

/// `GET /ui`.
pub(crate) async fn page(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let rt = st.rt();
    if let Err(e) = admin(&rt, &headers) {
        let challenge = matches!(e, ApiError::Unauthorized(_));
        let mut resp = e.into_response();
        if challenge {
            resp.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"tailcut\", charset=\"UTF-8\""));
        }
        return resp;
    }
    let html = render(&rt, &st.sinks.recent.newest_first(), &tailcut_core::trace::now_rfc3339());
    let mut resp = html.into_response();
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    // The page names tenants and spend: never cached, never framed.
    resp.headers_mut().insert("cache-control", HeaderValue::from_static("no-store"));
    resp.headers_mut().insert("x-frame-options", HeaderValue::from_static("DENY"));
    resp.headers_mut()
        .insert("content-security-policy", HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; img-src data:"));
    resp
}

/// Whether the caller may see the page: any caller with `auth = "none"`, otherwise a
/// key with `admin = true` (401 without a valid key, 403 with another key).
pub(crate) fn admin(rt: &Runtime, headers: &HeaderMap) -> Result<(), ApiError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(BadRequest::TwoAuthorizations.into());
    }
    if rt.config.gateway.auth == AuthMode::None {
        return Ok(());
    }
    let key = first.and_then(|v| v.to_str().ok()).and_then(key_of).ok_or_else(|| ApiError::from(Unauthorized::AdminKeyNeeded))?;
    let tenant = rt.tenants.get(&sha256_hex(&key)).ok_or_else(|| ApiError::from(Unauthorized::InvalidKey))?;
    if !tenant.admin {
        return Err(Forbidden::NotAdmin { key: tenant.name.clone() }.into());
    }
    Ok(())
}

/// The key in an `Authorization` value: `Bearer KEY`, or `Basic` with KEY as the password.
fn key_of(value: &str) -> Option<String> {
    use base64::Engine;
    let key = if let Some(k) = value.strip_prefix("Bearer ") {
        k.trim().to_string()
    } else {
        let encoded = value.strip_prefix("Basic ")?.trim();
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
        let pair = String::from_utf8(decoded).ok()?;
        pair.split_once(':')?.1.to_string()
    };
    (!key.is_empty()).then_some(key)
}

/// Text for HTML element content and attribute values (the status page's, and the
/// CLI's `--html` files').
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn usd(m: MicroUsd) -> String {
    format!("${:.4}", m.0 as f64 / 1e6)
}

fn role(r: Role) -> &'static str {
    match r {
        Role::Primary => "primary",
        Role::Hedge => "hedge",
        Role::Fallback => "fallback",
        Role::Racer => "racer",
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d232a;background:#fafbfc}\
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .5em}\
table{border-collapse:collapse;background:#fff;width:100%}\
th,td{border:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}\
th{background:#eef1f4}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.muted{color:#687480}.ok{color:#1a7f37}.bad{color:#cf222e;font-weight:600}\
.bar{background:#eef1f4;width:220px;height:12px;position:relative;display:inline-block;vertical-align:middle}\
.fill{background:#2f81f7;height:12px}.fill.warn{background:#d29922}.fill.over{background:#cf222e}\
.tick{position:absolute;top:-2px;width:2px;height:16px;background:#1d232a}\
ul{margin:0;padding-left:1.1em}code{font-size:12px}";

/// The whole page.
pub fn render_page(
    rt_routes: &[RouteRow],
    budgets: &[BudgetRow],
    learned: &[LearnedRow],
    recent: &[(String, RequestTrace)],
    now: &str,
) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>tailcut gateway</title>\
         <link rel=\"icon\" href=\"data:,\"><style>{STYLE}</style></head><body>\
         <h1>tailcut gateway</h1><div class=\"muted\">status at {} (reload the page to refresh)</div>",
        escape_html(now)
    );
    h.push_str("<h2>Routes</h2><table><tr><th>route</th><th>kind</th><th>models</th><th>policy</th><th>providers</th></tr>");
    for r in rt_routes {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} <div class=\"muted\"><code>{}</code></div></td><td>{}</td></tr>",
            escape_html(&r.name),
            r.kind,
            escape_html(&r.models.join(", ")),
            escape_html(&r.policy),
            escape_html(&r.policy_label),
            escape_html(&r.providers.join(", "))
        );
    }
    h.push_str("</table>");
    if !learned.is_empty() {
        h.push_str(
            "<h2>Learned models</h2><table><tr><th>route/slot</th><th>provider</th><th>samples</th>\
             <th>p50</th><th>p95</th><th>p99</th><th>P(warm) by idle gap</th></tr>",
        );
        let ms = |x: Option<f64>| x.map_or("-".to_string(), |s| format!("{:.1} ms", s * 1000.0));
        for r in learned {
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                escape_html(&r.key),
                escape_html(&r.provider),
                r.samples,
                ms(r.quantiles[0]),
                ms(r.quantiles[1]),
                ms(r.quantiles[2]),
                if r.p_warm.is_empty() { "-".to_string() } else { escape_html(&r.p_warm) }
            );
        }
        h.push_str("</table>");
    }
    h.push_str(
        "<h2>Spend against budgets</h2><table><tr><th>account</th><th>spent</th><th>soft stop</th><th>hard stop</th><th>of the hard stop</th></tr>",
    );
    for b in budgets {
        let spent = b.spent.map_or("<span class=\"bad\">ledger unreadable</span>".to_string(), usd);
        let soft = b.soft_stop.map_or("-".to_string(), usd);
        let hard = b.hard_stop.map_or("-".to_string(), usd);
        let bar = match (b.spent, b.hard_stop) {
            (Some(s), Some(hs)) if hs.0 > 0 => {
                let used = s.0 as f64 / hs.0 as f64;
                let soft_at = b.soft_stop.map(|x| x.0 as f64 / hs.0 as f64);
                let class = if used >= 0.9 || soft_at.is_some_and(|a| used >= a) {
                    "over"
                } else if used >= 0.7 {
                    "warn"
                } else {
                    ""
                };
                let tick = soft_at.map_or(String::new(), |a| {
                    format!("<span class=\"tick\" style=\"left:{:.1}%\" title=\"soft stop\"></span>", (a * 100.0).min(100.0))
                });
                format!(
                    "<span class=\"bar\"><div class=\"fill {class}\" style=\"width:{:.1}%\"></div>{tick}</span> {:.1}%",
                    (used * 100.0).clamp(0.0, 100.0),
                    used * 100.0
                )
            }
            _ => "-".into(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{spent}</td><td class=\"n\">{soft}</td><td class=\"n\">{hard}</td><td>{bar}</td></tr>",
            escape_html(&b.account)
        );
    }
    h.push_str("</table>");
    let _ = write!(
        h,
        "<h2>Recent requests ({} kept, at most {})</h2><table><tr><th>time (UTC)</th><th>request id</th><th>route</th><th>winner</th>\
         <th>latency</th><th>hedge</th><th>attempts</th><th>receipts (evidence)</th></tr>",
        recent.len(),
        crate::observe::RECENT
    );
    if recent.is_empty() {
        h.push_str("<tr><td colspan=\"8\" class=\"muted\">no request has finished since the gateway started</td></tr>");
    }
    for (route, t) in recent {
        let winner = t
            .winner
            .as_deref()
            .map_or("<span class=\"bad\">none</span>".to_string(), |w| format!("<span class=\"ok\">{}</span>", escape_html(w)));
        let latency = t.winner_total_ms.map_or("-".to_string(), |ms| format!("{ms:.1} ms"));
        let mut attempts = String::from("<ul>");
        for a in &t.attempts {
            let state = a.outcome.map_or("unresolved", |s| s.wire());
            // Validity only means something for a result that arrived.
            let valid = match (a.outcome, a.valid) {
                (Some(tailcut_core::JobState::Completed) | Some(tailcut_core::JobState::Running), Some(true)) => " valid",
                (Some(tailcut_core::JobState::Completed), Some(false)) => " <span class=\"bad\">invalid</span>",
                _ => "",
            };
            let wall = a.wall_ms.map_or(String::new(), |ms| format!(", {ms:.1} ms"));
            let _ = write!(attempts, "<li>{} ({}): {}{valid}{wall}</li>", escape_html(&a.provider), role(a.role), escape_html(state));
        }
        attempts.push_str("</ul>");
        let mut receipts = String::new();
        if t.receipts.is_empty() {
            receipts.push_str("<span class=\"muted\">none</span>");
        } else {
            receipts.push_str("<ul>");
            for r in &t.receipts {
                let leaked = if r.leaked { " <span class=\"bad\">LEAKED</span>" } else { "" };
                let _ = write!(receipts, "<li>{}: {}{leaked}</li>", escape_html(&r.provider), r.evidence.wire());
            }
            receipts.push_str("</ul>");
        }
        let _ = write!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{winner}</td><td class=\"n\">{latency}</td><td>{}</td><td>{attempts}</td><td>{receipts}</td></tr>",
            escape_html(&t.ts),
            escape_html(&t.request_id),
            escape_html(route),
            hedge_reason(&t.decisions)
        );
    }
    h.push_str("</table></body></html>\n");
    h
}

/// A route as the page lists it.
#[derive(Debug, Clone)]
pub struct RouteRow {
    /// Name.
    pub name: String,
    /// `openai` or `jobs`.
    pub kind: &'static str,
    /// Models served (OpenAI routes).
    pub models: Vec<String>,
    /// The configured policy's name.
    pub policy: String,
    /// The built policy's label (`hedge:a->b@300ms`).
    pub policy_label: String,
    /// Providers, in the policy's order.
    pub providers: Vec<String>,
}

/// One provider of a learned route's live model, as the page lists it.
#[derive(Debug, Clone)]
pub struct LearnedRow {
    /// `route/slot`.
    pub key: String,
    /// Provider.
    pub provider: String,
    /// Attempts observed.
    pub samples: u64,
    /// Learned p50, p95, p99, s.
    pub quantiles: [Option<f64>; 3],
    /// P(warm) per observed idle-gap bucket, as text (`<5s: 0.98 (40)`).
    pub p_warm: String,
}

fn learned(rt: &Runtime) -> Vec<LearnedRow> {
    let mut out = Vec::new();
    for m in &rt.learned.models {
        let Some(model) = m.policy.model() else { continue };
        for p in &model.providers {
            let p_warm: Vec<String> = p
                .warm_by_gap
                .iter()
                .enumerate()
                .filter(|(_, r)| r.samples() > 0)
                .map(|(k, r)| format!("{}: {:.2} ({})", tailcut_model::model::gap_label(k), r.rate(0.0, 0.0), r.samples()))
                .collect();
            out.push(LearnedRow {
                key: m.key.clone(),
                provider: p.name.clone(),
                samples: p.samples(),
                quantiles: [0.5, 0.95, 0.99].map(|q| p.latency.quantile_reached(q).filter(|x| x.is_finite())),
                p_warm: p_warm.join(", "),
            });
        }
    }
    out
}

/// An account's spend as the page lists it.
pub type BudgetRow = crate::budgets::BudgetLine;

fn routes(rt: &Runtime) -> Vec<RouteRow> {
    rt.config
        .routes
        .iter()
        .map(|r| {
            let label = match r.kind {
                RouteKind::OpenAi => rt.models.values().find(|m| m.cfg.name == r.name).map(|m| m.chat.policy.label().to_string()),
                RouteKind::Jobs => rt.jobs.get(&r.name).map(|j| j.policy.label().to_string()),
            }
            .unwrap_or_default();
            // The providers the route's policy launches, not every provider its hedger
            // could reach (a hedger holds all providers of the route's kind).
            let providers = rt.config.policy(&r.policy).map(tailcut_config::spec_providers).unwrap_or_default();
            RouteRow {
                name: r.name.clone(),
                kind: if r.kind == RouteKind::OpenAi { "openai" } else { "jobs" },
                models: r.models.clone(),
                policy: r.policy.clone(),
                policy_label: label,
                providers,
            }
        })
        .collect()
}

fn render(rt: &Runtime, recent: &[(String, RequestTrace)], now: &str) -> String {
    render_page(&routes(rt), &rt.budgets(), &learned(rt), recent, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{Recent, RECENT};

    fn trace(id: &str) -> RequestTrace {
        serde_json::from_value(serde_json::json!({
            "kind": "tailcut_request", "schema_version": 1, "ts": "2026-12-03T09:00:00.000Z",
            "request_id": id, "policy": "hedge:a->b@150ms", "hedge_launched": true,
            "attempts": [], "winner": "b<script>", "winner_valid_at_ms": 20.0, "winner_total_ms": 170.5,
            "receipts": [], "projected_cost_micro_usd": 10
        }))
        .unwrap()
    }

    #[test]
    fn the_buffer_keeps_the_newest_requests_only() {
        let r = Recent::default();
        for i in 0..RECENT + 7 {
            r.record(if i % 2 == 0 { "even" } else { "odd" }, trace(&format!("req-{i}")));
        }
        let kept = r.newest_first();
        assert_eq!(kept.len(), RECENT);
        assert_eq!(kept[0].1.request_id, format!("req-{}", RECENT + 6));
        assert_eq!(kept[0].0, "even", "a reused route string holds the new route");
        assert_eq!(kept[RECENT - 1].1.request_id, "req-7");
    }

    #[test]
    fn the_page_escapes_what_it_shows() {
        let page = render_page(&[], &[], &[], &[("r&d".into(), trace("<b>id</b>"))], "now");
        assert!(page.contains("&lt;b&gt;id&lt;/b&gt;") && page.contains("r&amp;d") && page.contains("b&lt;script&gt;"), "{page}");
        assert!(!page.contains("<script"), "no script anywhere: {page}");
        assert!(page.contains("170.5 ms") && page.contains(">timer<"), "{page}");
    }

    #[test]
    fn keys_come_as_bearer_or_as_the_basic_password() {
        assert_eq!(key_of("Bearer k1").as_deref(), Some("k1"));
        // "ops:k2" in base64.
        assert_eq!(key_of("Basic b3BzOmsy").as_deref(), Some("k2"));
        assert_eq!(key_of("Basic !!!"), None);
        assert_eq!(key_of("Bearer "), None);
        assert_eq!(key_of("Token k"), None);
    }
}
