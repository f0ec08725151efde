//! Micro-benchmarks of the I/O thread's pending table (`cargo bench --bench pending`).
//!
//! - `pending/insert_complete`: one request registered and one answered per iteration,
//!   with 1024 others in flight (an async window): the map insert and remove plus the
//!   deadline push, and the amortized rebuild that drops answered requests' deadlines.
//! - `pending/insert_expire`: one request registered with a deadline already due and
//!   taken back by `pop_expired`, with 1024 others in flight: the timeout path.
//!
//! The waiter is a 40-byte stand-in for the I/O thread's `Waiter`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mio::Token;
use rocketmq_blocking::remoting::pending::{PendingEntry, PendingTable};

const IN_FLIGHT: i32 = 1024;

type Waiter = [u64; 5];

fn entry(deadline: Instant) -> PendingEntry<Waiter> {
    PendingEntry {
        token: Token(1),
        deadline,
        timeout: Duration::from_secs(3),
        waiter: [0; 5],
    }
}

/// A table with `IN_FLIGHT` requests due at `deadline`, and the next free opaque.
fn in_flight(deadline: Instant) -> (PendingTable<Waiter>, i32) {
    let mut table = PendingTable::new();
    for o in 0..IN_FLIGHT {
        table.insert(o, entry(deadline));
    }
    (table, IN_FLIGHT)
}

fn pending(c: &mut Criterion) {
    let now = Instant::now();
    let later = now + Duration::from_secs(3);
    let mut g = c.benchmark_group("pending");
    g.throughput(Throughput::Elements(1));

    let (mut table, mut next) = in_flight(later);
    g.bench_function("insert_complete", |b| {
        b.iter(|| {
            table.insert(next, entry(later));
            let done = table.complete(next.wrapping_sub(IN_FLIGHT));
            next = next.wrapping_add(1);
            black_box(done)
        })
    });

    let (mut table, mut next) = in_flight(later);
    g.bench_function("insert_expire", |b| {
        b.iter(|| {
            table.insert(next, entry(now));
            next = next.wrapping_add(1);
            black_box(table.pop_expired(now))
        })
    });
    g.finish();
}

criterion_group!(benches, pending);
criterion_main!(benches);
