//! Waiting for a future on the calling thread, whatever runtime that thread belongs to (EMB-1).
//!
//! The node's actors answer through channels that any executor can poll, so the blocking
//! calls of the façade drive the answer's future right here: the thread parks until the
//! future's waker unparks it. No runtime is created, so a host with no runtime, with tokio or
//! with another one calls the same way; the wait is the time the node's event loop takes to
//! answer one message.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

// Tokio's clock reads the system's monotonic clock outside a runtime with a paused clock, and
// is the one clippy.toml allows.
use tokio::time::Instant;

/// Wakes the thread that waits in [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread.
///
/// The future runs outside tokio's cooperative budget: called from inside a tokio task whose
/// budget is spent, a budgeted channel would otherwise answer "not yet" for ever.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(tokio::task::unconstrained(future));
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        // A wake that came before the park leaves its token, so this returns at once then;
        // a spurious return only costs one more poll.
        thread::park();
    }
}

/// Runs `future` on this thread until it completes or `timeout` has passed (`None`).
pub(crate) fn block_on_within<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let deadline = Instant::now() + timeout;
    let mut future = pin!(tokio::task::unconstrained(future));
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return Some(output);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        thread::park_timeout(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EMB-1: a value sent from another thread is waited for without a runtime.
    #[test]
    fn waits_for_another_thread() {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let helper = thread::spawn(move || sender.send(42));
        assert_eq!(block_on(receiver), Ok(42));
        helper.join().unwrap().unwrap();
    }

    /// EMB-1: a future that never completes is given up at the deadline.
    #[test]
    fn gives_up_at_the_deadline() {
        let (_sender, receiver) = tokio::sync::oneshot::channel::<()>();
        assert_eq!(block_on_within(receiver, Duration::from_millis(10)), None);
    }

    /// EMB-1: a future that completes in time is waited for.
    #[test]
    fn a_completed_future_is_returned_before_the_deadline() {
        assert_eq!(
            block_on_within(std::future::ready(7), Duration::from_secs(60)),
            Some(7)
        );
    }

    /// EMB-1: inside a tokio task whose budget is spent, budgeted channels still answer.
    #[test]
    fn works_inside_a_tokio_task() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (sender, mut receiver) = tokio::sync::mpsc::channel(1);
            // Far more budgeted operations than one task poll is allowed.
            for i in 0..1000 {
                sender.try_send(i).unwrap();
                assert_eq!(block_on(receiver.recv()), Some(i));
            }
        });
    }
}
