//! The `rmq` tool against a cluster that enforces ACL: keys from the environment sign
//! every subcommand; without them the broker refuses; a secret never reaches its output.

use std::process::{Command, Output};

use crate::env::*;

fn rmq(env: &Env, keys: Option<(&str, &str)>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmq"));
    cmd.args(args)
        .env("NAMESRV_ADDR", &env.namesrv)
        .env("RUST_LOG", "trace")
        .env_remove("RMQ_ACCESS_KEY")
        .env_remove("RMQ_SECRET_KEY");
    if let Some((ak, sk)) = keys {
        cmd.env("RMQ_ACCESS_KEY", ak).env("RMQ_SECRET_KEY", sk);
    }
    let out = cmd.output().expect("rmq runs");
    // Trace-level logs, results and errors: no secret, whatever the command.
    for secret in SECRETS {
        assert!(
            !text(&out).contains(secret),
            "rmq {args:?} printed a secret"
        );
    }
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn the_cli_signs_every_subcommand_with_keys_from_the_environment(env: &Env) {
    let topic = unique("AclCliTopic");
    let out = rmq(
        env,
        Some(ADMIN),
        &["topic", "create", &topic, "--queues", "2"],
    );
    assert!(out.status.success(), "topic create: {}", text(&out));
    let out = rmq(env, Some(ADMIN), &["route", &topic]);
    assert!(out.status.success(), "route: {}", text(&out));
    let out = rmq(
        env,
        Some(APP),
        &["send", T_APP, "--body", "from the cli", "--count", "3"],
    );
    assert!(out.status.success(), "send: {}", text(&out));
    let out = rmq(
        env,
        Some(APP),
        &[
            "consume",
            T_APP,
            "--group",
            G_CLI,
            "--from",
            "first",
            "--count",
            "3",
            "--timeout",
            "60",
        ],
    );
    assert!(out.status.success(), "consume: {}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(r#""consumed":3"#),
        "{}",
        text(&out)
    );

    let out = rmq(env, None, &["send", T_APP, "--body", "unsigned"]);
    assert!(
        !out.status.success(),
        "an unsigned send succeeded: {}",
        text(&out)
    );
    let out = rmq(
        env,
        Some((APP.0, WRONG_SECRET)),
        &["send", T_APP, "--body", "wrong"],
    );
    assert!(
        !out.status.success(),
        "a wrongly signed send succeeded: {}",
        text(&out)
    );
    let refused = text(&out);
    eprintln!(
        "{} rmq send with a wrong secret: {}",
        env.version,
        refused.lines().last().unwrap_or("")
    );
    // Nor does --help show the secret from the environment.
    let help = rmq(env, Some(APP), &["send", "--help"]);
    assert!(text(&help).contains("--secret-key"), "{}", text(&help));
    assert!(!text(&help).contains(APP.1), "--help shows the secret");

    let out = rmq(
        env,
        None,
        &["--access-key", "x", "send", T_APP, "--body", "b"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--access-key needs --secret-key"),
        "{}",
        text(&out)
    );
}

#[test]
fn the_cli_signs_every_subcommand_with_keys_from_the_environment_v5() {
    the_cli_signs_every_subcommand_with_keys_from_the_environment(Env::v5());
}
