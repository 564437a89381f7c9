//! Issue 44.4 and 44.5: what `reel check` says of a file an operator gets slightly wrong.
//! Each refusal names the key's `file:line:column` and says what to write instead; the
//! keys of HTTP/3 left in place when it is turned off are accepted with a warning, by
//! `check` and by a reload.

use std::process::Command;

use crate::common::*;

/// Runs `reel check` on `text`: its exit code and stderr, and the file's name.
fn check(text: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("reel.toml");
    std::fs::write(&p, text).unwrap();
    let out = Command::new(BIN).arg("check").arg("--config").arg(&p).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err, p.display().to_string())
}

/// A listener that is fine, for files whose problem is elsewhere.
const LISTENER: &str = "[[listener]]\nname = \"http\"\naddress = \"127.0.0.1:0\"\n";

#[test]
fn check_says_what_to_write_instead() {
    let origin = "[[origin_group]]\nname = \"o\"\n  [[origin_group.tier]]\n  hosts = [";
    let cases: Vec<(String, &str, &str)> = vec![
        // `[listener]` for `[[listener]]`.
        (
            "[listener]\nname = \"http\"\naddress = \"127.0.0.1:8080\"\n".into(),
            "1:1: listener: ",
            "write [[listener]] (two brackets) above each entry, not [listener]",
        ),
        // `[[http]]` for `[http]`.
        (format!("{LISTENER}[[http]]\nmax_headers = 10\n"), "4:1: http[0]: ", "write [http]"),
        // An address without a port.
        (
            "[[listener]]\nname = \"http\"\naddress = \"127.0.0.1\"\n".into(),
            "3:11: listener[0].address: ",
            "no port: write \"127.0.0.1:8080\"",
        ),
        // A host name where reel binds an IP address.
        (
            "[[listener]]\nname = \"http\"\naddress = \"localhost:8080\"\n".into(),
            "3:11: listener[0].address: ",
            "is a host name: reel binds IP addresses, so write \"127.0.0.1:8080\"",
        ),
        (
            format!("{LISTENER}[admin]\naddress = \"cache.example.com:9090\"\n"),
            "5:11: admin.address: ",
            "\"0.0.0.0:9090\" for every IPv4 address of this host",
        ),
        // A URL where an origin host is wanted.
        (
            format!("{LISTENER}{origin}\"http://media.example.com\"]\n"),
            "7:11: origin_group[0].tier[0].hosts: ",
            "without a scheme: write \"media.example.com:80\"",
        ),
        (
            format!("{LISTENER}{origin}\"https://media.example.com:8443/live/\"]\n"),
            "7:11: origin_group[0].tier[0].hosts: ",
            "write \"media.example.com:8443\" and tls = true in this tier",
        ),
        // Units spelt out.
        (
            format!("{LISTENER}[http]\nidle_timeout = \"60 seconds\"\n"),
            "5:16: http.idle_timeout: ",
            "write \"60s\"",
        ),
        (
            format!("{LISTENER}[cache]\nheuristic_max = \"1 day\"\n"),
            "5:17: cache.heuristic_max: ",
            "write \"1d\"",
        ),
        // Syntax errors: the key, and the quotes a value needs.
        (
            format!("{LISTENER}[http]\nidle_timeout = 60s\n"),
            ": http.idle_timeout: ",
            "durations and sizes are strings: write \"60s\" (in quotes)",
        ),
        (
            format!("{LISTENER}[[listener]]\nname = \"b\"\naddress = 127.0.0.1:81\n"),
            ": listener[1].address: ",
            "text values are quoted: write \"127.0.0.1:81\"",
        ),
        (format!("{LISTENER}[log]\nlevel = info\n"), ": log.level: ", "write \"info\""),
        // A CMCD key spelt as a header would be.
        (
            format!("{LISTENER}[access_log]\ncmcd_keys = [\"sid\", \"Br\"]\n"),
            "5:21: access_log.cmcd_keys[1]: ",
            "\"Br\" is not a CMCD key (lowercase letters",
        ),
    ];
    for (text, at, want) in cases {
        let (code, err, file) = check(&text);
        assert_eq!(code, Some(64), "{text}\n{err}");
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("{file}:")) && l.contains(at))
            .unwrap_or_else(|| panic!("no problem at {at:?} for\n{text}\n{err}"));
        // file:LINE:COLUMN: every time, also for syntax errors.
        let pos: Vec<&str> = line[file.len() + 1..].splitn(3, ':').collect();
        assert!(
            pos[0].parse::<usize>().is_ok_and(|n| n >= 1)
                && pos[1].parse::<usize>().is_ok_and(|n| n >= 1),
            "a position: {line}"
        );
        assert!(line.contains(want), "{want:?} in\n{line}\nfor\n{text}");
    }
}

/// `alt_svc_max_age` and `quic_retry` with `http3 = false`: accepted, with a warning at
/// each key, so turning HTTP/3 off is one word, also by a reload.
#[test]
fn http3_off_keeps_its_keys_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    let lines = |on: bool| {
        format!(
            "tls_cert = \"self-signed\"\nhttp3 = {on}\nalt_svc_max_age = \"24h\"\nquic_retry = \"auto\"\n"
        )
    };
    conf.listener_lines.insert("http".into(), lines(false));
    conf.write();
    let out = Command::new(BIN).arg("check").arg("--config").arg(conf.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let file = conf.path().display().to_string();
    for key in ["alt_svc_max_age", "quic_retry"] {
        assert!(
            err.lines().any(|l| l.starts_with(&format!("warning: {file}:"))
                && l.contains(&format!(": listener[0].{key}: does nothing without HTTP/3"))),
            "{key}: {err}"
        );
    }

    // Running with HTTP/3, then the one-word change and a reload.
    conf.listener_lines.insert("http".into(), lines(true));
    let mut reel = Reel::start(&conf);
    conf.listener_lines.insert("http".into(), lines(false));
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    let status = reel.admin_req("GET", "/status").json();
    assert_eq!(status["reload"]["last_ok"], true, "{status}");
    reel.logs.wait_for("the warning, logged", |v| {
        message(v).contains("listener[0].quic_retry: does nothing without HTTP/3")
    });
}
