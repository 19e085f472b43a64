//! What the harness's own integration tests share and the simulator does not need.

mod raft_network;

pub(crate) use raft_network::RaftNetwork;
