//! What an OpenAI-style request answers once its race is over, the same for whole replies
//! ([`super::openai`]) and streams ([`super::stream`]): the reply headers, and the error
//! when no provider won (the client gone, out of time, or every provider's reason).
//! Both handlers call it, and it calls neither.

use crate::error::{ApiError, Upstream};
use crate::hangup::Hangup;
use crate::observe::names;
use crate::state::OpenAiRoute;
use axum::http::{HeaderMap, HeaderValue};
use std::sync::Arc;

/// The headers of a reply won by `winner`: the route's template (content type, route)
/// with the request id, winner, attempt count and hedge reason set in place (a copy and
/// a walk instead of hashing six header names into a fresh map).
pub(crate) fn headers(route: &OpenAiRoute, rid: &str, winner: &str, attempts: usize, reason: &'static str) -> HeaderMap {
    let mut h = route.reply_headers.clone();
    for (name, value) in h.iter_mut() {
        if name == names::REQUEST_ID {
            if let Ok(v) = HeaderValue::from_str(rid) {
                *value = v;
            }
        } else if name == names::WINNER {
            *value = route.provider_header(winner);
        } else if name == names::ATTEMPTS {
            *value = HeaderValue::from(attempts as u64);
        } else if name == names::HEDGE_REASON {
            *value = HeaderValue::from_static(reason);
        }
    }
    h
}

/// Most characters of one provider's reason in a client's error.
const REASON_CHARS: usize = 300;

/// Why a race had no winner: the client went away (499), the race ran out of time
/// (504), or every provider failed (502), each named with its reason.
pub(crate) fn no_winner(hangup: Option<&Arc<Hangup>>, timed_out: bool, attempts: usize, failures: &[(String, String)]) -> ApiError {
    if hangup.is_some_and(|h| h.happened()) {
        return ApiError::ClientClosed;
    }
    if timed_out {
        return ApiError::Timeout;
    }
    let why: Vec<String> = failures
        .iter()
        .map(|(provider, reason)| match reason.char_indices().nth(REASON_CHARS) {
            None => format!("{provider}: {reason}"),
            Some((cut, _)) => format!("{provider}: {}…", &reason[..cut]),
        })
        .collect();
    // Client-visible texts keep their words ("upstream"), which clients may match on.
    ApiError::from(Upstream::AllFailed { attempts, why })
}
