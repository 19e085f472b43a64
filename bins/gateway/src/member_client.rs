//! `conclave member`: the voters and learners of the replicated log's cluster through a node's
//! admin API (MEMB-3), with the requests and answers of `conclave-api`.
//!
//! `list` prints the node's own view. `add`, `promote` and `remove` go to the leader,
//! following a `not_leader` redirect as `conclave kv` does, and are answered once committed.
//! `add` is two changes, one at a time as the cluster makes them: the learner first; then,
//! once its log holds what the cluster committed (asked of the leader, which alone knows), the
//! promotion. A learner still behind is no failure while the wait lasts: the leader's refusal
//! says how far behind it is, and that is what is printed while waiting. Exit codes as for
//! `conclave kv`.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use conclave_api::{AddMemberRequest, ErrorCode, MembersAnswer};

use crate::cli::{ClientArgs, MemberCommand};
use crate::client::{AdminClient, ClientError};
use crate::log_client::{client, done, failed, print_json, send};
use crate::output::{errln, outln};

/// How often `member add` asks whether the learner caught up.
const CATCH_UP_POLL: Duration = Duration::from_millis(250);

/// Every how many polls `member add` says how far behind the learner is (every 2 s).
const PROGRESS_EVERY: u32 = 8;

/// Runs `conclave member ...`.
pub(crate) fn member(args: &ClientArgs, command: &MemberCommand) -> ExitCode {
    let client = match client(args) {
        Ok(client) => client,
        Err(err) => return failed(args, &err),
    };
    match command {
        MemberCommand::List => {
            let result = client
                .get::<MembersAnswer>("/v1/members")
                .map(|answer| show(args, &answer));
            done(args, result)
        }
        MemberCommand::Add {
            id,
            udp,
            admin_url,
            learner,
            wait,
        } => {
            let request = AddMemberRequest {
                id: id.clone(),
                udp: Some(udp.clone()),
                admin_url: admin_url.clone(),
            };
            add(
                args,
                &client,
                &request,
                *learner,
                Duration::from_secs(*wait),
            )
        }
        MemberCommand::Promote { id } => {
            let path = format!("/v1/members/{}/promote", encode(id));
            let result = send::<(), MembersAnswer>(&client, "POST", &path, None)
                .map(|answer| changed(args, &format!("{id} is a voter"), &answer));
            done(args, result)
        }
        MemberCommand::Remove { id } => {
            let path = format!("/v1/members/{}", encode(id));
            let result = send::<(), MembersAnswer>(&client, "DELETE", &path, None)
                .map(|answer| changed(args, &format!("{id} is removed"), &answer));
            done(args, result)
        }
    }
}

/// `member add`: the learner, then (unless `learner_only`) its promotion once caught up.
fn add(
    args: &ClientArgs,
    client: &AdminClient,
    request: &AddMemberRequest,
    learner_only: bool,
    wait: Duration,
) -> ExitCode {
    let id = &request.id;
    let mut leader = None;
    let added = client.follow_leader(
        |client| client.request("POST", "/v1/members", Some(request), Duration::ZERO),
        |_, url| leader = Some(url.to_owned()),
    );
    let answer: MembersAnswer = match added {
        Ok(answer) => answer,
        Err(err) => return failed(args, &err),
    };
    if learner_only {
        changed(args, &format!("{id} is a learner"), &answer);
        return ExitCode::SUCCESS;
    }
    if !args.json {
        outln!(
            "{id} is a learner (configuration index {}); waiting for it to catch up",
            answer.configuration_index
        );
    }
    // The promotion goes where the add went: the leader, which knows the learner's log.
    let leader = match leader.map(|url| client.other(&url)).transpose() {
        Ok(leader) => leader,
        Err(err) => return failed(args, &err),
    };
    let leader = leader.as_ref().unwrap_or(client);
    done(args, promote_when_caught_up(args, leader, id, wait))
}

/// Asks the leader to promote `id` until it is caught up, saying now and then how far behind
/// it is; gives up after `wait` with the leader's last refusal.
fn promote_when_caught_up(
    args: &ClientArgs,
    client: &AdminClient,
    id: &str,
    wait: Duration,
) -> Result<(), ClientError> {
    let path = format!("/v1/members/{}/promote", encode(id));
    // The wall clock is the user's: a wait the user reads in seconds, not a test's time.
    let deadline = SystemTime::now() + wait;
    let mut polls = 0u32;
    loop {
        match send::<(), MembersAnswer>(client, "POST", &path, None) {
            Ok(answer) => {
                changed(args, &format!("{id} is a voter"), &answer);
                return Ok(());
            }
            Err(err) if behind(&err) && SystemTime::now() < deadline => {
                if !args.json && polls % PROGRESS_EVERY == 0 {
                    if let Some(refusal) = err.refusal() {
                        outln!("  {}", refusal.message);
                    }
                }
                polls = polls.wrapping_add(1);
                std::thread::sleep(CATCH_UP_POLL);
            }
            Err(err) => {
                if behind(&err) {
                    errln!(
                        "{id} did not catch up within {} s; it stays a learner (`conclave \
                         member promote {id}` finishes the job)",
                        wait.as_secs()
                    );
                }
                return Err(err);
            }
        }
    }
}

/// Whether the leader refused because the learner is behind, or because the learner's own
/// addition was not committed everywhere yet: both pass with time.
fn behind(err: &ClientError) -> bool {
    err.refusal().is_some_and(|refusal| {
        matches!(
            refusal.error,
            ErrorCode::NotCaughtUp | ErrorCode::ChangeInProgress | ErrorCode::NotReady
        )
    })
}

/// A change's answer: its JSON, or what it did and the members after it.
fn changed(args: &ClientArgs, what: &str, answer: &MembersAnswer) {
    if args.json {
        print_json(answer);
    } else {
        outln!(
            "{what} (configuration index {})",
            answer.configuration_index
        );
        outln!("{}", table(answer));
    }
}

/// The list: its JSON, or the table.
fn show(args: &ClientArgs, answer: &MembersAnswer) {
    if args.json {
        print_json(answer);
    } else {
        outln!("{}", table(answer));
    }
}

/// The members as a table like `cluster status`'s, with the configuration's index and
/// whether it is committed above it.
fn table(answer: &MembersAnswer) -> String {
    let state = if answer.committed {
        "committed"
    } else {
        "not committed yet"
    };
    let mut rows = vec![[
        "ID".to_owned(),
        "ROLE".to_owned(),
        "UDP".to_owned(),
        "ADMIN URL".to_owned(),
        "MATCH".to_owned(),
        "LAG".to_owned(),
    ]];
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
    for member in &answer.members {
        rows.push([
            member.id.clone(),
            member.role.to_string(),
            or_dash(member.udp.clone()),
            or_dash(member.admin_url.clone()),
            or_dash(member.match_index.map(|m| m.to_string())),
            or_dash(member.lag.map(|l| l.to_string())),
        ]);
    }
    format!(
        "configuration at index {} ({state})\n{}",
        answer.configuration_index,
        crate::render::columns(&rows)
    )
}

/// A member id for a URL path: node ids are printable ASCII without spaces, but a mistyped
/// one must still reach the node whole, to be refused there with its reason.
fn encode(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_api::{Fencing, Member, MemberRole};

    /// MEMB-3: the table lists every member with dashes for what the node does not know.
    #[test]
    fn memb3_the_table_shows_every_member() {
        let answer = MembersAnswer {
            configuration_index: 7,
            committed: false,
            members: vec![
                Member {
                    id: "gw-a".into(),
                    role: MemberRole::Voter,
                    udp: None,
                    admin_url: Some("http://127.0.0.1:7070".into()),
                    match_index: Some(12),
                    lag: None,
                },
                Member {
                    id: "gw-d".into(),
                    role: MemberRole::Learner,
                    udp: Some("127.0.0.1:7949".into()),
                    admin_url: None,
                    match_index: Some(3),
                    lag: Some(9),
                },
            ],
            fencing: Fencing::default(),
        };
        let text = table(&answer);
        assert!(text.starts_with("configuration at index 7 (not committed yet)"));
        assert!(text.contains("gw-d  learner  127.0.0.1:7949"), "{text}");
        assert!(
            text.lines().nth(2).is_some_and(|l| l.ends_with("12     -")),
            "{text}"
        );
        assert_eq!(encode("gw d/1"), "gw%20d%2F1");
    }
}
