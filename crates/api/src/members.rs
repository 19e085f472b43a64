//! The membership endpoints of the log's cluster (MEMB-1, MEMB-2, MEMB-3): `GET /v1/members`
//! lists the configuration a node acts on, `POST /v1/members` adds a learner,
//! `POST /v1/members/{id}/promote` makes a caught-up learner a voter and
//! `DELETE /v1/members/{id}` removes a member. A change is answered once its configuration
//! entry is committed, with the members as they are then.

use serde::{Deserialize, Serialize};

use crate::common::Fencing;

/// `POST /v1/members`: add a learner, which receives the log and does not vote until it is
/// promoted. Adding a learner that is one already answers the members as they are (a retry,
/// or a joining node's own request, is safe).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AddMemberRequest {
    /// The new member's node id (its `node.id`).
    pub id: String,
    /// Its `link.udp.listen` address (`host:port`, an IP address), which every node tries
    /// until the member's frames show its route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<String>,
    /// Its admin API (`http://host:port`), named in redirects and in this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_url: Option<String>,
}

/// What a member does in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemberRole {
    /// Elects and counts toward commit.
    Voter,
    /// Receives the log; neither votes nor counts.
    Learner,
}

impl MemberRole {
    /// The role as the JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Voter => "voter",
            Self::Learner => "learner",
        }
    }
}

impl std::fmt::Display for MemberRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One member of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Member {
    /// Its node id.
    pub id: String,
    /// Voter or learner.
    pub role: MemberRole,
    /// The UDP address the configuration gives it; null for the voters `cluster.voters`
    /// names (the configuration files give theirs) and for a member added without one.
    pub udp: Option<String>,
    /// Its admin API, from the configuration or `admin.peer_urls`; null when neither names it.
    pub admin_url: Option<String>,
    /// On the leader: how far its log is known to match the leader's (the leader's own last
    /// index for itself); null on other nodes.
    pub match_index: Option<u64>,
    /// On the leader, for a learner: how many entries it is behind the leader's last entry;
    /// null otherwise.
    pub lag: Option<u64>,
}

/// The answer of every membership endpoint: the configuration the answering node acts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MembersAnswer {
    /// The index of the log entry that carries the configuration (0: the one `cluster.voters`
    /// seeds, which no entry carries).
    pub configuration_index: u64,
    /// Whether that entry is committed as far as this node knows; a change is in force as
    /// soon as appended, and the next change waits for this.
    pub committed: bool,
    /// Voters first, then learners, each by id.
    pub members: Vec<Member>,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}
