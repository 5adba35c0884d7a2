//! A request message of the API and how the lock service answers it, the
//! same for gRPC and HTTP/JSON (the same protobuf messages, in their proto3
//! JSON mapping). Both transports route every plain call of the `.proto`
//! to [`Call::answer`] (the lists are generated from the `.proto` by
//! `raftlock-proto`), so a new call needs no line in either: a request
//! message that names its operation ([`OpCall`], beside the operation in
//! `ops/`) is enough.

use super::{Locks, Operation};
use crate::auth::Caller;
use crate::error::NodeError;
use std::future::Future;

/// A request message the lock service answers with `Response`.
pub trait Call: Sized + Send {
    /// The answer message.
    type Response;
    /// Answers the request for `caller`.
    fn answer(
        self,
        locks: &Locks,
        caller: &Caller,
    ) -> impl Future<Output = Result<Self::Response, NodeError>> + Send;
}

/// A request message that asks for one [`Operation`]: parsed into it, run
/// through the pipeline ([`Locks::run`]), its output made the answer.
pub trait OpCall: Sized + Send {
    /// The operation.
    type Op: Operation;
    /// The answer message.
    type Response;
    /// Parses the request (refusing what cannot be parsed).
    fn op(self) -> Result<Self::Op, NodeError>;
    /// The operation's output as the answer message.
    fn response(out: <Self::Op as Operation>::Output) -> Self::Response;
}

impl<C: OpCall> Call for C {
    type Response = C::Response;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<C::Response, NodeError> {
        let op = self.op()?;
        Ok(C::response(locks.run(caller, op).await?))
    }
}
