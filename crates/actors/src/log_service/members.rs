//! The membership operations of the log's cluster (MEMB-1, MEMB-2, MEMB-3) as typed calls:
//! list the configuration, add a learner, promote it, remove a member. The admin API serves
//! them (`members_api.rs`); `conclave member` and `conclave init --join` call them over HTTP.
//!
//! - **Reads** come from the answering node's own view, as the status does: any node lists
//!   the configuration it acts on; only the leader knows how far each member's log matches.
//! - **Changes** go to the leader (a follower refuses with the 421 redirect, as for a write),
//!   which the core lets make one change at a time; the answer comes once the configuration
//!   entry is applied, within [`APPLY_TIMEOUT`](super::APPLY_TIMEOUT) like a write.
//! - **Retries are safe.** Adding a learner that is one already, or promoting a voter,
//!   answers the members as they are: a client whose answer was lost, or a joining node that
//!   asks for itself, may send the same request again.

use conclave_api::{self as api, ErrorCode};
use conclave_core::election::ModeStatus;
use conclave_core::raft::{MembershipChange, MembershipError};
use conclave_protocol::{MemberAddress, PeerId};

use super::{APPLY_TIMEOUT, Answer, LogService, fencing};
use crate::election::LogRefusal;

impl LogService {
    /// `GET /v1/members`: the configuration this node acts on.
    pub async fn members(&self) -> Answer<api::MembersAnswer> {
        let status = self
            .node
            .election_status()
            .await
            .map_err(|err| self.unavailable(&err))?;
        let fence = fencing(status.term, status.leader);
        let ModeStatus::Raft(raft) = &status.detail else {
            return Err(self.refused(LogRefusal::Disabled, fence));
        };
        let Some(log) = &raft.log else {
            return Err(self.refused(LogRefusal::Disabled, fence));
        };
        let leading = status.leader == Some(self.node.node_id())
            && status.role == conclave_core::election::Role::Leader;
        let config = &log.configuration;
        let member = |peer: &PeerId, role: api::MemberRole| {
            let address = config.addresses.get(peer);
            let match_index = leading.then(|| {
                if *peer == self.node.node_id() {
                    raft.last_log.index
                } else {
                    log.followers
                        .iter()
                        .find(|(follower, _)| follower == peer)
                        .map_or(0, |(_, matched)| *matched)
                }
            });
            api::Member {
                id: peer.to_string(),
                role,
                udp: address.and_then(|a| a.udp).map(|udp| udp.to_string()),
                admin_url: address
                    .and_then(|a| a.admin_url.clone())
                    .or_else(|| self.peer_urls.get(peer)),
                match_index,
                lag: match role {
                    api::MemberRole::Learner if leading => Some(
                        log.learner_lag
                            .iter()
                            .find(|(learner, _)| learner == peer)
                            .map_or(raft.last_log.index, |(_, lag)| *lag),
                    ),
                    _ => None,
                },
            }
        };
        let members = config
            .voters
            .iter()
            .map(|peer| member(peer, api::MemberRole::Voter))
            .chain(
                config
                    .learners
                    .iter()
                    .map(|peer| member(peer, api::MemberRole::Learner)),
            )
            .collect();
        Ok(api::MembersAnswer {
            configuration_index: log.configuration_index,
            committed: log.configuration_index <= log.commit,
            members,
            fencing: fence,
        })
    }

    /// `POST /v1/members`: adds a learner; a learner already is answered as it is.
    pub async fn add_member(&self, request: api::AddMemberRequest) -> Answer<api::MembersAnswer> {
        let peer = self.member_id(&request.id).await?;
        let address = self.member_address(&request).await?;
        self.change_membership(MembershipChange::AddLearner(peer, address), |err| {
            matches!(
                err,
                MembershipError::AlreadyMember {
                    role: "learner",
                    ..
                }
            )
        })
        .await
    }

    /// `POST /v1/members/{id}/promote`: a caught-up learner becomes a voter; a voter already
    /// is answered as it is.
    pub async fn promote_member(&self, id: &str) -> Answer<api::MembersAnswer> {
        let peer = self.member_id(id).await?;
        let current = self
            .change_membership(MembershipChange::Promote(peer), |err| {
                matches!(err, MembershipError::NotALearner { .. })
            })
            .await?;
        let voter = current
            .members
            .iter()
            .any(|m| m.id == peer.as_str() && m.role == api::MemberRole::Voter);
        if voter {
            return Ok(current);
        }
        Err(self.error(
            ErrorCode::NoSuchMember,
            format!(
                "{peer} is no member of the cluster: add it as a learner first (POST /v1/members)"
            ),
            Some(current.fencing),
        ))
    }

    /// `DELETE /v1/members/{id}`: removes a voter or a learner.
    pub async fn remove_member(&self, id: &str) -> Answer<api::MembersAnswer> {
        let peer = self.member_id(id).await?;
        self.change_membership(MembershipChange::Remove(peer), |_| false)
            .await
    }

    /// Proposes `change` on this node, which must lead, and waits until its entry is applied;
    /// then the members as this node sees them. A refusal that `done_already` recognises
    /// (the change is in force already) is answered with the members too.
    async fn change_membership(
        &self,
        change: MembershipChange,
        done_already: fn(&MembershipError) -> bool,
    ) -> Answer<api::MembersAnswer> {
        let answer =
            match tokio::time::timeout(APPLY_TIMEOUT, self.node.change_membership(change)).await {
                Ok(answer) => answer.map_err(|err| self.unavailable(&err))?,
                Err(_) => return Err(self.timed_out().await),
            };
        let fence = fencing(answer.term, answer.leader);
        match answer.outcome {
            Ok(_) => self.members().await,
            Err(LogRefusal::Membership(err)) if done_already(&err) => self.members().await,
            Err(refusal) => Err(self.refused(refusal, fence)),
        }
    }

    /// A member id from the request: 400 when it is no valid node id.
    async fn member_id(&self, id: &str) -> Answer<PeerId> {
        match PeerId::new(id) {
            Ok(peer) => Ok(peer),
            Err(err) => Err(self
                .error_now(
                    ErrorCode::InvalidArgument,
                    format!("{id:?} is no node id: {err}"),
                )
                .await),
        }
    }

    /// The addresses of an added member: 400 for a UDP address that is not `ip:port` or an
    /// admin URL that is not http(s).
    async fn member_address(&self, request: &api::AddMemberRequest) -> Answer<MemberAddress> {
        let udp = match request.udp.as_deref().map(str::parse) {
            None => None,
            Some(Ok(addr)) => Some(addr),
            Some(Err(_)) => {
                return Err(self
                    .error_now(
                        ErrorCode::InvalidArgument,
                        format!(
                            "udp {:?} is no UDP address: give the member's link.udp.listen as \
                             IP:PORT (127.0.0.1:7949, [::1]:7949)",
                            request.udp.as_deref().unwrap_or_default()
                        ),
                    )
                    .await);
            }
        };
        if let Some(url) = &request.admin_url {
            let scheme = url.starts_with("http://") || url.starts_with("https://");
            if !scheme || url.contains(char::is_whitespace) {
                return Err(self
                    .error_now(
                        ErrorCode::InvalidArgument,
                        format!(
                            "admin_url {url:?} is no admin API address: give it as \
                             http://HOST:PORT"
                        ),
                    )
                    .await);
            }
        }
        Ok(MemberAddress {
            udp,
            admin_url: request.admin_url.clone(),
        })
    }

    /// The code and message of a membership change the leader refused.
    pub(super) fn membership_refusal(err: &MembershipError) -> (ErrorCode, String) {
        let code = match err {
            MembershipError::ChangeInProgress { .. } => ErrorCode::ChangeInProgress,
            MembershipError::LeaderNotSettled { .. } => ErrorCode::NotReady,
            MembershipError::AlreadyMember { .. } => ErrorCode::AlreadyMember,
            MembershipError::LearnerBehind { .. } => ErrorCode::NotCaughtUp,
            MembershipError::NotAMember { .. } | MembershipError::NotALearner { .. } => {
                ErrorCode::NoSuchMember
            }
            MembershipError::LastVoter { .. } => ErrorCode::LastVoter,
            MembershipError::NoConfiguration => ErrorCode::NotAllowed,
            MembershipError::NotLeader { .. } => ErrorCode::NotLeader,
            MembershipError::Transferring | MembershipError::ShuttingDown => ErrorCode::Busy,
        };
        (code, err.to_string())
    }
}
