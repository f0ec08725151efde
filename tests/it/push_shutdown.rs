//! Push consumer shutdown against the real broker: what a listener finished is committed,
//! what it did not finish comes back, and a stuck listener does not hold shutdown.
//!
//! Each test counts, over two consumers of one group (the second started after the first
//! is shut down): *redelivered* — messages whose listener call returned `Success` before
//! the first consumer's `shutdown` returned and that the second consumer gets again; and
//! *lost* — messages that neither consumer consumed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::{ConsumeOrderlyStatus, ConsumeStatus, Message, MessageExt, Producer};

use crate::cluster;
use crate::consumer::{consumer, producer, wait_for};

type Ids = Arc<Mutex<Vec<String>>>;

/// Sends `n` messages `<prefix>0`, `<prefix>1`, ...; their ids.
fn send_numbered(p: &Producer, topic: &str, prefix: &str, n: usize) -> HashSet<String> {
    (0..n)
        .map(|i| {
            p.send(&Message::new(topic, format!("{prefix}{i}")))
                .unwrap()
                .msg_id()
                .to_string()
        })
        .collect()
}

/// Sends `n` numbered messages and waits until the listener has finished them (`done`),
/// then sends one with body `held` and waits until the listener holding it signals
/// `started`; the ids of the finished ones and of the held one.
fn finish_then_hold(
    p: &Producer,
    topic: &str,
    n: usize,
    done: &Ids,
    held: &str,
    started: &crossbeam_channel::Receiver<()>,
) -> (HashSet<String>, String) {
    let finished = send_numbered(p, topic, "f", n);
    wait_for("the first messages", Duration::from_secs(60), || {
        done.lock().len() >= n
    });
    let id = p
        .send(&Message::new(topic, held))
        .unwrap()
        .msg_id()
        .to_string();
    started
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the listener of {held:?} runs"));
    (finished, id)
}

/// Starts a second consumer of `group` that records every message id, waits until it has
/// `expected` and then a little more (redeliveries arrive with the rest), and shuts it down.
fn consume_again(group: &str, topic: &str, expected: &HashSet<String>) -> HashSet<String> {
    let seen: Ids = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let c = consumer(group, topic)
        .listener(move |msgs, _| {
            s.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let got = || seen.lock().iter().cloned().collect::<HashSet<String>>();
    wait_for("the rest of the messages", Duration::from_secs(60), || {
        expected.is_subset(&got())
    });
    std::thread::sleep(Duration::from_secs(2));
    c.shutdown();
    got()
}

#[test]
fn shutdown_commits_what_listeners_finish_during_the_drain() {
    drain(false);
}

#[test]
fn shutdown_commits_what_an_orderly_listener_finishes_during_the_drain() {
    drain(true);
}

/// A listener slower than the persist interval (the periodic persist fires while shutdown
/// waits for it), shut down mid-stream with time enough to finish what runs.
fn drain(orderly: bool) {
    let topic = cluster::topic("shutdrain", 4);
    let group = cluster::unique("cg_drain");
    let p = producer();
    let sent: HashSet<String> = send_numbered(&p, &topic, "d", 100);
    let done: Ids = Arc::new(Mutex::new(Vec::new()));
    let d = done.clone();
    let record = move |msgs: &[MessageExt]| {
        std::thread::sleep(Duration::from_millis(300));
        d.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
    };
    let b = consumer(&group, &topic)
        .persist_offset_interval(Duration::from_millis(100))
        .await_termination_when_shutdown(Duration::from_secs(5));
    let c = if orderly {
        b.orderly_listener(move |msgs, _| {
            record(msgs);
            ConsumeOrderlyStatus::Success
        })
    } else {
        b.listener(move |msgs, _| {
            record(msgs);
            ConsumeStatus::Success
        })
    }
    .start()
    .unwrap();
    wait_for("a dozen messages", Duration::from_secs(60), || {
        done.lock().len() >= 12
    });
    let began = Instant::now();
    c.shutdown();
    let took = began.elapsed();
    let finished: HashSet<String> = done.lock().iter().cloned().collect();
    drop(c);

    let rest: HashSet<String> = sent.difference(&finished).cloned().collect();
    let second = consume_again(&group, &topic, &rest);
    let redelivered = finished.intersection(&second).count();
    let lost = sent
        .iter()
        .filter(|id| !finished.contains(*id) && !second.contains(*id))
        .count();
    let what = if orderly { "orderly" } else { "concurrent" };
    eprintln!(
        "drain ({what}): {} sent, {} finished before shutdown returned in {took:?}; \
         redelivered {redelivered}, lost {lost}",
        sent.len(),
        finished.len()
    );
    // Shutdown waits for the batches that run (300 ms), not for the rest of the queues
    // (over 20 messages a queue, 6 s of listener time).
    assert!(
        took < Duration::from_secs(4) && (redelivered, lost) == (0, 0),
        "{what}: shutdown took {took:?}; (redelivered, lost) = ({redelivered}, {lost}) of {} \
         sent, {} finished before shutdown returned",
        sent.len(),
        finished.len()
    );
}

#[test]
fn shutdown_waits_for_a_stuck_listener_no_longer_than_await_termination() {
    let topic = cluster::topic("shutstuck", 1);
    let group = cluster::unique("cg_stuck");
    let p = producer();
    let done: Ids = Arc::new(Mutex::new(Vec::new()));
    let (started_tx, started) = crossbeam_channel::bounded::<()>(1);
    let (release, released) = crossbeam_channel::bounded::<()>(0);
    let d = done.clone();
    let c = consumer(&group, &topic)
        .persist_offset_interval(Duration::from_millis(100))
        .await_termination_when_shutdown(Duration::from_millis(500))
        .listener(move |msgs, _| {
            for m in msgs {
                if m.body() == b"stuck" {
                    let _ = started_tx.try_send(());
                    // Until the test lets go (or 30 s): a listener that does not return.
                    let _ = released.recv_timeout(Duration::from_secs(30));
                }
            }
            d.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let (finished, stuck) = finish_then_hold(&p, &topic, 5, &done, "stuck", &started);

    let began = Instant::now();
    c.shutdown();
    let took = began.elapsed();
    // The listener returns Success now, after shutdown: too late to be committed.
    drop(release);
    drop(c);

    let second = consume_again(&group, &topic, &[stuck.clone()].into_iter().collect());
    let redelivered = finished.intersection(&second).count();
    let lost = usize::from(!second.contains(&stuck));
    eprintln!(
        "stuck: shutdown took {took:?}; redelivered {redelivered} of 5 finished, lost {lost}"
    );
    assert!(
        took < Duration::from_secs(2) && (redelivered, lost) == (0, 0),
        "shutdown took {took:?}; (redelivered finished, unfinished lost) = ({redelivered}, {lost})"
    );
}

/// A listener that asks for a retry while shutdown waits for it: the message is not sent
/// back to the broker (its retry topic, `reconsume_times` 1, ten seconds later) but stays
/// uncommitted in its own queue, so the next consumer of the group gets it again as it was.
#[test]
fn a_retry_asked_during_shutdown_leaves_the_message_uncommitted_in_its_queue() {
    let topic = cluster::topic("shutretry", 1);
    let group = cluster::unique("cg_shutretry");
    let p = producer();
    let done: Ids = Arc::new(Mutex::new(Vec::new()));
    let (started_tx, started) = crossbeam_channel::bounded::<()>(1);
    let (release, released) = crossbeam_channel::bounded::<()>(0);
    let d = done.clone();
    let c = consumer(&group, &topic)
        .await_termination_when_shutdown(Duration::from_secs(10))
        .listener(move |msgs, _| {
            if msgs.iter().any(|m| m.body() == b"late") {
                let _ = started_tx.try_send(());
                let _ = released.recv_timeout(Duration::from_secs(30));
                return ConsumeStatus::ReconsumeLater;
            }
            d.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let (finished, late) = finish_then_hold(&p, &topic, 3, &done, "late", &started);

    let took = std::thread::scope(|s| {
        let shutting = s.spawn(|| {
            let began = Instant::now();
            c.shutdown();
            began.elapsed()
        });
        // Shutdown has begun once the consumer gives up its queues; then the listener
        // asks for a retry, within the 10 s that shutdown waits for it.
        wait_for("shutdown to begin", Duration::from_secs(10), || {
            c.assigned_queues().is_empty()
        });
        drop(release);
        shutting.join().unwrap()
    });
    drop(c);

    let seen: Arc<Mutex<Vec<(String, u32)>>> = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let again = consumer(&group, &topic)
        .listener(move |msgs, _| {
            s.lock().extend(
                msgs.iter()
                    .map(|m| (m.msg_id().to_string(), m.reconsume_times())),
            );
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    // Sent back, it would come from the retry topic only after its ten-second delay.
    wait_for("the late message again", Duration::from_secs(30), || {
        seen.lock().iter().any(|(id, _)| *id == late)
    });
    std::thread::sleep(Duration::from_secs(1));
    again.shutdown();
    let seen = seen.lock().clone();
    let redelivered = seen.iter().filter(|(id, _)| finished.contains(id)).count();
    let late_again: Vec<u32> = seen
        .iter()
        .filter(|(id, _)| *id == late)
        .map(|(_, times)| *times)
        .collect();
    eprintln!(
        "retry at shutdown: took {took:?}; late again as {late_again:?}; redelivered {redelivered}"
    );
    assert!(
        took < Duration::from_secs(5) && late_again == [0] && redelivered == 0,
        "shutdown took {took:?}; the late message came again with reconsume times \
         {late_again:?}; {redelivered} finished messages came again"
    );
}
