//! Membership changes in the ElectionActor (MEMB-1, MEMB-2, MEMB-3): an operator's change is
//! proposed to the core, which decides whether it may be made now; the client is answered
//! once the configuration entry is applied, as a client's write is. Every configuration the
//! node acts on hands its address book to the [`MemberDirectory`](crate::member_directory),
//! so that the transport can reach a member added at runtime and the admin API can name its
//! URL.

use actix::prelude::*;
use conclave_core::raft::{LogPosition, MembershipChange, MembershipError};
use tokio::sync::oneshot;

use super::ElectionActor;
use super::replication::{Fenced, LogRefusal};

/// An operator's membership change (MEMB-3), on the leader: answered with the index of its
/// configuration entry once that entry is committed and applied, or refused at once.
#[derive(Debug, Message)]
#[rtype(result = "Fenced<u64>")]
pub struct ProposeMembership(pub MembershipChange);

impl ElectionActor {
    /// MEMB-3: the address book of the configuration in force, for the transport and the
    /// admin API.
    pub(super) fn learn_member_addresses(&mut self) {
        let configuration = self
            .driver
            .election_mut()
            .replicated_log()
            .and_then(|log| log.configuration());
        if let Some(configuration) = configuration {
            self.directory.replace(&configuration);
        }
    }

    /// Shares the directory this actor keeps current (see `learn_member_addresses`).
    pub fn with_member_directory(
        mut self,
        directory: crate::member_directory::MemberDirectory,
    ) -> Self {
        self.directory = directory;
        self.learn_member_addresses();
        self
    }

    /// Proposes `change`; its position, or why not.
    fn propose_membership(&mut self, change: MembershipChange) -> Result<LogPosition, LogRefusal> {
        let now = self.clock.now();
        let leader = self.driver.election().leader();
        if self.log.is_none() {
            return Err(LogRefusal::Disabled);
        }
        let Some(mut log) = self.driver.election_mut().replicated_log() else {
            return Err(LogRefusal::Disabled);
        };
        log.propose_membership(now, change)
            .map_err(|err| match err {
                MembershipError::NotLeader { leader: known } => LogRefusal::NotLeader {
                    leader: known.or(leader),
                },
                MembershipError::Transferring | MembershipError::ShuttingDown => LogRefusal::Busy,
                other => LogRefusal::Membership(other),
            })
    }
}

impl Handler<ProposeMembership> for ElectionActor {
    type Result = ResponseFuture<Fenced<u64>>;

    fn handle(&mut self, change: ProposeMembership, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let (reply, answer) = oneshot::channel();
        let fence = self.fence();
        let index = match self.propose_membership(change.0) {
            Ok(position) => {
                self.wait_for(position, reply);
                self.pump(ctx);
                Some(position.index)
            }
            Err(refusal) => {
                let _ = reply.send(fence.wrap(Err(refusal)));
                None
            }
        };
        Box::pin(async move {
            let applied = answer
                .await
                .unwrap_or_else(|_| fence.wrap(Err(LogRefusal::Unknown)));
            // The entry's own index: what was applied there is raft's, not the machine's.
            applied.map(|_| index.unwrap_or_default())
        })
    }
}
