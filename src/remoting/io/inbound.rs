//! The loop's inbound side: reading a connection (plain or TLS, up to a bound per turn)
//! into frames, and dispatching each frame: a response to its waiter, a broker request to
//! its processor.

use super::*;

impl IoLoop {
    pub(super) fn read(&mut self, token: Token) {
        let tls = self.conns.get(&token).is_some_and(|c| c.tls.is_some());
        if tls {
            self.read_tls(token);
            self.tls_progress(token);
        } else {
            self.read_plain(token);
        }
    }

    /// Reads TLS records, decrypts them and parses the plaintext into frames.
    fn read_tls(&mut self, token: Token) {
        let max_frame = self.shared.config.max_frame;
        let mut frames = Vec::new();
        let mut failure = None;
        if let Some(c) = self.conns.get_mut(&token) {
            let Conn {
                stream,
                tls: Some(tls),
                state,
                rbuf,
                last_active,
                ..
            } = c
            else {
                return;
            };
            let handshaking = matches!(state, ConnState::Handshaking { .. });
            let (mut reads, mut bytes) = (0, 0);
            loop {
                if reads == MAX_TLS_READS_PER_TURN || bytes >= MAX_TLS_BYTES_PER_TURN {
                    if !self.still_readable.contains(&token) {
                        self.still_readable.push(token);
                    }
                    break;
                }
                reads += 1;
                match tls.read_tls(stream) {
                    Ok(0) => {
                        failure = Some(if handshaking {
                            CloseReason::Tls("handshake failed: closed by peer".into())
                        } else {
                            CloseReason::Closed("closed by peer".into())
                        });
                        break;
                    }
                    Ok(n) => bytes += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        failure = Some(if handshaking {
                            CloseReason::Tls(format!("handshake failed: read failed: {e}"))
                        } else {
                            CloseReason::Closed(format!("read failed: {e}"))
                        });
                        break;
                    }
                }
                *last_active = Instant::now();
                if let Err(e) = tls.process_new_packets() {
                    // Tell the peer why (the alert rustls queued), best effort.
                    let _ = tls.write_tls(stream);
                    failure = Some(CloseReason::Tls(e.to_string()));
                    break;
                }
                // Take every decrypted byte; parse after each chunk, as for plain reads.
                loop {
                    match tls.reader().read(&mut self.scratch) {
                        Ok(0) => {
                            failure =
                                Some(CloseReason::Closed("closed by peer (close_notify)".into()));
                            break;
                        }
                        Ok(n) => {
                            rbuf.buf.extend_from_slice(&self.scratch[..n]);
                            if let Err(why) =
                                parse_frames(&mut rbuf.buf, &mut rbuf.start, max_frame, &mut frames)
                            {
                                failure = Some(CloseReason::Closed(why));
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            failure = Some(CloseReason::Closed(format!("TLS read failed: {e}")));
                            break;
                        }
                    }
                }
                if failure.is_some() {
                    break;
                }
            }
        }
        for (cmd, len) in frames {
            self.dispatch(token, cmd, len);
        }
        if let Some(reason) = failure {
            self.close(token, reason);
        }
    }

    fn read_plain(&mut self, token: Token) {
        let max_frame = self.shared.config.max_frame;
        let mut frames = Vec::new();
        let mut failure = None;
        if let Some(c) = self.conns.get_mut(&token) {
            let mut lent;
            let mut to_end = self.read_to_end;
            if let Some(d) = c.direct.as_deref() {
                d.note_loop_woken();
            }
            let rb = match c.direct.as_deref() {
                // Out of the loop's hands while lent, also between two callers reading
                // in turn (the read side is free for a moment then).
                Some(d) if d.lent.load(Ordering::SeqCst) => return,
                Some(d) => match d.read.try_lock() {
                    Some(guard) => {
                        d.loop_reads();
                        // Its events carry no EPOLLRDHUP (see `direct::share_wakeups`).
                        to_end |= d.shares_wakeups;
                        lent = guard;
                        &mut lent.buf
                    }
                    // A sync caller is reading this socket for its own response (an
                    // event from before it took the socket): what it finds for others
                    // it hands over, and the socket comes back to the loop after.
                    None => return,
                },
                None => &mut c.rbuf,
            };
            // A short read proves the socket drained (bytes that arrive later raise a new
            // edge), so the `recv` that would only return WouldBlock is skipped.
            let stop_short = SHORT_READ_DRAINS && !to_end;
            let (end, bytes) = read_frames(
                &mut c.stream,
                &mut self.scratch,
                rb,
                max_frame,
                MAX_READS_PER_TURN,
                stop_short,
                &mut frames,
            );
            if bytes > 0 {
                c.last_active = Instant::now();
            }
            match end {
                ReadEnd::Drained | ReadEnd::Short => {}
                ReadEnd::Capped => {
                    if !self.still_readable.contains(&token) {
                        self.still_readable.push(token);
                    }
                }
                ReadEnd::Eof => failure = Some(CloseReason::Closed(rb.eof_reason())),
                ReadEnd::Failed(why) => failure = Some(CloseReason::Closed(why)),
            }
        }
        // Frames that arrived before a failure are still delivered.
        for (cmd, len) in frames {
            self.dispatch(token, cmd, len);
        }
        if let Some(reason) = failure {
            self.close(token, reason);
        }
    }

    /// Handles one frame of `len` bytes read from `token`'s connection.
    pub(super) fn dispatch(&mut self, token: Token, cmd: RemotingCommand, len: usize) {
        if cmd.is_response() {
            match self.pending.complete(cmd.opaque) {
                Some(entry) => {
                    self.settled(entry.token);
                    self.complete(entry.waiter, Ok(cmd));
                }
                None => {
                    // Maybe the answer to a frame a caller wrote itself, whose
                    // registration this turn's drain handles.
                    let shared = self.conns.get(&token).is_some_and(|c| c.direct.is_some());
                    let dropped = if shared {
                        self.direct_awaits.keep_early(token, cmd)
                    } else {
                        Some(cmd)
                    };
                    if let Some(cmd) = dropped {
                        debug!(
                            "response with unknown opaque {} (code {:?}) dropped",
                            cmd.opaque,
                            cmd.response_code()
                        );
                    }
                }
            }
            return;
        }
        let addr = match self.conns.get(&token) {
            Some(c) => c.addr.clone(),
            None => return,
        };
        let processor = self.shared.processors.read().get(&cmd.code).cloned();
        let shared = self.shared.clone();
        let (busy_opaque, busy_ty, busy_oneway) = (cmd.opaque, cmd.serialize_type, cmd.is_oneway());
        let limit = self.shared.config.processor_queue;
        let job = move || {
            shared
                .processor_queued_bytes
                .fetch_sub(len, Ordering::Relaxed);
            let opaque = cmd.opaque;
            let ty = cmd.serialize_type;
            let oneway = cmd.is_oneway();
            let response = match processor {
                Some(p) => p.process(&addr, cmd),
                None => Some(RemotingCommand::response(
                    ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                    opaque,
                    Some(format!(" request type {} not supported", cmd.code)),
                )),
            };
            if let Some(mut resp) = response {
                if oneway && resp.code != ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0 {
                    return;
                }
                resp.opaque = opaque;
                resp.flag |= 1;
                resp.serialize_type = ty;
                shared.submit(Command::Reply {
                    token,
                    frame: resp.to_frame(),
                });
            }
        };
        // Bounded by bytes too: each waiting request may be a whole frame (16 MiB). One
        // request bigger than the bound still gets in when none waits.
        let waiting = self.shared.processor_queued_bytes.load(Ordering::Relaxed);
        let queued = if waiting > 0 && waiting + len > self.shared.config.processor_queue_bytes {
            Err(Refused::Full)
        } else {
            self.shared
                .processor_queued_bytes
                .fetch_add(len, Ordering::Relaxed);
            let queued = self.shared.processor_pool.try_execute(limit, job);
            if queued.is_err() {
                self.shared
                    .processor_queued_bytes
                    .fetch_sub(len, Ordering::Relaxed);
            }
            queued
        };
        match queued {
            Ok(()) => {}
            Err(Refused::Full) => {
                // Java's broker answers a full queue the same way ("system busy"). One
                // warning per 1000 refusals: a flood must not become a flood of logs.
                let refused = BUSY_REFUSALS.fetch_add(1, Ordering::Relaxed);
                if refused.is_multiple_of(1000) {
                    warn!(
                        "request from {} refused: {} broker requests of {waiting} bytes already wait (at most {limit}, {} bytes; {} refused so far)",
                        self.conn_addr(token),
                        self.shared.processor_pool.waiting(),
                        self.shared.config.processor_queue_bytes,
                        refused + 1
                    );
                }
                if !busy_oneway {
                    let mut busy = RemotingCommand::response(
                        ResponseCode::SYSTEM_BUSY,
                        busy_opaque,
                        Some("[REJECTREQUEST]client busy, too many requests waiting".into()),
                    );
                    busy.flag |= 1;
                    busy.serialize_type = busy_ty;
                    self.shared.submit(Command::Reply {
                        token,
                        frame: busy.to_frame(),
                    });
                }
            }
            Err(Refused::Closed) => debug!(
                "request from {} dropped: shutting down",
                self.conn_addr(token)
            ),
        }
    }
}
