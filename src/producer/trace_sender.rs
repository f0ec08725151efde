//! The producer side of message trace: a traced client's inner producer, which sends the
//! trace dispatcher's batches (`trace.rs` knows only the [`TraceSender`] trait, so it does
//! not depend on the producer).

use std::sync::Arc;

use log::warn;

use super::Producer;
use crate::client::ClientConfig;
use crate::error::Result;
use crate::message::Message;
use crate::trace::{TraceDispatcher, TraceSender, RMQ_SYS_TRACE_TOPIC};

impl TraceSender for Producer {
    fn send_sync(&self, msg: &Message) -> Result<()> {
        self.send(msg).map(drop)
    }

    fn send_async(&self, msg: Message, done: Box<dyn FnOnce(Result<()>) + Send>) -> Result<()> {
        Producer::send_async(self, msg, move |r| done(r.map(drop))).map_err(|e| e.into_parts().0)
    }

    fn shutdown(&self) {
        Producer::shutdown(self)
    }
}

/// The dispatcher of a traced client of `group`: its own producer
/// (`_INNER_TRACE_PRODUCER-<group>`, on the same client instance) sends to `topic`
/// (default [`RMQ_SYS_TRACE_TOPIC`]).
fn trace_for_client(
    group: &str,
    config: ClientConfig,
    topic: Option<&str>,
) -> Result<TraceDispatcher> {
    let producer =
        Producer::builder(format!("_INNER_TRACE_PRODUCER-{group}")).build_with_config(config)?;
    producer.start()?;
    TraceDispatcher::start(
        Box::new(producer),
        topic.unwrap_or(RMQ_SYS_TRACE_TOPIC).to_string(),
    )
}

/// [`trace_for_client`] when `enabled`; a trace that cannot start is logged and the client
/// runs untraced, as in Java.
pub(crate) fn start_trace(
    enabled: bool,
    group: &str,
    config: ClientConfig,
    topic: Option<&str>,
) -> Option<Arc<TraceDispatcher>> {
    if !enabled {
        return None;
    }
    match trace_for_client(group, config, topic) {
        Ok(t) => Some(Arc::new(t)),
        Err(e) => {
            warn!("{group}: message trace not started: {e}");
            None
        }
    }
}
