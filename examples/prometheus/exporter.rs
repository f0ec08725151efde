//! A Prometheus endpoint with no async runtime: the `metrics-exporter-prometheus` recorder
//! renders the text format, and one thread answers `GET /metrics` over plain TCP.
//!
//! Before each scrape it calls `refresh`, which writes the clients' figures through the
//! `metrics` facade (`ProducerStats::record_metrics`, `ConsumerStats::record_metrics`), so
//! a scrape always shows the figures of that moment. The integration test
//! `stats_prometheus_endpoint_shows_what_stats_return` serves with this same code.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The endpoint: stops and joins its thread on drop.
pub struct Exporter {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Installs the Prometheus recorder as the process's `metrics` recorder (once per
    /// process) and serves it on `addr` (port 0: any free port).
    pub fn start(
        addr: &str,
        refresh: impl Fn() + Send + 'static,
    ) -> Result<Exporter, Box<dyn std::error::Error>> {
        let handle = PrometheusBuilder::new().install_recorder()?;
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("prometheus-http".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    if let Err(e) = answer(conn, &handle, &refresh) {
                        eprintln!("prometheus endpoint: {e}");
                    }
                }
            })?;
        Ok(Exporter {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // A connection wakes the accept loop, which then sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request: `GET /metrics` gets the figures, anything else a 404.
fn answer(
    mut conn: TcpStream,
    handle: &PrometheusHandle,
    refresh: &dyn Fn(),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // The headers, up to the blank line; a GET has no body.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let (status, body) = if request_line.starts_with("GET /metrics ") {
        refresh();
        ("200 OK", handle.render())
    } else {
        ("404 Not Found", "not found\n".to_string())
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}
