//! The package's own objects read and made here, for the producer's per-message calls.
//!
//! A send from Python pays for every line of Python it runs, and pays more than a
//! micro-benchmark shows: between two sends the thread sleeps on the broker's answer,
//! and the interpreter comes back to cold caches. So the producer's sends take the
//! package's `Message` as it is (its attributes read here, checked as `Message._tuple`
//! checks them) and give back its `SendResult` made here (as `pickle` makes an object:
//! `object.__new__` and the instance dictionary, without the frozen dataclass's six
//! `object.__setattr__` calls).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::type_object::PyTypeInfo;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple, PyType};

use crate::set_delays;
use rmq::SendStatus;
use rocketmq_blocking as rmq;

/// The package's classes, registered once by `set_classes`.
struct Classes {
    message: Py<PyType>,
    send_result: Py<PyType>,
    /// `callback_raised(what, exception)`: logs an exception a callback raised.
    callback_raised: Py<PyAny>,
    object_new: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// Registers the package's `Message` and `SendResult` classes and the function that
/// logs what a callback raised.
#[pyfunction]
pub(crate) fn set_classes(
    py: Python<'_>,
    message: Py<PyType>,
    send_result: Py<PyType>,
    callback_raised: Py<PyAny>,
) -> PyResult<()> {
    let object_new = py
        .import("builtins")?
        .getattr("object")?
        .getattr("__new__")?
        .unbind();
    // A second registration (a reloaded package) keeps the first.
    let _ = CLASSES.set(
        py,
        Classes {
            message,
            send_result,
            callback_raised,
            object_new,
        },
    );
    Ok(())
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get(py).ok_or_else(|| {
        PyTypeError::new_err("rocketmq_blocking._native: set_classes was not called")
    })
}

/// The library's message for the package's `Message` `m`; `TypeError` for anything
/// else, `ValueError` for what `Message._tuple` refuses.
pub(crate) fn message_of<'py>(py: Python<'py>, m: &Bound<'py, PyAny>) -> PyResult<rmq::Message> {
    let cls = classes(py)?;
    let cls = cls.message.bind(py);
    // A `Message` itself (not a subclass, whose attributes may be properties) keeps its
    // fields in its instance dictionary: one lookup there each instead of a generic
    // attribute lookup (the type's attributes first), about a fifth of a send's native
    // overhead. A field missing there (deleted) is looked up as an attribute.
    let fields = if m.get_type().is(cls) {
        m.getattr(intern!(py, "__dict__"))?
            .cast_into::<PyDict>()
            .ok()
    } else if m.is_instance(cls)? {
        None
    } else {
        return Err(PyTypeError::new_err(format!(
            "expected a Message, not {}",
            m.get_type().name()?
        )));
    };
    let attr = |name: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyAny>> {
        match fields
            .as_ref()
            .map(|d| d.get_item(name))
            .transpose()?
            .flatten()
        {
            Some(v) => Ok(v),
            None => m.getattr(name),
        }
    };
    let deliver_at = attr(intern!(py, "deliver_time_ms"))?;
    let delay = attr(intern!(py, "delivery_delay_ms"))?;
    if !deliver_at.is_none() && !delay.is_none() {
        return Err(PyValueError::new_err(
            "deliver_time_ms and delivery_delay_ms exclude each other",
        ));
    }
    let deliver_at = millis_field(&deliver_at, "deliver_time_ms")?;
    let delay = millis_field(&delay, "delivery_delay_ms")?;
    let body = converted::<PyBytes>(attr(intern!(py, "body"))?)?;
    let topic: String = attr(intern!(py, "topic"))?.extract()?;
    let mut msg = rmq::Message::new(topic, body.as_bytes());
    let tags: Option<String> = attr(intern!(py, "tags"))?.extract()?;
    if let Some(tags) = tags {
        msg.set_tags(tags);
    }
    // The keys and properties as `Message._tuple` takes them (`list(keys)`,
    // `dict(properties)`), read in place when they are a tuple, list or dict: most
    // messages have none, and an empty one then costs nothing.
    let keys = attr(intern!(py, "keys"))?;
    let keys = match keys.cast_into::<PyTuple>() {
        Ok(t) => t.into_any(),
        Err(e) => match e.into_inner().cast_into::<PyList>() {
            Ok(l) => l.into_any(),
            Err(e) => py.get_type::<PyList>().call1((e.into_inner(),))?,
        },
    };
    if keys.len()? > 0 {
        let keys: Vec<String> = keys.extract()?;
        msg.set_keys(keys);
    }
    let properties = converted::<PyDict>(attr(intern!(py, "properties"))?)?;
    for (k, v) in properties.iter() {
        msg.put_user_property(k.extract::<String>()?, v.extract::<String>()?)
            .map_err(|e| crate::to_py(py, e))?;
    }
    let level: Option<u32> = attr(intern!(py, "delay_level"))?.extract()?;
    set_delays(&mut msg, level, deliver_at, delay);
    Ok(msg)
}

/// `v` if it is a `T`, else `T(v)` (as `bytes(body)` and `dict(properties)` in
/// `Message._tuple`).
fn converted<'py, T: PyTypeInfo>(v: Bound<'py, PyAny>) -> PyResult<Bound<'py, T>> {
    match v.cast_into::<T>() {
        Ok(t) => Ok(t),
        Err(e) => {
            let v = e.into_inner();
            Ok(v.py().get_type::<T>().call1((v,))?.cast_into::<T>()?)
        }
    }
}

/// A timer field: `None`, or a non-negative `int` that is not a `bool`.
fn millis_field(v: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<u64>> {
    if v.is_none() {
        return Ok(None);
    }
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        if let Ok(ms) = v.extract::<u64>() {
            return Ok(Some(ms));
        }
    }
    Err(PyValueError::new_err(format!(
        "{name} must be a non-negative int, not {}",
        v.repr()?
    )))
}

/// The package's `SendResult` of `r`.
pub(crate) fn send_result_of<'py>(
    py: Python<'py>,
    r: &rmq::SendResult,
) -> PyResult<Bound<'py, PyAny>> {
    let cls = classes(py)?;
    let obj = cls.object_new.bind(py).call1((cls.send_result.bind(py),))?;
    let d = obj
        .getattr(intern!(py, "__dict__"))?
        .cast_into::<PyDict>()?;
    let q = r.message_queue();
    let status: i32 = match r.send_status() {
        SendStatus::Ok => 0,
        SendStatus::FlushDiskTimeout => 1,
        SendStatus::FlushSlaveTimeout => 2,
        SendStatus::SlaveNotAvailable => 3,
    };
    d.set_item(intern!(py, "msg_id"), r.msg_id())?;
    d.set_item(intern!(py, "offset_msg_id"), r.offset_msg_id())?;
    d.set_item(intern!(py, "broker_name"), q.broker_name())?;
    d.set_item(intern!(py, "queue_id"), q.queue_id())?;
    d.set_item(intern!(py, "queue_offset"), r.queue_offset())?;
    d.set_item(intern!(py, "status"), status)?;
    Ok(obj)
}

/// Hands what a callback raised to the package's logger (with its traceback).
pub(crate) fn callback_raised(py: Python<'_>, what: &str, e: PyErr) {
    let logged = classes(py).and_then(|cls| {
        cls.callback_raised
            .call1(py, (what, e.clone_ref(py).into_value(py)))
            .map(drop)
    });
    if logged.is_err() {
        e.write_unraisable(py, None);
    }
}
