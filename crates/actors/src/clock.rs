//! The bridge between actix time and the core's virtual [`Instant`](conclave_core::Instant).
//!
//! Every actor of a node shares one [`NodeClock`] whose origin is the node's start. Actor time
//! is `actix::clock::Instant` (tokio's), never the standard library's, so that tests can pause
//! and advance it (CONVENTIONS: time in actors).
//!
//! [`CoreTimer`] is the one timer an actor arms from its core's `poll_timeout`.

use std::time::Duration;

use actix::clock::Instant;
use actix::{Actor, AsyncContext, Context, SpawnHandle};

/// Converts between actix instants and the core's microseconds since the node started.
#[derive(Debug, Clone, Copy)]
pub struct NodeClock {
    origin: Instant,
}

impl NodeClock {
    /// A clock whose origin is now.
    pub fn start() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// The core's "now".
    pub fn now(&self) -> conclave_core::Instant {
        self.to_core(Instant::now())
    }

    /// An actix instant as core time.
    pub fn to_core(&self, at: Instant) -> conclave_core::Instant {
        let micros = at.saturating_duration_since(self.origin).as_micros();
        conclave_core::Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// How long from now until the core instant `at` (zero if it has passed).
    pub fn until(&self, at: conclave_core::Instant) -> Duration {
        at.saturating_duration_since(self.now())
    }
}

/// The single timer of an actor that drives a sans-IO core: armed after every input from the
/// core's `poll_timeout`, it calls the actor back when that deadline comes.
///
/// It remembers the deadline it is armed for, so that the many inputs which leave the
/// deadline where it was (most frames) cost a comparison rather than a cancelled and a new
/// timer future.
#[derive(Debug, Default)]
pub struct CoreTimer {
    armed: Option<(conclave_core::Instant, SpawnHandle)>,
}

impl CoreTimer {
    /// Arms the timer for `deadline` (none: disarms it). When it fires, the timer is marked
    /// idle and `fire` runs; `timer_of` finds this timer in the actor.
    pub fn arm<A>(
        &mut self,
        ctx: &mut Context<A>,
        clock: &NodeClock,
        deadline: Option<conclave_core::Instant>,
        timer_of: fn(&mut A) -> &mut CoreTimer,
        fire: fn(&mut A, &mut Context<A>),
    ) where
        A: Actor<Context = Context<A>>,
    {
        if self.armed.as_ref().map(|(at, _)| *at) == deadline {
            return;
        }
        if let Some((_, handle)) = self.armed.take() {
            ctx.cancel_future(handle);
        }
        if let Some(at) = deadline {
            let handle = ctx.run_later(clock.until(at), move |actor, ctx| {
                timer_of(actor).armed = None;
                fire(actor, ctx);
            });
            self.armed = Some((at, handle));
        }
    }

    /// The deadline it is armed for.
    pub fn deadline(&self) -> Option<conclave_core::Instant> {
        self.armed.as_ref().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use actix::prelude::*;

    use super::{CoreTimer, NodeClock};

    /// An actor whose "core" is just the deadline it asks for; it counts the firings.
    struct Ticker {
        clock: NodeClock,
        timer: CoreTimer,
        fired_at: Vec<conclave_core::Instant>,
    }

    impl Actor for Ticker {
        type Context = Context<Self>;
    }

    #[derive(Message)]
    #[rtype(result = "()")]
    struct ArmIn(Option<Duration>);

    #[derive(Message)]
    #[rtype(result = "(Vec<conclave_core::Instant>, Option<conclave_core::Instant>)")]
    struct Report;

    impl Handler<ArmIn> for Ticker {
        type Result = ();
        fn handle(&mut self, ArmIn(after): ArmIn, ctx: &mut Context<Self>) {
            // Deadlines are taken from the clock's origin, as a core's are.
            let deadline = after.map(|after| {
                conclave_core::Instant::from_micros(after.as_micros().try_into().unwrap())
            });
            self.timer.arm(
                ctx,
                &self.clock,
                deadline,
                |ticker| &mut ticker.timer,
                |ticker, _| {
                    let now = ticker.clock.now();
                    ticker.fired_at.push(now);
                },
            );
        }
    }

    impl Handler<Report> for Ticker {
        type Result = MessageResult<Report>;
        fn handle(&mut self, _: Report, _: &mut Context<Self>) -> Self::Result {
            MessageResult((self.fired_at.clone(), self.timer.deadline()))
        }
    }

    fn at_ms(ms: u64) -> conclave_core::Instant {
        conclave_core::Instant::from_micros(ms * 1_000)
    }

    /// Arming again for the same deadline keeps the one timer; a new deadline replaces it; no
    /// deadline disarms it; a fired timer is idle until armed again.
    #[actix_rt::test]
    async fn one_timer_follows_the_core_deadline() {
        tokio::time::pause();
        let ticker = Ticker {
            clock: NodeClock::start(),
            timer: CoreTimer::default(),
            fired_at: Vec::new(),
        }
        .start();

        for _ in 0..3 {
            ticker
                .send(ArmIn(Some(Duration::from_millis(50))))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
        let (fired, armed) = ticker.send(Report).await.unwrap();
        // tokio's timer wheel rounds up to the next millisecond.
        assert_eq!(fired.len(), 1, "three arms for one deadline fire once");
        assert!(fired[0] >= at_ms(50) && fired[0] < at_ms(52), "{fired:?}");
        assert_eq!(armed, None, "a fired timer is idle");

        ticker
            .send(ArmIn(Some(Duration::from_millis(100))))
            .await
            .unwrap();
        ticker
            .send(ArmIn(Some(Duration::from_millis(120))))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(70)).await;
        let (fired, armed) = ticker.send(Report).await.unwrap();
        assert_eq!(fired.len(), 2, "one firing for the two arms");
        assert!(
            fired[1] >= at_ms(120) && fired[1] < at_ms(122),
            "the later deadline replaced the first: {fired:?}"
        );
        assert_eq!(armed, None);

        ticker
            .send(ArmIn(Some(Duration::from_millis(200))))
            .await
            .unwrap();
        ticker.send(ArmIn(None)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (fired, armed) = ticker.send(Report).await.unwrap();
        assert_eq!(fired.len(), 2, "a disarmed timer never fires");
        assert_eq!(armed, None);
    }
}
