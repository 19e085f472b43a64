//! The record of a simulated run: every published event, crash, restart and partition with its
//! virtual time and node. Recording the text is optional (replays and the determinism test
//! turn it on); the digest over the same entries is always kept, so two runs can be compared
//! cheaply.

use conclave_protocol::PeerId;

use conclave_core::Instant;

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEntry {
    /// When.
    pub at: Instant,
    /// Which node.
    pub node: PeerId,
    /// What happened.
    pub what: String,
}

impl std::fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>14} {:<6} {}",
            self.at.to_string(),
            self.node.as_str(),
            self.what
        )
    }
}

#[derive(Debug)]
pub(crate) struct Trace {
    entries: Option<Vec<TraceEntry>>,
    digest: u64,
}

impl Trace {
    pub(crate) fn new(record: bool) -> Self {
        Self {
            entries: record.then(Vec::new),
            // FNV-1a offset basis.
            digest: 0xcbf2_9ce4_8422_2325,
        }
    }

    /// Adds an entry; `describe` only runs when text is recorded.
    pub(crate) fn record(
        &mut self,
        at: Instant,
        node: PeerId,
        describe: impl FnOnce() -> String,
        fingerprint: u64,
    ) {
        let node_hash = node
            .as_bytes()
            .iter()
            .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        for word in [at.as_micros(), node_hash, fingerprint] {
            // FNV-1a over the three words, 64-bit prime.
            self.digest ^= word;
            self.digest = self.digest.wrapping_mul(0x0000_0100_0000_01b3);
        }
        if let Some(entries) = &mut self.entries {
            entries.push(TraceEntry {
                at,
                node,
                what: describe(),
            });
        }
    }

    pub(crate) fn entries(&self) -> Option<&[TraceEntry]> {
        self.entries.as_deref()
    }

    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }
}
