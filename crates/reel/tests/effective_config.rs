//! Issue 44.8: `reel check --print` and `GET /status/config` show the effective
//! configuration (defaults filled in, secrets redacted) as a TOML file that `reel check`
//! accepts again, and `/status/config` follows the running generation through a reload.

use std::process::{Command, Output};

use crate::common::*;

/// `reel check --config PATH --print` with `env`.
fn check_print(path: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.arg("check").arg("--config").arg(path).arg("--print");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run reel check")
}

/// The printed file without its first line (the comment naming the file and its hash).
fn body(text: &str) -> &str {
    assert!(text.starts_with("# reel: effective configuration of "), "{text}");
    text.split_once('\n').map_or("", |(_, rest)| rest)
}

#[test]
fn check_print_shows_defaults_redacts_the_token_and_checks_again() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.admin = "token = \"s3cret-print\"\n".into();
    conf.write();
    let out = check_print(&conf.path(), &[]);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("is valid"), "the verdict goes to stderr: {stderr}");
    assert!(!stdout.contains("s3cret-print"), "{stdout}");
    assert!(stdout.contains(&conf.path().display().to_string()), "names the file: {stdout}");
    // It is TOML, with what the file set and the defaults it left out.
    let v: toml::Table = toml::from_str(&stdout).expect("the print is TOML");
    assert_eq!(v["admin"]["token"].as_str(), Some("<redacted>"));
    assert_eq!(v["cache"]["negative_ttl"].as_str(), Some("0s"), "as the file said it");
    assert_eq!(v["store"]["size"].as_str(), Some("64MiB"), "sizes as the file takes them");
    assert!(v["http"]["header_timeout"].as_str().is_some(), "a default filled in: {stdout}");
    assert!(v["server"]["cdn_id"].as_str().is_some(), "a default filled in: {stdout}");

    // `reel check` accepts the print, and prints it back the same.
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, stdout.as_bytes()).unwrap();
    let again = check_print(&printed, &[]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(body(&String::from_utf8_lossy(&again.stdout)), body(&stdout));

    // A token from the environment: the variable's name is shown, its value never.
    conf.admin = "token_env = \"REEL_TEST_PRINT_TOKEN\"\n".into();
    conf.write();
    let out = check_print(&conf.path(), &[("REEL_TEST_PRINT_TOKEN", "env-s3cret")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("token_env = \"REEL_TEST_PRINT_TOKEN\""), "{stdout}");
    assert!(!stdout.contains("env-s3cret"), "{stdout}");

    // A config with problems prints nothing on stdout: only the problems, exit 64.
    conf.admin = "token = \"x\"\ntoken_env = \"Y\"\n".into();
    conf.write();
    let out = check_print(&conf.path(), &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn status_config_is_the_running_generation() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.admin = "token = \"s3cret-status\"\n".into();
    let mut reel = Reel::start(&conf);
    let r = request(reel.admin, "GET", "127.0.0.1", "/status/config", &[]);
    assert_eq!(r.status, 401, "token-protected like /status");
    reel.token = Some("s3cret-status".into());
    let r = reel.admin_req("GET", "/status/config");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-reel-config-generation"), Some("1"));
    let text = r.text();
    assert!(!text.contains("s3cret-status"), "{text}");
    let v: toml::Table = toml::from_str(&text).expect("TOML");
    assert_eq!(v["admin"]["token"].as_str(), Some("<redacted>"));
    assert_eq!(v["cache"]["negative_ttl"].as_str(), Some("0s"));
    assert_eq!(v["store"]["size"].as_str(), Some("64MiB"));
    assert_eq!(reel.admin_req("POST", "/status/config").status, 405);

    // A reload: the live key shows its new value; a key that needs a restart shows the
    // value still running, not the file's.
    conf.negative_ttl = "7s".into();
    conf.store_size = "128MiB".into();
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = reel.admin_req("GET", "/status/config");
    assert_eq!(r.header("x-reel-config-generation"), Some("2"));
    let v: toml::Table = toml::from_str(&r.text()).expect("TOML");
    assert_eq!(v["cache"]["negative_ttl"].as_str(), Some("7s"), "{}", r.text());
    assert_eq!(v["store"]["size"].as_str(), Some("64MiB"), "needs a restart: {}", r.text());

    // What /status/config answers, `reel check` accepts.
    let printed = dir.path().join("from-status.toml");
    std::fs::write(&printed, r.body).unwrap();
    let out = check_print(&printed, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
