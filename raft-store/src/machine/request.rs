//! The one place that knows the history of the log's format. An entry is a
//! [`Command`] as the release that proposed it wrote it: wrappers
//! (`WithTerms`, `Sequenced`, `SequencedAcks`, `ByOwner`,
//! `WithinSessionLimit`, `SequencedSet`) and three shapes of
//! session creation (`CreateSession`, `CreateSessionOnce`,
//! `CreateSessionAt`) were added as the API grew, and an entry written by any
//! release must apply the same way today. [`Request::of`] maps each shape to
//! the one request it makes, so `apply` and the file of each request never
//! peel a wrapper or tell the shapes apart.

use super::error::LeaseError;
use super::ratelimit::{LimitSpec, Take};
use super::types::{FencingToken, LogIndex, Origin, RequestId, SessionId};
use super::Command;
use super::{acquire, acquire_all};

/// What an entry asks of the machine.
pub(super) enum Request<'a> {
    CreateSession(NewSession<'a>),
    CloseSession {
        session: SessionId,
    },
    ExpireSessions {
        sessions: &'a [SessionId],
    },
    Acquire {
        acquire: acquire::Request<'a>,
        /// Its place in the session's exactly-once numbering, if any.
        sequence: Option<Sequence<'a>>,
    },
    Release {
        session: SessionId,
        name: &'a str,
        token: FencingToken,
    },
    CancelWait {
        session: SessionId,
        name: &'a str,
        request_id: RequestId,
    },
    Proclaim {
        session: SessionId,
        name: &'a str,
        token: FencingToken,
        value: &'a [u8],
    },
    ForceRelease {
        name: &'a str,
    },
    EndHold {
        name: &'a str,
        session: SessionId,
        token: FencingToken,
    },
    EndLockDelay {
        name: &'a str,
        /// The index that started the delay it ends (`None` from releases
        /// that did not name it: it ends whatever delay is in force).
        started: Option<LogIndex>,
    },
    Resize {
        name: &'a str,
        permits: u32,
    },
    DefineLimit {
        name: &'a str,
        spec: LimitSpec,
        now_ns: u64,
    },
    Take(Take<'a>),
    ReturnTokens {
        name: &'a str,
        lease: LogIndex,
        unused: u64,
        now_ns: u64,
        /// The identity returning, where authentication named one.
        owner: Option<&'a str>,
    },
    DeleteLimit {
        name: &'a str,
    },
    AcquireAll {
        all: acquire_all::Request<'a>,
        /// Its place in the session's exactly-once numbering, if any.
        sequence: Option<Sequence<'a>>,
    },
    /// A command that applies itself ([`super::Apply`]).
    Own(&'a dyn super::Apply),
    /// A wrapper around a command it cannot wrap: refused with this.
    Malformed(LeaseError),
}

/// A session to create.
pub(super) struct NewSession<'a> {
    pub ttl_ms: u64,
    pub client_name: &'a str,
    pub owner: &'a str,
    /// A retried creation with the same key gets the first one's session.
    pub key: Option<u128>,
    /// Where its client runs, if the client said.
    pub origin: Option<&'a Origin>,
    /// The most live sessions its owner may have (`None`: from a release
    /// that did not say, no limit).
    pub max_sessions: Option<u64>,
}

/// An acquisition's number in its session's exactly-once sequence.
pub(super) struct Sequence<'a> {
    pub seq: u64,
    pub acked_below: u64,
    /// The numbers still in flight, from a client that acknowledges per
    /// request (`None`: by `acked_below` alone).
    pub in_flight: Option<&'a [u64]>,
}

impl<'a> Request<'a> {
    /// The request `command` makes.
    pub(super) fn of(command: &'a Command) -> Self {
        match command {
            Command::CreateSession {
                ttl_ms,
                client_name,
                owner,
            } => Request::CreateSession(NewSession {
                ttl_ms: *ttl_ms,
                client_name,
                owner,
                key: None,
                origin: None,
                max_sessions: None,
            }),
            Command::CreateSessionOnce {
                ttl_ms,
                client_name,
                owner,
                key,
            } => Request::CreateSession(NewSession {
                ttl_ms: *ttl_ms,
                client_name,
                owner,
                key: Some(*key),
                origin: None,
                max_sessions: None,
            }),
            Command::CreateSessionAt {
                ttl_ms,
                client_name,
                owner,
                key,
                origin,
            } => Request::CreateSession(NewSession {
                ttl_ms: *ttl_ms,
                client_name,
                owner,
                key: *key,
                origin: Some(origin),
                max_sessions: None,
            }),
            Command::CloseSession { session } => Request::CloseSession { session: *session },
            Command::ExpireSessions { sessions } => Request::ExpireSessions { sessions },
            Command::Acquire { .. } | Command::WithTerms { .. } => {
                match acquire::Request::of(command) {
                    Some(acquire) => Request::Acquire {
                        acquire,
                        sequence: None,
                    },
                    None => {
                        Request::Malformed(LeaseError::InvalidArgument("not an acquire".into()))
                    }
                }
            }
            Command::Sequenced {
                seq,
                acked_below,
                command,
            } => Self::sequenced(*seq, *acked_below, None, command),
            Command::SequencedAcks {
                seq,
                acked_below,
                in_flight,
                command,
            } => Self::sequenced(*seq, *acked_below, Some(in_flight), command),
            Command::Release {
                session,
                name,
                token,
            } => Request::Release {
                session: *session,
                name,
                token: *token,
            },
            Command::CancelWait {
                session,
                name,
                request_id,
            } => Request::CancelWait {
                session: *session,
                name,
                request_id: *request_id,
            },
            Command::Proclaim {
                session,
                name,
                token,
                value,
            } => Request::Proclaim {
                session: *session,
                name,
                token: *token,
                value,
            },
            Command::ForceRelease { name } => Request::ForceRelease { name },
            Command::EndHold {
                name,
                session,
                token,
            } => Request::EndHold {
                name,
                session: *session,
                token: *token,
            },
            Command::EndLockDelay { name } => Request::EndLockDelay {
                name,
                started: None,
            },
            Command::EndLockDelayAt { name, started } => Request::EndLockDelay {
                name,
                started: Some(*started),
            },
            Command::Resize { name, permits } => Request::Resize {
                name,
                permits: *permits,
            },
            Command::DefineLimit { name, spec, now_ns } => Request::DefineLimit {
                name,
                spec: *spec,
                now_ns: *now_ns,
            },
            Command::Take { .. } | Command::ReturnTokens { .. } => Self::rate(command, ""),
            Command::ByOwner { owner, command } => Self::rate(command, owner),
            Command::DeleteLimit { name } => Request::DeleteLimit { name },
            Command::WithinSessionLimit {
                max_sessions,
                command,
            } => match Request::of(command) {
                Request::CreateSession(new) => Request::CreateSession(NewSession {
                    max_sessions: Some(*max_sessions),
                    ..new
                }),
                _ => Request::Malformed(LeaseError::InvalidArgument(format!(
                    "only a session creation has a session limit, not {}",
                    command.kind()
                ))),
            },
            Command::SequencedSet {
                seq,
                acked_below,
                in_flight,
                command,
            } => match (command.as_ref(), Self::of(command)) {
                (Command::AcquireAll { .. }, Request::AcquireAll { all, .. }) => {
                    Request::AcquireAll {
                        all,
                        sequence: Some(Sequence {
                            seq: *seq,
                            acked_below: *acked_below,
                            in_flight: Some(in_flight),
                        }),
                    }
                }
                _ => Request::Malformed(LeaseError::InvalidArgument(format!(
                    "only a lock set is sequenced as a set, not {}",
                    command.kind()
                ))),
            },
            Command::AcquireAll {
                session,
                names,
                request_id,
                wait_ms,
                metadata,
            } => Request::AcquireAll {
                all: acquire_all::Request {
                    session: *session,
                    names,
                    request_id: *request_id,
                    wait_ms: *wait_ms,
                    metadata,
                },
                sequence: None,
            },
            // Every command of the newer form applies itself.
            own => match own.own() {
                Some(c) => Request::Own(c),
                None => Request::Malformed(LeaseError::InvalidArgument(format!(
                    "{} is neither a request nor a command that applies itself",
                    own.kind()
                ))),
            },
        }
    }

    fn sequenced(
        seq: u64,
        acked_below: u64,
        in_flight: Option<&'a [u64]>,
        command: &'a Command,
    ) -> Self {
        let sequence = Some(Sequence {
            seq,
            acked_below,
            in_flight,
        });
        match acquire::Request::of(command) {
            Some(acquire) => Request::Acquire { acquire, sequence },
            None => Request::Malformed(LeaseError::InvalidArgument(format!(
                "only an acquire can be sequenced, not {}",
                command.kind()
            ))),
        }
    }

    /// A take or a return, on behalf of `owner` ("" for nobody in
    /// particular: a plain command, whose return is not checked).
    fn rate(command: &'a Command, owner: &'a str) -> Self {
        match command {
            Command::Take {
                name,
                n,
                spec,
                lease_ms,
                now_ns,
            } => Request::Take(Take {
                name,
                n: *n,
                now_ns: *now_ns,
                spec: *spec,
                lease_ms: *lease_ms,
                owner,
            }),
            Command::ReturnTokens {
                name,
                lease,
                unused,
                now_ns,
            } => Request::ReturnTokens {
                name,
                lease: *lease,
                unused: *unused,
                now_ns: *now_ns,
                owner: (!owner.is_empty()).then_some(owner),
            },
            other => Request::Malformed(LeaseError::InvalidArgument(format!(
                "only a take or a return carries an owner, not {}",
                other.kind()
            ))),
        }
    }
}
