use super::*;

#[test]
fn a_topic_threshold_is_shared_by_the_queues_held_of_the_topic() {
    let mut o = PushConsumerOptions::default();
    assert_eq!(
        topic_queue_limits(&o, 4),
        None,
        "no per-topic threshold set"
    );
    o.pull_threshold_for_topic = Some(100);
    assert_eq!(topic_queue_limits(&o, 4), Some((25, 100)));
    assert_eq!(topic_queue_limits(&o, 3), Some((33, 100)));
    // More queues than messages: each still pulls; no queue held: the whole budget.
    assert_eq!(topic_queue_limits(&o, 1000), Some((1, 100)));
    assert_eq!(topic_queue_limits(&o, 0), Some((100, 100)));
    o.pull_threshold_size_for_topic_mib = Some(10);
    assert_eq!(topic_queue_limits(&o, 4), Some((25, 2)));
    o.pull_threshold_for_topic = None;
    assert_eq!(topic_queue_limits(&o, 20), Some((1000, 1)));
}
