//! Two tiny combinators that let the engine run concurrent work without spawning: a body raced
//! against a background keeper (the lease renew loop), and a join over several futures (the
//! worker's slots). Both poll in a fixed order, so a deterministic executor stays deterministic.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Poll;

/// Run `body` to completion while also polling `keeper`; the keeper is dropped when the body
/// finishes, and simply stops being polled if it finishes first.
pub async fn with_keeper<T>(body: impl Future<Output = T>, keeper: impl Future<Output = ()>) -> T {
    let mut body = pin!(body);
    let mut keeper = pin!(keeper);
    let mut keeper_done = false;
    poll_fn(|cx| {
        if let Poll::Ready(value) = body.as_mut().poll(cx) {
            return Poll::Ready(value);
        }
        if !keeper_done && keeper.as_mut().poll(cx).is_ready() {
            keeper_done = true;
        }
        Poll::Pending
    })
    .await
}

/// A boxed future that need not be `Send`.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Poll every future until all are done; outputs in input order.
pub async fn join_all<'a, T>(futures: Vec<LocalFuture<'a, T>>) -> Vec<T> {
    let mut slots: Vec<(LocalFuture<'a, T>, Option<T>)> = futures.into_iter().map(|f| (f, None)).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for (future, out) in slots.iter_mut() {
            if out.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *out = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    let count = slots.len();
    let outputs: Vec<T> = slots.into_iter().filter_map(|(_, out)| out).collect();
    // Ready only once no slot is pending: an output per future, in the futures' order.
    assert_eq!(outputs.len(), count, "join_all returned before every future finished");
    outputs
}
