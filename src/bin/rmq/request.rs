//! `rmq request`: sends requests (Java `DefaultMQProducer.request`) and prints each reply.
//!
//! The message arguments are `rmq send`'s. stdout gets one JSON line per reply (its body as
//! text, correlation id and latency) and a summary line; a request without a reply within
//! `--timeout` is counted and reported on stderr, and makes the exit status non-zero.

use std::time::{Duration, Instant};

use rocketmq_blocking::message::property;
use rocketmq_blocking::protocol::SerializeType;
use rocketmq_blocking::{MessageExt, Result as RmqResult};

use crate::send::{build_message, SendArgs};
use crate::{namesrv, parse_seconds, start_producer, CliResult, Mode};

#[derive(clap::Args)]
pub(crate) struct RequestArgs {
    #[command(flatten)]
    message: SendArgs,
    /// Seconds to wait for each reply, the send included (Java's default is 3).
    #[arg(long, value_name = "SECONDS", default_value = "3", value_parser = parse_seconds)]
    timeout: Duration,
}

pub(crate) fn run(namesrv_arg: &Option<String>, args: RequestArgs) -> CliResult {
    let msg = build_message(&args.message)?;
    let (count, mode) = (args.message.count, args.message.mode);
    if args.message.transaction.is_some() {
        return Err("--transaction is for rmq send; a request is an ordinary message".into());
    }
    if mode == Mode::Oneway {
        return Err("a request waits for its reply: --mode oneway does not apply".into());
    }
    let addr = namesrv(namesrv_arg)?;
    let producer = start_producer(
        crate::client_options(&addr, SerializeType::from_env()),
        &args.message.group,
        |b| b,
    )?;
    let started = Instant::now();
    let (mut replies, mut failed) = (0u64, 0u64);
    let mut tally = |i: u64, t: Instant, r: RmqResult<MessageExt>| match r {
        Ok(reply) => {
            print_reply(&reply, t.elapsed());
            replies += 1;
        }
        Err(e) => {
            eprintln!("rmq: request {i}/{count}: {e}");
            failed += 1;
        }
    };
    for i in 1..=count {
        let t = Instant::now();
        let r = match mode {
            Mode::Async => {
                let (tx, rx) = crossbeam_channel::bounded(1);
                match producer.request_async(msg.clone(), args.timeout, move |r| {
                    let _ = tx.send(r);
                }) {
                    // The callback comes within the timeout; the margin is for a loaded box.
                    Ok(()) => rx
                        .recv_timeout(args.timeout + Duration::from_secs(5))
                        .unwrap_or_else(|_| {
                            Err(rocketmq_blocking::Error::new(
                                rocketmq_blocking::ErrorKind::Timeout,
                                "the request's callback did not come",
                            ))
                        }),
                    Err(e) => Err(e),
                }
            }
            _ => producer.request(&msg, args.timeout),
        };
        tally(i, t, r);
    }
    producer.shutdown();
    println!(
        "{{\"requests\":{count},\"replies\":{replies},\"failed\":{failed},\"elapsedMs\":{}}}",
        started.elapsed().as_millis()
    );
    if failed > 0 {
        return Err(format!("{failed} of {count} requests got no reply").into());
    }
    Ok(())
}

fn print_reply(reply: &MessageExt, latency: Duration) {
    let line = serde_json::json!({
        "reply": String::from_utf8_lossy(reply.body()),
        "correlationId": reply.property(property::CORRELATION_ID),
        "topic": reply.topic(),
        "latencyMs": latency.as_secs_f64() * 1000.0,
    });
    println!("{line}");
}
