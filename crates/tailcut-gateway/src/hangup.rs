//! A client hanging up while its request is raced: the connection's reader marks it
//! ([`Hangup`], from `tailcut_http`), and the race stops on it, cancelling its live
//! attempts with receipts as at the total timeout.

pub(crate) use tailcut_http::Hangup;
