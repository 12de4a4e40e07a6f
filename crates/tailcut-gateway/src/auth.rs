//! Who is calling and what they may do. The API key (`Authorization: Bearer <key>`) is
//! checked before anything else about a request is looked at, so an unauthenticated
//! caller learns nothing (not even whether a model or a job exists); then the caller's
//! route permission and rate limit. Every jobs and OpenAI route goes through here.

use crate::error::{ApiError, BadRequest, Forbidden, TooMany, Unauthorized};
use crate::state::Runtime;
use crate::tenancy::{sha256_hex, Tenant};
use axum::http::{header::AUTHORIZATION, HeaderMap};
use std::sync::Arc;
use tailcut_config::AuthMode;

/// The caller's tenant. With keys configured: 401 for a missing, malformed or unknown key,
/// 400 for more than one `Authorization` header (which one a proxy in front of us would
/// have honoured is unknowable). With `auth = "none"`: the anonymous tenant. With no keys
/// and no explicit `auth = "none"`: every request is refused (fail closed).
pub(crate) fn authenticate(rt: &Runtime, headers: &HeaderMap) -> Result<Arc<Tenant>, ApiError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(BadRequest::TwoAuthorizations.into());
    }
    if rt.config.gateway.auth == AuthMode::None {
        return Ok(rt.anonymous.clone());
    }
    let Some(value) = first else {
        return Err(Unauthorized::MissingKey.into());
    };
    let key = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::from(Unauthorized::Malformed))?;
    rt.tenants.get(&sha256_hex(key)).cloned().ok_or_else(|| ApiError::from(Unauthorized::InvalidKey))
}

/// Whether `tenant` may use `route`, and takes one request from its rate limit.
pub(crate) fn authorize(tenant: &Tenant, route: &str) -> Result<(), ApiError> {
    if !may_use(tenant, route) {
        return Err(Forbidden::Route { route: route.to_string() }.into());
    }
    if let Some(b) = &tenant.bucket {
        if !b.take() {
            return Err(TooMany::Rate { key: tenant.name.clone() }.into());
        }
    }
    Ok(())
}

/// Whether `tenant`'s key lists `route` (or lists no routes, which allows all).
pub(crate) fn may_use(tenant: &Tenant, route: &str) -> bool {
    tenant.routes.as_ref().is_none_or(|routes| routes.iter().any(|r| r == route))
}
