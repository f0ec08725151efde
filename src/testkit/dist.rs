//! The per-version jar cache: `<work_dir>/dist/<version>/lib`, filled once by Maven
//! from the released `rocketmq-namesrv` and `rocketmq-broker` artifacts.
//!
//! Several test binaries may start at once, so filling is guarded by a lock file
//! (created with `create_new`, holding the owner's pid so a crashed owner's lock can be
//! broken) and the jars are copied into a private directory that is renamed into place
//! only after it is complete; `lib/.complete` marks a finished cache.

use std::ffi::OsString;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use log::{info, warn};

use super::TestkitError;

const MARKER: &str = ".complete";
/// How long we wait for another process that is filling the same cache.
const LOCK_WAIT: Duration = Duration::from_secs(20 * 60);

/// A ready jar cache for one version.
pub(crate) struct Dist {
    pub(crate) classpath: OsString,
}

/// Makes sure the jars of `version` are in the cache and returns the classpath.
pub(crate) fn ensure(work_dir: &Path, version: &str) -> Result<Dist, TestkitError> {
    let dir = work_dir.join("dist").join(version);
    let lib = dir.join("lib");
    if !lib.join(MARKER).exists() {
        fs::create_dir_all(&dir).map_err(|e| TestkitError::io("create dist dir", &dir, e))?;
        let _lock = DirLock::acquire(&dir.join(".lock"))?;
        // Another process may have finished while we waited for the lock.
        if !lib.join(MARKER).exists() {
            fetch(&dir, &lib, version)?;
        }
    }
    Ok(Dist {
        classpath: classpath(&lib)?,
    })
}

fn pom(version: &str) -> String {
    format!(
        r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.rocketmq-testkit</groupId>
  <artifactId>rocketmq-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-namesrv</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-broker</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"#
    )
}

fn fetch(dir: &Path, lib: &Path, version: &str) -> Result<(), TestkitError> {
    // Leftovers of a run that died half-way.
    remove_if_exists(lib)?;
    let staging = dir.join(format!("lib.partial-{}", std::process::id()));
    remove_if_exists(&staging)?;

    let pom_path = dir.join("pom.xml");
    fs::write(&pom_path, pom(version)).map_err(|e| TestkitError::io("write pom", &pom_path, e))?;

    let out_arg = format!("-DoutputDirectory={}", staging.display());
    let args = ["-q", "-B", "dependency:copy-dependencies", out_arg.as_str()];
    let command = format!("(cd {} && mvn {})", dir.display(), args.join(" "));
    info!("fetching RocketMQ {version} jars: {command}");
    let started = Instant::now();
    let output = Command::new("mvn")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestkitError::io("run mvn (is Maven installed and on PATH?)", dir, e))?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        let _ = fs::remove_dir_all(&staging);
        return Err(TestkitError::Maven {
            command,
            status: output.status.to_string(),
            output_tail: maven_tail(&text, version),
        });
    }
    for artifact in ["rocketmq-namesrv", "rocketmq-broker"] {
        let jar = staging.join(format!("{artifact}-{version}.jar"));
        if !jar.is_file() {
            return Err(TestkitError::Maven {
                command,
                status: output.status.to_string(),
                output_tail: format!("maven succeeded but {} is missing", jar.display()),
            });
        }
    }
    let marker = staging.join(MARKER);
    fs::write(&marker, version).map_err(|e| TestkitError::io("write marker", &marker, e))?;
    fs::rename(&staging, lib).map_err(|e| TestkitError::io("move jars into place", lib, e))?;
    info!(
        "fetched RocketMQ {version} jars in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The last 30 lines of Maven's output, with a hint for the common "no such release".
fn maven_tail(text: &str, version: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut tail = lines[lines.len().saturating_sub(30)..].join("\n");
    if text.contains("Could not find artifact") || text.contains("was not found in") {
        tail.push_str(&format!(
            "\nhint: RocketMQ {version} server artifacts (rocketmq-namesrv/rocketmq-broker) \
             are not on Maven Central; not every release published them (e.g. 4.9.6 and \
             4.9.8 did not; 4.9.7 did)"
        ));
    }
    tail
}

fn classpath(lib: &Path) -> Result<OsString, TestkitError> {
    let entries = fs::read_dir(lib).map_err(|e| TestkitError::io("list jars", lib, e))?;
    let mut jars: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| TestkitError::io("list jars", lib, e))?;
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "jar") {
            jars.push(path);
        }
    }
    // A stable order keeps class resolution the same from run to run.
    jars.sort();
    std::env::join_paths(&jars)
        .map_err(|e| TestkitError::io("build classpath", lib, std::io::Error::other(e)))
}

fn remove_if_exists(path: &Path) -> Result<(), TestkitError> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(TestkitError::io("remove stale directory", path, e)),
    }
}

/// An exclusive lock held as long as the value lives: a file created with
/// `create_new` holding our pid. A lock whose owner no longer runs is broken.
struct DirLock {
    path: PathBuf,
}

impl DirLock {
    fn acquire(path: &Path) -> Result<Self, TestkitError> {
        let started = Instant::now();
        let mut warned = false;
        loop {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
            {
                Ok(mut file) => {
                    let pid = std::process::id().to_string();
                    file.write_all(pid.as_bytes())
                        .map_err(|e| TestkitError::io("write lock file", path, e))?;
                    return Ok(DirLock {
                        path: path.to_path_buf(),
                    });
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(TestkitError::io("create lock file", path, e)),
            }
            let owner = fs::read_to_string(path).unwrap_or_default();
            match owner.trim().parse::<u32>() {
                Ok(pid) if !super::work_dir::pid_alive(pid) => {
                    warn!("breaking stale lock {} of dead pid {pid}", path.display());
                    let _ = fs::remove_file(path);
                    continue;
                }
                Ok(_) => {}
                // Empty: the owner is between create and write, or died right there.
                Err(_) => {
                    let age = fs::metadata(path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .unwrap_or_default();
                    if age > Duration::from_secs(10) {
                        warn!("breaking empty stale lock {}", path.display());
                        let _ = fs::remove_file(path);
                        continue;
                    }
                }
            }
            if started.elapsed() > LOCK_WAIT {
                return Err(TestkitError::Timeout {
                    what: format!("lock {} (held by pid {})", path.display(), owner.trim()),
                    waited: LOCK_WAIT,
                    log_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
                    log_tail: String::new(),
                });
            }
            if !warned {
                info!(
                    "waiting for pid {} to finish fetching jars ({})",
                    owner.trim(),
                    path.display()
                );
                warned = true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}
