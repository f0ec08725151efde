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
