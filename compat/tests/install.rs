//! `ffi/install.sh --compat` into a scratch prefix, then what a user of the original
//! library has: C programs of the 2.x API (`examples/producer.c`, `push_consumer.c`,
//! copied out of the repository) built with `pkg-config --cflags --libs rocketmq` alone
//! and run against the cluster on the installed library, and the PyPI
//! `rocketmq-client-python` 2.0.0 loading it through `LD_LIBRARY_PATH=<prefix>/lib`.

#[path = "../../tests/common/java.rs"]
#[allow(dead_code)]
mod java;
mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use java::lines_after;
use support::{acked, check, create_topic, lib_dir, namesrv, run, stdout, unique, venv};

/// The headers of 2.2.0's C API, as `include/` holds them.
const HEADERS: [&str; 13] = [
    "CBatchMessage.h",
    "CCommon.h",
    "CErrorMessage.h",
    "CMQException.h",
    "CMessage.h",
    "CMessageExt.h",
    "CMessageQueue.h",
    "CProducer.h",
    "CPullConsumer.h",
    "CPullResult.h",
    "CPushConsumer.h",
    "CSendResult.h",
    "CTransactionStatus.h",
];

/// A fresh prefix with the library `lib_dir()` holds installed by `install.sh --compat`.
fn installed(scratch: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let prefix = scratch.join("prefix");
    let lib = lib_dir();
    let out = run(
        Command::new("bash")
            .arg(root.join("ffi/install.sh"))
            .args(["--compat", "--no-build", "--profile", "debug", "--prefix"])
            .arg(&prefix)
            .env("CARGO_TARGET_DIR", lib.parent().expect("target"))
            .current_dir(&root),
        Duration::from_secs(60),
    );
    check("install.sh --compat", &out);
    prefix
}

/// `pkg-config <args> rocketmq` on the prefix's pkg-config directory alone.
fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let out = run(
        Command::new("pkg-config")
            .args(args)
            .arg("rocketmq")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .env_remove("PKG_CONFIG_LIBDIR"),
        Duration::from_secs(30),
    );
    check("pkg-config", &out);
    stdout(&out)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `examples/<name>.c` copied to `dir` and built there with the flags pkg-config gives.
fn build(prefix: &Path, dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.c")),
        &src,
    )
    .expect("copy the example");
    let exe = dir.join(name);
    let out = run(
        Command::new("cc")
            .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .args(pkg_config(prefix, &["--cflags", "--libs"]))
            .arg("-lpthread")
            .current_dir(dir),
        Duration::from_secs(60),
    );
    check(
        &format!("cc {name}.c $(pkg-config --cflags --libs rocketmq)"),
        &out,
    );
    exe
}

#[test]
fn installed_drop_in_serves_c_programs_via_pkg_config_and_the_pypi_python_client() {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("compat-install"));
    let prefix = installed(&scratch);
    let libdir = prefix.join("lib");

    // The layout of the original's `make install`, the soname its users need.
    for h in HEADERS {
        assert!(prefix.join("include/rocketmq").join(h).is_file(), "{h}");
    }
    assert_eq!(
        std::fs::read_link(libdir.join("librocketmq.so")).expect("librocketmq.so is a link"),
        Path::new("librocketmq.so.2.2.0")
    );
    let real = libdir.join("librocketmq.so.2.2.0");
    let dynamic = run(
        Command::new("readelf").arg("-d").arg(&real),
        Duration::from_secs(30),
    );
    check("readelf -d", &dynamic);
    assert!(
        stdout(&dynamic).contains("Library soname: [librocketmq.so]"),
        "{}",
        stdout(&dynamic)
    );
    assert_eq!(pkg_config(&prefix, &["--modversion"]), ["2.2.0"]);

    // Outside the repository: no path of it on the command lines, no rpath.
    let apps = scratch.join("apps");
    std::fs::create_dir_all(&apps).expect("apps directory");
    let producer = build(&prefix, &apps, "producer");
    let consumer = build(&prefix, &apps, "push_consumer");
    // The other include style, `<rocketmq/...>`, compiles too.
    std::fs::write(
        apps.join("angle.c"),
        "#include <rocketmq/CProducer.h>\nint main(void) { return GetLatestErrorMessage() == 0; }\n",
    )
    .expect("angle.c");
    let out = run(
        Command::new("cc")
            .arg("angle.c")
            .args(["-o", "angle"])
            .args(pkg_config(&prefix, &["--cflags", "--libs"]))
            .current_dir(&apps),
        Duration::from_secs(60),
    );
    check("cc angle.c", &out);

    let ns = namesrv();
    let topic = unique("Installed");
    create_topic(&topic, 4);
    let count = 2;
    let out = run(
        Command::new(&producer)
            .args([&ns, &topic, &count.to_string()])
            .env("LD_LIBRARY_PATH", &libdir),
        Duration::from_secs(120),
    );
    check("installed producer", &out);
    let mut sent = acked(&stdout(&out));
    assert_eq!(sent.len(), 6 * count + 3, "{}", stdout(&out));

    // The PyPI client finds the installed library by name through LD_LIBRARY_PATH.
    let out = run(
        Command::new(venv().join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/drive_client.py"))
            .args(["produce", &ns, &topic, "3"])
            .env("LD_LIBRARY_PATH", &libdir)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        Duration::from_secs(120),
    );
    check("drive_client.py produce", &out);
    let py = stdout(&out);
    assert_eq!(lines_after(&py, "LIB "), ["librocketmq.so"], "{py}");
    assert_eq!(
        lines_after(&py, "MAPPED "),
        [real.display().to_string()],
        "the installed file is the one loaded: {py}"
    );
    let py_sent: Vec<String> = lines_after(&py, "SENT ")
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(py_sent.len(), 3, "{py}");
    sent.extend(py_sent);

    // Everything comes back to the installed consumer: + 2 oneway of producer.c and 1 of
    // the Python producer.
    let expected = (sent.len() + 3).to_string();
    let out = run(
        Command::new(&consumer)
            .args([&ns, &topic, &unique("installed_c"), &expected, "120"])
            .env("LD_LIBRARY_PATH", &libdir),
        Duration::from_secs(150),
    );
    check("installed push_consumer", &out);
    let got: HashSet<String> = lines_after(&stdout(&out), "GOT ")
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(
        got.is_superset(&sent),
        "missed {:?}",
        sent.difference(&got).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
