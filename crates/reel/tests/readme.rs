//! The README's "Put reel in front of your own origin" section, run as written against a
//! local origin: the one-line `--origin` run, its `curl -sI` checks, and the production
//! `[[site]]` + `[[origin_group]]` with `reel check` and its `curl -sI` check. What cannot
//! run here verbatim is swapped for its local equivalent: `cargo run --release --` for the
//! binary under test with a test config (ports 0, a temp store), the example origin for
//! the test's, `127.0.0.1:8080` for the bound address, `/etc/reel/reel.toml` for the test
//! config, and `tls = true` dropped (the test origin speaks plain HTTP).

use std::process::Command;

use crate::common::*;

const SECTION: &str = "## Put reel in front of your own origin";

/// The section's text, up to the next `## ` heading.
fn section() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let start = readme.find(SECTION).expect("the README has the section");
    let rest = &readme[start + SECTION.len()..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

/// The indented command lines (4 spaces), each with the `# ` comment lines that follow it.
fn commands(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("    ")) {
        match (l.strip_prefix("# "), out.last_mut()) {
            (Some(c), Some(last)) => last.1.push(c.to_string()),
            _ => out.push((l.to_string(), Vec::new())),
        }
    }
    out
}

/// The ```toml block.
fn toml_block(text: &str) -> String {
    let start = text.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let len = text[start..].find("```").expect("the block ends");
    text[start..start + len].to_string()
}

/// Runs a `curl -sI ... | grep -i cache-status` line against `reel` and returns its output.
fn run_curl(line: &str, reel: &Reel) -> String {
    assert!(line.starts_with("curl -sI ") && line.contains("| grep -i cache-status"), "{line}");
    let line = line.replace("127.0.0.1:8080", &reel.data.to_string());
    let out = Command::new("sh").arg("-c").arg(&line).output().expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_ascii_lowercase()
}

#[test]
fn the_readme_origin_section_works_as_written() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("SKIPPED the_readme_origin_section_works_as_written: no curl");
        return;
    }
    let text = section();
    let cmds = commands(&text);
    let origin = Origin::start("yours");
    origin
        .put("/path/to/segment.ts", Object::ok("a segment").header("cache-control", "max-age=60"));

    // The one-line run.
    let (run, _) = &cmds[0];
    let args = run.strip_prefix("cargo run --release -- ").expect("a cargo run line");
    let args: Vec<&str> = args.split_whitespace().collect();
    assert_eq!(args.len(), 2, "{run}");
    assert_eq!(args[0], "--origin", "{run}");
    let url = args[1];
    assert!(url.starts_with("https://") && !url[8..].contains([':', '/']), "{url}");
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one-line");
    std::fs::create_dir(&one).unwrap();
    let mut conf = Conf::new(&one, &origin);
    conf.bare = true;
    conf.serve_args = vec!["--origin".into(), format!("http://{}", origin.addr)];
    let reel = Reel::start(&conf);
    let mut checked = 0;
    for (line, expect) in cmds.iter().skip(1).take_while(|(l, _)| l.starts_with("curl -sI http")) {
        assert_eq!(run_curl(line, &reel), expect.join("\n"), "{line}");
        checked += 1;
    }
    assert_eq!(checked, 2, "a miss, then a hit");
    // The origin got its own name, as the section says of `media.example.com`.
    assert_eq!(origin.host("/path/to/segment.ts"), Some(origin.addr.to_string()));
    assert!(text.contains(&format!("`Host: {}`", &url[8..])), "the section names the Host sent");
    drop(reel);

    // Production: the tables as written pass `reel check` ...
    let block = toml_block(&text);
    let prod = dir.path().join("production");
    std::fs::create_dir(&prod).unwrap();
    let mut conf = Conf::new(&prod, &origin);
    conf.extra = format!("\n{block}");
    conf.write();
    let (check, _) = cmds.iter().find(|(l, _)| l.starts_with("reel check")).expect("reel check");
    let check = check.replace("/etc/reel/reel.toml", conf.path().to_str().unwrap());
    let args: Vec<&str> = check.split_whitespace().skip(1).collect();
    let out = Command::new(BIN).args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // ... and serve the site's name from its origin group, which gets its `host_header`.
    let origin_name = block
        .lines()
        .find_map(|l| l.trim().strip_prefix("host_header = "))
        .expect("host_header")
        .trim_matches('"')
        .to_string();
    let local = block
        .lines()
        .filter(|l| l.trim() != "tls = true")
        .map(|l| match l.trim().starts_with("hosts = [\"media.") {
            true => format!("  hosts = [\"{}\"]", origin.addr),
            false => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    conf.extra = format!("\n{local}\n");
    let reel = Reel::start(&conf);
    let (line, expect) =
        cmds.iter().find(|(l, _)| l.starts_with("curl -sI -H")).expect("the site's curl line");
    origin
        .put("/path/to/segment.ts", Object::ok("a segment").header("cache-control", "max-age=60"));
    assert_eq!(run_curl(line, &reel), expect.join("\n"), "{line}");
    assert_eq!(origin.host("/path/to/segment.ts"), Some(origin_name));
}
