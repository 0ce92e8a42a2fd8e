//! What reaches a session from outside the loop: the [`lease`] that keeps
//! it held, the inbox controls ([`steer`]) and the approval gate with the
//! operator's answers ([`approvals`]).

pub mod approvals;
pub(crate) mod lease;
pub(crate) mod steer;
