//! `ffi/install.sh` into a scratch prefix, then C programs outside the repository built the
//! two ways a C user would: with `pkg-config --cflags --libs rocketmq-blocking` (shared and
//! static) and with CMake's `find_package(rocketmq-blocking)`. Each checks that the header's
//! version macros and the library's `rmq_version()` agree, and makes and frees a producer
//! builder, so the header and the library are the same ABI.

use std::path::{Path, PathBuf};
use std::process::Command;

const APP: &str = r#"#include <stdio.h>
#include <string.h>
#include <rocketmq_blocking.h>

int main(void) {
    char header[32];
    snprintf(header, sizeof header, "%d.%d.%d", RMQ_VERSION_MAJOR, RMQ_VERSION_MINOR,
             RMQ_VERSION_PATCH);
    if (strcmp(header, rmq_version()) != 0) {
        fprintf(stderr, "header %s, library %s\n", header, rmq_version());
        return 1;
    }
    rmq_producer_builder *b = NULL;
    if (rmq_producer_builder_new("install_check", strlen("install_check"), &b) != RMQ_OK) {
        return 2;
    }
    rmq_producer_builder_free(b);
    printf("rocketmq-blocking %s (%d)\n", rmq_version(), RMQ_VERSION_NUMBER);
    return 0;
}
"#;

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e} (is it installed? .ci/run installs it)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh prefix with the debug build of the library installed into it.
fn installed() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let scratch =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let prefix = scratch.join("prefix");
    // The debug build `cargo build` left (as `.ci/run` does first); else one of its own,
    // in a target directory of its own: the outer cargo holds the shared one's lock.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = target.parent().expect("the target directory");
    let built = ["librocketmq_blocking.so", "librocketmq_blocking.a"]
        .iter()
        .all(|f| target.join("debug").join(f).exists());
    let mut install = Command::new("bash");
    install
        .arg(root.join("ffi/install.sh"))
        .args(["--profile", "debug", "--prefix"])
        .arg(&prefix)
        .current_dir(&root);
    if built {
        install.arg("--no-build").env("CARGO_TARGET_DIR", target);
    } else {
        install.env("CARGO_TARGET_DIR", target.join("install-build"));
    }
    run(&mut install);
    prefix
}

fn app_dir(prefix: &Path, name: &str) -> PathBuf {
    let dir = prefix.parent().expect("scratch").join(name);
    std::fs::create_dir_all(&dir).expect("app directory");
    std::fs::write(dir.join("app.c"), APP).expect("app.c");
    dir
}

fn check_runs(exe: &Path, prefix: &Path) {
    let out = run(Command::new(exe).env("LD_LIBRARY_PATH", prefix.join("lib")));
    assert!(
        out.starts_with(&format!("rocketmq-blocking {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
}

#[test]
fn a_c_program_outside_the_repository_builds_with_pkg_config_and_with_cmake() {
    let prefix = installed();
    let lib = prefix.join("lib");
    let soname = format!(
        "librocketmq_blocking.so.{}.{}",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR")
    );
    assert!(lib.join(&soname).exists(), "no {soname} link");
    let dynamic = run(Command::new("readelf")
        .arg("-d")
        .arg(lib.join("librocketmq_blocking.so")));
    assert!(dynamic.contains(&format!("[{soname}]")), "{dynamic}");

    // pkg-config, shared and static.
    let dir = app_dir(&prefix, "pkg-config");
    let pc = |args: &[&str]| -> Vec<String> {
        run(Command::new("pkg-config")
            .args(args)
            .arg("rocketmq-blocking")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig")))
        .split_whitespace()
        .map(String::from)
        .collect()
    };
    let version = pc(&["--modversion"]);
    assert_eq!(version, [env!("CARGO_PKG_VERSION")]);
    let shared = dir.join("app-shared");
    run(Command::new("cc")
        .arg(dir.join("app.c"))
        .arg("-o")
        .arg(&shared)
        .args(pc(&["--cflags", "--libs"])));
    let needed = run(Command::new("readelf").arg("-d").arg(&shared));
    assert!(needed.contains(&format!("[{soname}]")), "{needed}");
    check_runs(&shared, &prefix);
    let fixed = dir.join("app-static");
    run(Command::new("cc")
        .arg(dir.join("app.c"))
        .arg("-o")
        .arg(&fixed)
        .args(pc(&["--cflags"]))
        .arg(lib.join("librocketmq_blocking.a"))
        .args(
            pc(&["--static", "--libs-only-other", "--libs-only-l"])
                .into_iter()
                .filter(|f| f != "-lrocketmq_blocking"),
        ));
    let needed = run(Command::new("readelf").arg("-d").arg(&fixed));
    assert!(
        !needed.contains("librocketmq_blocking"),
        "linked statically: {needed}"
    );
    check_runs(&fixed, &prefix);

    // CMake's find_package.
    let dir = app_dir(&prefix, "cmake");
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\n\
         find_package(rocketmq-blocking 0.1 REQUIRED)\n\
         add_executable(app app.c)\n\
         target_link_libraries(app rocketmq-blocking::rocketmq-blocking)\n",
    )
    .expect("CMakeLists.txt");
    let build = dir.join("build");
    run(Command::new("cmake")
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())));
    run(Command::new("cmake").arg("--build").arg(&build));
    check_runs(&build.join("app"), &prefix);
    // A request for a version this is not compatible with fails to configure.
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\n\
         find_package(rocketmq-blocking 0.2 REQUIRED)\n",
    )
    .expect("CMakeLists.txt");
    let refused = Command::new("cmake")
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(dir.join("build-0.2"))
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .output()
        .expect("cmake");
    assert!(!refused.status.success(), "0.1 satisfied a request for 0.2");
}
