//! Frame splitting for the I/O thread: whole frames off the front of a connection's read
//! buffer, decoded, with the buffer compacted as it drains.

use crate::protocol::{frame_len, RemotingCommand};

/// Splits complete frames off the front of the connection's read buffer.
pub(super) fn parse_frames(
    rbuf: &mut Vec<u8>,
    rstart: &mut usize,
    max_frame: usize,
    out: &mut Vec<(RemotingCommand, usize)>,
) -> Result<(), String> {
    loop {
        let avail = &rbuf[*rstart..];
        let n = match frame_len(avail, max_frame) {
            Ok(Some(n)) => n,
            Ok(None) => break,
            Err(e) => return Err(format!("bad frame: {e}")),
        };
        if avail.len() < 4 + n {
            // Reserve what the frame needs (bounded by max_frame) to avoid regrowth.
            rbuf.reserve(4 + n - avail.len());
            break;
        }
        let cmd =
            RemotingCommand::decode(&avail[4..4 + n]).map_err(|e| format!("bad frame: {e}"))?;
        *rstart += 4 + n;
        out.push((cmd, 4 + n));
    }
    if *rstart == rbuf.len() {
        rbuf.clear();
        *rstart = 0;
    } else if *rstart > 0 && *rstart >= rbuf.len() / 2 {
        rbuf.drain(..*rstart);
        *rstart = 0;
    }
    Ok(())
}

/// How a run of [`read_frames`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReadEnd {
    /// A read returned WouldBlock: the socket is empty.
    Drained,
    /// A read returned less than asked (and the caller allowed stopping there): the socket
    /// was empty then, and bytes that arrive later raise a new edge.
    Short,
    /// `max_reads` reads were made; more may be waiting.
    Capped,
    /// End of stream.
    Eof,
    /// A read failed or a frame was malformed.
    Failed(String),
}

/// A plain connection's unparsed bytes.
#[derive(Default)]
pub(super) struct ReadBuf {
    pub(super) buf: Vec<u8>,
    pub(super) start: usize,
    /// Whether the peer ever sent a byte.
    pub(super) received: bool,
}

impl ReadBuf {
    /// Why the connection ended at end of stream.
    pub(super) fn eof_reason(&self) -> String {
        if self.received {
            "closed by peer".into()
        } else {
            // Java's servers in TLS "enforcing" mode close a plain connection at its first
            // bytes.
            "closed by peer before it sent anything (a server that requires TLS does this to a client without TLS)".into()
        }
    }
}

/// Reads `stream` into `rb` (through `scratch`), parsing whole frames into `out` after
/// every read so the buffer holds at most one frame; returns how it ended and the bytes
/// read. Frames parsed before a failure stay in `out`.
pub(super) fn read_frames(
    mut stream: impl std::io::Read,
    scratch: &mut [u8],
    rb: &mut ReadBuf,
    max_frame: usize,
    max_reads: usize,
    stop_at_short_read: bool,
    out: &mut Vec<(RemotingCommand, usize)>,
) -> (ReadEnd, usize) {
    let mut bytes = 0;
    for _ in 0..max_reads {
        match stream.read(scratch) {
            Ok(0) => return (ReadEnd::Eof, bytes),
            Ok(n) => {
                bytes += n;
                rb.received = true;
                rb.buf.extend_from_slice(&scratch[..n]);
                if let Err(why) = parse_frames(&mut rb.buf, &mut rb.start, max_frame, out) {
                    return (ReadEnd::Failed(why), bytes);
                }
                if n < scratch.len() && stop_at_short_read {
                    return (ReadEnd::Short, bytes);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return (ReadEnd::Drained, bytes)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (ReadEnd::Failed(format!("read failed: {e}")), bytes),
        }
    }
    (ReadEnd::Capped, bytes)
}
