//! Proclaim: a holder (an election's leader) replaces its grant's metadata.
//! The token does not change: it identifies the term of office, not the value.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::{FencingToken, SessionId};
use super::{validate, LeaseMachine};

impl LeaseMachine {
    pub(super) fn proclaim(
        &mut self,
        session: SessionId,
        name: &str,
        token: FencingToken,
        value: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        validate::metadata("value", value)?;
        self.check_holder(session, name, token)?;
        let grant = self
            .locks
            .get_mut(name)
            .and_then(|l| l.holder_mut(session))
            .ok_or_else(|| LeaseError::NotHolder {
                name: name.to_owned(),
                session,
            })?;
        grant.metadata = value.to_vec();
        let grant = grant.clone();
        events.push(Event::Proclaimed(grant.clone()));
        Ok(Reply::Proclaimed(grant))
    }
}
