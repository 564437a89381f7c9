//! `reel check`, `reel plan` and start-up refusal of a broken config.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

fn repo_config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// Keys whose check asks this host rather than the file: a config written for another
/// machine (`production.toml`: 32 CPUs, a raised descriptor limit, its disks under `/srv`)
/// may be refused here at these keys only (and a disk's `path` and `size`).
const HOST_KEYS: [&str; 5] =
    ["cores.workers", "cores", "http.reserved_fds", "store.path", "store.size"];

/// Whether a problem line names a key that asks this host, or what this process may do
/// there (a user other than the unit's: no `CAP_NET_BIND_SERVICE` for port 80, no right to
/// write `/var/log`).
fn host_key(line: &str) -> bool {
    HOST_KEYS.iter().any(|k| line.contains(&format!(": {k}: ")))
        || (line.contains(": store.disk[")
            && (line.contains("].path: ") || line.contains("].size: ")))
        || line.contains("lacks CAP_NET_BIND_SERVICE")
        || (line.contains(": access_log.path: ") && line.contains("not writable by this user"))
}

/// `reel check` accepts every shipped config (given the variables it names), short of what
/// this host lacks ([`HOST_KEYS`]); `reel.toml` runs here as it is. A build without the
/// `demo` feature rejects (with the key's position) those that enable the demo origin, and
/// `serve` refuses them.
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
        } else if out.status.code() == Some(64) && !p.ends_with("reel.toml") {
            let at = format!("{}:", p.display());
            let problems: Vec<&str> = err.lines().filter(|l| l.starts_with(&at)).collect();
            assert!(!problems.is_empty(), "{err}");
            for l in problems {
                assert!(host_key(l), "{}: only what this host lacks: {l}", p.display());
            }
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

/// A CPU this process may not run on: one past the highest of `Cpus_allowed_list`.
fn cpu_not_allowed() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status");
    list.split([',', '-']).filter_map(|n| n.trim().parse::<usize>().ok()).max().unwrap_or(0) + 1
}

/// Runs `reel <sub> --config p` with the soft and hard descriptor limits at `nofile` (when
/// given): its exit code and stderr.
fn run_sub(sub: &str, p: &std::path::Path, nofile: Option<u32>) -> (Option<i32>, String) {
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("ulimit -n {n} && exec \"$0\" \"$@\"")).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    cmd.arg(sub).arg("--config").arg(p).env_remove("NOTIFY_SOCKET");
    cmd.current_dir(p.parent().unwrap());
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A key, how to break it, the descriptor limit to run with, and what the problem says.
type Case = (&'static str, Box<dyn Fn(&mut Conf)>, Option<u32>, &'static str);

/// Issue 26.1: what `serve` refuses at start, `check` refuses too, with the key's file,
/// line and column: a worker CPU outside the allowed set, `http.reserved_fds` above the
/// descriptor limit, a store path that is a file, a listener address this host does not
/// have. Both exit 64 (systemd's `RestartPreventExitStatus`), not 1 in a restart loop.
#[test]
fn check_refuses_what_serve_refuses_with_the_key_position() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let base = Conf::new(dir.path(), &o);
    let p = base.path();
    let file = p.display().to_string();
    let bad_cpu = cpu_not_allowed();
    let not_a_dir = dir.path().join("a-file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let cases: Vec<Case> = vec![
        (
            "cores.workers",
            Box::new(move |c: &mut Conf| {
                c.extra = String::new();
                c.raw = Some(
                    c.render().replace("workers = \"auto\"", &format!("workers = [{bad_cpu}]")),
                );
            }),
            None,
            "is not in the allowed cpu set",
        ),
        (
            "http.reserved_fds",
            Box::new(|c: &mut Conf| c.http = "reserved_fds = 1000\n".into()),
            Some(512),
            "leaves no client connections",
        ),
        (
            "store.path",
            Box::new({
                let f = not_a_dir.clone();
                move |c: &mut Conf| {
                    c.raw = Some(c.render().replace(
                        &format!("path = \"{}/store\"", c.dir.display()),
                        &format!("path = \"{}\"", f.display()),
                    ));
                }
            }),
            None,
            "is not a directory",
        ),
        (
            "listener[0].address",
            Box::new(|c: &mut Conf| c.listeners = vec![("http".into(), "192.0.2.1:0".into())]),
            None,
            "this host cannot bind 192.0.2.1",
        ),
    ];
    for (key, edit, nofile, why) in cases {
        let mut conf = base.clone();
        edit(&mut conf);
        conf.write();
        let text = std::fs::read_to_string(&p).unwrap();
        for sub in ["check", "serve"] {
            let (code, err) = run_sub(sub, &p, nofile);
            assert_eq!(code, Some(64), "{sub} {key}: {err}\n{text}");
            let line = err
                .lines()
                .find(|l| l.starts_with(&format!("{file}:")) && l.contains(&format!(": {key}: ")))
                .unwrap_or_else(|| panic!("{sub}: no line for {key}:\n{err}"));
            assert!(line.contains(why), "{sub} {key}: {line}");
            let pos: Vec<&str> = line[file.len() + 1..].splitn(3, ':').collect();
            assert!(
                pos[0].parse::<usize>().unwrap() > 1 && pos[1].parse::<usize>().unwrap() >= 1,
                "{sub} {key}: a real position: {line}"
            );
        }
    }
    // The unchanged file passes both ways (check here; serve in every other test).
    base.write();
    let (code, err) = run_sub("check", &p, Some(512));
    assert_eq!(code, Some(0), "{err}");
}

/// `reel check` without `--config` says which file it read.
#[test]
fn check_without_config_names_the_file_it_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(dir.path().join("config/reel.toml"), TOKEN_ENV.replace("token_env", "token"))
        .unwrap();
    let out = Command::new(BIN).arg("check").current_dir(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let want = dir.path().canonicalize().unwrap().join("config/reel.toml");
    assert!(
        err.lines().any(|l| l.contains("no --config") && l.contains(&want.display().to_string())),
        "{err}"
    );
}

/// Issue 26.4: a size or duration `reel check` refuses comes with the same value written as
/// the parser accepts it, at the key's position.
#[test]
fn check_suggests_a_value_it_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("units.toml");
    let file = p.display().to_string();
    for (line, want) in [
        (
            "idle_timeout = \"2.5h\"",
            "http.idle_timeout: invalid duration \"2.5h\": fractions are not supported: write \"150m\"",
        ),
        ("idle_timeout = \"1h30m\"", "write \"90m\""),
        ("idle_timeout = \"10\"", "missing unit (ns, us, ms, s, m, h or d)"),
        ("idle_timeout = \"10x\"", "unknown unit (use ns, us, ms, s, m, h or d)"),
        (
            "max_body = \"1.5MiB\"",
            "http.max_body: invalid size \"1.5MiB\": fractions are not supported: write \"1536KiB\"",
        ),
    ] {
        std::fs::write(&p, format!("[http]\n{line}\n")).unwrap();
        let out = Command::new(BIN).arg("check").arg("--config").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{line}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.lines().any(|l| l.starts_with(&format!("{file}:2:")) && l.contains(want)),
            "{line}: {want}\n{err}"
        );
    }
}
