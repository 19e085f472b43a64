//! The client commands: everything but `run`, `check-config` and `demo` talks to running
//! nodes through their admin API.
//!
//! Two commands act on the whole cluster, the way `etcdctl endpoint status --cluster` does:
//! `cluster status` and `auto-election on|off --cluster`. They find the nodes from
//! `--endpoints` when given, else from the node at `--admin`: itself, and the admin URL of
//! each voter and peer its `admin.peer_urls` names. Every node is then asked for its own view;
//! the nodes never relay each other's answers, so a node that does not answer shows as such.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use conclave_actors::events::unix_millis;
use conclave_api::{
    AutoElectionRequest, CommandAnswer, HistoryAnswer, PeersAnswer, SetLeaderRequest, StatusAnswer,
};
use serde::Serialize;

use crate::cli::{ClientArgs, ClusterCommand, Commands, LeaderCommand, Switch};
use crate::client::{AdminClient, ClientError};
use crate::cluster_members::{self, Members};
use crate::output::{errln, out, outln};
use crate::render;

/// Runs a client command; the exit code.
pub(crate) fn run(command: &Commands) -> ExitCode {
    let Some(cli) = command.client_args() else {
        // `main` runs the others, and sends none of them here.
        errln!("error: internal: not a command that talks to a node");
        return ExitCode::from(crate::EXIT_SOFTWARE);
    };
    let cli = &cli;
    let result = AdminClient::new(
        &cli.admin,
        cli.token.clone(),
        Duration::from_secs(cli.timeout),
    )
    .and_then(|client| client.with_tls(&cli.tls))
    .and_then(|client| dispatch(cli, &client, command));
    match result {
        Ok(code) => code,
        Err(err) => {
            errln!("error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

fn dispatch(
    cli: &ClientArgs,
    client: &AdminClient,
    command: &Commands,
) -> Result<ExitCode, ClientError> {
    let json = cli.json;
    match command {
        Commands::Status { .. } => {
            let answer: StatusAnswer = client.get("/v1/status")?;
            print_answer(json, &answer, render::status);
        }
        Commands::Peers { .. } => {
            let answer: PeersAnswer = client.get("/v1/peers")?;
            print_answer(json, &answer, render::peers_answer);
        }
        Commands::History { .. } => {
            let answer: HistoryAnswer = client.get("/v1/history")?;
            let now = unix_millis(SystemTime::now());
            print_answer(json, &answer, |answer| render::history(answer, now));
        }
        Commands::Leader {
            command:
                LeaderCommand::Set {
                    peer_id,
                    wait,
                    no_wait,
                },
            ..
        } => {
            let wait = (!no_wait).then(|| Duration::from_secs(*wait));
            return leader_set(client, peer_id, wait, json);
        }
        Commands::Leader {
            command: LeaderCommand::Resign { wait, no_wait },
            ..
        } => {
            let wait = (!no_wait).then(|| Duration::from_secs(*wait));
            return leader_resign(client, wait, json);
        }
        Commands::AutoElection {
            switch,
            cluster: false,
            ..
        } => {
            let request = AutoElectionRequest {
                enabled: *switch == Switch::On,
            };
            let answer: CommandAnswer =
                client.post("/v1/auto-election", &request, Duration::ZERO)?;
            print_answer(json, &answer, render::outcome);
            if !request.enabled && !json {
                // The switch is per node: the other voters still elect.
                errln!(
                    "note: automatic election is off on {} only; the other voters still elect a \
                     leader when this one is lost (`--cluster` switches it on every voter)",
                    answer.node_id
                );
            }
        }
        Commands::AutoElection {
            switch,
            cluster: true,
            ..
        } => return cluster_auto_election(cli, client, *switch == Switch::On),
        Commands::Cluster {
            command: ClusterCommand::Status,
            ..
        } => return cluster_status(cli, client),
        // Not client commands; `main` runs them.
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}

fn print_answer<T: Serialize>(json: bool, answer: &T, table: impl FnOnce(&T) -> String) {
    if json {
        match serde_json::to_string_pretty(answer) {
            Ok(text) => outln!("{text}"),
            Err(err) => errln!("error: cannot print the answer as JSON: {err}"),
        }
    } else {
        out!("{}", table(answer));
    }
}

/// Says that a follower refused and the request goes on to the leader it named.
fn passing_on(refusal: &conclave_api::ErrorAnswer, url: &str) {
    errln!(
        "{} is not the leader; passing the request on to the leader {} at {url}",
        refusal.node_id.as_deref().unwrap_or("the node"),
        refusal
            .fencing
            .as_ref()
            .and_then(|fencing| fencing.leader.as_deref())
            .unwrap_or("?")
    );
}

/// `leader set`: start the change, wait for it (unless `wait` is `None`), print the state
/// after it; exit 1 when it did not complete.
fn leader_set(
    client: &AdminClient,
    peer_id: &str,
    wait: Option<Duration>,
    json: bool,
) -> Result<ExitCode, ClientError> {
    let request = SetLeaderRequest {
        peer_id: peer_id.to_owned(),
        wait_ms: wait.map(|wait| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
    };
    // A mode whose followers cannot start the change (priority: only the master hands over,
    // or the target forces itself) names its leader: the request goes there, as `leader
    // resign` does.
    let result: Result<CommandAnswer, ClientError> = client.follow_leader(
        |client| client.post("/v1/leader", &request, wait.unwrap_or_default()),
        passing_on,
    );
    let code = match result {
        Ok(answer) => {
            print_answer(json, &answer, render::outcome);
            ExitCode::SUCCESS
        }
        // The change started but the new leader did not take over in time: say so, then
        // show where things stand.
        Err(err @ ClientError::Refused { status: 504, .. }) => {
            errln!("error: {err}");
            ExitCode::from(1)
        }
        Err(err) => return Err(err),
    };
    if wait.is_some() && !json {
        match client.get::<StatusAnswer>("/v1/status") {
            Ok(status) => outln!("now: {}", render::summary(&status)),
            Err(err) => errln!("cannot read the state after the change: {err}"),
        }
    }
    Ok(code)
}

/// `leader resign`: sent to a follower, it is passed on once to the leader's admin API,
/// which the follower names when `admin.peer_urls` lists it. The answer carries the state when
/// the resignation started; unless `wait` is `None`, the node that resigned is then asked until
/// it names another leader, or leads again in a later term (a node alone is re-elected), and
/// that state is printed; exit 1 when that did not happen within `wait`.
fn leader_resign(
    client: &AdminClient,
    wait: Option<Duration>,
    json: bool,
) -> Result<ExitCode, ClientError> {
    let no_body = serde_json::Map::new();
    let mut resigned_at: Option<String> = None;
    let answer: CommandAnswer = client.follow_leader(
        |client| client.post("/v1/leader/resign", &no_body, Duration::ZERO),
        |refusal, url| {
            passing_on(refusal, url);
            resigned_at = Some(url.to_owned());
        },
    )?;
    let leader_client = resigned_at.map(|url| client.other(&url)).transpose()?;
    let Some(wait) = wait else {
        print_answer(json, &answer, render::outcome);
        return Ok(ExitCode::SUCCESS);
    };
    let resigned = leader_client.as_ref().unwrap_or(client);
    let before = (answer.fencing.term, answer.node_id.clone());
    let outcome = |status: &StatusAnswer| match status.fencing.leader.as_deref() {
        Some(leader) => leader != before.1 || status.fencing.term > before.0,
        None => false,
    };
    // Asked every POLL until `wait` has gone by (counted in polls: the client keeps no clock).
    const POLL: Duration = Duration::from_millis(100);
    let polls = wait.as_millis().div_ceil(POLL.as_millis()).max(1);
    let mut last = None;
    for _ in 0..polls {
        match resigned.get::<StatusAnswer>("/v1/status") {
            Ok(status) if outcome(&status) => {
                if json {
                    print_answer(json, &status, render::status);
                } else {
                    outln!(
                        "{}: {}",
                        answer.outcome.describe(),
                        answer.peer_id.as_deref().unwrap_or(&answer.node_id)
                    );
                    outln!("now: {}", render::summary(&status));
                }
                return Ok(ExitCode::SUCCESS);
            }
            Ok(status) => last = Some(status),
            Err(err) => errln!("cannot read the state after the resignation: {err}"),
        }
        std::thread::sleep(POLL);
    }
    errln!(
        "error: {} resigned in term {}, but no other leader took over within {} ms",
        answer.node_id,
        answer.fencing.term,
        wait.as_millis()
    );
    match last {
        Some(status) if json => print_answer(json, &status, render::status),
        Some(status) => outln!("now: {}", render::summary(&status)),
        None => {}
    }
    Ok(ExitCode::from(1))
}

/// One node of a cluster-wide command: who it should be, where its API is, what it said.
#[derive(Debug, Serialize)]
struct NodeView {
    /// The id it is known by before asking (from a voter list or `admin.peer_urls`).
    expected_id: Option<String>,
    /// Its admin API, when known.
    url: Option<String>,
    /// Its status, when it answered.
    status: Option<StatusAnswer>,
    /// Why there is no status.
    error: Option<String>,
}

impl NodeView {
    /// The node's id: what it answered, else what it was expected to be, else its URL.
    fn name(&self) -> String {
        self.status
            .as_ref()
            .map(|status| status.node_id.clone())
            .or_else(|| self.expected_id.clone())
            .or_else(|| self.url.clone())
            .unwrap_or_else(|| "?".to_owned())
    }
}

/// Every node of the cluster, each asked for its own status.
fn survey(cli: &ClientArgs, client: &AdminClient) -> Result<Vec<NodeView>, ClientError> {
    // (expected id, url) of every node to ask.
    let mut targets: Vec<(Option<String>, Option<String>)> = Vec::new();
    let mut first = None;
    if cli.endpoints.is_empty() {
        let status: StatusAnswer = client.get("/v1/status")?;
        targets.push((Some(status.node_id.clone()), Some(client.base().to_owned())));
        // The members the node reports (its `cluster.voters` when it reports none), and
        // whoever else it has an admin URL for.
        let members = Members::judge(&[&status]);
        let mut others: BTreeSet<&str> = members.everyone().into_iter().collect();
        others.extend(status.peer_admin_urls.keys().map(String::as_str));
        for id in others {
            if id != status.node_id {
                targets.push((Some(id.to_owned()), status.peer_admin_urls.get(id).cloned()));
            }
        }
        first = Some(status);
    } else {
        for endpoint in &cli.endpoints {
            targets.push((None, Some(client.other(endpoint)?.base().to_owned())));
        }
    }
    let mut views: Vec<NodeView> = std::thread::scope(|scope| {
        let asks: Vec<_> = targets
            .into_iter()
            .enumerate()
            .map(|(i, (expected_id, url))| {
                let first = if i == 0 { first.take() } else { None };
                scope.spawn(move || ask(client, expected_id, url, first))
            })
            .collect();
        asks.into_iter()
            .map(|ask| {
                ask.join().unwrap_or_else(|_| NodeView {
                    expected_id: None,
                    url: None,
                    status: None,
                    error: Some("the request's thread failed".to_owned()),
                })
            })
            .collect()
    });
    // Members the nodes report but no endpoint answered as: they are part of the picture too.
    let answered: BTreeSet<String> = views
        .iter()
        .filter_map(|view| view.status.as_ref().map(|s| s.node_id.clone()))
        .collect();
    let expected: BTreeSet<String> = views.iter().filter_map(|v| v.expected_id.clone()).collect();
    let answering: Vec<&StatusAnswer> = views.iter().filter_map(|v| v.status.as_ref()).collect();
    let members: Vec<String> = Members::judge(&answering)
        .everyone()
        .into_iter()
        .map(str::to_owned)
        .collect();
    for member in members {
        if !answered.contains(&member) && !expected.contains(&member) {
            views.push(NodeView {
                expected_id: Some(member),
                url: None,
                status: None,
                error: Some("not among --endpoints".to_owned()),
            });
        }
    }
    Ok(views)
}

/// Asks the node at `url` for its status (`known` when already asked).
fn ask(
    client: &AdminClient,
    expected_id: Option<String>,
    url: Option<String>,
    known: Option<StatusAnswer>,
) -> NodeView {
    let mut view = NodeView {
        expected_id,
        url,
        status: known,
        error: None,
    };
    if view.status.is_some() {
        return view;
    }
    let Some(url) = &view.url else {
        view.error = Some(
            "no admin URL known (list it in admin.peer_urls on the nodes, or pass --endpoints)"
                .to_owned(),
        );
        return view;
    };
    match client
        .other(url)
        .and_then(|node| node.get::<StatusAnswer>("/v1/status"))
    {
        Ok(status) => view.status = Some(status),
        Err(err) => view.error = Some(err.to_string()),
    }
    view
}

/// What is wrong with the cluster as its nodes see it (problems), and what an operator
/// should know (notes).
fn assess(views: &[NodeView]) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let answering: Vec<&StatusAnswer> = views.iter().filter_map(|v| v.status.as_ref()).collect();
    for view in views {
        if let Some(error) = &view.error {
            problems.push(format!("{} does not answer: {error}", view.name()));
        }
        if let (Some(expected), Some(status)) = (&view.expected_id, &view.status) {
            if *expected != status.node_id {
                problems.push(format!(
                    "the admin URL listed for {expected} ({}) answers as {}",
                    view.url.as_deref().unwrap_or("?"),
                    status.node_id
                ));
            }
        }
        if view
            .status
            .as_ref()
            .is_some_and(|status| status.quarantined)
        {
            problems.push(format!(
                "{} is quarantined: another live node uses its id",
                view.name()
            ));
        }
    }
    let leaders: Vec<String> = answering
        .iter()
        .filter(|status| status.role == "leader")
        .map(|status| format!("{} (term {})", status.node_id, status.fencing.term))
        .collect();
    if leaders.len() > 1 {
        problems.push(format!(
            "{} nodes claim to lead: {}",
            leaders.len(),
            leaders.join(", ")
        ));
    }
    let grouped = |key: &dyn Fn(&StatusAnswer) -> String| {
        let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for status in &answering {
            groups.entry(key(status)).or_default().push(&status.node_id);
        }
        groups
            .into_iter()
            .map(|(value, nodes)| format!("{value} at {}", nodes.join(", ")))
            .collect::<Vec<_>>()
    };
    let terms = grouped(&|status| format!("term {}", status.fencing.term));
    if terms.len() > 1 {
        problems.push(format!("terms differ: {}", terms.join("; ")));
    }
    let named = grouped(&|status| {
        status.fencing.leader.as_ref().map_or_else(
            || "no leader".to_owned(),
            |leader| format!("leader {leader}"),
        )
    });
    if named.len() > 1 {
        problems.push(format!(
            "nodes name different leaders: {}",
            named.join("; ")
        ));
    } else if !answering.is_empty() && answering.iter().all(|s| s.fencing.leader.is_none()) {
        problems.push("no node knows a leader".to_owned());
    }
    // Only where elections run: a static node (or a gossip node with static leadership)
    // reports automatic election off because nobody elects there, and refuses to switch it.
    let auto_off: Vec<&str> = answering
        .iter()
        .filter(|status| {
            status.mode != "static"
                && status
                    .gossip
                    .as_ref()
                    .is_none_or(|gossip| gossip.use_leader_election)
        })
        .filter(|status| !status.auto_election)
        .map(|status| status.node_id.as_str())
        .collect();
    notes.extend(cluster_members::disagreement_note(&answering));
    if !auto_off.is_empty() {
        notes.push(format!(
            "automatic election is off on {}: {} not start elections (`conclave auto-election \
             on --cluster` switches it back on)",
            auto_off.join(", "),
            if auto_off.len() == 1 {
                "it does"
            } else {
                "they do"
            }
        ));
    }
    (problems, notes)
}

/// What `cluster status --json` prints.
#[derive(Debug, Serialize)]
struct ClusterReport<'a> {
    nodes: &'a [NodeView],
    problems: &'a [String],
    notes: &'a [String],
}

/// `conclave cluster status`.
fn cluster_status(cli: &ClientArgs, client: &AdminClient) -> Result<ExitCode, ClientError> {
    let views = survey(cli, client)?;
    let (problems, notes) = assess(&views);
    if cli.json {
        let report = ClusterReport {
            nodes: &views,
            problems: &problems,
            notes: &notes,
        };
        print_answer(true, &report, |_| String::new());
    } else {
        out!("{}", cluster_table(&views, &problems, &notes));
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The table of `cluster status`, then its problems and notes.
fn cluster_table(views: &[NodeView], problems: &[String], notes: &[String]) -> String {
    use std::fmt::Write;
    let answering: Vec<&StatusAnswer> = views.iter().filter_map(|v| v.status.as_ref()).collect();
    let members = Members::judge(&answering);
    let mut out = format!(
        "{:<16} {:<28} {:<13} {:>6}  {:<16} {:<5} {:<6} {}\n",
        "NODE", "ADMIN", "ROLE", "TERM", "LEADER", "AUTO", "READY", "VOTERS REACHED"
    );
    for view in views {
        let url = view.url.as_deref().unwrap_or("-");
        match &view.status {
            Some(status) => {
                let _ = writeln!(
                    out,
                    "{:<16} {:<28} {:<13} {:>6}  {:<16} {:<5} {:<6} {}/{}",
                    status.node_id,
                    url,
                    members.role_of(status),
                    status.fencing.term,
                    status.fencing.leader.as_deref().unwrap_or("-"),
                    if status.auto_election { "on" } else { "OFF" },
                    if status.ready { "yes" } else { "NO" },
                    status.reachable_voters,
                    members.voters().len().max(1)
                );
            }
            None => {
                let _ = writeln!(out, "{:<16} {url:<28} NO ANSWER", view.name());
            }
        }
    }
    if let Some(line) = members.line() {
        let _ = writeln!(out, "\n{line}");
    }
    if problems.is_empty() {
        let agreed = views
            .iter()
            .find_map(|view| view.status.as_ref())
            .map(|status| {
                format!(
                    "leader {} in term {}",
                    status.fencing.leader.as_deref().unwrap_or("-"),
                    status.fencing.term
                )
            })
            .unwrap_or_default();
        // A cluster of one node is no "all 1 nodes".
        let _ = match views.len() {
            1 => writeln!(out, "\nok: the one node answers and knows {agreed}"),
            count => writeln!(out, "\nok: all {count} nodes answer and agree on {agreed}"),
        };
    } else {
        out.push_str("\nproblems:\n");
        for problem in problems {
            let _ = writeln!(out, "  ! {problem}");
        }
    }
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

/// One node's part in `auto-election --cluster`.
#[derive(Debug, Serialize)]
struct SwitchResult {
    node_id: String,
    url: Option<String>,
    voter: bool,
    answer: Option<CommandAnswer>,
    error: Option<String>,
}

/// `conclave auto-election on|off --cluster`: the switch on every node found, a line per
/// node; exit 1 unless every voter applied it.
fn cluster_auto_election(
    cli: &ClientArgs,
    client: &AdminClient,
    enabled: bool,
) -> Result<ExitCode, ClientError> {
    let views = survey(cli, client)?;
    let voters: BTreeSet<String> = views
        .iter()
        .filter_map(|view| view.status.as_ref())
        .flat_map(|status| status.voters.iter().cloned())
        .collect();
    let request = AutoElectionRequest { enabled };
    let results: Vec<SwitchResult> = std::thread::scope(|scope| {
        let posts: Vec<_> = views
            .iter()
            .map(|view| {
                let voters = &voters;
                scope.spawn(move || {
                    let node_id = view.name();
                    let mut result = SwitchResult {
                        voter: voters.contains(&node_id),
                        node_id,
                        url: view.url.clone(),
                        answer: None,
                        error: view.error.clone(),
                    };
                    if let (Some(url), None) = (&view.url, &view.error) {
                        match client.other(url).and_then(|node| {
                            node.post::<_, CommandAnswer>(
                                "/v1/auto-election",
                                &request,
                                Duration::ZERO,
                            )
                        }) {
                            Ok(answer) => result.answer = Some(answer),
                            Err(err) => result.error = Some(err.to_string()),
                        }
                    }
                    result
                })
            })
            .collect();
        posts
            .into_iter()
            .filter_map(|post| post.join().ok())
            .collect()
    });
    let failed: Vec<&str> = results
        .iter()
        .filter(|result| result.voter && result.answer.is_none())
        .map(|result| result.node_id.as_str())
        .collect();
    if cli.json {
        print_answer(true, &results, |_| String::new());
    } else {
        let state = if enabled { "on" } else { "off" };
        for result in &results {
            let role = if result.voter { "" } else { " (not a voter)" };
            match (&result.answer, &result.error) {
                (Some(_), _) => outln!(
                    "{:<16} applied: automatic election {state}{role}",
                    result.node_id
                ),
                (None, error) => outln!(
                    "{:<16} FAILED{role}: {}",
                    result.node_id,
                    error.as_deref().unwrap_or("no answer")
                ),
            }
        }
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        errln!(
            "error: automatic election was not switched {} on {} of {} {}: {}",
            if enabled { "on" } else { "off" },
            failed.len(),
            voters.len(),
            if voters.len() == 1 { "voter" } else { "voters" },
            failed.join(", ")
        );
        Ok(ExitCode::from(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_api::Fencing;

    fn node(id: &str, role: &str, term: u64, leader: Option<&str>) -> NodeView {
        NodeView {
            expected_id: Some(id.to_owned()),
            url: Some(format!("http://{id}:7070")),
            status: Some(StatusAnswer {
                node_id: id.to_owned(),
                cluster_id: "c".to_owned(),
                mode: "raft".to_owned(),
                quorum: "voters".to_owned(),
                quorum_size: 2,
                electorate: 3,
                role: role.to_owned(),
                phase: role.to_owned(),
                fencing: Fencing {
                    term,
                    leader: leader.map(str::to_owned),
                    fencing_token: leader.map(|l| format!("{term}:{l}")),
                },
                voted_for: None,
                auto_election: true,
                manual_override: false,
                pinned_leader: None,
                quarantined: false,
                abstaining: false,
                abstaining_until_heard: Vec::new(),
                incarnation: 1,
                authenticated: true,
                peers: Vec::new(),
                unanswered: Vec::new(),
                dongle: None,
                voters: vec!["a".into(), "b".into(), "c".into()],
                reachable_voters: 3,
                ready: leader.is_some(),
                peer_admin_urls: BTreeMap::new(),
                log: None,
                priority: None,
                gossip: None,
                static_leader: None,
            }),
            error: None,
        }
    }

    /// Issue 15: static mode, where nobody elects, reports automatic election off; that is
    /// no reason to suggest `auto-election on --cluster`, which static mode refuses. A raft
    /// node with it off still gets the note.
    #[test]
    fn a_static_cluster_is_not_told_to_switch_automatic_election_on() {
        let views: Vec<NodeView> = [("a", "leader"), ("b", "follower")]
            .into_iter()
            .map(|(id, role)| {
                let mut view = node(id, role, 1, Some("a"));
                if let Some(status) = &mut view.status {
                    status.mode = "static".to_owned();
                    status.quorum = "none".to_owned();
                    status.auto_election = false;
                }
                view
            })
            .collect();
        let (problems, notes) = assess(&views);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(notes.is_empty(), "{notes:?}");

        let mut raft = node("c", "follower", 1, Some("a"));
        if let Some(status) = &mut raft.status {
            status.auto_election = false;
        }
        let (_, notes) = assess(&[raft]);
        assert!(
            notes
                .iter()
                .any(|note| note.contains("auto-election on --cluster")),
            "{notes:?}"
        );
    }

    #[test]
    fn an_agreeing_cluster_has_no_problems() {
        let views = [
            node("a", "leader", 4, Some("a")),
            node("b", "follower", 4, Some("a")),
            node("c", "follower", 4, Some("a")),
        ];
        let (problems, notes) = assess(&views);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(notes.is_empty(), "{notes:?}");
        let table = cluster_table(&views, &problems, &notes);
        assert!(
            table.contains("ok: all 3 nodes answer and agree on leader a in term 4"),
            "{table}"
        );
    }

    /// A cluster of one node says so in the singular.
    #[test]
    fn a_cluster_of_one_node_is_said_in_the_singular() {
        let views = [node("a", "leader", 2, Some("a"))];
        let (problems, notes) = assess(&views);
        assert!(problems.is_empty(), "{problems:?}");
        let table = cluster_table(&views, &problems, &notes);
        assert!(
            table.contains("ok: the one node answers and knows leader a in term 2"),
            "{table}"
        );
        assert!(!table.contains("1 nodes"), "{table}");
    }

    /// Two leaders, different terms and leaders, a silent node: each is flagged.
    #[test]
    fn disagreement_is_flagged() {
        let mut silent = node("c", "follower", 0, None);
        silent.status = None;
        silent.error = Some("cannot reach".to_owned());
        let mut off = node("b", "leader", 5, Some("b"));
        if let Some(status) = off.status.as_mut() {
            status.auto_election = false;
        }
        let views = [node("a", "leader", 4, Some("a")), off, silent];
        let (problems, notes) = assess(&views);
        let all = problems.join("\n");
        assert!(all.contains("c does not answer: cannot reach"), "{all}");
        assert!(
            all.contains("2 nodes claim to lead: a (term 4), b (term 5)"),
            "{all}"
        );
        assert!(
            all.contains("terms differ: term 4 at a; term 5 at b"),
            "{all}"
        );
        assert!(
            all.contains("nodes name different leaders: leader a at a; leader b at b"),
            "{all}"
        );
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("automatic election is off on b"),
            "{notes:?}"
        );
        let table = cluster_table(&views, &problems, &notes);
        assert!(table.contains("NO ANSWER"), "{table}");
        assert!(table.contains("OFF"), "{table}");
    }
}
