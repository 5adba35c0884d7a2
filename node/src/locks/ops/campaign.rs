//! Campaign in an election: an election is an exclusive lock whose
//! holder's metadata is the leader's value, so a campaign is an acquire
//! that waits, and is answered once it leads.

use super::super::pipeline::{Context, Operation, Rights};
use super::acquire::{self, Acquire, Acquired, Sequence};
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::{grant, request_id};
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{
    validate, Command, FencingToken, Grant, Mode, Reply, RequestId, SessionId,
};
use std::time::Duration;

/// Campaign in an election: wait to become its leader.
#[derive(Clone, Debug)]
pub struct Campaign {
    /// The campaigning session.
    pub session: SessionId,
    /// Election name.
    pub name: String,
    /// The client's id for this campaign (retries reuse it).
    pub request_id: RequestId,
    /// The leader's value once elected.
    pub value: Vec<u8>,
    /// How long to wait; `None` waits as long as the cluster allows.
    pub wait: Option<Duration>,
    /// The session's exactly-once numbering, if the client uses it.
    pub sequence: Option<Sequence>,
}

impl Campaign {
    fn acquire(&self) -> Acquire {
        Acquire {
            session: self.session,
            name: self.name.clone(),
            request_id: self.request_id,
            mode: Mode::Exclusive,
            permits: None,
            wait: self.wait,
            metadata: self.value.clone(),
            sequence: self.sequence.clone(),
            terms: Default::default(),
        }
    }
}

impl Operation for Campaign {
    /// The leadership's grant.
    type Output = Grant;
    type Pending = acquire::Pending;
    const NAME: &'static str = "election.campaign";
    const GROWS: bool = true;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        // Checked here so the message says "value", the name campaigners
        // know it by; the machine stores it as the holder's metadata.
        validate::metadata("value", &self.value)?;
        if let Some(w) = self.wait {
            limits.check_wait(w.as_millis() as u64)?;
        }
        self.wait = Some(
            self.wait
                .unwrap_or(Duration::from_millis(limits.max_wait_ms)),
        );
        Ok(())
    }

    fn admit(&self, cx: Context<'_>) -> Result<(), NodeError> {
        self.acquire().admit(cx)
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, acquire::Pending), NodeError> {
        self.acquire().command(cx)
    }

    async fn answer(
        self,
        cx: Context<'_>,
        pending: acquire::Pending,
        reply: Option<(u64, Reply)>,
    ) -> Result<Grant, NodeError> {
        match self.acquire().answer(cx, pending, reply).await? {
            Acquired::Granted(g) => Ok(g),
            Acquired::Busy(_) => Err(NodeError::Internal(
                "a waiting campaign answered busy".into(),
            )),
        }
    }

    fn token(out: &Grant) -> Option<FencingToken> {
        Some(out.token)
    }

    fn let_go(pending: acquire::Pending) {
        Acquire::let_go(pending);
    }
}

impl TryFrom<pb::CampaignRequest> for Campaign {
    type Error = NodeError;
    fn try_from(r: pb::CampaignRequest) -> Result<Self, NodeError> {
        Ok(Campaign {
            request_id: request_id(&r.request_id)?,
            wait: r.wait_timeout_ms.map(std::time::Duration::from_millis),
            sequence: super::acquire::sequence(r.seq, r.acked_below, r.in_flight)?,
            session: r.session_id,
            name: r.name,
            value: r.value,
        })
    }
}

impl OpCall for pb::CampaignRequest {
    type Op = crate::locks::Campaign;
    type Response = pb::CampaignResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        self.try_into()
    }
    fn response(g: raftlock_store::machine::Grant) -> pb::CampaignResponse {
        pb::CampaignResponse {
            leader: Some(grant(&g)),
        }
    }
}
