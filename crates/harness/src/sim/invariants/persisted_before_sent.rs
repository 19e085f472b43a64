//! RAFT-1, CB-5: term and vote are persisted before any message that depends on them leaves
//! the node — raft's term, and in gossip and priority mode the epoch or round every message
//! carries. Every election message is checked against the sender's durable state at the moment
//! the driver hands it to the network: its term must be durable, and a granted vote must be
//! the durable vote of that term — or the node must be durably past that term. The second
//! case is group commit: a vote granted in term 10 and a term-12 message heard before that
//! write began go to disk in one batch, and the grant leaves once the batch is durable, when
//! the durable term is already 12. The grant is still safe: its record went to disk first,
//! and a node durably in term 12 can never vote in term 10 again. Pre-vote messages speak of a
//! term nobody has entered and are exempt.

use crate::sim::cluster::{Observation, SentKind, Simulation};
use crate::sim::invariants::Invariant;

/// Fails on the first message sent ahead of its durable state.
#[derive(Debug, Default)]
pub struct PersistedBeforeSent;

impl Invariant for PersistedBeforeSent {
    fn name(&self) -> &'static str {
        "persisted before sent"
    }

    fn check(&mut self, _: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            let Observation::Sent {
                from,
                to,
                term,
                kind,
                durable,
            } = observation
            else {
                continue;
            };
            match kind {
                SentKind::PreVote => {}
                SentKind::VoteGranted => {
                    let recorded = durable.term == *term && durable.vote == Some(*to);
                    if !recorded && durable.term <= *term {
                        return Err(format!(
                            "{from} granted its vote to {to} in term {term} while its durable state was {durable:?}"
                        ));
                    }
                }
                SentKind::Other => {
                    if durable.term < *term {
                        return Err(format!(
                            "{from} sent a term-{term} message to {to} while only term {} was durable",
                            durable.term
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
