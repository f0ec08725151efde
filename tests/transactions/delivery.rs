//! What consumers see of transactions ended every way: by the local transaction, by a
//! check (commit, rollback, a panicking checker), by a new producer of a group whose
//! old producer shut down mid-transaction, and under a storm of checks.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_blocking::{LocalTransactionState, Message, MessageExt};

use crate::*;

/// Long enough for a check round on a loaded machine: a half message is checked
/// `TRANSACTION_TIMEOUT_MS` after it was born, at the next round; its answer then waits
/// in the broker for a free check thread.
const CHECK_WAIT: Duration = Duration::from_secs(60);
const READ_WAIT: Duration = Duration::from_secs(60);

#[test]
fn committed_transactions_are_delivered_and_rolled_back_ones_never() {
    let t = topic("tx_end", 4);
    let checks = Arc::new(Checks::default());
    let p = producer_builder(&unique("tx_end_pg"), ByProperties(checks.clone()))
        .start()
        .unwrap();
    let n = 20 * scale();
    let (mut committed, mut rolled_back) = (HashSet::new(), HashSet::new());
    for i in 0..n {
        let local = if i % 2 == 0 { "commit" } else { "rollback" };
        let r = p
            .send_in_transaction(&message(&t, i, local, "unknown"), &())
            .unwrap();
        let id = r.send_result().msg_id().to_string();
        let want = if i % 2 == 0 {
            LocalTransactionState::CommitMessage
        } else {
            LocalTransactionState::RollbackMessage
        };
        assert_eq!(r.local_transaction_state(), want);
        // The local transaction saw the half message's id as its transaction id.
        assert_eq!(
            checks
                .executed
                .lock()
                .get(&id)
                .cloned()
                .flatten()
                .as_deref(),
            Some(id.as_str())
        );
        if i % 2 == 0 {
            committed.insert(id);
        } else {
            rolled_back.insert(id);
        }
    }
    // Past a check round, so that a rollback the broker got wrong would have shown.
    std::thread::sleep(Duration::from_millis(
        TRANSACTION_TIMEOUT_MS + 2 * CHECK_INTERVAL_MS,
    ));
    let c = count(&t, &committed, &rolled_back, READ_WAIT);
    let asked = checks.total();
    p.shutdown();
    eprintln!(
        "{} ended by the local transaction: {} committed, {} delivered, {} missing, {} duplicates; {} rolled back, {} delivered; {asked} checks",
        version(),
        committed.len(),
        c.delivered,
        c.missing,
        c.duplicates,
        rolled_back.len(),
        c.leaked.len()
    );
    assert_eq!(c.missing, 0, "{c:?}");
    assert!(c.leaked.is_empty(), "rolled back, yet delivered: {c:?}");
    assert_eq!(c.duplicates, 0, "{c:?}");
    assert_eq!(c.strangers, 0, "{c:?}");
}

#[test]
fn unknown_transactions_are_resolved_by_the_check_both_ways() {
    let t = topic("tx_check", 4);
    let checks = Arc::new(Checks::default());
    let p = producer_builder(&unique("tx_check_pg"), ByProperties(checks.clone()))
        .start()
        .unwrap();
    let n = 10 * scale();
    let (mut committed, mut rolled_back) = (HashSet::new(), HashSet::new());
    let mut sent_at = Vec::new();
    for i in 0..n {
        let check = if i % 2 == 0 { "commit" } else { "rollback" };
        let r = p
            .send_in_transaction(&message(&t, i, "unknown", check), &())
            .unwrap();
        assert_eq!(r.local_transaction_state(), LocalTransactionState::Unknown);
        let id = r.send_result().msg_id().to_string();
        sent_at.push((id.clone(), Instant::now()));
        if i % 2 == 0 {
            committed.insert(id);
        } else {
            rolled_back.insert(id);
        }
    }
    let all: Vec<String> = committed.iter().chain(&rolled_back).cloned().collect();
    let answered = eventually(CHECK_WAIT, || all.iter().all(|id| checks.count(id) > 0));
    let latencies: Vec<f64> = sent_at
        .iter()
        .filter_map(|(id, at)| Some(checks.first(id)?.duration_since(*at).as_secs_f64()))
        .collect();
    // A broker that ignored the answers would ask again next round; give it two.
    std::thread::sleep(Duration::from_millis(3 * CHECK_INTERVAL_MS));
    let c = count(&t, &committed, &rolled_back, READ_WAIT);
    let rechecked = all.iter().filter(|id| checks.count(id) > 1).count();
    p.shutdown();
    let (min, max) = latencies
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), l| (lo.min(*l), hi.max(*l)));
    eprintln!(
        "{} unknown, then checked: {} checked of {n} (first check {min:.1}-{max:.1}s after the send, {rechecked} asked again); {} to commit, {} delivered, {} missing, {} duplicates; {} to roll back, {} delivered",
        version(),
        latencies.len(),
        committed.len(),
        c.delivered,
        c.missing,
        c.duplicates,
        rolled_back.len(),
        c.leaked.len()
    );
    assert!(
        answered,
        "not every half message was checked within {CHECK_WAIT:?}"
    );
    assert_eq!(c.missing, 0, "{c:?}");
    assert!(
        c.leaked.is_empty(),
        "rolled back by the check, yet delivered: {c:?}"
    );
    assert_eq!(c.duplicates, 0, "{c:?}");
    assert_eq!(
        rechecked, 0,
        "the broker asked again about transactions the checker had answered"
    );
}

#[test]
fn a_transaction_left_open_by_a_producer_that_shut_down_is_committed_by_a_new_producer_of_its_group(
) {
    let t = topic("tx_orphan", 2);
    let group = unique("tx_orphan_pg");
    let (entered_tx, entered_rx) = crossbeam_channel::bounded::<()>(1);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
    // The first producer's local transaction holds until the producer is shut down;
    // it would commit, but the producer is gone by then and ends nothing.
    let first_checks = Arc::new(Checks::default());
    let fc = first_checks.clone();
    let first = producer_builder(
        &group,
        (
            move |_: &Message, _: &dyn std::any::Any| {
                let _ = entered_tx.send(());
                let _ = release_rx.recv_timeout(Duration::from_secs(60));
                LocalTransactionState::CommitMessage
            },
            move |m: &MessageExt| {
                fc.seen
                    .lock()
                    .push((m.msg_id().to_string(), Instant::now()));
                LocalTransactionState::CommitMessage
            },
        ),
    )
    .start()
    .unwrap();
    let id = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            first
                .send_in_transaction(&message(&t, 0, "commit", "commit"), &())
                .unwrap()
        });
        entered_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the half message was stored and the local transaction started");
        first.shutdown();
        release_tx.send(()).unwrap();
        sender.join().unwrap().send_result().msg_id().to_string()
    });
    drop(first);
    let down = Instant::now();
    // The broker checks the open transaction: nobody of the group is there, and later
    // the new producer is.
    std::thread::sleep(Duration::from_millis(
        TRANSACTION_TIMEOUT_MS + CHECK_INTERVAL_MS,
    ));
    let checks = Arc::new(Checks::default());
    let second = producer_builder(&group, ByProperties(checks.clone()))
        .start()
        .unwrap();
    let started = Instant::now();
    let checked = eventually(CHECK_WAIT, || checks.count(&id) > 0);
    let latency = checks.first(&id).map(|t| t.duration_since(started));
    let c = count(&t, &HashSet::from([id.clone()]), &HashSet::new(), READ_WAIT);
    second.shutdown();
    eprintln!(
        "{} orphaned transaction: checked by the new producer {latency:?} after its start ({:.1}s after the old one shut down); delivered {}, duplicates {}; the old producer was asked {} times",
        version(),
        down.elapsed().as_secs_f64(),
        c.delivered,
        c.duplicates,
        first_checks.total()
    );
    assert!(checked, "the new producer was never asked about {id}");
    assert_eq!(
        first_checks.total(),
        0,
        "the shut-down producer answered a check"
    );
    assert_eq!(c.delivered, 1, "{c:?}");
    assert_eq!(c.duplicates, 0, "{c:?}");
}

#[test]
fn a_panicking_local_transaction_or_checker_means_unknown_and_the_check_pool_lives_on() {
    let t = topic("tx_panic", 2);
    let checks = Arc::new(Checks::default());
    // One check thread: a panic that killed it would leave every later check unanswered.
    let p = producer_builder(&unique("tx_panic_pg"), ByProperties(checks.clone()))
        .check_thread_pool_min_size(1)
        .check_thread_pool_max_size(1)
        .start()
        .unwrap();
    let n = 4 * scale();
    let mut ids = HashSet::new();
    for i in 0..n {
        // Half of them panic in the local transaction, the others say unknown; every
        // checker panics on the first check and commits on the second.
        let local = if i % 2 == 0 { "panic" } else { "unknown" };
        let r = p
            .send_in_transaction(&message(&t, i, local, "panic-once"), &())
            .unwrap();
        assert_eq!(r.local_transaction_state(), LocalTransactionState::Unknown);
        ids.insert(r.send_result().msg_id().to_string());
    }
    let twice = eventually(CHECK_WAIT, || ids.iter().all(|id| checks.count(id) >= 2));
    let c = count(&t, &ids, &HashSet::new(), READ_WAIT);
    let asked: usize = ids.iter().map(|id| checks.count(id)).sum();
    p.shutdown();
    eprintln!(
        "{} panics: {n} transactions, {asked} checks (the first of each panicked), delivered {}, missing {}, duplicates {}",
        version(),
        c.delivered,
        c.missing,
        c.duplicates
    );
    // The broker asked again, so the panic was answered "unknown", not commit or
    // rollback; and the one check thread was there to commit on the second check.
    assert!(twice, "a panicking check was not followed by another");
    assert_eq!(c.missing, 0, "{c:?}");
    assert_eq!(c.duplicates, 0, "{c:?}");
}

#[test]
fn a_storm_of_checks_keeps_the_check_queue_bounded_and_counts_what_it_drops() {
    const HOLD: usize = 4;
    let t = topic("tx_storm", 4);
    let storming = Arc::new(AtomicBool::new(true));
    let checks = Arc::new(Checks::default());
    let (s, c2) = (storming.clone(), checks.clone());
    // During the storm the checker is slow and knows nothing; after it, it commits.
    let listener = (
        |_: &Message, _: &dyn std::any::Any| LocalTransactionState::Unknown,
        move |m: &MessageExt| {
            c2.seen
                .lock()
                .push((m.msg_id().to_string(), Instant::now()));
            if s.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                LocalTransactionState::Unknown
            } else {
                LocalTransactionState::CommitMessage
            }
        },
    );
    let p = producer_builder(&unique("tx_storm_pg"), listener)
        .check_request_hold_max(HOLD)
        .start()
        .unwrap();
    let n = 100 * scale();
    let mut ids = HashSet::new();
    for i in 0..n {
        let r = p
            .send_in_transaction(&message(&t, i, "unknown", "unknown"), &())
            .unwrap();
        ids.insert(r.send_result().msg_id().to_string());
    }
    // Several check rounds of `n` checks each, against a pool that takes HOLD + 1.
    let storm_end =
        Instant::now() + Duration::from_millis(TRANSACTION_TIMEOUT_MS + 4 * CHECK_INTERVAL_MS);
    let mut max_queued = 0;
    while Instant::now() < storm_end {
        max_queued = max_queued.max(p.queued_checks());
        std::thread::sleep(Duration::from_millis(5));
    }
    let (dropped, accepted) = (p.dropped_checks(), p.accepted_checks());
    storming.store(false, Ordering::SeqCst);
    let c = count(&t, &ids, &HashSet::new(), Duration::from_secs(120));
    let answered = checks.total();
    p.shutdown();
    eprintln!(
        "{} check storm: {n} open transactions, queue at most {max_queued} of {HOLD}; during the storm {accepted} checks taken, {dropped} dropped; {answered} answered in all; then committed: delivered {}, missing {}, duplicates {}",
        version(),
        c.delivered,
        c.missing,
        c.duplicates
    );
    assert!(
        max_queued <= HOLD,
        "{max_queued} checks waited, more than {HOLD}"
    );
    assert!(dropped > 0, "a storm of {n} checks a round dropped none");
    // Dropped checks are asked again: every transaction ends committed.
    assert_eq!(c.missing, 0, "{c:?}");
    assert_eq!(c.duplicates, 0, "{c:?}");
}
