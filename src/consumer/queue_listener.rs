//! Listeners told of queue changes: [`MessageQueueListener`] (a rebalance changed what a
//! consumer holds of a topic) and [`TopicQueueChangeListener`] (the readable queues of a
//! topic changed, as a lite pull consumer's periodic check sees them).
//!
//! Both run on the client instance's rebalance thread with no lock of the consumer held;
//! a panic in one is caught and logged, and the consumer goes on.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::message::MessageQueue;

/// Told when a rebalance changed the queues a consumer holds of a subscribed topic (Java
/// `MessageQueueListener.messageQueueChanged(topic, mqAll, mqDivided)`): `all` are the
/// topic's readable queues, `mine` those allocated to this consumer, both sorted, topics
/// without namespace. A closure `Fn(&str, &[MessageQueue], &[MessageQueue])` is one.
pub trait MessageQueueListener: Send + Sync {
    /// The allocation of `topic` changed.
    fn message_queue_changed(&self, topic: &str, all: &[MessageQueue], mine: &[MessageQueue]);
}

impl<F> MessageQueueListener for F
where
    F: Fn(&str, &[MessageQueue], &[MessageQueue]) + Send + Sync,
{
    fn message_queue_changed(&self, topic: &str, all: &[MessageQueue], mine: &[MessageQueue]) {
        self(topic, all, mine)
    }
}

/// Told when the readable queues of a topic changed (Java
/// `TopicMessageQueueChangeListener.onChanged(topic, messageQueues)`), for example when an
/// operator grew the topic from 4 to 8 queues: `queues` is the new set, sorted, topics
/// without namespace. A closure `Fn(&str, &[MessageQueue])` is one.
#[doc(alias = "TopicMessageQueueChangeListener")]
pub trait TopicQueueChangeListener: Send + Sync {
    /// The readable queues of `topic` are now `queues`.
    fn on_changed(&self, topic: &str, queues: &[MessageQueue]);
}

impl<F> TopicQueueChangeListener for F
where
    F: Fn(&str, &[MessageQueue]) + Send + Sync,
{
    fn on_changed(&self, topic: &str, queues: &[MessageQueue]) {
        self(topic, queues)
    }
}

/// Runs a user listener, logging a panic instead of passing it on to the rebalance thread.
pub(crate) fn call_guarded(group: &str, what: &str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        log::error!("{group}: the {what} panicked; ignored");
    }
}

/// `queues` with the namespace taken off their topics, sorted.
pub(crate) fn unwrapped_sorted<'a>(
    namespace: Option<&str>,
    queues: impl IntoIterator<Item = &'a MessageQueue>,
) -> Vec<MessageQueue> {
    let mut v: Vec<MessageQueue> = queues
        .into_iter()
        .map(|mq| {
            let mut mq = mq.clone();
            mq.topic = crate::client::namespace::unwrap(namespace, &mq.topic).into();
            mq
        })
        .collect();
    v.sort();
    v
}

/// Tells `listener` of a rebalance's allocation of `topic` (with namespace; the group's
/// retry topic too, as Java does).
pub(crate) fn notify_allocation(
    group: &str,
    namespace: Option<&str>,
    listener: &dyn MessageQueueListener,
    (topic, all, mine): (
        &str,
        &std::collections::HashSet<MessageQueue>,
        &std::collections::HashSet<MessageQueue>,
    ),
) {
    let user_topic = crate::client::namespace::unwrap(namespace, topic);
    let all = unwrapped_sorted(namespace, all);
    let mine = unwrapped_sorted(namespace, mine);
    call_guarded(group, "message queue listener", || {
        listener.message_queue_changed(&user_topic, &all, &mine)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_listener_is_contained() {
        let l = |_: &str, _: &[MessageQueue]| panic!("boom");
        call_guarded("g", "listener", || l.on_changed("T", &[]));
    }

    #[test]
    fn queues_are_given_sorted_without_the_namespace() {
        let qs = [
            MessageQueue::new("ns%T", "b", 1),
            MessageQueue::new("ns%T", "a", 3),
            MessageQueue::new("ns%T", "a", 0),
        ];
        let got = unwrapped_sorted(Some("ns"), &qs);
        assert_eq!(
            got,
            [
                MessageQueue::new("T", "a", 0),
                MessageQueue::new("T", "a", 3),
                MessageQueue::new("T", "b", 1)
            ]
        );
    }
}
