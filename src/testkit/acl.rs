//! Clusters that enforce ACL: the accounts a test asks for, and how each RocketMQ line
//! is told about them.
//!
//! - 4.x (ACL 1.0): `aclEnable=true` in `broker.conf` and the accounts in
//!   `$ROCKETMQ_HOME/conf/plain_acl.yml` (the file `PlainPermissionManager` reads), written
//!   before the brokers start. Name servers check nothing.
//! - 5.3+ (ACL 2.0, which no longer reads `plain_acl.yml`): authentication and
//!   authorization on in `broker.conf` with the default providers, the first admin
//!   account as `initAuthenticationUser` (a super user created at first start) and as
//!   `innerClientAuthenticationCredentials` (what the broker signs its own requests with).
//!   The other accounts and their grants are created once the cluster is up with the
//!   official admin tool (`mqadmin createUser`, `createAcl`), which signs as the admin
//!   through `$ROCKETMQ_HOME/conf/tools.yml`. Name servers check nothing here either.

use std::ffi::OsString;
use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use log::info;

use super::{config, TestkitError};

/// What an account may do with a topic or group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclPerm {
    /// Send only (4.x `PUB`; 5.x action `Pub`).
    Pub,
    /// Consume only (4.x `SUB`; 5.x action `Sub`).
    Sub,
    /// Both (4.x `PUB|SUB`; 5.x actions `Pub,Sub`).
    PubSub,
    /// Nothing (4.x `DENY`; 5.x a `Deny` decision for `Pub,Sub`).
    Deny,
}

impl AclPerm {
    fn plain(self) -> &'static str {
        match self {
            AclPerm::Pub => "PUB",
            AclPerm::Sub => "SUB",
            AclPerm::PubSub => "PUB|SUB",
            AclPerm::Deny => "DENY",
        }
    }

    /// (actions, decision) of a 5.x ACL entry.
    fn v2(self) -> (&'static str, &'static str) {
        match self {
            AclPerm::Pub => ("Pub", "Allow"),
            AclPerm::Sub => ("Sub", "Allow"),
            AclPerm::PubSub => ("Pub,Sub", "Allow"),
            AclPerm::Deny => ("Pub,Sub", "Deny"),
        }
    }
}

/// One account of a cluster that enforces ACL: an admin (may do anything) or a user
/// with grants on named topics and groups and nothing else.
#[derive(Clone)]
pub struct AclAccount {
    pub(crate) access_key: String,
    pub(crate) secret_key: String,
    pub(crate) admin: bool,
    topics: Vec<(String, AclPerm)>,
    groups: Vec<(String, AclPerm)>,
}

impl fmt::Debug for AclAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclAccount")
            .field("access_key", &self.access_key)
            .field("secret_key", &format_args!("<redacted>"))
            .field("admin", &self.admin)
            .field("topics", &self.topics)
            .field("groups", &self.groups)
            .finish()
    }
}

impl AclAccount {
    /// An account that may do anything (4.x `admin: true`; 5.x a `Super` user).
    pub fn admin(access_key: &str, secret_key: &str) -> Self {
        AclAccount {
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            admin: true,
            topics: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// An account that may do only what [`topic`](Self::topic) and
    /// [`group`](Self::group) grant (4.x default permissions `DENY`; 5.x a `Normal` user).
    pub fn user(access_key: &str, secret_key: &str) -> Self {
        AclAccount {
            admin: false,
            ..AclAccount::admin(access_key, secret_key)
        }
    }

    /// Grants `perm` on `topic`.
    pub fn topic(mut self, topic: &str, perm: AclPerm) -> Self {
        self.topics.push((topic.to_string(), perm));
        self
    }

    /// Grants `perm` on consumer group `group` (4.x checks it on the group's retry topic;
    /// consuming needs `Sub` on the group and on the topic).
    pub fn group(mut self, group: &str, perm: AclPerm) -> Self {
        self.groups.push((group.to_string(), perm));
        self
    }

    /// The account's access key.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The account's secret key.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }
}

/// Whether `version` has ACL 2.0 (5.3 and later) rather than `plain_acl.yml`.
pub(crate) fn is_v2(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    major > 5 || major == 5 && minor >= 3
}

/// Checks the accounts: the first one must be an admin (it runs the cluster's own
/// requests), keys must be plain words for the files they go into.
pub(crate) fn validate(accounts: &[AclAccount]) -> Result<(), TestkitError> {
    if accounts.first().is_some_and(|a| !a.admin) {
        return Err(TestkitError::InvalidArgument(
            "the first ACL account must be an admin".into(),
        ));
    }
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '%'))
    };
    for a in accounts {
        let names = a.topics.iter().chain(&a.groups).map(|(n, _)| n.as_str());
        if ![a.access_key.as_str(), a.secret_key.as_str()]
            .into_iter()
            .chain(names)
            .all(plain)
        {
            return Err(TestkitError::InvalidArgument(format!(
                "ACL account {:?}: keys and names must be letters, digits, '_', '-', '.', '%'",
                a.access_key
            )));
        }
    }
    Ok(())
}

/// The `broker.conf` entries that turn ACL on for `version`, signed as `admin`.
pub(crate) fn broker_entries(version: &str, admin: &AclAccount) -> Vec<(String, String)> {
    let e = |k: &str, v: String| (k.to_string(), v);
    if !is_v2(version) {
        return vec![e("aclEnable", "true".into())];
    }
    let provider =
        |kind: &str, name: &str| format!("org.apache.rocketmq.auth.{kind}.provider.{name}");
    vec![
        e("authenticationEnabled", "true".into()),
        e(
            "authenticationProvider",
            provider("authentication", "DefaultAuthenticationProvider"),
        ),
        e(
            "authenticationMetadataProvider",
            provider("authentication", "LocalAuthenticationMetadataProvider"),
        ),
        e("authorizationEnabled", "true".into()),
        e(
            "authorizationProvider",
            provider("authorization", "DefaultAuthorizationProvider"),
        ),
        e(
            "authorizationMetadataProvider",
            provider("authorization", "LocalAuthorizationMetadataProvider"),
        ),
        e(
            "initAuthenticationUser",
            format!(
                r#"{{"username":"{}","password":"{}"}}"#,
                admin.access_key, admin.secret_key
            ),
        ),
        e(
            "innerClientAuthenticationCredentials",
            format!(
                r#"{{"accessKey":"{}","secretKey":"{}"}}"#,
                admin.access_key, admin.secret_key
            ),
        ),
    ]
}

/// `plain_acl.yml` for 4.x: no global white list (a listed address would skip the
/// signature check), every user denied what it is not granted.
pub(crate) fn plain_acl_yml(accounts: &[AclAccount]) -> String {
    let mut s =
        String::from("# written by rocketmq-testkit\nglobalWhiteRemoteAddresses: []\naccounts:\n");
    for a in accounts {
        s.push_str(&format!(
            "  - accessKey: {}\n    secretKey: {}\n    whiteRemoteAddress:\n    admin: {}\n",
            a.access_key, a.secret_key, a.admin
        ));
        if a.admin {
            continue;
        }
        s.push_str("    defaultTopicPerm: DENY\n    defaultGroupPerm: DENY\n");
        for (key, list) in [("topicPerms", &a.topics), ("groupPerms", &a.groups)] {
            s.push_str(&format!("    {key}:\n"));
            for (name, perm) in list {
                s.push_str(&format!("      - {name}={}\n", perm.plain()));
            }
        }
    }
    s
}

/// Writes `plain_acl.yml` (4.x) or `tools.yml` (5.x: the admin tool's credentials) into
/// `<home>/conf`.
pub(crate) fn write_files(
    home: &Path,
    version: &str,
    accounts: &[AclAccount],
) -> Result<(), TestkitError> {
    let conf = home.join("conf");
    match accounts.first() {
        Some(admin) if is_v2(version) => config::write(
            &conf.join("tools.yml"),
            &format!(
                "accessKey: {}\nsecretKey: {}\n",
                admin.access_key, admin.secret_key
            ),
        ),
        Some(_) => config::write(&conf.join("plain_acl.yml"), &plain_acl_yml(accounts)),
        None => Ok(()),
    }
}

/// What the admin tool needs to run against a cluster.
pub(crate) struct Tool<'a> {
    pub java: &'a Path,
    pub classpath: &'a OsString,
    pub home: &'a Path,
    pub run_dir: &'a Path,
    pub log_dir: &'a Path,
    pub namesrv: String,
    pub timeout: Duration,
}

/// Runs `MQAdminStartup` once per line of its standard input (arguments separated by
/// tabs) in one JVM: a JVM start costs seconds on a loaded machine, and the secrets stay
/// out of the process list. Java runs it as a source file (JDK 11+).
const ADMIN_BATCH_JAVA: &str = r#"// written by rocketmq-testkit
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class AdminBatch {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.isEmpty()) {
                MQAdminStartup.main0(line.split("\t"), null);
            }
        }
        System.exit(0);
    }
}
"#;

/// Creates the users (every account but the first admin) and their grants on a 5.x
/// cluster with the admin tool's `createUser` and `createAcl`, in one JVM.
pub(crate) fn create_users(tool: &Tool<'_>, accounts: &[AclAccount]) -> Result<(), TestkitError> {
    let started = Instant::now();
    let mut commands: Vec<Vec<String>> = Vec::new();
    let cluster = ["-c", "DefaultCluster", "-n", &tool.namesrv].map(String::from);
    for a in accounts.iter().skip(1) {
        let kind = if a.admin { "Super" } else { "Normal" };
        let mut cmd: Vec<String> = [
            "createUser",
            "-u",
            &a.access_key,
            "-p",
            &a.secret_key,
            "-t",
            kind,
        ]
        .map(String::from)
        .to_vec();
        cmd.extend(cluster.iter().cloned());
        commands.push(cmd);
        // One entry per permission: its resources together.
        for perm in [AclPerm::Pub, AclPerm::Sub, AclPerm::PubSub, AclPerm::Deny] {
            let topics = a
                .topics
                .iter()
                .filter(|(_, p)| *p == perm)
                .map(|(n, _)| format!("Topic:{n}"));
            let groups = a
                .groups
                .iter()
                .filter(|(_, p)| *p == perm)
                .map(|(n, _)| format!("Group:{n}"));
            let list = topics.chain(groups).collect::<Vec<_>>().join(",");
            if list.is_empty() {
                continue;
            }
            let (actions, decision) = perm.v2();
            let subject = format!("User:{}", a.access_key);
            let mut cmd: Vec<String> = [
                "createAcl",
                "-s",
                &subject,
                "-r",
                &list,
                "-a",
                actions,
                "-d",
                decision,
            ]
            .map(String::from)
            .to_vec();
            cmd.extend(cluster.iter().cloned());
            commands.push(cmd);
        }
    }
    if commands.is_empty() {
        return Ok(());
    }
    run_tool(tool, &commands)?;
    info!(
        "created {} ACL users with {} mqadmin commands in {:.1}s",
        accounts.len() - 1,
        commands.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs the admin-tool `commands` in one JVM; each must print "success" within the
/// timeout.
fn run_tool(tool: &Tool<'_>, commands: &[Vec<String>]) -> Result<(), TestkitError> {
    let source = tool.run_dir.join("AdminBatch.java");
    config::write(&source, ADMIN_BATCH_JAVA)?;
    let log_file = tool.log_dir.join("mqadmin.log");
    let mut cmd = Command::new(tool.java);
    cmd.args(config::jvm_options(
        "-Xms64m",
        "-Xmx256m",
        tool.run_dir,
        tool.home,
        &log_file,
    ))
    .arg({
        let mut s = OsString::from("-Drocketmq.home.dir=");
        s.push(tool.home);
        s
    })
    .arg("-cp")
    .arg(tool.classpath)
    .arg(&source)
    .env("ROCKETMQ_HOME", tool.home)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // Arguments hold secrets: errors name the subcommands only.
    let what = format!(
        "mqadmin {}",
        commands
            .iter()
            .filter_map(|c| c.first().map(String::as_str))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut child = cmd
        .spawn()
        .map_err(|e| TestkitError::io(format!("run {what}"), tool.java, e))?;
    if let Some(mut stdin) = child.stdin.take() {
        let mut input = String::new();
        for c in commands {
            input.push_str(&c.join("\t"));
            input.push('\n');
        }
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| TestkitError::io(format!("run {what}"), tool.java, e))?;
    }
    let output = wait_with_timeout(child, tool.timeout)
        .map_err(|e| TestkitError::io(format!("run {what}"), tool.java, e))?;
    let Some(output) = output else {
        return Err(TestkitError::Timeout {
            what,
            waited: tool.timeout,
            log_dir: tool.log_dir.to_path_buf(),
            log_tail: String::new(),
        });
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let successes = stdout.lines().filter(|l| l.contains("success")).count();
    if output.status.success() && successes >= commands.len() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| !l.contains("|-INFO") && !l.contains("logback"))
        .map(str::trim_end)
        .collect::<Vec<_>>();
    let tail = tail[tail.len().saturating_sub(20)..].join("\n");
    Err(TestkitError::Tool {
        command: what,
        status: format!(
            "{}, {successes} of {} succeeded",
            output.status,
            commands.len()
        ),
        output_tail: tail,
    })
}

/// Waits for `child` up to `timeout`; kills it (and returns `None`) past that.
fn wait_with_timeout(
    mut child: std::process::Child,
    timeout: Duration,
) -> std::io::Result<Option<std::process::Output>> {
    // Output is small; reading it on threads keeps a full pipe from blocking the tool.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    );
    Ok(status.map(|status| std::process::Output {
        status,
        stdout,
        stderr,
    }))
}

/// Reads `pipe` to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_5_3_use_acl_2() {
        assert!(!is_v2("4.9.7"));
        assert!(!is_v2("5.2.0"));
        assert!(is_v2("5.3.0"));
        assert!(is_v2("5.3.3"));
        assert!(is_v2("6.0.0"));
    }

    #[test]
    fn plain_acl_lists_grants_and_denies_the_rest() {
        let yml = plain_acl_yml(&[
            AclAccount::admin("root", "rootpw"),
            AclAccount::user("limited", "pw")
                .topic("T1", AclPerm::Pub)
                .group("G1", AclPerm::Sub),
        ]);
        assert!(yml.contains("globalWhiteRemoteAddresses: []\n"), "{yml}");
        assert!(yml.contains("  - accessKey: root\n    secretKey: rootpw\n    whiteRemoteAddress:\n    admin: true\n"), "{yml}");
        assert!(yml.contains("    admin: false\n    defaultTopicPerm: DENY\n    defaultGroupPerm: DENY\n    topicPerms:\n      - T1=PUB\n    groupPerms:\n      - G1=SUB\n"), "{yml}");
    }

    #[test]
    fn the_first_account_must_be_an_admin_and_keys_plain() {
        assert!(validate(&[AclAccount::user("u", "p")]).is_err());
        assert!(validate(&[AclAccount::admin("a", "p w")]).is_err());
        assert!(validate(&[
            AclAccount::admin("a", "p"),
            AclAccount::user("u", "p").topic("x:y", AclPerm::Pub)
        ])
        .is_err());
        assert!(validate(&[AclAccount::admin("a", "p"), AclAccount::user("u", "p")]).is_ok());
    }

    #[test]
    fn debug_hides_the_secret() {
        let text = format!("{:?}", AclAccount::admin("root", "rootpw-secret"));
        assert!(
            text.contains("root") && !text.contains("rootpw-secret"),
            "{text}"
        );
    }
}
