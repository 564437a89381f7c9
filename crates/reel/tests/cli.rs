//! `reel check`, `reel plan` and start-up refusal of a broken config.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

fn repo_config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// `reel check` accepts every shipped config (given the variables it names); a build without
/// the `demo` feature rejects (with the key's position) those that enable the demo origin,
/// and `serve` refuses them.
#[test]
fn check_accepts_every_shipped_config() {
    let mut n = 0;
    for e in std::fs::read_dir(repo_config_dir()).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let cfg = reel_config::Config::load(&p).unwrap();
        let wants_demo = cfg.demo_origin.enabled;
        // The environment the config names is there, as the unit's EnvironmentFile gives it.
        let mut check = Command::new(BIN);
        check.arg("check").arg("--config").arg(&p);
        if !cfg.admin.token_env.is_empty() {
            check.env(&cfg.admin.token_env, "a-token");
        }
        let out = check.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if wants_demo && !cfg!(feature = "demo") {
            assert_eq!(out.status.code(), Some(64), "{}: {err}", p.display());
            let at = format!("{}:", p.display());
            assert!(
                err.lines().any(|l| l.starts_with(&at)
                    && l.contains("demo_origin.enabled")
                    && l.contains("feature `demo`")),
                "{err}"
            );
            let out = Command::new(BIN).arg("serve").arg("--config").arg(&p).output().unwrap();
            assert_eq!(out.status.code(), Some(64));
            assert!(String::from_utf8_lossy(&out.stderr).contains("feature `demo`"));
        } else {
            assert_eq!(out.status.code(), Some(0), "{}: {err}", p.display());
            assert!(String::from_utf8_lossy(&out.stdout).contains("is valid"));
        }
        n += 1;
    }
    assert!(n >= 2, "config/ has reel.toml and production.toml");
}

/// A config with three independent problems on known lines.
const BROKEN: &str = r#"[server]
shutdown_timeout = "10s"

[cores]
workers = [0, 0]

[health]
max_cpu_percent = 50
resume_cpu_percent = 60

[[listener]]
name = "http"
address = "127.0.0.1:0"

[store]
path = "store"
size = "1MiB"
volume_size = "1MiB"
"#;

#[test]
fn check_lists_every_problem_with_file_line_column_and_exits_64() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("broken.toml");
    std::fs::write(&p, BROKEN).unwrap();
    let out = Command::new(BIN).arg("check").arg("--config").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    let file = p.display().to_string();
    let located: Vec<&str> = err
        .lines()
        .filter(|l| {
            l.strip_prefix(&file)
                .and_then(|r| r.strip_prefix(':'))
                .and_then(|r| r.split_once(':'))
                .is_some_and(|(line, rest)| {
                    line.parse::<u32>().is_ok()
                        && rest.split_once(':').is_some_and(|(c, _)| c.parse::<u32>().is_ok())
                })
        })
        .collect();
    assert!(located.len() >= 3, "every problem with file:line:column:\n{err}");
    for (line, key) in [(5, "cores.workers"), (9, "health.resume_cpu_percent"), (17, "store.size")]
    {
        assert!(
            located.iter().any(|l| l.starts_with(&format!("{file}:{line}:")) && l.contains(key)),
            "{key} at line {line}:\n{err}"
        );
    }

    // A value of the wrong type is reported at its position too.
    std::fs::write(&p, "[http]\nidle_timeout = \"5 fortnights\"\n").unwrap();
    let out = Command::new(BIN).arg("check").arg("--config").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{file}:2:16: http.idle_timeout: ")), "{err}");
    for bad in ["\"soon\"", "\"-1s\"", "\"99999999999999999999s\"", "1"] {
        std::fs::write(&p, format!("[http]\npark_after = {bad}\n")).unwrap();
        let out = Command::new(BIN).arg("check").arg("--config").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("{file}:2:14: http.park_after: ")), "{bad}: {err}");
    }
    std::fs::write(&p, BROKEN).unwrap();

    // `serve` refuses the same file with the same exit code (systemd does not restart it).
    let out = Command::new(BIN).arg("serve").arg("--config").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{file}:5:")));
}

#[test]
fn plan_prints_a_table_and_shell_assignments() {
    let cfg = repo_config_dir().join("reel.toml");
    let out = Command::new(BIN).arg("plan").arg("--config").arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let rows = text
        .lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<usize>().is_ok()))
        .count();
    assert!(rows >= cpus.min(1), "a row per CPU:\n{text}");
    assert!(text.contains("worker"), "{text}");

    let out =
        Command::new(BIN).args(["plan", "--format", "env", "--config"]).arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let env = String::from_utf8_lossy(&out.stdout);
    for var in ["NICS=", "IRQ_CPUS=", "WORKER_CPUS=", "NIC_IRQS="] {
        assert!(env.lines().any(|l| l.starts_with(var)), "{var} in\n{env}");
    }
}

/// `admin.token_env` on line 7, its value at column 13.
const TOKEN_ENV: &str = r#"[[listener]]
name = "http"
address = "127.0.0.1:0"

[admin]
address = "127.0.0.1:0"
token_env = "REEL_TEST_CHECK_TOKEN"

[store]
path = "store"
size = "2MiB"
volume_size = "1MiB"
"#;

/// `reel check` reports a `token_env` naming an unset variable like any other problem (as
/// `serve` refuses it), at its position.
#[test]
fn check_flags_an_unset_token_env_at_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("token.toml");
    std::fs::write(&p, TOKEN_ENV).unwrap();
    let at = format!("{}:7:13: admin.token_env: ", p.display());
    for sub in ["check", "serve"] {
        let out = Command::new(BIN)
            .arg(sub)
            .arg("--config")
            .arg(&p)
            .current_dir(dir.path())
            .env_remove("REEL_TEST_CHECK_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{sub}: {err}");
        assert!(
            err.lines().any(|l| l.starts_with(&at) && l.contains("REEL_TEST_CHECK_TOKEN")),
            "{sub}: the problem at {at}\n{err}"
        );
    }
    let out = Command::new(BIN)
        .arg("check")
        .arg("--config")
        .arg(&p)
        .env("REEL_TEST_CHECK_TOKEN", "s3cret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
