//! Private origins: `request_headers` (a shared secret the origin checks) and `auth = "s3"`
//! (AWS Signature Version 4), against a bucket origin that verifies every request with
//! botocore's own S3 signer (`s3_origin.py`, in a venv the first test creates).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const ACCESS: &str = "AKIAREELTEST0000EXAM";
const SECRET: &str = "reel/test+Secret/Key0000000000000000000000";
const TOKEN: &str = "IQoJb3JpZ2luX2VjEAAaCXRlc3Q+token/==";
const REGION: &str = "eu-west-3";
/// The bucket's virtual host: sent, and signed, instead of the viewer's Host.
const BUCKET_HOST: &str = "media.s3.test";

/// The venv's python with botocore, made once per test run; `None` when pip cannot
/// install it here.
fn botocore_python() -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("botocore-venv");
        let py = venv.join("bin/python");
        let ok = |c: &mut Command| c.stdout(Stdio::null()).status().is_ok_and(|s| s.success());
        let have = |py: &Path| ok(Command::new(py).args(["-c", "import botocore.auth"]));
        if py.exists() && have(&py) {
            return Some(py);
        }
        let made = ok(Command::new("python3").arg("-m").arg("venv").arg(&venv))
            && ok(Command::new(venv.join("bin/pip")).args(["install", "-q", "botocore"]));
        (made && have(&py)).then_some(py)
    })
    .clone()
}

/// The verifying bucket origin, stopped when dropped.
struct Bucket {
    child: Child,
    addr: SocketAddr,
}

impl Bucket {
    fn start(py: &Path, dir: &Path, token: Option<&str>) -> Bucket {
        let script = dir.join("s3_origin.py");
        std::fs::write(&script, include_str!("s3_origin.py")).expect("write the script");
        let port_file = dir.join("s3.port");
        let mut cmd = Command::new(py);
        cmd.arg(&script).arg(&port_file).args([ACCESS, SECRET, REGION]);
        cmd.args(token).stdout(Stdio::null());
        let child = cmd.spawn().expect("start s3_origin.py");
        let port = eventually("the bucket origin's port", || {
            std::fs::read_to_string(&port_file).ok()?.trim().parse::<u16>().ok()
        });
        Bucket { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) }
    }

    /// The requests it received, oldest first.
    fn log(&self) -> Vec<Value> {
        get(self.addr, "/__log").json().as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Bucket {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A reel whose group `o` is the bucket, signing with `secret`; also a sliced site.
fn reel_for(bucket: &Bucket, dir: &Path, secret: &str, token: bool) -> Reel {
    let unused = Origin::start("unused");
    let mut conf = Conf::new(dir, &unused);
    conf.origins = vec![bucket.addr];
    conf.rules = String::new();
    conf.log_level = "debug".into();
    conf.origin_group = format!(
        "auth = \"s3\"\nregion = \"{REGION}\"\naccess_key_env = \"REEL_T_S3_ACCESS\"\nsecret_key_env = \"REEL_T_S3_SECRET\"\n{}",
        if token { "session_token_env = \"REEL_T_S3_TOKEN\"\n" } else { "" }
    );
    conf.tier = format!("  host_header = \"{BUCKET_HOST}\"\n");
    conf.extra =
        "\n[[site]]\nhosts = [\"sliced.test\"]\norigin_group = \"o\"\nslice = \"64KiB\"\n".into();
    let env =
        [("REEL_T_S3_ACCESS", ACCESS), ("REEL_T_S3_SECRET", secret), ("REEL_T_S3_TOKEN", TOKEN)];
    let reel = Reel::start_env(&conf, &env);
    // The secret appears in no log line (debug level).
    assert!(!reel.logs.dump().contains(secret));
    reel
}

/// What `s3_origin.py` serves for `key` (the decoded path).
fn body_of(key: &str) -> Vec<u8> {
    let size = if key.contains("big") { 300_000 } else { 64 };
    let unit = format!("object {key}\n");
    unit.as_bytes().iter().copied().cycle().take(size).collect()
}

fn verified(log: &[Value], key: &str) -> Vec<Value> {
    log.iter().filter(|e| e["key"] == key).cloned().collect()
}

#[test]
fn s3_signed_requests_verify_with_botocore_plain_ranged_conditional_and_encoded() {
    let Some(py) = botocore_python() else {
        return reel_test_support::skip("python3 -m venv / pip install botocore failed");
    };
    let dir = tempfile::tempdir().unwrap();
    let bucket = Bucket::start(&py, dir.path(), Some(TOKEN));
    let reel = reel_for(&bucket, dir.path(), SECRET, true);
    let mut c = Conn::open(reel.data).unwrap();

    // A plain GET: signed, verified, stored; the second is served from the store (the
    // bucket sees one request, checked below).
    for _ in 0..2 {
        let r = c.get("127.0.0.1", "/bucket/a.ts").unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.body, body_of("/bucket/a.ts"));
    }

    // A viewer's own Authorization and x-amz-* fields never reach the bucket (it would
    // refuse a request with a forged signature or an unsigned x-amz-* field).
    let forged = [("authorization", "AWS4-HMAC-SHA256 forged"), ("x-amz-meta-a", "1")];
    let r = c.request("GET", "127.0.0.1", "/bucket/forged.ts", &forged).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    // A path that needs encoding names the same object the bucket decodes.
    let target = "/bucket/caf%C3%A9/a%20b+c!(1)$.ts?x-id=GetObject&v=1%2F2";
    let r = c.get("127.0.0.1", target).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let key = "/bucket/café/a b+c!(1)$.ts";
    assert_eq!(r.body, body_of(key));

    // A Range on a sliced site: the slice is fetched with a signed Range request.
    let r = c.request("GET", "sliced.test", "/bucket/big.mp4", &[("range", "bytes=70000-70099")]);
    let r = r.unwrap();
    assert_eq!(r.status, 206, "{}", r.text());
    assert_eq!(r.body, body_of("/bucket/big.mp4")[70000..70100]);

    // A revalidation of a stale object is signed too, and the bucket's 304 freshens it.
    let r = c.get("127.0.0.1", "/bucket/revalidate.ts").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    std::thread::sleep(Duration::from_millis(2100));
    let r = c.get("127.0.0.1", "/bucket/revalidate.ts").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.body, body_of("/bucket/revalidate.ts"));

    let log = bucket.log();
    let refused: Vec<&Value> = log.iter().filter(|e| e["verified"] != true).collect();
    assert!(refused.is_empty(), "requests botocore did not verify: {refused:#?}");
    assert_eq!(verified(&log, "/bucket/a.ts").len(), 1, "{log:#?}");
    let enc = verified(&log, key);
    assert_eq!(enc.len(), 1, "{log:#?}");
    assert_eq!(
        enc[0]["target"],
        "/bucket/caf%C3%A9/a%20b%2Bc%21%281%29%24.ts?x-id=GetObject&v=1%2F2"
    );
    let ranged = verified(&log, "/bucket/big.mp4");
    assert!(ranged.iter().any(|e| e["range"] == "bytes=65536-131071"), "{ranged:#?}");
    let reval = verified(&log, "/bucket/revalidate.ts");
    assert_eq!(reval.len(), 2, "{reval:#?}");
    assert!(reval[1]["if_none_match"].is_string() || reval[1]["if_modified_since"].is_string());
    assert!(
        reval.iter().all(|e| e["authorization"]
            .as_str()
            .is_some_and(|a| a.contains("x-amz-security-token")))
    );

    // Nothing of the credentials shows on /status or in the log.
    let status = reel.admin_req("GET", "/status").text();
    for s in [SECRET, TOKEN] {
        assert!(!status.contains(s) && !reel.logs.dump().contains(s));
    }
}

#[test]
fn s3_wrong_secret_passes_the_buckets_403_through_and_stores_nothing() {
    let Some(py) = botocore_python() else {
        return reel_test_support::skip("python3 -m venv / pip install botocore failed");
    };
    let dir = tempfile::tempdir().unwrap();
    let bucket = Bucket::start(&py, dir.path(), None);
    let reel = reel_for(&bucket, dir.path(), "not-the-secret", false);
    for _ in 0..2 {
        let r = get(reel.data, "/bucket/private.ts");
        assert_eq!(r.status, 403, "{}", r.text());
        assert!(r.text().contains("SignatureDoesNotMatch"), "{}", r.text());
    }
    let log = bucket.log();
    let seen = verified(&log, "/bucket/private.ts");
    assert_eq!(seen.len(), 2, "the 403 was stored: {log:#?}");
    assert!(seen.iter().all(|e| e["why"] == "SignatureDoesNotMatch"), "{seen:#?}");
}

#[test]
fn request_headers_reach_the_origin_replace_the_viewers_and_never_show() {
    let origin = Origin::start("main");
    origin.put("/p/a.ts", Object::ok("payload").header("cache-control", "max-age=60"));
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.log_level = "debug".into();
    conf.origin_group =
        "request_headers = { \"X-Origin-Secret\" = { env = \"REEL_T_ORIGIN_SECRET\" } }\n".into();
    let secret = "sh4red-s3cret-0f-the-edge";
    let reel = Reel::start_env(&conf, &[("REEL_T_ORIGIN_SECRET", secret)]);
    let r = request(reel.data, "GET", "127.0.0.1", "/p/a.ts", &[("x-origin-secret", "forged")]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(origin.field("/p/a.ts", "x-origin-secret").as_deref(), Some(secret));
    let shown = format!("{:?}{}", r.headers, r.text());
    assert!(!shown.contains(secret), "{shown}");
    let status = reel.admin_req("GET", "/status").text();
    assert!(!status.contains(secret) && !reel.logs.dump().contains(secret));
}

#[test]
fn reel_check_refuses_a_missing_variable_at_the_key_that_names_it() {
    let origin = Origin::start("main");
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.origin_group = "request_headers = { \"X-Origin-Secret\" = { env = \"REEL_T_UNSET_1\" } }\nauth = \"s3\"\nregion = \"us-east-1\"\naccess_key_env = \"REEL_T_UNSET_2\"\nsecret_key_env = \"REEL_T_SET\"\n".into();
    conf.write();
    let check = |env: &[(&str, &str)]| {
        let mut c = Command::new(BIN);
        c.arg("check").arg("--config").arg(conf.path()).envs(env.iter().copied());
        c.env_remove("REEL_T_UNSET_1").env_remove("REEL_T_UNSET_2");
        c.output().unwrap()
    };
    let out = check(&[("REEL_T_SET", "x")]);
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    let file = conf.path().display().to_string();
    let text = conf.render();
    let line = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let at = |key: &str, needle: &str| {
        err.lines().any(|l| {
            l.starts_with(&format!("{file}:{}:", line(needle)))
                && l.contains(key)
                && l.contains("is not set")
        })
    };
    assert!(at("origin_group[0].request_headers.X-Origin-Secret.env", "REEL_T_UNSET_1"), "{err}");
    assert!(at("origin_group[0].access_key_env", "REEL_T_UNSET_2"), "{err}");
    assert!(!err.contains("secret_key_env"), "{err}");
    // `serve` refuses it the same way.
    let mut serve = Command::new(BIN);
    serve.arg("serve").arg("--config").arg(conf.path()).env("REEL_T_SET", "x");
    let out = serve.env_remove("REEL_T_UNSET_1").env_remove("REEL_T_UNSET_2").output().unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", String::from_utf8_lossy(&out.stderr));
}
