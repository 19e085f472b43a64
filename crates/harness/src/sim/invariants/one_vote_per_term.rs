//! RAFT-1, RAFT-5, Raft §5.2, WAL-2: each node grants at most one vote per term — including
//! after a crash and restart from its persisted state, and after a crash that lost its whole
//! WAL: votes are remembered by node id for the whole run, whatever the node remembers. Checked
//! on the votes actually sent, so a vote that left before its `Persist` and was forgotten in a
//! crash is caught.

use std::collections::BTreeMap;

use conclave_protocol::PeerId;

use crate::sim::cluster::{Observation, SentKind, Simulation};
use crate::sim::invariants::Invariant;

/// Remembers every granted vote by `(voter, term)`.
#[derive(Debug, Default)]
pub struct OneVotePerTerm {
    votes: BTreeMap<(PeerId, u64), PeerId>,
}

impl Invariant for OneVotePerTerm {
    fn name(&self) -> &'static str {
        "one vote per term"
    }

    fn check(&mut self, _: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            if let Observation::Sent {
                from: voter,
                to: candidate,
                term,
                kind: SentKind::VoteGranted,
                ..
            } = observation
            {
                let first = *self.votes.entry((*voter, *term)).or_insert(*candidate);
                if first != *candidate {
                    return Err(format!(
                        "{voter} voted for {first} and for {candidate} in term {term}"
                    ));
                }
            }
        }
        Ok(())
    }
}
