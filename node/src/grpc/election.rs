//! The Election service over gRPC: convert, call [`Locks`], convert back.

use super::service;

use crate::limits::ConnectionCounts;
use crate::locks::Locks;
use crate::messages::grant;
use futures::{Stream, StreamExt};
use raftlock_proto::v1::election_server::Election as ElectionApi;
use raftlock_proto::v1::*;
use std::pin::Pin;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Serves elections.
pub struct ElectionService {
    locks: Locks,
    connections: Arc<ConnectionCounts>,
}

impl ElectionService {
    /// Serves the elections of `locks` over gRPC.
    pub fn new(locks: Locks, connections: Arc<ConnectionCounts>) -> Self {
        ElectionService { locks, connections }
    }
}

type ObserveStream = Pin<Box<dyn Stream<Item = Result<LeaderResponse, Status>> + Send>>;

raftlock_proto::election_calls!(service! {
    impl ElectionApi for ElectionService {
    type ObserveStream = ObserveStream;

    async fn observe(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let caller = crate::auth::stream_caller(&req)?;
        let slot = super::stream_slot(
            &self.connections,
            self.locks.replica().limits(),
            req.extensions(),
        )?;
        let name = req.into_inner().name;
        let changes = self.locks.observe(caller.opened(), name.clone()).await?;
        // Each change goes to the identity as it stands now (see watch).
        let stream = changes.map(move |change| {
            let _slot = &slot;
            let now = caller
                .now()
                .and_then(|c| c.check(crate::auth::Access::Read, &name));
            now.and(change)
                .map(|leader| LeaderResponse {
                    leader: leader.as_ref().map(grant),
                })
                .map_err(Status::from)
        });
        Ok(Response::new(Box::pin(stream)))
    }
    }
});
