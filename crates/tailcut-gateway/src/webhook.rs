//! Job webhooks: where a finished job's JSON may be posted. Only `http`/`https` URLs
//! whose every resolved address is public, unless the configuration explicitly allows
//! private targets (`gateway.webhook_allow_private`): a caller must not be able to make
//! the gateway POST into its own network (loopback admin ports, cloud metadata, other
//! pods). The name is resolved again at delivery and the connection pinned to the
//! addresses just checked, so a DNS answer that changes in between (rebinding) cannot
//! redirect the POST; redirects are not followed.
//!
//! A refusal names no address and does not say whether the host resolved at all: the
//! check must not be a way to read the gateway's internal DNS. The jobs API checks a
//! webhook only after the caller is authorized for the route.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Why a webhook target was refused or its delivery failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Not a URL.
    #[error("not a valid URL: {0}")]
    Url(#[from] url::ParseError),
    /// A scheme other than http/https.
    #[error("scheme `{scheme}` is not allowed (http or https only)")]
    Scheme {
        /// The URL's scheme.
        scheme: String,
    },
    /// No host, or credentials in the URL.
    #[error("{0}")]
    Shape(&'static str),
    /// The host did not resolve, or resolves to an address that is not public (one
    /// answer for both, naming no address).
    #[error("refused: not a public address")]
    NotPublic,
    /// The POST failed.
    #[error("delivery failed: {0}")]
    Delivery(#[from] reqwest::Error),
    /// The target answered with a status other than 2xx.
    #[error("delivery failed: HTTP {status}")]
    Status {
        /// The status.
        status: u16,
    },
}

/// How long a delivery may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A URL checked as a webhook target, with the addresses its host resolved to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL.
    pub url: reqwest::Url,
    host: String,
    addrs: Vec<SocketAddr>,
}

/// Checks `url` as a webhook target: scheme, shape, and every address its host resolves
/// to (refusing non-public ones unless `allow_private`).
pub async fn check(url: &str, allow_private: bool) -> Result<Target, WebhookError> {
    let parsed = reqwest::Url::parse(url)?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(WebhookError::Scheme { scheme: parsed.scheme().to_string() });
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(WebhookError::Shape("credentials in a webhook URL are not allowed"));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        None => return Err(WebhookError::Shape("a webhook URL needs a host")),
    };
    let port = parsed.port_or_known_default().ok_or(WebhookError::Shape("a webhook URL needs a port"))?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port)).await.map_err(|_| WebhookError::NotPublic)?.collect();
    if addrs.is_empty() || (!allow_private && addrs.iter().any(|a| non_public(a.ip()).is_some())) {
        return Err(WebhookError::NotPublic);
    }
    Ok(Target { url: parsed, host, addrs })
}

/// Posts `body` to the target, after checking it again; the connection goes only to the
/// addresses checked, and redirects are refused.
pub async fn deliver(target: &Target, allow_private: bool, body: &serde_json::Value) -> Result<(), WebhookError> {
    let fresh = check(target.url.as_str(), allow_private).await?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve_to_addrs(&fresh.host, &fresh.addrs)
        .timeout(DELIVERY_TIMEOUT)
        .build()?;
    let resp = client.post(fresh.url).json(body).send().await?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(WebhookError::Status { status: resp.status().as_u16() })
    }
}

/// What kind of non-public address `ip` is, or `None` for a public one.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b) {
        _ if ip.is_loopback() => "loopback",
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "cloud metadata",
        _ if ip.is_link_local() => "link-local",
        _ if ip.is_private() => "private",
        (0, _) => "unspecified (\"this network\")",
        (100, 64..=127) => "shared (carrier-grade NAT)",
        (192, 0) if c == 0 || c == 2 => "reserved",
        (198, 18..=19) => "benchmarking",
        (198, 51) if c == 100 => "documentation",
        (203, 0) if c == 113 => "documentation",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() => "broadcast",
        (240..=255, _) => "reserved",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // Addresses that carry an IPv4 address are judged by it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    if s[0] == 0x0064 && s[1] == 0xff9b {
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48).
        return non_public_v4(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8));
    }
    if s[0] == 0x2002 {
        // 6to4 carries its IPv4 address in bits 16-48.
        return non_public_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    }
    Some(match s[0] {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if s[..6] == [0; 6] => "IPv4-compatible (deprecated)",
        0xfd00 if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) => "cloud metadata",
        x if x & 0xfe00 == 0xfc00 => "unique local (private)",
        x if x & 0xffc0 == 0xfe80 => "link-local",
        x if x & 0xffc0 == 0xfec0 => "site-local (deprecated)",
        x if x & 0xff00 == 0xff00 => "multicast",
        0x2001 if s[1] == 0x0db8 => "documentation",
        0x0100 if s[1..4] == [0, 0, 0] => "discard-only",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_classified() {
        for (ip, public) in [
            ("8.8.8.8", true),
            ("1.1.1.1", true),
            ("127.0.0.1", false),
            ("127.8.9.10", false),
            ("10.1.2.3", false),
            ("172.16.0.1", false),
            ("172.32.0.1", true),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("169.254.1.1", false),
            ("0.0.0.0", false),
            ("100.100.100.200", false),
            ("224.0.0.1", false),
            ("255.255.255.255", false),
            ("::1", false),
            ("::", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("64:ff9b::a9fe:a9fe", false),
            ("2002:7f00:1::", false),
            ("fd00:ec2::254", false),
            ("fc00::1", false),
            ("fe80::1", false),
            ("ff02::1", false),
            ("2606:4700:4700::1111", true),
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(non_public(ip).is_none(), public, "{ip}: {:?}", non_public(ip));
        }
    }

    #[tokio::test]
    async fn only_http_urls_to_public_addresses_pass() {
        for (url, why) in [
            ("file:///etc/passwd", "scheme `file`"),
            ("gopher://example.com/", "scheme `gopher`"),
            ("http://user:pw@8.8.8.8/", "credentials"),
            ("not a url", "not a valid URL"),
        ] {
            let e = check(url, false).await.unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
        }
        // Non-public targets, and names that do not resolve, get one answer that names
        // no address: the check reveals nothing of the gateway's own DNS.
        for url in [
            "http://127.0.0.1:9/internal/admin",
            "http://localhost:9/",
            "http://[::1]:9/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.5/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://no-such-host.invalid/",
        ] {
            assert_eq!(check(url, false).await.unwrap_err().to_string(), "refused: not a public address", "{url}");
        }
        assert!(check("http://8.8.8.8:80/hook", false).await.is_ok());
        assert!(check("http://127.0.0.1:9/hook", true).await.is_ok());
        assert!(check("file:///etc/passwd", true).await.is_err(), "the scheme rule holds even when private targets are allowed");
    }
}
