//! Unit tests of static leadership (STA-1): each fires one input and compares the drained
//! actions exactly.

use conclave_protocol::Vote;

use super::*;
use crate::election::{
    Election, ElectionConfig, ElectionMessage, ElectionStatus, Event, Mode, ModeStatus,
};
use crate::raft::RaftMessage;
use crate::testing::{drain, id, ms};

/// Node `me` of the cluster a, b, c, led by `a`.
fn config(me: &str) -> StaticConfig {
    StaticConfig {
        members: [id("a"), id("b"), id("c")].into_iter().collect(),
        ..StaticConfig::new(id(me), id("a"))
    }
}

fn start(me: &str, restored: HardState) -> StaticLeader {
    StaticLeader::new(config(me), restored, SeededRng::new(1), ms(0)).unwrap()
}

fn epoch(term: u64, assigned: Option<&str>) -> HardState {
    HardState {
        term,
        vote: None,
        manual_override: assigned.map(id),
    }
}

fn role_changed(term: u64, role: Role) -> Action {
    Action::Publish(Event::RoleChanged {
        term,
        role,
        phase: role.label(),
    })
}

fn leader_changed(term: u64, leader: Option<&str>, role: Role, cause: LeaderChangeCause) -> Action {
    Action::Publish(Event::LeaderChanged {
        term,
        leader: leader.map(id),
        role,
        cause,
    })
}

/// STA-1: a leader outside the members is refused under `StaticSetting::Leader`, naming the
/// leader and the members; without members, any leader is accepted.
#[test]
fn sta1_leader_outside_the_members_is_refused_under_its_setting() {
    let mut outside = config("b");
    outside.leader = id("x");
    assert_eq!(
        outside.validate(),
        Err(ElectionError::InvalidConfig(vec![SettingProblem::new(
            StaticSetting::Leader,
            "x is not one of the members, the nodes that may lead (a, b, c)"
        )]))
    );
    assert!(matches!(
        StaticLeader::new(outside, HardState::default(), SeededRng::new(1), ms(0)),
        Err(ElectionError::InvalidConfig(_))
    ));
    assert_eq!(StaticConfig::new(id("b"), id("x")).validate(), Ok(()));
}

/// STA-1, CB-5: the configured leader persists its first epoch, then publishes that it leads
/// (cause `configured`); its fencing token is `1:a`.
#[test]
fn sta1_configured_leader_persists_its_epoch_then_leads() {
    let mut node = start("a", HardState::default());
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(epoch(1, None)),
            role_changed(1, Role::Leader),
            leader_changed(1, Some("a"), Role::Leader, LeaderChangeCause::Configured),
        ]
    );
    assert_eq!((node.role(), node.leader()), (Role::Leader, Some(id("a"))));
    assert_eq!(
        node.fencing_token(),
        Some(FencingToken {
            term: 1,
            leader: id("a")
        })
    );
    assert_eq!(node.poll_timeout(), None);
}

/// STA-1: a restart with the epoch already durable persists nothing and leads at once.
#[test]
fn sta1_restarted_leader_persists_nothing() {
    let mut node = start("a", epoch(1, None));
    assert_eq!(
        drain(&mut node),
        vec![
            role_changed(1, Role::Leader),
            leader_changed(1, Some("a"), Role::Leader, LeaderChangeCause::Configured),
        ]
    );
}

/// STA-1: a follower knows no leader until membership reports it connected (cause
/// `configured`), reports it lost when membership does (leader none, cause `leader_lost`), and
/// found again (cause `leader_heard`), with the same fencing token: the leader never stopped
/// leading. Other peers coming and going change nothing, and neither do repeated reports.
#[test]
fn sta1_follower_tracks_the_leaders_liveness() {
    let mut node = start("b", HardState::default());
    assert_eq!(drain(&mut node), vec![Action::Persist(epoch(1, None))]);
    assert_eq!(node.leader(), None);

    node.handle_peer_status(ms(10), id("c"), true);
    assert_eq!(drain(&mut node), vec![]);
    node.handle_peer_status(ms(20), id("a"), true);
    assert_eq!(
        drain(&mut node),
        vec![leader_changed(
            1,
            Some("a"),
            Role::Follower,
            LeaderChangeCause::Configured
        )]
    );
    node.handle_peer_status(ms(25), id("a"), true);
    assert_eq!(drain(&mut node), vec![]);
    let token = node.fencing_token();

    node.handle_peer_status(ms(30), id("a"), false);
    assert_eq!(
        drain(&mut node),
        vec![leader_changed(
            1,
            None,
            Role::Follower,
            LeaderChangeCause::LeaderLost
        )]
    );
    assert_eq!(node.fencing_token(), None);
    assert!(!node.status().leader_reachable);
    node.handle_peer_status(ms(35), id("c"), false);
    assert_eq!(drain(&mut node), vec![]);

    node.handle_peer_status(ms(40), id("a"), true);
    assert_eq!(
        drain(&mut node),
        vec![leader_changed(
            1,
            Some("a"),
            Role::Follower,
            LeaderChangeCause::LeaderHeard
        )]
    );
    assert_eq!(node.fencing_token(), token);
}

/// STA-1: the static leader cannot resign (a clear error naming the way to reassign); a
/// follower is told it does not lead; nothing is emitted either way.
#[test]
fn sta1_resign_refused() {
    let mut leader = start("a", epoch(1, None));
    drain(&mut leader);
    assert_eq!(
        leader.handle_command(ms(5), Command::Resign),
        Err(ElectionError::StaticLeaderCannotResign { leader: id("a") })
    );
    assert_eq!(drain(&mut leader), vec![]);
    assert_eq!(leader.role(), Role::Leader);
    let message = ElectionError::StaticLeaderCannotResign { leader: id("a") }.to_string();
    assert!(
        message.contains("election.static.leader") && message.contains("conclave leader set"),
        "{message}"
    );

    let mut follower = start("b", epoch(1, None));
    follower.handle_peer_status(ms(1), id("a"), true);
    drain(&mut follower);
    assert_eq!(
        follower.handle_command(ms(5), Command::Resign),
        Err(ElectionError::NotLeader {
            leader: Some(id("a"))
        })
    );
    assert_eq!(drain(&mut follower), vec![]);
}

/// STA-1: nobody elects, so `auto-election` is refused, and nothing is persisted.
#[test]
fn sta1_auto_election_refused() {
    let mut node = start("b", epoch(1, None));
    for enabled in [false, true] {
        assert_eq!(
            node.handle_command(ms(5), Command::EnableAutoElection(enabled)),
            Err(ElectionError::StaticModeElectsNobody)
        );
    }
    assert_eq!(drain(&mut node), vec![]);
    assert!(!node.auto_election());
}

/// STA-1, CB-5: `leader set b` on the leader reassigns on this node: a new epoch with the
/// assignment is persisted first, then it steps down and follows `b` (cause `set_leader`);
/// `leader set a` there hands it back, clearing the assignment, in a third epoch.
#[test]
fn sta1_set_leader_reassigns_on_this_node() {
    let mut node = start("a", epoch(1, None));
    node.handle_peer_status(ms(1), id("b"), true);
    drain(&mut node);

    assert_eq!(
        node.handle_command(ms(10), Command::SetLeader(id("b"))),
        Ok(CommandOutcome::Applied)
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(epoch(2, Some("b"))),
            role_changed(2, Role::Follower),
            leader_changed(2, Some("b"), Role::Follower, LeaderChangeCause::SetLeader),
        ]
    );
    assert_eq!(node.manual_override(), Some(id("b")));

    assert_eq!(
        node.handle_command(ms(20), Command::SetLeader(id("a"))),
        Ok(CommandOutcome::Applied)
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(epoch(3, None)),
            role_changed(3, Role::Leader),
            leader_changed(3, Some("a"), Role::Leader, LeaderChangeCause::SetLeader),
        ]
    );
}

/// STA-1: on a follower, an assignment to itself makes it lead at once; an assignment to an
/// unreachable node leaves it leaderless until membership finds that node (cause
/// `set_leader`, the first time after the assignment).
#[test]
fn sta1_set_leader_on_a_follower() {
    let mut node = start("b", epoch(1, None));
    node.handle_peer_status(ms(1), id("a"), true);
    drain(&mut node);
    node.handle_command(ms(10), Command::SetLeader(id("b")))
        .unwrap();
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(epoch(2, Some("b"))),
            role_changed(2, Role::Leader),
            leader_changed(2, Some("b"), Role::Leader, LeaderChangeCause::SetLeader),
        ]
    );

    node.handle_command(ms(20), Command::SetLeader(id("c")))
        .unwrap();
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(epoch(3, Some("c"))),
            role_changed(3, Role::Follower),
            leader_changed(3, None, Role::Follower, LeaderChangeCause::SetLeader),
        ]
    );
    node.handle_peer_status(ms(30), id("c"), true);
    assert_eq!(
        drain(&mut node),
        vec![leader_changed(
            3,
            Some("c"),
            Role::Follower,
            LeaderChangeCause::SetLeader
        )]
    );
}

/// STA-1: `leader set` naming a node outside `cluster.voters` is refused; naming the leader
/// already assigned changes nothing.
#[test]
fn sta1_set_leader_refuses_strangers_and_ignores_no_change() {
    let mut node = start("b", epoch(1, None));
    drain(&mut node);
    assert_eq!(
        node.handle_command(ms(5), Command::SetLeader(id("x"))),
        Err(ElectionError::NotAVoter(id("x")))
    );
    assert_eq!(
        node.handle_command(ms(5), Command::SetLeader(id("a"))),
        Ok(CommandOutcome::Applied)
    );
    assert_eq!(drain(&mut node), vec![]);
    assert_eq!(node.term(), 1);
}

/// STA-1: a reassignment recorded in the WAL outlives a restart: the assigned node leads in
/// its epoch without persisting anything; an assignment naming the configured leader is no
/// assignment at all.
#[test]
fn sta1_assignment_survives_a_restart() {
    let mut node = start("c", epoch(4, Some("c")));
    assert_eq!(
        drain(&mut node),
        vec![
            role_changed(4, Role::Leader),
            leader_changed(4, Some("c"), Role::Leader, LeaderChangeCause::Configured),
        ]
    );
    assert_eq!(node.status().configured_leader, id("a"));
    assert_eq!(node.status().assigned_leader, id("c"));

    let mut configured = start("a", epoch(4, Some("a")));
    assert_eq!(configured.manual_override(), None);
    assert_eq!(drain(&mut configured)[0], Action::Persist(epoch(4, None)));
}

/// CB-2: a stopping static leader steps down (cause `shutdown`) and says it stopped, then
/// takes no more commands; a stopping follower publishes nothing but that it stopped, and
/// ignores membership after.
#[test]
fn cb2_stopping_static_leader_steps_down() {
    let mut leader = start("a", epoch(1, None));
    drain(&mut leader);
    leader.handle_shutdown(ms(5));
    assert_eq!(
        drain(&mut leader),
        vec![
            role_changed(1, Role::Follower),
            leader_changed(1, None, Role::Follower, LeaderChangeCause::Shutdown),
            Action::Stopped,
        ]
    );
    leader.handle_shutdown(ms(6));
    assert_eq!(drain(&mut leader), vec![]);
    assert_eq!(
        leader.handle_command(ms(7), Command::SetLeader(id("a"))),
        Err(ElectionError::ShuttingDown)
    );

    let mut follower = start("b", epoch(1, None));
    follower.handle_peer_status(ms(1), id("a"), true);
    drain(&mut follower);
    follower.handle_shutdown(ms(5));
    assert_eq!(drain(&mut follower), vec![Action::Stopped]);
    follower.handle_peer_status(ms(6), id("a"), false);
    assert_eq!(drain(&mut follower), vec![]);
}

/// MEM-3: a static leader whose id is a live duplicate steps down (cause `quarantined`) and
/// refuses every command after.
#[test]
fn mem3_quarantined_static_leader_steps_down() {
    let mut node = start("a", epoch(1, None));
    drain(&mut node);
    node.handle_id_refused(ms(5));
    assert_eq!(
        drain(&mut node),
        vec![
            role_changed(1, Role::Follower),
            leader_changed(1, None, Role::Follower, LeaderChangeCause::Quarantined),
        ]
    );
    assert_eq!(
        node.handle_command(ms(6), Command::SetLeader(id("a"))),
        Err(ElectionError::Quarantined)
    );
    node.handle_peer_status(ms(7), id("b"), true);
    assert_eq!(drain(&mut node), vec![]);
    assert!(node.is_quarantined());
}

/// Through the seam: static mode drops other modes' messages with `OtherMode` and reports its
/// mode, its epoch as term and its detail in the status.
#[test]
fn seam_static_mode_refuses_raft_messages_and_reports_its_status() {
    let mut election = Election::new(
        ElectionConfig::Static(config("a")),
        HardState::default(),
        SeededRng::new(1),
        ms(0),
    )
    .unwrap();
    assert_eq!(election.mode(), Mode::Static);
    drain(&mut election);
    let vote = ElectionMessage::Raft(RaftMessage::Vote(Vote {
        term: 9,
        granted: true,
        pre_vote: false,
        priority: None,
    }));
    assert_eq!(
        election.handle_message(ms(1), id("b"), vote),
        Err(ElectionError::OtherMode {
            ours: Mode::Static,
            theirs: Mode::Raft
        })
    );
    assert_eq!(election.poll_action(), None);
    assert_eq!(
        election.status(),
        ElectionStatus {
            id: id("a"),
            mode: Mode::Static,
            role: Role::Leader,
            phase: "leader",
            term: 1,
            leader: Some(id("a")),
            fencing_token: Some(FencingToken {
                term: 1,
                leader: id("a")
            }),
            auto_election: false,
            manual_override: None,
            quarantined: false,
            abstaining: false,
            detail: ModeStatus::Static(StaticStatus {
                configured_leader: id("a"),
                assigned_leader: id("a"),
                leader_reachable: true,
            }),
        }
    );
}
