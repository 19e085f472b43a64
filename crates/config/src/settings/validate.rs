//! From [`Settings`] to [`NodeConfig`]: every rule on the values of docs/design.md §9, each broken rule
//! reported with its key, all of them in one pass.
//!
//! Covers the identity rules of PROTO-1, the key file of PROTO-5, the timing rules of MEM-4,
//! the quorum modes of RAFT-6, CB-2's hook commands, CB-3's refusal to expose the admin API
//! beyond loopback without a token, and SEC-2's named tokens (`admin.tokens_file`).
//!
//! The election's configuration is the core's own ([`ModeConfig`]), built here once from the
//! section of `election.mode`. What only the file can get wrong is checked here: units (a
//! `*_ms` key of zero or beyond [`MAX_MILLIS`], a number that does not fit), words that must be
//! one of a list (`election.mode`, `election.raft.quorum`), ids, and the warnings. The rules
//! of the election itself (RAFT-2's heartbeat below the election timeout, GOS-1..5, PRI-2..6,
//! STA-1's leader among the voters) are the cores' `validate()`, run on the configuration
//! built; each problem it finds names its [`Setting`], which [`key_of`] maps to the key it is
//! read from.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use conclave_core::MembershipConfig;
use conclave_core::election::{
    ElectionConfig as ModeConfig, ElectionError, GossipSetting, Mode, PrioritySetting, RaftSetting,
    Setting, StaticSetting,
};
use conclave_core::gossip::GossipConfig;
use conclave_core::priority::PriorityConfig;
use conclave_core::raft::LogConfig;
use conclave_core::static_leader::StaticConfig;
use conclave_protocol::{
    AppendEntries, AuthKey, Body, ClusterId, ESPNOW_V1_MTU, Envelope, FrameCodec, IdError, PeerId,
    SEALED_TAG_LEN, SendKey,
};
use conclave_statemachine::StoreLimits;

use super::{ConfigProblem, ConfigWarning, HookEntry, Settings};
use crate::tls::{TlsFiles, TlsIdentity};
use crate::tokens;
use crate::{
    AdminConfig, AdminToken, DonglePort, EspNowLinkConfig, HealthConfig, HealthSource, HookCommand,
    HooksConfig, InitialState, MetricsConfig, NodeConfig, Quorum, UdpLinkConfig,
};

/// The fewest bytes of log entries an ESP-NOW frame must hold for the log to run over the
/// radio: a short key-value write.
const MIN_RADIO_ENTRY_BYTES: usize = 64;

/// The largest `log.max_append_bytes`: the bytes of log entries one UDP datagram
/// ([`conclave_protocol::UDP_MTU`]) holds beside an AppendEntries' envelope and fields with
/// the longest ids and authentication tag there can be, so that a batch of this size travels
/// with any configuration. A larger entry could never be sent: the transport drops a frame
/// beyond the datagram, so the entry, and every write after it, would wait for a commit that
/// never comes. A test computes it.
pub const MAX_APPEND_BYTES: u64 = 1237;

/// Longest duration any `*_ms` key accepts: one day. Anything longer is a slip of the keyboard,
/// and deadlines computed from it could overflow.
pub const MAX_MILLIS: u64 = 86_400_000;

impl Settings {
    /// The node's configuration, or every problem with these settings; warnings are logged.
    pub fn validate(&self) -> Result<NodeConfig, Vec<ConfigProblem>> {
        let (config, warnings) = self.validate_with_warnings()?;
        for warning in &warnings {
            tracing::warn!(key = %warning.key, "configuration: {}", warning.message);
        }
        Ok(config)
    }

    /// Like [`Settings::validate`], returning the warnings instead of logging them.
    pub fn validate_with_warnings(
        &self,
    ) -> Result<(NodeConfig, Vec<ConfigWarning>), Vec<ConfigProblem>> {
        let mut findings = Findings::new(&self.read_problems);
        let f = &mut findings;

        let node_id = f.id("node.id", &self.node.id, PeerId::new);
        if self.node.data_dir.as_os_str().is_empty() {
            f.problem(
                "node.data_dir",
                "must not be empty: the WAL and snapshots live there",
            );
        } else if self.node.data_dir.is_file() {
            f.problem(
                "node.data_dir",
                format!(
                    "{} is a file; it must be a directory (created when missing) for the WAL \
                     and snapshots",
                    self.node.data_dir.display()
                ),
            );
        }
        let cluster_id = f.id("cluster.id", &self.cluster.id, ClusterId::new);
        let auth_key = self.auth_key(f);
        let rotation = self.key_rotation(f);
        let election = self.election(f, node_id);
        let membership = self.membership(f);
        let udp = self.udp(f);
        let espnow = self.espnow(f);
        let (admin, metrics) = self.endpoints(f);
        let hooks = self.hooks(f);
        let health = self.health(f);
        let store_limits = self.store_limits(f);
        let initial_state = match self.cluster.initial_state.as_str() {
            "new" => Some(InitialState::New),
            "existing" => Some(InitialState::Existing),
            other => {
                f.problem(
                    "cluster.initial_state",
                    format!("unknown initial state {other:?}; expected \"new\" or \"existing\""),
                );
                None
            }
        };

        // PROTO-5 before the rest is known good, so that a missing key is reported in the same
        // pass as any other problem. A section refused above counts as absent here: nothing is
        // reported twice, and nothing is claimed of a link that could not be read.
        if let Some(keyed) = auth_key.as_ref().map(Option::is_some) {
            self.authentication(
                &mut findings,
                keyed,
                udp.as_ref().and_then(Option::as_ref),
                espnow.as_ref().and_then(Option::as_ref),
            );
        }
        // Every `None` above came with a problem, so both exits below report at least one.
        let (
            Some(node_id),
            Some(cluster_id),
            Some(auth_key),
            Some((election, voters)),
            Some(membership),
            Some(udp),
            Some(espnow),
            Some(admin),
            Some(metrics),
            Some(hooks),
            Some(health),
            Some(initial_state),
            Some(store_limits),
        ) = (
            node_id,
            cluster_id,
            auth_key,
            election,
            membership,
            udp,
            espnow,
            admin,
            metrics,
            hooks,
            health,
            initial_state,
            store_limits,
        )
        else {
            return Err(findings.problems);
        };
        if !findings.problems.is_empty() {
            return Err(findings.problems);
        }
        // A refused rotation came with a problem, returned just above.
        let (next_key, send_key) = rotation.unwrap_or_default();
        let config = NodeConfig {
            node_id,
            data_dir: self.node.data_dir.clone(),
            cluster_id,
            auth_key,
            election,
            voters,
            membership,
            udp,
            espnow,
            admin,
            metrics,
            hooks,
            health,
            initial_state,
            store_limits,
            next_key,
            send_key,
        };
        Ok((config, findings.warnings))
    }

    /// PROTO-5, secure by default: without a key, only links nobody else can reach (warned
    /// about), or no link at all (nothing to warn about); anything else needs
    /// `cluster.insecure = true`, and is warned about even then.
    fn authentication(
        &self,
        f: &mut Findings<'_>,
        keyed: bool,
        udp: Option<&UdpLinkConfig>,
        espnow: Option<&EspNowLinkConfig>,
    ) {
        if keyed {
            if self.cluster.insecure {
                f.warn(
                    "cluster.insecure",
                    "has no effect: cluster.psk_file is set, so frames are authenticated",
                );
            }
            return;
        }
        if udp.is_none() && espnow.is_none() {
            // No link: this node sends and receives no frame, so there is nothing to
            // authenticate and nothing to warn about (a single node on the defaults).
            return;
        }
        let mut exposed = Vec::new();
        if let Some(udp) = udp {
            if !udp.listen.ip().to_canonical().is_loopback() {
                exposed.push(format!("link.udp.listen ({})", udp.listen));
            }
            for (i, peer) in udp.peers.iter().enumerate() {
                if !peer.ip().to_canonical().is_loopback() {
                    exposed.push(format!("link.udp.peers[{i}] ({peer})"));
                }
            }
        }
        if let Some(EspNowLinkConfig {
            port: DonglePort::Device(path),
            ..
        }) = espnow
        {
            exposed.push(format!("link.espnow.port ({}, a radio)", path.display()));
        }
        if exposed.is_empty() {
            f.warn(
                "cluster.psk_file",
                "no pre-shared key: frames are not authenticated; only loopback and in-process \
                 links are in use, so only this machine can forge them (acceptable for a demo)",
            );
        } else if self.cluster.insecure {
            f.warn(
                "cluster.insecure",
                format!(
                    "frames are not authenticated although {} can be reached by others: anyone \
                     there can forge and replay them",
                    exposed.join(", ")
                ),
            );
        } else {
            f.problem(
                "cluster.psk_file",
                format!(
                    "required: {} can be reached by others, and without a pre-shared key anyone \
                     there could forge frames and depose the leader. Set cluster.psk_file to a \
                     file of 64 hex digits or 32 raw bytes (generate one with `openssl rand -hex \
                     32`), or set cluster.insecure = true to run unauthenticated on purpose",
                    exposed.join(", ")
                ),
            );
        }
    }

    /// `cluster.psk_file` and `cluster.tag_bytes`: `Some(None)` runs without a key.
    fn auth_key(&self, f: &mut Findings<'_>) -> Option<Option<AuthKey>> {
        let tag_len = match usize::try_from(self.cluster.tag_bytes) {
            Ok(len) if len == SEALED_TAG_LEN => Some(len),
            _ => {
                // PROTO-9: sealed frames carry the AEAD's whole tag; a length configured for
                // the HMAC tags of earlier versions is refused by name, not ignored.
                f.problem(
                    "cluster.tag_bytes",
                    format!(
                        "must be {SEALED_TAG_LEN}, found {}: sealed frames carry a \
                         {SEALED_TAG_LEN}-byte tag, neither truncated nor longer",
                        self.cluster.tag_bytes
                    ),
                );
                None
            }
        };
        let path = &self.cluster.psk_file;
        if path.as_os_str().is_empty() {
            return tag_len.map(|_| None);
        }
        let secret = match read_secret(path) {
            Ok(secret) => secret,
            Err(message) => {
                f.problem("cluster.psk_file", message);
                return None;
            }
        };
        match AuthKey::new(&secret, tag_len?) {
            Ok(key) => Some(Some(key)),
            Err(error) => {
                f.problem("cluster.psk_file", format!("{}: {error}", path.display()));
                None
            }
        }
    }

    /// PROTO-9, key rotation: `cluster.psk_next_file` (read and checked like `psk_file`, and
    /// not the same key) and `cluster.psk_send`. `None` after a problem.
    fn key_rotation(&self, f: &mut Findings<'_>) -> Option<(Option<AuthKey>, SendKey)> {
        let send = match self.cluster.psk_send.as_str() {
            "current" => Some(SendKey::Current),
            "next" => Some(SendKey::Next),
            other => {
                f.problem(
                    "cluster.psk_send",
                    format!("unknown key {other:?}; expected \"current\" or \"next\""),
                );
                None
            }
        };
        let path = &self.cluster.psk_next_file;
        if path.as_os_str().is_empty() {
            if send == Some(SendKey::Next) {
                f.problem(
                    "cluster.psk_send",
                    "is \"next\" but cluster.psk_next_file is not set: there is no next key to \
                     send under",
                );
                return None;
            }
            return send.map(|send| (None, send));
        }
        if self.cluster.psk_file.as_os_str().is_empty() {
            f.problem(
                "cluster.psk_next_file",
                "is set but cluster.psk_file is not: a next key rotates a current one, and a \
                 cluster without a key cannot start sealing by a reload",
            );
            return None;
        }
        let next = match read_secret(path) {
            Ok(secret) => secret,
            Err(message) => {
                f.problem("cluster.psk_next_file", message);
                return None;
            }
        };
        if read_secret(&self.cluster.psk_file).is_ok_and(|current| current == next) {
            f.problem(
                "cluster.psk_next_file",
                format!(
                    "{} holds the same key as cluster.psk_file: a rotation needs a new key \
                     (generate one with `openssl rand -hex 32`)",
                    path.display()
                ),
            );
            return None;
        }
        let key = match AuthKey::new(&next, SEALED_TAG_LEN) {
            Ok(key) => key,
            Err(error) => {
                f.problem(
                    "cluster.psk_next_file",
                    format!("{}: {error}", path.display()),
                );
                return None;
            }
        };
        send.map(|send| (Some(key), send))
    }

    /// `[election]`, the section of its mode, and `cluster.voters`: the election core's
    /// configuration for this node, checked by the core's own `validate()`, and the voters as
    /// listed.
    fn election(
        &self,
        f: &mut Findings<'_>,
        node_id: Option<PeerId>,
    ) -> Option<(ModeConfig, Vec<PeerId>)> {
        let label = self.election.mode.as_str();
        let mode = Mode::from_label(label);
        if mode.is_none() {
            f.problem(
                "election.mode",
                format!(
                    "unknown mode {label:?}; expected \"raft\", \"gossip\", \"priority\" or \
                     \"static\""
                ),
            );
        }
        self.keys_of_other_modes(f);
        let raft = &self.election.raft;
        let quorum = match raft.quorum.as_str() {
            "voters" => Some(Quorum::Voters),
            "connected" => Some(Quorum::Connected),
            other => {
                f.problem(
                    "election.raft.quorum",
                    format!("unknown quorum {other:?}; expected \"voters\" or \"connected\""),
                );
                None
            }
        };
        let voters = match mode {
            Some(Mode::Raft) => self.voters(f, node_id, quorum),
            // No quorum: the list is who may be named (static) or expected (gossip,
            // priority), as written.
            _ => self.listed_voters(f),
        };
        // The cores' rules never look at the node's id. When node.id is refused itself, they
        // still run, for a stand-in id, so that every problem is reported in one pass; the
        // configuration built for it is dropped below.
        let id = node_id.or_else(|| PeerId::new("stand-in").ok())?;
        // `[election.raft]` is checked in every mode, as every other section is; used in raft
        // mode only.
        let raft = self.raft(f, id, quorum, voters.as_deref());
        let config = match mode? {
            Mode::Raft => raft,
            Mode::Gossip => self.gossip(f, id),
            Mode::Priority => self.priority(f, id),
            Mode::Static => self.static_leader(f, id, voters.as_deref()),
        };
        node_id?;
        Some((config?, voters?))
    }

    /// `[election.raft]` (RAFT-2, RAFT-6, RAFT-10): each key on its own here, raft's rules on
    /// their relations by `RaftConfig::validate`. Outside raft mode, or without a usable voter
    /// list, the electorate is this node alone: only the section's own values are checked.
    fn raft(
        &self,
        f: &mut Findings<'_>,
        id: PeerId,
        quorum: Option<Quorum>,
        voters: Option<&[PeerId]>,
    ) -> Option<ModeConfig> {
        let raft = &self.election.raft;
        let heartbeat = f.millis("election.raft.heartbeat_ms", raft.heartbeat_ms);
        let min = f.millis(
            "election.raft.election_timeout_min_ms",
            raft.election_timeout_min_ms,
        );
        let max = f.millis(
            "election.raft.election_timeout_max_ms",
            raft.election_timeout_max_ms,
        );
        if let (Some(min), Some(max)) = (min, max) {
            if max == min {
                f.warn(
                    "election.raft.election_timeout_max_ms",
                    "equals election_timeout_min_ms: timeouts are not randomized, so \
                     candidates that start together may split the vote round after round",
                );
            }
        }
        let preempt_delay = f.millis("election.raft.preempt_delay_ms", raft.preempt_delay_ms);
        let suspicion_floor = self.suspicion_floor(f);
        let log = self.replicated_log(f, quorum);
        let priority = self.raft_priority(f);
        // Raft's rules relate these values: they run once each is usable on its own, so a
        // value refused here is not refused again for its relation to another.
        heartbeat?;
        min?;
        max?;
        preempt_delay?;
        suspicion_floor?;
        let log = log?;
        let alone = [id];
        let electorate = voters.filter(|voters| !voters.is_empty()).unwrap_or(&alone);
        // A refused quorum or priority is reported already; raft's rules on the timings still
        // run, with stand-ins that add no rule of their own (connected quorum: no voter list
        // to check; no priority), so that every problem shows in one pass. The configuration
        // built from stand-ins is dropped.
        let config = crate::raft_config(
            id,
            quorum.unwrap_or(Quorum::Connected),
            electorate,
            raft,
            priority.unwrap_or(None),
            self.election.auto,
            log,
        );
        f.core_problems(config.validate())?;
        quorum?;
        priority?;
        Some(config)
    }

    /// `election.raft.priority` (RAFT-10): 0–255 or absent, and a warning for the preemption
    /// keys set without it.
    fn raft_priority(&self, f: &mut Findings<'_>) -> Option<Option<u8>> {
        let raft = &self.election.raft;
        if raft.priority.is_none() {
            for key in ["election.raft.preempt_delay_ms", "election.raft.nopreempt"] {
                if self.operator_keys.contains(key) {
                    f.warn(
                        key,
                        "has no effect without election.raft.priority: a node without a \
                         priority takes no part in preemption",
                    );
                }
            }
        }
        match raft.priority.map(u8::try_from) {
            None => Some(None),
            Some(Ok(priority)) => Some(Some(priority)),
            Some(Err(_)) => {
                f.problem(
                    "election.raft.priority",
                    format!(
                        "must be between 0 and 255, found {}",
                        raft.priority.unwrap_or_default()
                    ),
                );
                None
            }
        }
    }

    /// `election.raft.suspicion_floor_ms` on its own: a duration, and a warning when it is set
    /// without adaptive detection; its relation to the heartbeat and the maximum election
    /// timeout is `RaftConfig::validate`'s.
    fn suspicion_floor(&self, f: &mut Findings<'_>) -> Option<Option<Duration>> {
        let raft = &self.election.raft;
        let key = "election.raft.suspicion_floor_ms";
        let Some(floor) = raft.suspicion_floor_ms else {
            return Some(None);
        };
        if !raft.adaptive_timeout {
            f.warn(
                key,
                "has no effect without election.raft.adaptive_timeout = true",
            );
        }
        f.millis(key, floor).map(Some)
    }

    /// `log.max_store_bytes` and `log.max_jobs` (STORE-1, STORE-2), each in its range: at
    /// least 1 MiB, so that the largest single write fits an empty store.
    fn store_limits(&self, f: &mut Findings<'_>) -> Option<StoreLimits> {
        let mut within = |key: &str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Some(value)
            } else {
                f.problem(
                    key,
                    format!("must be between {min} and {max}, found {value}"),
                );
                None
            }
        };
        let max_bytes = within(
            "log.max_store_bytes",
            self.log.max_store_bytes,
            1 << 20,
            1 << 40,
        );
        let max_jobs = within("log.max_jobs", self.log.max_jobs, 1, 100_000_000);
        Some(StoreLimits {
            max_bytes: max_bytes?,
            max_jobs: max_jobs?,
        })
    }

    /// `[log]`'s replicated-log keys (LOG-1..4): each number in its range, and `enabled` only
    /// in raft mode with the `voters` quorum, the one that keeps a committed entry. `Some(None)`
    /// when the log is off (or raft is not the mode: that is reported once, here).
    fn replicated_log(
        &self,
        f: &mut Findings<'_>,
        quorum: Option<Quorum>,
    ) -> Option<Option<LogConfig>> {
        let section = &self.log;
        let range = |f: &mut Findings<'_>, key: &str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                usize::try_from(value).ok()
            } else {
                f.problem(
                    key,
                    format!("must be between {min} and {max}, found {value}"),
                );
                None
            }
        };
        let mut bytes = range(
            f,
            "log.max_append_bytes",
            section.max_append_bytes,
            64,
            MAX_APPEND_BYTES,
        );
        // PROTO-4: every frame must fit the smallest link, and an ESP-NOW frame is 250 bytes;
        // a larger batch would be refused by the transport and never arrive. What is left for
        // entries depends on the ids and the tag every frame carries.
        let radio_budget = self
            .link
            .espnow
            .as_ref()
            .and_then(|_| self.entry_budget(ESPNOW_V1_MTU));
        if let (Some(budget), Some(configured)) = (radio_budget, bytes) {
            if configured > budget {
                if section.enabled && self.operator_keys.contains("log.max_append_bytes") {
                    f.warn(
                        "log.max_append_bytes",
                        format!(
                            "lowered to {budget} with an ESP-NOW link: a 250-byte radio frame \
                             has room for no more entries beside its envelope; a write larger \
                             than that is refused"
                        ),
                    );
                }
                bytes = Some(budget);
            }
        }
        let entries = range(
            f,
            "log.max_append_entries",
            section.max_append_entries,
            1,
            4096,
        );
        let inflight = range(f, "log.max_inflight", section.max_inflight, 1, 256);
        // LOG-4: 0 never snapshots; a handful of entries would snapshot the machine on almost
        // every write.
        let snapshot_entries = if section.snapshot_entries == 0 {
            Some(0)
        } else {
            range(
                f,
                "log.snapshot_entries",
                section.snapshot_entries,
                10,
                1_000_000_000,
            )
        };
        if !section.enabled {
            return Some(None);
        }
        if radio_budget.is_some_and(|budget| budget < MIN_RADIO_ENTRY_BYTES) {
            f.problem(
                "log.enabled",
                format!(
                    "with an ESP-NOW link and ids this long (cluster.id, node.id, \
                     cluster.voters) and cluster.tag_bytes = {}, a 250-byte radio frame has \
                     room for only {} bytes of log entries; use shorter ids or tag",
                    self.cluster.tag_bytes,
                    radio_budget.unwrap_or(0)
                ),
            );
            return None;
        }
        let mode = self.election.mode.as_str();
        if mode != Mode::Raft.label() {
            f.problem(
                "log.enabled",
                format!("the replicated log runs in raft mode only; election.mode is {mode:?}"),
            );
            return Some(None);
        }
        match quorum {
            Some(Quorum::Connected) => {
                f.problem(
                    "log.enabled",
                    "needs election.raft.quorum = \"voters\" (it is \"connected\"): a \
                     majority of whichever nodes are connected does not keep a committed entry",
                );
                return None;
            }
            // A refused quorum is reported already.
            None => return None,
            Some(Quorum::Voters) => {}
        }
        Some(Some(LogConfig {
            max_append_bytes: bytes?,
            max_append_entries: entries?,
            max_inflight: inflight?,
            snapshot_entries: snapshot_entries? as u64,
            // Issue 27, item 2: on a radio every answer takes the air from every frame.
            shared_acks: self.link.espnow.is_some(),
        }))
    }

    /// Bytes of log entries one frame of `mtu` bytes holds beside an AppendEntries' envelope
    /// and fields, with this configuration's ids (the longest one in every place an id goes)
    /// and tag; `None` when an id is not valid (reported elsewhere).
    fn entry_budget(&self, mtu: usize) -> Option<usize> {
        let longest = std::iter::once(&self.node.id)
            .chain(self.cluster.voters.iter())
            .max_by_key(|id| id.len())?;
        let id = PeerId::new(longest).ok()?;
        let cluster = ClusterId::new(&self.cluster.id).ok()?;
        let tag_len = if self.cluster.psk_file.as_os_str().is_empty() {
            None
        } else {
            Some(usize::try_from(self.cluster.tag_bytes).ok()?)
        };
        frame_entry_budget(cluster, id, tag_len, mtu)
    }

    /// Issue 9, item 8: a key of another mode's section, set by the operator, is refused
    /// naming it (the built-in defaults set every key of every mode, and do not count).
    fn keys_of_other_modes(&self, f: &mut Findings<'_>) {
        let mode = self.election.mode.as_str();
        if !Mode::ALL.iter().any(|known| known.label() == mode) {
            // An unknown mode is its own problem; every section would be "another mode's".
            return;
        }
        for key in &self.operator_keys {
            let Some(owner) = Mode::ALL.iter().map(|m| m.label()).find(|owner| {
                key.strip_prefix("election.")
                    .and_then(|rest| rest.strip_prefix(owner))
                    .is_some_and(|rest| rest.starts_with('.'))
            }) else {
                continue;
            };
            if owner != mode {
                f.problem(
                    key,
                    format!("is a setting of {owner} mode; election.mode is {mode:?}"),
                );
            }
        }
    }

    /// `[election.gossip]` (GOS-1..5): each key on its own here, the gossip election's rules
    /// by `GossipConfig::validate`.
    fn gossip(&self, f: &mut Findings<'_>, id: PeerId) -> Option<ModeConfig> {
        let section = &self.election.gossip;
        let grace = f.millis(
            "election.gossip.startup_grace_period_ms",
            section.startup_grace_period_ms,
        );
        let sample = f.millis(
            "election.gossip.membership_sample_interval_ms",
            section.membership_sample_interval_ms,
        );
        let alive = f.millis(
            "election.gossip.leader_alive_threshold_ms",
            section.leader_alive_threshold_ms,
        );
        let duration = f.millis(
            "election.gossip.leader_election_duration_ms",
            section.leader_election_duration_ms,
        );
        let core = GossipConfig {
            use_leader_election: section.use_leader_election,
            org_leader: section.org_leader,
            auto_election: self.election.auto,
            ..GossipConfig::new(id).with_timings(grace?, sample?, alive?, duration?)
        };
        if core.use_leader_election && core.membership_sample_interval >= core.startup_grace_period
        {
            f.warn(
                "election.gossip.membership_sample_interval_ms",
                format!(
                    "is not less than startup_grace_period_ms ({} >= {}): a starting node \
                     never sees its view settle and always waits out the grace period",
                    section.membership_sample_interval_ms, section.startup_grace_period_ms
                ),
            );
        }
        let config = ModeConfig::Gossip(core);
        f.core_problems(config.validate())?;
        Some(config)
    }

    /// `[election.priority]` (PRI-2..6), with the battery of `[health]`: each key on its own
    /// here, the priority election's rules by `PriorityConfig::validate`.
    fn priority(&self, f: &mut Findings<'_>, id: PeerId) -> Option<ModeConfig> {
        let section = &self.election.priority;
        let discovery = f.millis(
            "election.priority.discovery_timeout_ms",
            section.discovery_timeout_ms,
        );
        let campaign = f.millis(
            "election.priority.campaign_timeout_ms",
            section.campaign_timeout_ms,
        );
        let vote = f.millis("election.priority.vote_timeout_ms", section.vote_timeout_ms);
        // Zero is allowed: no jitter.
        let jitter = if section.jitter_max_ms == 0 {
            Some(Duration::ZERO)
        } else {
            f.millis("election.priority.jitter_max_ms", section.jitter_max_ms)
        };
        let announce = f.millis(
            "election.priority.announce_interval_ms",
            section.announce_interval_ms,
        );
        let master = f.millis(
            "election.priority.master_timeout_ms",
            section.master_timeout_ms,
        );
        let retries = f.at_most(
            "election.priority.max_retries",
            section.max_retries,
            u8::MAX,
        );
        let low_battery = f.at_most(
            "election.priority.low_battery_percent",
            section.low_battery_percent,
            99,
        );
        // The battery assumed until the first reading is `[health]`'s, and checked there (a
        // refused one is reported once, under health.battery_percent).
        let battery = u8::try_from(self.health.battery_percent)
            .ok()
            .filter(|&percent| percent <= 100);
        let config = ModeConfig::Priority(PriorityConfig {
            id,
            discovery_timeout: discovery?,
            campaign_timeout: campaign?,
            vote_timeout: vote?,
            jitter_max: jitter?,
            max_retries: retries?,
            announce_interval: announce?,
            master_timeout: master?,
            battery_percent: battery?,
            low_battery_percent: low_battery?,
            force_master: section.force_master,
            auto_election: self.election.auto,
        });
        f.core_problems(config.validate())?;
        Some(config)
    }

    /// `[health]`.
    fn health(&self, f: &mut Findings<'_>) -> Option<HealthConfig> {
        let section = &self.health;
        let battery = f.at_most("health.battery_percent", section.battery_percent, 100);
        let interval = f.millis("health.interval_ms", section.interval_ms);
        let timeout = f.millis("health.timeout_ms", section.timeout_ms);
        if let (Some(interval), Some(timeout)) = (interval, timeout) {
            if timeout > interval {
                f.problem(
                    "health.timeout_ms",
                    format!(
                        "must not exceed health.interval_ms ({} > {}): a reading must end \
                         before the next one is due",
                        section.timeout_ms, section.interval_ms
                    ),
                );
            }
        }
        for (key, used_by) in [("health.file", "file"), ("health.command", "command")] {
            if self.operator_keys.contains(key) && section.source != used_by {
                f.warn(
                    key,
                    format!(
                        "ignored: health.source is {:?}, not \"{used_by}\"",
                        section.source
                    ),
                );
            }
        }
        let source = match section.source.as_str() {
            "fixed" => Some(HealthSource::Fixed),
            "file" if section.file.as_os_str().is_empty() => {
                f.problem(
                    "health.file",
                    "health.source = \"file\" needs the file to read, e.g. \
                     /sys/class/power_supply/BAT0/capacity",
                );
                None
            }
            "file" => Some(HealthSource::File(section.file.clone())),
            "command" => f
                .commands("health.command", std::slice::from_ref(&section.command))
                .and_then(|mut commands| commands.pop())
                .map(HealthSource::Command),
            other => {
                f.problem(
                    "health.source",
                    format!(
                        "unknown source {other:?}; expected \"fixed\", \"file\" or \"command\""
                    ),
                );
                None
            }
        };
        Some(HealthConfig {
            source: source?,
            battery_percent: battery?,
            interval: interval?,
            timeout: timeout?,
        })
    }

    /// `election.static.leader`, required in static mode (STA-1), and the members
    /// `cluster.voters` lists; `StaticConfig::validate` checks the leader is one of them.
    fn static_leader(
        &self,
        f: &mut Findings<'_>,
        id: PeerId,
        voters: Option<&[PeerId]>,
    ) -> Option<ModeConfig> {
        let text = &self.election.static_leader.leader;
        if text.is_empty() {
            f.problem(
                "election.static.leader",
                "election.mode = \"static\" needs the node that leads (a node id)",
            );
            return None;
        }
        let leader = f.id("election.static.leader", text, PeerId::new)?;
        let config = ModeConfig::Static(StaticConfig {
            id,
            leader,
            members: voters?.iter().copied().collect(),
        });
        f.core_problems(config.validate())?;
        Some(config)
    }

    /// `cluster.voters`; in voters mode an empty list is this node alone.
    fn voters(
        &self,
        f: &mut Findings<'_>,
        node_id: Option<PeerId>,
        quorum: Option<Quorum>,
    ) -> Option<Vec<PeerId>> {
        let voters = self.listed_voters(f)?;
        match quorum? {
            Quorum::Connected => {
                if !voters.is_empty() {
                    f.warn(
                        "cluster.voters",
                        "ignored: with election.raft.quorum = \"connected\" the electorate is \
                         this node and its connected peers",
                    );
                }
                Some(voters)
            }
            Quorum::Voters => {
                let node_id = node_id?;
                if voters.is_empty() {
                    return Some(vec![node_id]);
                }
                if !voters.contains(&node_id) {
                    // With the log, the voters in force are the log's configuration, which
                    // `conclave member` changes: a node added at runtime starts this way.
                    let warning = if self.log.enabled {
                        format!(
                            "node.id {node_id} is not listed: this node starts as a non-voting \
                             follower and votes only once the cluster's configuration makes it a \
                             voter (`conclave init --join URL`, then `conclave member promote \
                             {node_id}`)"
                        )
                    } else {
                        format!(
                            "node.id {node_id} is not listed: this node follows the leader but \
                             never campaigns or votes (a non-voting follower)"
                        )
                    };
                    f.warn("cluster.voters", warning);
                }
                let no_link = self.link.udp.is_none() && self.link.espnow.is_none();
                if no_link && voters.iter().any(|&voter| voter != node_id) {
                    f.warn(
                        "cluster.voters",
                        "lists other nodes but no link is configured ([link.udp] or \
                         [link.espnow]): they cannot be reached, so no leader can be elected",
                    );
                }
                Some(voters)
            }
        }
    }

    /// The text of `cluster.voters`, as ids, each once.
    fn listed_voters(&self, f: &mut Findings<'_>) -> Option<Vec<PeerId>> {
        let mut voters = Some(Vec::new());
        let mut first_seen: BTreeMap<PeerId, usize> = BTreeMap::new();
        for (i, text) in self.cluster.voters.iter().enumerate() {
            let key = format!("cluster.voters[{i}]");
            let Some(id) = f.id(&key, text, PeerId::new) else {
                voters = None;
                continue;
            };
            if let Some(first) = first_seen.get(&id) {
                f.problem(
                    &key,
                    format!("{text:?} is listed twice (also cluster.voters[{first}])"),
                );
                voters = None;
                continue;
            }
            first_seen.insert(id, i);
            if let Some(voters) = &mut voters {
                voters.push(id);
            }
        }
        voters
    }

    /// `[membership]`.
    fn membership(&self, f: &mut Findings<'_>) -> Option<MembershipConfig> {
        let section = &self.membership;
        let heartbeat = f.millis("membership.heartbeat_ms", section.heartbeat_ms);
        let multiplier = match u32::try_from(section.timeout_multiplier) {
            Ok(multiplier) if multiplier >= 2 => Some(multiplier),
            Ok(multiplier) => {
                f.problem(
                    "membership.timeout_multiplier",
                    format!(
                        "must be at least 2, found {multiplier}: a peer would be declared \
                         disconnected as soon as one heartbeat is late"
                    ),
                );
                None
            }
            Err(_) => {
                f.problem(
                    "membership.timeout_multiplier",
                    format!(
                        "must be at most {}, found {}",
                        u32::MAX,
                        section.timeout_multiplier
                    ),
                );
                None
            }
        };
        let hello = f.millis("membership.hello_interval_ms", section.hello_interval_ms);
        let announce = f.millis(
            "membership.announce_interval_ms",
            section.announce_interval_ms,
        );
        Some(MembershipConfig {
            heartbeat_interval: heartbeat?,
            timeout_multiplier: multiplier?,
            hello_interval: hello?,
            announce_interval: announce?,
            // Derived from the voters and links when the node starts.
            expected_peers: 0,
        })
    }

    /// `[link.udp]`: `Some(None)` when the section is absent.
    fn udp(&self, f: &mut Findings<'_>) -> Option<Option<UdpLinkConfig>> {
        let Some(section) = &self.link.udp else {
            return Some(None);
        };
        let listen = if section.listen.trim().is_empty() {
            f.problem(
                "link.udp.listen",
                "required when [link.udp] is present: the ip:port this node receives on, \
                 e.g. 127.0.0.1:7946",
            );
            None
        } else {
            f.socket_addr("link.udp.listen", &section.listen)
        };
        let mut peers = Some(Vec::with_capacity(section.peers.len()));
        for (i, text) in section.peers.iter().enumerate() {
            let key = format!("link.udp.peers[{i}]");
            match f.peer_addrs(&key, text, listen) {
                Some(addrs) => {
                    for peer in addrs {
                        if Some(peer) == listen {
                            f.warn(
                                &key,
                                format!("{peer} is this node's own link.udp.listen address"),
                            );
                        }
                        if let Some(peers) = &mut peers {
                            peers.push(peer);
                        }
                    }
                }
                None => peers = None,
            }
        }
        Some(Some(UdpLinkConfig {
            listen: listen?,
            peers: peers?,
        }))
    }

    /// `[link.espnow]`: `Some(None)` when the section is absent.
    fn espnow(&self, f: &mut Findings<'_>) -> Option<Option<EspNowLinkConfig>> {
        let Some(section) = &self.link.espnow else {
            return Some(None);
        };
        let port = match section.port.trim() {
            "" => {
                f.problem(
                    "link.espnow.port",
                    "required when [link.espnow] is present: the dongle's serial device \
                     (e.g. /dev/ttyACM0) or \"virtual\"",
                );
                None
            }
            "virtual" => Some(DonglePort::Virtual),
            path => Some(DonglePort::Device(path.into())),
        };
        let baud = match u32::try_from(section.baud) {
            Ok(0) => Some(921_600),
            Ok(baud) if baud >= 9600 => Some(baud),
            _ => {
                f.problem(
                    "link.espnow.baud",
                    format!(
                        "{} is not a usable serial speed; the dongle runs at 921600",
                        section.baud
                    ),
                );
                None
            }
        };
        let channel = match u8::try_from(section.channel) {
            Ok(0) => Some(1),
            Ok(channel @ 1..=14) => Some(channel),
            _ => {
                f.problem(
                    "link.espnow.channel",
                    format!("{} is not a Wi-Fi channel; use 1 to 14", section.channel),
                );
                None
            }
        };
        let pmk = hex_key(f, "link.espnow.pmk", &section.pmk);
        let lmk = hex_key(f, "link.espnow.lmk", &section.lmk);
        let peer_lmks = peer_keys(f, &section.peer_lmks);
        Some(Some(EspNowLinkConfig {
            port: port?,
            baud: baud?,
            channel: channel?,
            pmk: pmk?,
            lmk: lmk?,
            peer_lmks: peer_lmks?,
        }))
    }

    /// `[admin]` and `[metrics]`, checked together because they must not share an address.
    fn endpoints(&self, f: &mut Findings<'_>) -> (Option<AdminConfig>, Option<MetricsConfig>) {
        let admin_listen = f.optional_socket_addr("admin.listen", &self.admin.listen);
        let tokens = self.admin_tokens(f);
        if let (Some(Some(listen)), Some(tokens)) = (admin_listen, &tokens) {
            if tokens.is_empty() && !listen.ip().to_canonical().is_loopback() {
                f.problem(
                    "admin.token_file",
                    format!(
                        "required (or admin.tokens_file) when admin.listen ({listen}) is not a \
                         loopback address"
                    ),
                );
            }
        }
        let metrics_listen = f.optional_socket_addr("metrics.listen", &self.metrics.listen);
        if let (Some(Some(admin)), Some(Some(metrics))) = (admin_listen, metrics_listen) {
            if clash(admin, metrics) {
                f.problem(
                    "metrics.listen",
                    format!("{metrics} collides with admin.listen ({admin})"),
                );
            }
        }
        let peer_urls = admin_peer_urls(f, &self.admin.peer_urls);
        let (max_connections, max_event_streams) = self.admin_bounds(f);
        let admin_tls = listener_tls(f, "admin.tls", &self.admin.tls);
        let metrics_tls = listener_tls(f, "metrics.tls", &self.metrics.tls);
        let admin = match (
            admin_listen,
            tokens,
            peer_urls,
            max_connections,
            max_event_streams,
            admin_tls,
        ) {
            (
                Some(listen),
                Some(tokens),
                Some(peer_urls),
                Some(max_connections),
                Some(max_event_streams),
                Some(tls),
            ) => Some(AdminConfig {
                listen,
                tokens,
                peer_urls,
                max_connections,
                max_event_streams,
                tls,
            }),
            _ => None,
        };
        let metrics = match (metrics_listen, metrics_tls) {
            (Some(listen), Some(tls)) => Some(MetricsConfig { listen, tls }),
            _ => None,
        };
        (admin, metrics)
    }

    /// SEC-2: the token of `admin.token_file` (an admin token named `token_file`) and those of
    /// `admin.tokens_file`; `None` when either file has a problem, each reported under its key.
    fn admin_tokens(&self, f: &mut Findings<'_>) -> Option<Vec<AdminToken>> {
        let token_file = &self.admin.token_file;
        let single = if token_file.as_os_str().is_empty() {
            Some(None)
        } else {
            match read_token(token_file) {
                Ok(token) => {
                    if tokens::readable_by_others(token_file) {
                        f.warn(
                            "admin.token_file",
                            format!(
                                "{} may be read by every user of this machine: chmod 600 it",
                                token_file.display()
                            ),
                        );
                    }
                    Some(Some(AdminToken::from_token_file(&token)))
                }
                Err(message) => {
                    f.problem("admin.token_file", message);
                    None
                }
            }
        };
        let tokens_file = &self.admin.tokens_file;
        let named = if tokens_file.as_os_str().is_empty() {
            Some(Vec::new())
        } else {
            match tokens::read_tokens_file(tokens_file) {
                Ok((tokens, clear)) => {
                    if clear && tokens::readable_by_others(tokens_file) {
                        f.problem(
                            "admin.tokens_file",
                            format!(
                                "{} holds secrets in clear and may be read by every user of \
                                 this machine: chmod 600 it (or 640 for the node's group), or \
                                 give secret_sha256 instead of secret",
                                tokens_file.display()
                            ),
                        );
                        None
                    } else {
                        Some(tokens)
                    }
                }
                Err(problems) => {
                    for problem in problems {
                        f.problem("admin.tokens_file", problem);
                    }
                    None
                }
            }
        };
        let (single, named) = (single?, named?);
        if let Some(single) = &single {
            if let Some(clash) = tokens::clash_with_token_file(single, &named) {
                f.problem(
                    "admin.tokens_file",
                    format!("{}: {clash}", tokens_file.display()),
                );
                return None;
            }
        }
        Some(single.into_iter().chain(named).collect())
    }

    /// `admin.max_connections` and `admin.max_event_streams` (item 4 of issue 8): both at
    /// least 1, and fewer streams than connections, so that idle subscribers can never take
    /// every connection and leave none for status and commands.
    fn admin_bounds(&self, f: &mut Findings<'_>) -> (Option<usize>, Option<usize>) {
        let bound = |f: &mut Findings<'_>, key: &str, value: u64| match usize::try_from(value) {
            Ok(n) if (1..=MAX_ADMIN_CONNECTIONS).contains(&n) => Some(n),
            _ => {
                f.problem(
                    key,
                    format!("must be between 1 and {MAX_ADMIN_CONNECTIONS}, found {value}"),
                );
                None
            }
        };
        let connections = bound(f, "admin.max_connections", self.admin.max_connections);
        let streams = bound(f, "admin.max_event_streams", self.admin.max_event_streams);
        if let (Some(connections), Some(streams)) = (connections, streams) {
            if streams >= connections {
                f.problem(
                    "admin.max_event_streams",
                    format!(
                        "must be less than admin.max_connections ({streams} >= {connections}): \
                         event streams stay open, and would leave no connection for status \
                         and commands"
                    ),
                );
                return (Some(connections), None);
            }
        }
        (connections, streams)
    }

    /// `[hooks]`.
    fn hooks(&self, f: &mut Findings<'_>) -> Option<HooksConfig> {
        let hooks = &self.hooks;
        let on_leader = f.commands("hooks.on_leader", &hooks.on_leader);
        let on_follower = f.commands("hooks.on_follower", &hooks.on_follower);
        let on_leader_change = f.commands("hooks.on_leader_change", &hooks.on_leader_change);
        let on_peer_status = f.commands("hooks.on_peer_status", &hooks.on_peer_status);
        let on_membership_change =
            f.commands("hooks.on_membership_change", &hooks.on_membership_change);
        let timeout = f.millis("hooks.timeout_ms", hooks.timeout_ms);
        Some(HooksConfig {
            on_leader: on_leader?,
            on_follower: on_follower?,
            on_leader_change: on_leader_change?,
            on_peer_status: on_peer_status?,
            on_membership_change: on_membership_change?,
            timeout: timeout?,
        })
    }
}

/// Problems and warnings found so far.
struct Findings<'a> {
    /// Problems met while reading; a value they concern was replaced by the layer below, so
    /// rules about that key would only repeat them.
    read: &'a [ConfigProblem],
    problems: Vec<ConfigProblem>,
    warnings: Vec<ConfigWarning>,
}

impl<'a> Findings<'a> {
    fn new(read: &'a [ConfigProblem]) -> Self {
        Self {
            read,
            problems: read.to_vec(),
            warnings: Vec::new(),
        }
    }

    fn problem(&mut self, key: &str, message: impl Into<String>) {
        if !self.read.iter().any(|read| related(&read.key, key)) {
            self.problems.push(ConfigProblem::new(key, message));
        }
    }

    fn warn(&mut self, key: &str, message: impl Into<String>) {
        self.warnings.push(ConfigWarning::new(key, message));
    }

    /// A peer or cluster id (PROTO-1).
    fn id<T>(
        &mut self,
        key: &str,
        text: &str,
        parse: impl FnOnce(&str) -> Result<T, IdError>,
    ) -> Option<T> {
        match parse(text) {
            Ok(id) => Some(id),
            Err(error) => {
                let rules = match error {
                    // This message states the rules already.
                    IdError::InvalidByte { .. } => "",
                    _ => "; ids are 1 to 32 bytes of A-Z a-z 0-9 . _ -",
                };
                self.problem(key, format!("{text:?}: {error}{rules}"));
                None
            }
        }
    }

    /// A positive number of milliseconds, at most [`MAX_MILLIS`].
    fn millis(&mut self, key: &str, millis: u64) -> Option<Duration> {
        if millis == 0 {
            self.problem(key, "must be greater than 0");
            None
        } else if millis > MAX_MILLIS {
            self.problem(
                key,
                format!("must be at most {MAX_MILLIS} (one day), found {millis}"),
            );
            None
        } else {
            Some(Duration::from_millis(millis))
        }
    }

    /// A whole number from 0 to `max`.
    fn at_most<T: TryFrom<u64> + Into<u64>>(&mut self, key: &str, value: u64, max: T) -> Option<T> {
        let max = max.into();
        match T::try_from(value) {
            Ok(fits) if value <= max => Some(fits),
            _ => {
                self.problem(key, format!("must be between 0 and {max}, found {value}"));
                None
            }
        }
    }

    /// The problems a core's own `validate()` found, each under the key its setting is read
    /// from ([`key_of`]); `None` when there were any.
    fn core_problems(&mut self, checked: Result<(), ElectionError>) -> Option<()> {
        match checked {
            Ok(()) => Some(()),
            Err(ElectionError::InvalidConfig(problems)) => {
                for problem in problems {
                    self.problem(key_of(problem.setting), problem.message);
                }
                None
            }
            // `validate()` refuses with `InvalidConfig` only; anything else is still a refusal.
            Err(other) => {
                self.problem("election", other.to_string());
                None
            }
        }
    }

    fn socket_addr(&mut self, key: &str, text: &str) -> Option<SocketAddr> {
        match text.trim().parse() {
            Ok(addr) => Some(addr),
            Err(_) => {
                self.problem(
                    key,
                    format!(
                        "{text:?} is not a socket address; expected ip:port such as \
                         127.0.0.1:7946 (host names are not resolved)"
                    ),
                );
                None
            }
        }
    }

    /// A UDP peer: `ip:port`, or `host:port` resolved now to the addresses of the same
    /// family as `listen` (a socket of one family cannot send to the other).
    fn peer_addrs(
        &mut self,
        key: &str,
        text: &str,
        listen: Option<SocketAddr>,
    ) -> Option<Vec<SocketAddr>> {
        let text = text.trim();
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Some(vec![addr]);
        }
        let Some((host, port)) = text
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .filter(|(host, _)| !host.is_empty())
        else {
            self.problem(
                key,
                format!(
                    "{text:?} is not an address; expected ip:port or host:port, such as \
                     127.0.0.1:7946 or gw-b.lan:7946"
                ),
            );
            return None;
        };
        let resolved: Vec<SocketAddr> = match (host, port).to_socket_addrs() {
            Ok(addrs) => addrs.collect(),
            Err(error) => {
                self.problem(
                    key,
                    format!(
                        "cannot resolve the host name {host:?}: {error} (names are resolved \
                         once, at start: is it in DNS or /etc/hosts?)"
                    ),
                );
                return None;
            }
        };
        let usable: Vec<SocketAddr> = resolved
            .iter()
            .copied()
            .filter(|addr| listen.is_none_or(|listen| listen.is_ipv4() == addr.is_ipv4()))
            .collect();
        if usable.is_empty() {
            let family = if listen.is_some_and(|l| l.is_ipv4()) {
                "IPv4"
            } else {
                "IPv6"
            };
            self.problem(
                key,
                format!(
                    "{host:?} resolves to no {family} address, the family of link.udp.listen \
                     (found {resolved:?})"
                ),
            );
            return None;
        }
        Some(usable)
    }

    /// An address where the empty string turns the endpoint off: `Some(None)`.
    fn optional_socket_addr(&mut self, key: &str, text: &str) -> Option<Option<SocketAddr>> {
        if text.trim().is_empty() {
            Some(None)
        } else {
            self.socket_addr(key, text).map(Some)
        }
    }

    /// One hook list (CB-2).
    fn commands(&mut self, key: &str, entries: &[HookEntry]) -> Option<Vec<HookCommand>> {
        let mut commands = Some(Vec::with_capacity(entries.len()));
        for (i, entry) in entries.iter().enumerate() {
            let item = format!("{key}[{i}]");
            let command = match entry {
                HookEntry::Shell(line) if line.trim().is_empty() => {
                    self.problem(&item, "empty command");
                    None
                }
                HookEntry::Shell(_) => Some(entry.clone()),
                HookEntry::Argv(argv) => match argv.first() {
                    None => {
                        self.problem(&item, "empty command: an array needs at least the program");
                        None
                    }
                    Some(program) if program.trim().is_empty() => {
                        self.problem(&item, "empty command: the program (first item) is empty");
                        None
                    }
                    Some(_) => Some(entry.clone()),
                },
            };
            match (command, &mut commands) {
                (Some(command), Some(commands)) => commands.push(command),
                (None, _) => commands = None,
                (Some(_), None) => {}
            }
        }
        commands
    }
}

/// The key a setting of an election core is read from (docs/design.md §9). Exhaustive, so a setting
/// a core adds to its rules is a compile error here until it has a key.
fn key_of(setting: Setting) -> &'static str {
    match setting {
        Setting::Raft(setting) => match setting {
            // Raft's voters are the listed ones (voters quorum): an empty set is the list's.
            RaftSetting::Quorum => "cluster.voters",
            RaftSetting::HeartbeatInterval => "election.raft.heartbeat_ms",
            RaftSetting::ElectionTimeoutMax => "election.raft.election_timeout_max_ms",
            RaftSetting::SuspicionFloor => "election.raft.suspicion_floor_ms",
            RaftSetting::ReplicatedLog => "log.enabled",
        },
        Setting::Gossip(setting) => match setting {
            GossipSetting::StartupGracePeriod => "election.gossip.startup_grace_period_ms",
            GossipSetting::MembershipSampleInterval => {
                "election.gossip.membership_sample_interval_ms"
            }
            GossipSetting::LeaderAliveThreshold => "election.gossip.leader_alive_threshold_ms",
            GossipSetting::LeaderElectionDuration => "election.gossip.leader_election_duration_ms",
            GossipSetting::OrgLeader => "election.gossip.org_leader",
        },
        Setting::Priority(setting) => match setting {
            PrioritySetting::DiscoveryTimeout => "election.priority.discovery_timeout_ms",
            PrioritySetting::CampaignTimeout => "election.priority.campaign_timeout_ms",
            PrioritySetting::VoteTimeout => "election.priority.vote_timeout_ms",
            PrioritySetting::AnnounceInterval => "election.priority.announce_interval_ms",
            PrioritySetting::MasterTimeout => "election.priority.master_timeout_ms",
            // The battery assumed until the first reading.
            PrioritySetting::BatteryPercent => "health.battery_percent",
            PrioritySetting::LowBatteryPercent => "election.priority.low_battery_percent",
        },
        Setting::Static(setting) => match setting {
            StaticSetting::Leader => "election.static.leader",
        },
    }
}

/// The most `admin.max_connections` (and `admin.max_event_streams`) may be: room for one
/// streaming session keepalive per client of a large fleet (SESS-1) beside the operators and
/// dashboards; each takes a file descriptor, so the node's open-files limit must allow it.
pub const MAX_ADMIN_CONNECTIONS: usize = 65_536;

/// `admin.peer_urls`: `"<peer id>=<admin URL>"` each; the URL is `http://host:port` (the
/// scheme may be left out), kept without a trailing slash.
fn admin_peer_urls(f: &mut Findings<'_>, entries: &[String]) -> Option<BTreeMap<PeerId, String>> {
    let mut urls = BTreeMap::new();
    let mut sound = true;
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("admin.peer_urls[{i}]");
        let Some((id, url)) = entry.split_once('=') else {
            f.problem(
                &key,
                format!(
                    "{entry:?} must be \"<peer id>=<admin URL>\", e.g. \
                     \"gw-b=http://10.0.0.2:7070\""
                ),
            );
            sound = false;
            continue;
        };
        let id = match PeerId::new(id.trim()) {
            Ok(id) => Some(id),
            Err(error) => {
                f.problem(&key, format!("peer id {:?}: {error}", id.trim()));
                None
            }
        };
        let url = match admin_url(url.trim()) {
            Ok(url) => Some(url),
            Err(message) => {
                f.problem(&key, message);
                None
            }
        };
        match (id, url) {
            (Some(id), Some(url)) => {
                if urls.insert(id, url).is_some() {
                    f.problem(&key, format!("a second URL for {id}; give each peer one"));
                    sound = false;
                }
            }
            _ => sound = false,
        }
    }
    sound.then_some(urls)
}

/// An admin API's base URL: `http://host:port`, `https://host:port` (a node with
/// `admin.tls`), or `host:port` given the scheme http.
pub fn admin_url(text: &str) -> Result<String, String> {
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme @ ("http" | "https"), rest)) => (scheme, rest),
        Some((scheme, _)) => {
            return Err(format!(
                "{text:?}: the admin API speaks http or https (admin.tls), not {scheme}; write \
                 http://host:port or https://host:port"
            ));
        }
        None => ("http", text),
    };
    let authority = rest.trim_end_matches('/');
    let port_ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if authority.contains('/') || !port_ok {
        return Err(format!(
            "{text:?} is not an admin API address; expected http://host:port, \
             https://host:port or host:port, such as http://10.0.0.2:7070"
        ));
    }
    Ok(format!("{scheme}://{authority}"))
}

/// `[admin.tls]` or `[metrics.tls]` (ADMIN-TLS): none of the files (plain HTTP), or a
/// certificate and its key, and optionally client CAs, that pass the checks of
/// [`TlsIdentity::load`] now: readable, the key the certificate's, not expired. `Some(None)`
/// is plain HTTP; `None` a problem reported under the file's key.
fn listener_tls(
    f: &mut Findings<'_>,
    section: &str,
    tls: &super::TlsSection,
) -> Option<Option<TlsFiles>> {
    let given = |path: &Path| !path.as_os_str().is_empty();
    match (given(&tls.cert_file), given(&tls.key_file)) {
        (false, false) => {
            if given(&tls.client_ca_file) {
                f.problem(
                    &format!("{section}.client_ca_file"),
                    format!(
                        "needs {section}.cert_file and {section}.key_file: client certificates \
                         are asked for over TLS only"
                    ),
                );
                return None;
            }
            return Some(None);
        }
        (true, false) | (false, true) => {
            let missing = if given(&tls.cert_file) {
                "key_file"
            } else {
                "cert_file"
            };
            f.problem(
                &format!("{section}.{missing}"),
                format!(
                    "{section}.cert_file and {section}.key_file go together: set both, or \
                     neither for plain HTTP"
                ),
            );
            return None;
        }
        (true, true) => {}
    }
    let files = TlsFiles {
        cert_file: tls.cert_file.clone(),
        key_file: tls.key_file.clone(),
        client_ca_file: given(&tls.client_ca_file).then(|| tls.client_ca_file.clone()),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        });
    match TlsIdentity::load(&files, now) {
        Ok(_) => Some(Some(files)),
        Err(problem) => {
            f.problem(&format!("{section}.{}", problem.field), problem.message);
            None
        }
    }
}

/// Whether `a` and `b` are the same key or one lies inside the other (`link.udp` and
/// `link.udp.listen`, `cluster.voters` and `cluster.voters[1]`).
fn related(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    a == b || inside(a, b) || inside(b, a)
}

/// Whether two TCP listeners would fight over one port.
fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// Length of the pre-shared key, in bytes, in either form of its file.
const PSK_LEN: usize = 32;

/// The pre-shared key in `path`: exactly 64 hex digits (surrounding whitespace allowed),
/// decoded to 32 bytes, or exactly 32 raw bytes (32 hex digits are refused as half a hex key).
/// Anything else is refused with the file's name and length, rather than read as a raw key of
/// some other length: a half-pasted hex key must not quietly become a weaker one.
fn read_secret(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|error| cannot_read(path, &error))?;
    if let Some(secret) = decode_hex_key(bytes.trim_ascii()) {
        return Ok(secret);
    }
    let trimmed = bytes.trim_ascii();
    if trimmed.len() == PSK_LEN && trimmed.iter().all(u8::is_ascii_hexdigit) {
        // A random raw key is almost never made of hex digits only: this is half a hex key.
        return Err(format!(
            "{} is {PSK_LEN} hex digits ({} bytes): expected exactly {} hex digits (surrounding \
             whitespace allowed) or exactly {PSK_LEN} raw bytes; generate one with `openssl rand \
             -hex 32 > {}`",
            path.display(),
            PSK_LEN / 2,
            PSK_LEN * 2,
            path.display()
        ));
    }
    if !trimmed.is_empty() && trimmed.iter().all(u8::is_ascii_hexdigit) {
        // Hex digits of the wrong count (a digit lost in a copy): say what the file holds. A
        // byte count would mislead (63 digits and a newline are 64 bytes), and 31 digits and
        // a newline are not a raw key for being 32 bytes.
        let around = match bytes.len() - trimmed.len() {
            0 => String::new(),
            1 if bytes.last() == Some(&b'\n') => " and a newline".to_owned(),
            n => format!(" and {n} bytes of whitespace"),
        };
        return Err(format!(
            "{} holds {} hex digits{around}: expected exactly {} hex digits (surrounding \
             whitespace allowed) or exactly {PSK_LEN} raw bytes; generate one with `openssl rand \
             -hex 32 > {}`",
            path.display(),
            trimmed.len(),
            PSK_LEN * 2,
            path.display()
        ));
    }
    if bytes.len() == PSK_LEN {
        return Ok(bytes);
    }
    Err(format!(
        "{} is {} bytes: expected exactly {} hex digits (surrounding whitespace allowed) or \
         exactly {PSK_LEN} raw bytes; generate one with `openssl rand -hex 32 > {}`",
        path.display(),
        bytes.len(),
        PSK_LEN * 2,
        path.display()
    ))
}

/// 64 hex digits as 32 bytes; anything else is not the hex form.
fn decode_hex_key(text: &[u8]) -> Option<Vec<u8>> {
    fn nibble(digit: u8) -> Option<u8> {
        char::from(digit)
            .to_digit(16)
            .and_then(|value| u8::try_from(value).ok())
    }
    if text.len() != PSK_LEN * 2 {
        return None;
    }
    text.chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// The admin bearer token in `path`, surrounding whitespace trimmed.
fn read_token(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|error| cannot_read(path, &error))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(token.to_owned())
}

fn cannot_read(path: &Path, error: &std::io::Error) -> String {
    format!("cannot read {}: {error}", path.display())
}

/// A 16-byte radio key written as 32 hex characters; empty means none.
/// `link.espnow.peer_lmks`: `"<peer id>=<32 hex characters>"` each, one entry per peer.
fn peer_keys(f: &mut Findings<'_>, entries: &[String]) -> Option<BTreeMap<PeerId, [u8; 16]>> {
    let mut keys = BTreeMap::new();
    let mut sound = true;
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("link.espnow.peer_lmks[{i}]");
        let Some((id, hex)) = entry.split_once('=') else {
            f.problem(
                &key,
                "must be \"<peer id>=<32 hex characters>\", e.g. \"gw-b=00112233445566778899aabbccddeeff\"",
            );
            sound = false;
            continue;
        };
        let id = match PeerId::new(id.trim()) {
            Ok(id) => Some(id),
            Err(err) => {
                f.problem(&key, format!("peer id {:?}: {err}", id.trim()));
                None
            }
        };
        let hex = hex.trim();
        let lmk = parse_key16(hex);
        if lmk.is_none() {
            let what = if hex.is_empty() {
                "the key is missing after '='"
            } else {
                "the key must be 32 hex characters (a 16-byte ESP-NOW key)"
            };
            f.problem(&key, what);
        }
        match (id, lmk) {
            (Some(id), Some(lmk)) => {
                if keys.insert(id, lmk).is_some() {
                    f.problem(&key, format!("a second key for {id}; give each peer one"));
                    sound = false;
                }
            }
            _ => sound = false,
        }
    }
    sound.then_some(keys)
}

fn hex_key(f: &mut Findings<'_>, key: &str, text: &str) -> Option<Option<[u8; 16]>> {
    let text = text.trim();
    if text.is_empty() {
        return Some(None);
    }
    match parse_key16(text) {
        Some(bytes) => Some(Some(bytes)),
        None => {
            f.problem(
                key,
                "must be 32 hex characters (a 16-byte ESP-NOW key), or empty for none",
            );
            None
        }
    }
}

/// 32 hex characters as 16 bytes.
fn parse_key16(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    let digits: Vec<u8> = text
        .as_bytes()
        .chunks(2)
        .map_while(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .collect();
    <[u8; 16]>::try_from(digits.as_slice()).ok()
}

/// Bytes of log entries one frame of `mtu` bytes holds beside an AppendEntries' envelope and
/// fields sent by `id` to `id` of `cluster`, with a tag of `tag_len` bytes (none without a
/// key), and the largest numbers; `None` when the tag length is not valid.
pub(crate) fn frame_entry_budget(
    cluster: ClusterId,
    id: PeerId,
    tag_len: Option<usize>,
    mtu: usize,
) -> Option<usize> {
    let key = match tag_len {
        Some(tag_len) => Some(AuthKey::new(&[0; 32], tag_len).ok()?),
        None => None,
    };
    let codec = FrameCodec::new(cluster, key);
    let append = AppendEntries {
        term: u64::MAX,
        leader: id,
        prev_index: u64::MAX,
        prev_term: u64::MAX,
        entries: Vec::new(),
        commit: u64::MAX,
        pinned: true,
        // LOG-7: a read round is not counted here. The leader puts one on a batch only
        // where it fits beside the entries, and otherwise leaves it to an empty heartbeat,
        // so that the largest single write stays what it was before reads had rounds.
        read_round: None,
        // MEMB-6: an entry sent in chunks fills the same budget (the chunk's own fields are
        // counted against it by the leader).
        chunk: None,
    };
    let envelope = Envelope::new(
        cluster,
        id,
        u64::MAX,
        u64::MAX,
        Some(id),
        Body::AppendEntries(append),
    );
    let frame = codec.encode(&envelope, usize::MAX).ok()?;
    // The entries' array header grows by two bytes past 15 entries.
    Some(mtu.saturating_sub(frame.len() + 2))
}
