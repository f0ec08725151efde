//! Topics of the lite pull consumer: subscribing and unsubscribing while running, the
//! subscribed topics, the readable queues of a topic (`fetch_message_queues`), and the
//! topic queue change listeners with the periodic lookup that feeds them.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use log::{info, warn};

use super::{LitePullConsumer, LitePullImpl, Mode};
use crate::client::namespace;
use crate::client::validators::check_topic;
use crate::consumer::subscription::{build_subscription_data, MessageSelector};
use crate::consumer::TopicQueueChangeListener;
use crate::error::{Error, Result};
use crate::message::MessageQueue;

/// A topic whose readable queues a [`TopicQueueChangeListener`] follows.
pub(super) struct WatchedTopic {
    pub(super) listener: Arc<dyn TopicQueueChangeListener>,
    pub(super) seen: Option<HashSet<MessageQueue>>,
}

impl LitePullConsumer {
    /// The readable queues of `topic`, sorted, from the name server (Java
    /// `fetchMessageQueues`); what [`assign`](Self::assign) takes. A topic may have fewer
    /// or more readable queues than writable ones (what
    /// [`Producer::fetch_publish_message_queues`](crate::Producer::fetch_publish_message_queues)
    /// gives): messages sit only in queues below the write count, and a queue at or above
    /// the read count is not consumed.
    #[doc(alias = "fetchMessageQueues")]
    pub fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        check_topic(topic)?;
        let c = &self.inner;
        c.check_running()?;
        let queues = c.fetch_read_queues(&namespace::wrap(c.namespace.as_deref(), topic))?;
        Ok(crate::consumer::queue_listener::unwrapped_sorted(
            c.namespace.as_deref(),
            &queues,
        ))
    }

    /// Subscribes to one more topic while running, or before queues are assigned (Java
    /// `subscribe` after `start`): the route is fetched, a heartbeat sent and a rebalance
    /// started at once. Subscribing again to a topic replaces its expression. A state error
    /// on a consumer that [`assign`](Self::assign)s.
    pub fn subscribe(&self, topic: &str, tag_expression: &str) -> Result<()> {
        self.subscribe_with(topic, MessageSelector::by_tag(tag_expression))
    }

    /// [`subscribe`](Self::subscribe) with a tag or SQL92 selector.
    pub fn subscribe_with(&self, topic: &str, selector: MessageSelector) -> Result<()> {
        check_topic(topic)?;
        let c = &self.inner;
        c.check_running()?;
        let wrapped = namespace::wrap(c.namespace.as_deref(), topic);
        let sub = build_subscription_data(&wrapped, &selector)?;
        {
            let mut mode = c.mode.lock();
            if *mode == Some(Mode::Assign) {
                return Err(Error::state(
                    "this consumer assigns queues; subscribe is not allowed",
                ));
            }
            *mode = Some(Mode::Subscribe);
        }
        c.rebalance
            .subscriptions
            .write()
            .insert(wrapped.clone(), sub);
        crate::consumer::follow_new_subscription(&c.instance, &c.group, &wrapped);
        Ok(())
    }

    /// Stops consuming `topic` (Java `unsubscribe`): its queues are dropped now, with their
    /// committed offsets written through, and `poll` returns none of its messages after
    /// this; an error if the consumer does not subscribe to it. A rebalance round in
    /// progress (broker calls of up to a few seconds each) ends first.
    pub fn unsubscribe(&self, topic: &str) -> Result<()> {
        check_topic(topic)?;
        let c = &self.inner;
        c.check_running()?;
        let wrapped = namespace::wrap(c.namespace.as_deref(), topic);
        // The mode's lock is not held across the removal, which may wait for a round.
        let subscribes = *c.mode.lock() == Some(Mode::Subscribe);
        if !subscribes
            || !c
                .rebalance
                .remove_subscription(&wrapped, |mq| c.drop_queue(mq))
        {
            return Err(Error::invalid_argument(format!(
                "the consumer {} does not subscribe to {topic}",
                c.group
            )));
        }
        c.instance.send_heartbeat_to_all_brokers_with_lock();
        c.instance.rebalance_immediately();
        Ok(())
    }

    /// The topics subscribed now (without namespace), sorted.
    pub fn subscriptions(&self) -> Vec<String> {
        let c = &self.inner;
        let mut v: Vec<String> = c
            .rebalance
            .subscribed_topics()
            .iter()
            .map(|t| c.unwrap_topic(t))
            .collect();
        v.sort();
        v
    }

    /// Follows the readable queues of `topic` with `listener` from now on (Java
    /// `registerTopicMessageQueueChangeListener`); see
    /// [`LitePullConsumerBuilder::topic_queue_change_listener`]. The queues now are looked
    /// up at once, and the listener is told of changes after them.
    ///
    /// [`LitePullConsumerBuilder::topic_queue_change_listener`]:
    ///     super::LitePullConsumerBuilder::topic_queue_change_listener
    #[doc(alias = "registerTopicMessageQueueChangeListener")]
    pub fn register_topic_queue_change_listener(
        &self,
        topic: &str,
        listener: impl TopicQueueChangeListener + 'static,
    ) -> Result<()> {
        check_topic(topic)?;
        let c = &self.inner;
        c.check_running()?;
        let wrapped = namespace::wrap(c.namespace.as_deref(), topic);
        let seen = c.fetch_read_queues(&wrapped)?;
        let listener: Arc<dyn TopicQueueChangeListener> = Arc::new(listener);
        c.topic_listeners.lock().insert(
            wrapped,
            WatchedTopic {
                listener,
                seen: Some(seen),
            },
        );
        c.start_watching_topics();
        Ok(())
    }
}

impl LitePullImpl {
    /// The readable queues of `topic` (with namespace) in its route from the name server
    /// (Java `MQAdminImpl.fetchSubscribeMessageQueues`); an error for a topic with none.
    fn fetch_read_queues(&self, topic: &str) -> Result<HashSet<MessageQueue>> {
        let timeout = self.instance.config().mq_client_api_timeout();
        let route = self.instance.api().get_topic_route_info(topic, timeout)?;
        let queues = crate::client::to_subscribe_info(topic, &route);
        if queues.is_empty() {
            return Err(Error::new(
                crate::ErrorKind::NoRoute,
                format!("the topic {topic} has no readable queue"),
            ));
        }
        Ok(queues)
    }

    /// Starts the periodic lookup of the watched topics, once.
    pub(super) fn start_watching_topics(&self) {
        if !self.watching.swap(true, Ordering::SeqCst) {
            self.schedule_topic_check();
        }
    }

    /// The next lookup after `topic_metadata_check_interval`, run on the rebalance thread
    /// (it asks the name server) rather than on the timer that every delayed pull shares.
    fn schedule_topic_check(&self) {
        let me = self.me.clone();
        let every = self.options.topic_metadata_check_interval;
        self.instance
            .schedule_later("lite-pull-topics", every, move || {
                let Some(c) = me.upgrade() else { return };
                let me = c.me.clone();
                let queued = c.instance.run_on_rebalance_thread(move || {
                    if let Some(c) = me.upgrade() {
                        if c.is_running() {
                            c.check_watched_topics();
                            c.schedule_topic_check();
                        }
                    }
                });
                if !queued {
                    c.watching.store(false, Ordering::SeqCst);
                }
            });
    }

    /// Looks up every watched topic and tells the listener of each whose queues changed
    /// (Java `fetchTopicMessageQueuesAndCompare`). A subscribed topic that changed has its
    /// route refreshed and a rebalance started, so that this consumer takes new queues now
    /// rather than at the next route refresh.
    fn check_watched_topics(&self) {
        let topics: Vec<String> = self.topic_listeners.lock().keys().cloned().collect();
        let mut rebalance = false;
        for topic in topics {
            let queues = match self.fetch_read_queues(&topic) {
                Ok(q) => q,
                Err(e) => {
                    warn!("{}: queues of {topic}: {e}", self.group);
                    continue;
                }
            };
            let listener = {
                let mut watched = self.topic_listeners.lock();
                let Some(w) = watched.get_mut(&topic) else {
                    continue;
                };
                if w.seen.as_ref() == Some(&queues) {
                    continue;
                }
                w.seen = Some(queues.clone());
                w.listener.clone()
            };
            info!(
                "{}: the readable queues of {topic} changed to {}",
                self.group,
                queues.len()
            );
            if self.rebalance.subscriptions.read().contains_key(&topic) {
                if let Err(e) = self.instance.update_topic_route(&topic) {
                    warn!("{}: route of {topic}: {e}", self.group);
                }
                rebalance = true;
            }
            let user_topic = self.unwrap_topic(&topic);
            let queues = crate::consumer::queue_listener::unwrapped_sorted(
                self.namespace.as_deref(),
                &queues,
            );
            crate::consumer::queue_listener::call_guarded(
                &self.group,
                "topic queue change listener",
                || listener.on_changed(&user_topic, &queues),
            );
        }
        if rebalance {
            self.instance.rebalance_immediately();
        }
    }
}
