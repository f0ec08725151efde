//! The only place raw pointers from C become Rust references: NULL checks, lengths,
//! UTF-8, out-parameters and handle boxes. Everything else in the crate works on
//! references these helpers return.

use std::ffi::{c_char, c_void};

use crate::error::{fail, rmq_result};

/// A C caller's `void *userdata`, carried to the crate's threads. The C side promises
/// (documented on every function taking one) that it may be used from those threads.
#[derive(Clone, Copy)]
pub(crate) struct Userdata(pub(crate) *mut c_void);

// SAFETY: the pointer is never dereferenced by Rust; it is handed back to the C callback,
// whose documentation requires the userdata to be usable from the crate's threads.
unsafe impl Send for Userdata {}
// SAFETY: as above; Rust only copies the pointer value.
unsafe impl Sync for Userdata {}

fn null(what: &str) -> rmq_result {
    fail(rmq_result::RMQ_NULL_PARAMETER, format!("{what} is NULL"))
}

/// A byte string from C: `p` may be NULL only when `len` is 0.
pub(crate) fn bytes_arg<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], rmq_result> {
    slice_arg(p, len, what)
}

/// An array of `len` values from C: `p` may be NULL only when `len` is 0.
pub(crate) fn slice_arg<'a, T>(p: *const T, len: usize, what: &str) -> Result<&'a [T], rmq_result> {
    if p.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(null(what)) };
    }
    // SAFETY: the caller passes `len` readable, initialised values at `p` that outlive
    // this call (documented on every function taking pointer + length); `p` is not NULL.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A UTF-8 string from C as pointer + length (no NUL needed); NULL is an error.
pub(crate) fn str_arg<'a>(p: *const c_char, len: usize, what: &str) -> Result<&'a str, rmq_result> {
    if p.is_null() {
        return Err(null(what));
    }
    let b = bytes_arg(p.cast(), len, what)?;
    std::str::from_utf8(b).map_err(|e| {
        fail(
            rmq_result::RMQ_INVALID_UTF8,
            format!("{what} is not UTF-8: {e}"),
        )
    })
}

/// Like `str_arg`, but NULL means "not given".
pub(crate) fn opt_str_arg<'a>(
    p: *const c_char,
    len: usize,
    what: &str,
) -> Result<Option<&'a str>, rmq_result> {
    if p.is_null() {
        Ok(None)
    } else {
        str_arg(p, len, what).map(Some)
    }
}

/// A shared reference to a handle; NULL is `RMQ_NULL_PARAMETER`.
pub(crate) fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T, rmq_result> {
    // SAFETY: non-NULL handles come from this library (`Box::into_raw` or a borrowed
    // view documented as valid for the call) and are not freed while in use, as the
    // header requires of the caller.
    unsafe { p.as_ref() }.ok_or_else(|| null(what))
}

/// An exclusive reference to a handle (builders, messages being filled in).
pub(crate) fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, rmq_result> {
    // SAFETY: as for `handle`; the header documents these handles as not shareable
    // between threads, so no other reference exists during the call.
    unsafe { p.as_mut() }.ok_or_else(|| null(what))
}

/// Writes `v` to an out-parameter.
pub(crate) fn out<T>(p: *mut T, v: T) -> Result<(), rmq_result> {
    if p.is_null() {
        return Err(null("an out-parameter"));
    }
    // SAFETY: not NULL, and the caller passes a writable, aligned `T` location.
    unsafe { p.write(v) };
    Ok(())
}

/// Boxes `v` and writes the new handle to `p`.
pub(crate) fn out_handle<T>(p: *mut *mut T, v: T) -> Result<(), rmq_result> {
    if p.is_null() {
        return Err(null("the out-parameter for the new handle"));
    }
    out(p, Box::into_raw(Box::new(v)))
}

/// Takes back a handle made by `out_handle`; NULL is a no-op.
pub(crate) fn take_handle<T>(p: *mut T) -> Option<Box<T>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` came from `Box::into_raw` in `out_handle` and the caller frees it once.
    Some(unsafe { Box::from_raw(p) })
}

/// Hands out a borrowed string as pointer + length (not NUL-terminated).
pub(crate) fn out_str(
    s: &str,
    data: *mut *const c_char,
    len: *mut usize,
) -> Result<(), rmq_result> {
    if data.is_null() || len.is_null() {
        return Err(null("an out-parameter"));
    }
    out(data, s.as_ptr().cast())?;
    out(len, s.len())
}

/// Like `out_str`; `None` is a NULL pointer with length 0.
pub(crate) fn out_opt_str(
    s: Option<&str>,
    data: *mut *const c_char,
    len: *mut usize,
) -> Result<(), rmq_result> {
    match s {
        Some(s) => out_str(s, data, len),
        None => {
            out(data, std::ptr::null())?;
            out(len, 0)
        }
    }
}

/// Copies `bytes` into the caller's buffer. With `nul`, a terminating NUL follows (and
/// must fit). `*written` is the length copied, or the length needed (NUL excluded) with
/// `RMQ_BUFFER_TOO_SMALL`.
pub(crate) fn copy_to_buf(
    bytes: &[u8],
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
    nul: bool,
) -> Result<(), rmq_result> {
    if buf.is_null() {
        return Err(null("the buffer"));
    }
    if written.is_null() {
        return Err(null("written"));
    }
    let need = bytes.len() + usize::from(nul);
    if need > len {
        out(written, bytes.len())?;
        return Err(fail(
            rmq_result::RMQ_BUFFER_TOO_SMALL,
            format!("{} bytes needed, the buffer has {len}", need),
        ));
    }
    // SAFETY: `buf` is not NULL and has `len >= need` writable bytes, as the caller
    // promises; the source is a Rust slice, so the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        if nul {
            buf.add(bytes.len()).write(0);
        }
    }
    out(written, bytes.len())
}

/// An array of `n` handle pointers from C (`const T *const *`), each non-NULL.
pub(crate) fn handle_array<'a, T>(
    p: *const *const T,
    n: usize,
    what: &str,
) -> Result<Vec<&'a T>, rmq_result> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: the caller passes `n` readable pointers at `p`; not NULL.
    let ptrs = unsafe { std::slice::from_raw_parts(p, n) };
    ptrs.iter().map(|&h| handle(h, what)).collect()
}
