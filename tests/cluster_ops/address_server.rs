//! Job 1: the HTTP name-server address server (Java `TopAddressing`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::{ErrorKind, Message, Producer};

use crate::cluster;
use rocketmq_blocking::ClientOptions;

/// A one-thread HTTP/1.0 server answering every request with `200` and the current body.
struct AddressServer {
    url: String,
    body: Arc<Mutex<String>>,
    gets: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AddressServer {
    fn start(body: &str) -> AddressServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/rocketmq/nsaddr", listener.local_addr().unwrap());
        let body = Arc::new(Mutex::new(body.to_string()));
        let gets = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, g, s) = (body.clone(), gets.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("test-addr-server".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => serve(stream, &b, &g),
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
            .unwrap();
        AddressServer {
            url,
            body,
            gets,
            stop,
            thread: Some(thread),
        }
    }

    fn answer(&self, body: &str) {
        *self.body.lock() = body.to_string();
    }

    fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }
}

fn serve(mut stream: TcpStream, body: &Mutex<String>, gets: &AtomicUsize) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    if request.starts_with(b"GET /rocketmq/nsaddr ") {
        gets.fetch_add(1, Ordering::SeqCst);
    }
    let body = body.lock().clone();
    let _ = stream.write_all(
        format!("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}\n").as_bytes(),
    );
}

impl Drop for AddressServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn the_http_address_server_switches_name_servers() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("addrsrv", 2);
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let server = AddressServer::start(&dead);
    let url = server.url.clone();
    let p = Producer::builder(cluster::unique("pg_addrsrv"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .name_server_address_url(url)
                .fetch_name_server_interval(Duration::from_millis(500)),
        )
        .start()
        .unwrap();
    let remoting = p.client_instance().unwrap().remoting().clone();
    assert_eq!(remoting.name_server_address_list(), vec![dead.clone()]);
    let e = p.send(&Message::new(&topic, "x")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
    assert!(e.to_string().contains(&dead), "{e}");

    let real = cluster::namesrv();
    server.answer(&real);
    let switched = Instant::now();
    let mut last = None;
    let ok = cluster::eventually(Duration::from_secs(10), || {
        match p.send(&Message::new(&topic, "x")) {
            Ok(_) => true,
            Err(e) => {
                last = Some(e);
                false
            }
        }
    });
    assert!(
        ok,
        "no send succeeded after the switch; last error: {last:?}"
    );
    eprintln!(
        "sends succeed {:.2}s after the address server switched",
        switched.elapsed().as_secs_f64()
    );
    // The address server's answer is `;`-separated, as Java's; the list is its parts, in
    // an order of the client's choosing (it spreads clients over name servers).
    let mut want: Vec<String> = real.split(';').map(str::to_string).collect();
    let mut got = remoting.name_server_address_list();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    // One GET at start, then job 1 every 500 ms, before and after the switch.
    let gets = server.gets();
    assert!(gets >= 2, "the address server saw {gets} GETs");
    assert!(
        cluster::eventually(Duration::from_secs(3), || server.gets() >= gets + 2),
        "job 1 stopped polling after {} GETs",
        server.gets()
    );
}
