//! Failure detection that adapts to the link (RAFT-2, RAFT-7): a follower's estimate of how
//! far apart its leader's beats arrive, and the suspicion timeout that estimate gives.
//!
//! It owns [`LeaderBeats`], the estimator, and [`SuspicionRule`], the bounds it is read
//! within. A fixed election timeout must cover the worst link a cluster may run on, so on a
//! good link a follower waits far longer than its leader's silence justifies. The estimator
//! learns the link instead, with the smoothed mean and mean deviation of TCP's retransmission
//! timer (Jacobson and Karels 1988, RFC 6298) applied to the gaps between beats rather than to
//! round trips:
//!
//! ```text
//! first gap g:    mean = g                      deviation = g / 2
//! each next g:    deviation = 3/4 deviation + 1/4 |mean - g|
//!                 mean      = 7/8 mean      + 1/8 g
//! each slot:      loss      = 63/64 loss    + 1/64 (1 if its beat was lost, else 0)
//! suspicion     = clamp(mean + 4 * deviation + L * heartbeat, floor, election_timeout_max)
//!                 where L >= 1 is the fewest lost beats in a row with loss^L <= 1/10,000
//! ```
//!
//! `mean + 4 * deviation` is how late the next beat may be on this link, the way `srtt + 4 *
//! rttvar` is how late an answer may be (for normally spread gaps, about φ = 4 in the
//! phi-accrual detector of Hayashibara et al. 2004, since the mean deviation is 0.8 of the
//! standard deviation). The heartbeat intervals added on top let beats be lost without
//! suspicion: one on a link that loses none, and on a lossy one as many in a row as it takes
//! to make a false suspicion a one-in-ten-thousand event per beat. A loss shows as a gap of
//! about two heartbeat intervals, which the mean and deviation forget within a few beats,
//! while two lost in a row, a few beats later, are likely on the same link: so the loss rate
//! has a memory of its own, about 64 heartbeat slots, and on a radio that loses one frame in
//! twenty the suspicion waits for five beats in a row to be missing instead of pre-voting
//! whenever two are. A gap of at least one and three quarter intervals counts one lost beat
//! (two and three quarters, two; and so on): a beat merely late, by the leader's scheduling or
//! the link's jitter, is no loss. Memory is a handful of numbers, whatever the run's length,
//! and all of them are integers, so a seed replays exactly.
//!
//! A beat is an arrival at least half a heartbeat interval after the previous beat: the
//! entries a leader replicates between its heartbeats, and duplicated frames, refresh the
//! leader's contact but are no new beat, or a busy log would teach the follower gaps that
//! end the moment the writes stop. The estimate is of one leader in one term and starts again
//! with another, and it says nothing until [`MIN_GAPS`] gaps were seen: until then the fixed
//! timeout holds, as without adaptive detection.

use std::time::Duration;

use conclave_protocol::PeerId;

use crate::raft::config::RaftConfig;
use crate::time::Instant;

/// Gaps seen before the estimate is used. The first deviation is half the first gap, so a
/// young estimate errs long anyway; six gaps (three seconds at the default heartbeat) let it
/// settle near what the link shows.
pub(super) const MIN_GAPS: u32 = 6;

/// The bounds a suspicion timeout is read within, from the node's settings; `None` from
/// [`SuspicionRule::of`] when adaptive detection is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SuspicionRule {
    /// The leader's heartbeat interval: the margin for one lost beat, and half of it the
    /// least gap between two beats.
    pub(super) heartbeat: Duration,
    /// Never suspect sooner (`suspicion_floor`, at least two heartbeats).
    pub(super) floor: Duration,
    /// Never suspect later (`election_timeout_max`).
    pub(super) ceiling: Duration,
}

impl SuspicionRule {
    /// The rule of `config`, when adaptive detection is on.
    pub(super) fn of(config: &RaftConfig) -> Option<Self> {
        config.adaptive_timeout.then_some(Self {
            heartbeat: config.heartbeat_interval,
            floor: config.suspicion_floor(),
            ceiling: config.election_timeout_max,
        })
    }
}

/// A follower's estimate of its leader's beats (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LeaderBeats {
    /// The term and leader the estimate is of.
    source: Option<(u64, PeerId)>,
    /// When the latest beat arrived.
    last_beat: Option<Instant>,
    /// Gaps seen, up to [`MIN_GAPS`] (more change nothing).
    gaps: u32,
    /// Smoothed gap, in microseconds.
    mean: u64,
    /// Smoothed mean deviation of the gaps, in microseconds.
    deviation: u64,
    /// Smoothed share of the heartbeat slots whose beat was lost, in parts per million.
    loss_ppm: u64,
}

/// A whole, in the loss rate's parts per million.
const PPM: u64 = 1_000_000;

/// The chance per beat of a false suspicion that the lost-beat margin allows, in parts per
/// million: one in ten thousand.
const FALSE_SUSPICION_PPM: u64 = 100;

/// The most lost beats in a row the margin allows for; beyond it the ceiling decides anyway.
const MAX_LOST_IN_A_ROW: u64 = 8;

/// How many beats in a row may be lost on a link that loses `loss_ppm` parts per million of
/// them before a false suspicion is more likely than [`FALSE_SUSPICION_PPM`]: at least one.
fn tolerated_losses(loss_ppm: u64) -> u64 {
    let mut run = 1;
    let mut chance = loss_ppm;
    while chance > FALSE_SUSPICION_PPM && run < MAX_LOST_IN_A_ROW {
        chance = chance * loss_ppm / PPM;
        run += 1;
    }
    run
}

impl LeaderBeats {
    /// `leader` of `term` was heard at `now`. Another leader or term starts the estimate again.
    pub(super) fn observe(&mut self, now: Instant, term: u64, leader: PeerId, rule: SuspicionRule) {
        if self.source != Some((term, leader)) {
            *self = Self {
                source: Some((term, leader)),
                last_beat: Some(now),
                ..Self::default()
            };
            return;
        }
        let Some(last) = self.last_beat else {
            self.last_beat = Some(now);
            return;
        };
        let gap = now.saturating_duration_since(last);
        if gap < rule.heartbeat / 2 {
            return;
        }
        self.last_beat = Some(now);
        let interval = micros(rule.heartbeat).max(1);
        let gap = micros(gap);
        // Slots this gap spans beyond its own beat, a quarter interval of lateness forgiven.
        let lost = ((gap + interval / 4) / interval)
            .saturating_sub(1)
            .min(MAX_LOST_IN_A_ROW);
        for _ in 0..lost {
            self.loss_ppm = self.loss_ppm * 63 / 64 + PPM / 64;
        }
        self.loss_ppm = self.loss_ppm * 63 / 64;
        if self.gaps == 0 {
            self.mean = gap;
            self.deviation = gap / 2;
        } else {
            self.deviation = (3 * self.deviation + self.mean.abs_diff(gap)) / 4;
            self.mean = (7 * self.mean + gap) / 8;
        }
        self.gaps = (self.gaps + 1).min(MIN_GAPS);
    }

    /// How long after its last contact `leader` of `term` is overdue on this link, within the
    /// rule's bounds; `None` while the estimate is of another leader or term, or too young.
    pub(super) fn suspicion(
        &self,
        term: u64,
        leader: PeerId,
        rule: SuspicionRule,
    ) -> Option<Duration> {
        if self.source != Some((term, leader)) || self.gaps < MIN_GAPS {
            return None;
        }
        let margin = micros(rule.heartbeat).saturating_mul(tolerated_losses(self.loss_ppm));
        let overdue = Duration::from_micros(
            self.mean
                .saturating_add(self.deviation.saturating_mul(4))
                .saturating_add(margin),
        );
        // `max` then `min`: a floor above the ceiling (refused by validation) gives the ceiling.
        Some(overdue.max(rule.floor).min(rule.ceiling))
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// Heartbeat 500 ms, floor 1000 ms, ceiling 3000 ms: the defaults with the lowest floor.
    fn rule() -> SuspicionRule {
        SuspicionRule {
            heartbeat: Duration::from_millis(500),
            floor: Duration::from_millis(1000),
            ceiling: Duration::from_millis(3000),
        }
    }

    /// Feeds beats of `leader` in term 1 at the given gaps (ms) after time zero; the time of
    /// the last.
    fn feed(beats: &mut LeaderBeats, leader: PeerId, gaps_ms: &[u64]) -> Instant {
        let mut now = Instant::ZERO;
        beats.observe(now, 1, leader, rule());
        for gap in gaps_ms {
            now += Duration::from_millis(*gap);
            beats.observe(now, 1, leader, rule());
        }
        now
    }

    /// RAFT-2: on a steady link the leader is suspected about two heartbeats after its last
    /// beat (one expected gap plus one lost beat), within a few intervals, and not before the
    /// floor.
    #[test]
    fn raft2_steady_beats_give_a_suspicion_of_a_few_intervals() {
        let leader = testing::id("a");
        let mut beats = LeaderBeats::default();
        feed(&mut beats, leader, &[500; 40]);
        let suspicion = beats.suspicion(1, leader, rule()).unwrap();
        assert!(suspicion >= Duration::from_millis(1000), "{suspicion:?}");
        assert!(suspicion < Duration::from_millis(1050), "{suspicion:?}");
    }

    /// RAFT-2: the more the gaps spread, the later the suspicion: the same mean with a jitter
    /// of ±200 ms, and with one beat in four lost, waits longer than a steady link.
    #[test]
    fn raft2_jittery_beats_make_the_suspicion_grow() {
        let leader = testing::id("a");
        let steady = {
            let mut beats = LeaderBeats::default();
            feed(&mut beats, leader, &[500; 40]);
            beats.suspicion(1, leader, rule()).unwrap()
        };
        let jittery = {
            let mut beats = LeaderBeats::default();
            let gaps: Vec<u64> = (0..40)
                .map(|i| if i % 2 == 0 { 300 } else { 700 })
                .collect();
            feed(&mut beats, leader, &gaps);
            beats.suspicion(1, leader, rule()).unwrap()
        };
        let lossy = {
            let mut beats = LeaderBeats::default();
            let gaps: Vec<u64> = (0..40)
                .map(|i| if i % 4 == 3 { 1000 } else { 500 })
                .collect();
            feed(&mut beats, leader, &gaps);
            beats.suspicion(1, leader, rule()).unwrap()
        };
        assert!(
            jittery > steady + Duration::from_millis(500),
            "{jittery:?} {steady:?}"
        );
        assert!(
            lossy > steady + Duration::from_millis(300),
            "{lossy:?} {steady:?}"
        );
    }

    /// RAFT-2: on a link that loses about one beat in twenty the suspicion leaves room for
    /// three lost in a row, where the mean and deviation alone forget a loss within a few
    /// beats and would suspect after two; a late beat is no loss.
    #[test]
    fn raft2_a_lossy_link_makes_room_for_several_lost_beats_in_a_row() {
        let leader = testing::id("a");
        let steady = {
            let mut beats = LeaderBeats::default();
            feed(&mut beats, leader, &[500; 200]);
            beats.suspicion(1, leader, rule()).unwrap()
        };
        // One beat in twenty lost (a gap of two intervals), the last loss eleven beats ago.
        let mut lossy = LeaderBeats::default();
        let gaps: Vec<u64> = (0..200)
            .map(|i| if i % 20 == 8 { 1000 } else { 500 })
            .collect();
        feed(&mut lossy, leader, &gaps);
        let suspicion = lossy.suspicion(1, leader, rule()).unwrap();
        assert!(
            suspicion > Duration::from_millis(2000),
            "three lost beats in a row (a gap of 2000 ms) are no suspicion: {suspicion:?}"
        );
        assert!(suspicion > steady + Duration::from_millis(1000));
        // Five in a hundred: 0.05³ is more than one in ten thousand, 0.05⁴ is not.
        assert_eq!(tolerated_losses(50_000), 4);
        assert_eq!(tolerated_losses(10_000), 2);
        assert_eq!(tolerated_losses(100), 1);
        assert_eq!(tolerated_losses(0), 1);
        // Beats up to three quarters of an interval late teach no loss.
        let mut late = LeaderBeats::default();
        let gaps: Vec<u64> = (0..200)
            .map(|i| if i % 20 == 8 { 870 } else { 500 })
            .collect();
        feed(&mut late, leader, &gaps);
        assert_eq!(late.loss_ppm, 0);
    }

    /// RAFT-2: one lost beat makes the suspicion cautious for a while, then it is forgotten
    /// and the suspicion is what a steady link gives.
    #[test]
    fn raft2_a_single_loss_is_forgotten() {
        let leader = testing::id("a");
        let mut steady = LeaderBeats::default();
        feed(&mut steady, leader, &[500; 40]);
        let mut once = LeaderBeats::default();
        let mut gaps = vec![500; 20];
        gaps.push(1000);
        gaps.extend([500; 10]);
        let last = feed(&mut once, leader, &gaps);
        let soon = once.suspicion(1, leader, rule()).unwrap();
        assert!(
            soon >= steady.suspicion(1, leader, rule()).unwrap() + Duration::from_millis(1000),
            "{soon:?}"
        );
        let mut now = last;
        for _ in 0..400 {
            now += Duration::from_millis(500);
            once.observe(now, 1, leader, rule());
        }
        assert_eq!(once.loss_ppm, steady.loss_ppm);
        let forgotten = once.suspicion(1, leader, rule()).unwrap();
        // Integer smoothing leaves a few microseconds of the old gap in the mean.
        assert!(
            forgotten < steady.suspicion(1, leader, rule()).unwrap() + Duration::from_millis(1),
            "{forgotten:?}"
        );
    }

    /// RAFT-2: the suspicion never falls below the floor nor rises above the maximum election
    /// timeout, however steady or wild the gaps.
    #[test]
    fn raft2_suspicion_stays_between_the_floor_and_the_maximum() {
        let leader = testing::id("a");
        let mut fast = LeaderBeats::default();
        feed(&mut fast, leader, &[250; 40]);
        assert_eq!(
            fast.suspicion(1, leader, rule()),
            Some(Duration::from_millis(1000))
        );
        let mut wild = LeaderBeats::default();
        let gaps: Vec<u64> = (0..40)
            .map(|i| if i % 2 == 0 { 250 } else { 2500 })
            .collect();
        feed(&mut wild, leader, &gaps);
        assert_eq!(
            wild.suspicion(1, leader, rule()),
            Some(Duration::from_millis(3000))
        );
    }

    /// RAFT-2: with fewer than six gaps seen there is no estimate (the fixed timeout holds);
    /// arrivals closer than half a heartbeat join the previous beat and make no gap, so
    /// entries replicated between the heartbeats leave the estimate what the heartbeats make.
    #[test]
    fn raft2_no_suspicion_until_enough_beats_and_close_arrivals_join_a_beat() {
        let leader = testing::id("a");
        let mut beats = LeaderBeats::default();
        feed(&mut beats, leader, &[500; 5]);
        assert_eq!(beats.suspicion(1, leader, rule()), None);
        let mut steady = LeaderBeats::default();
        feed(&mut steady, leader, &[500; 40]);
        // Five entries 10 ms apart after each heartbeat.
        let mut busy = LeaderBeats::default();
        let gaps: Vec<u64> = (0..40).flat_map(|_| [10, 10, 10, 10, 10, 450]).collect();
        feed(&mut busy, leader, &gaps);
        assert_eq!(
            busy.suspicion(1, leader, rule()),
            steady.suspicion(1, leader, rule())
        );
    }

    /// RAFT-2: the estimate is of one leader in one term: another leader, or the same leader
    /// in a later term, starts it again, and it says nothing about another source.
    #[test]
    fn raft2_estimate_starts_again_with_another_leader_or_term() {
        let (a, b) = (testing::id("a"), testing::id("b"));
        let mut beats = LeaderBeats::default();
        let last = feed(&mut beats, a, &[500; 40]);
        assert!(beats.suspicion(1, a, rule()).is_some());
        assert_eq!(beats.suspicion(1, b, rule()), None);
        assert_eq!(beats.suspicion(2, a, rule()), None);
        beats.observe(last + Duration::from_millis(500), 1, b, rule());
        assert_eq!(beats.suspicion(1, b, rule()), None);
        assert_eq!(beats.suspicion(1, a, rule()), None);
        beats.observe(last + Duration::from_millis(1000), 2, b, rule());
        assert_eq!(beats.gaps, 0);
    }
}
