//! Shared test scaffolding: an in-test origin server, a blocking HTTP/1.1 client, a config
//! builder and a handle on a running `reel` child process whose JSON log is parsed.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) use reel_test_support::{PATIENCE, eventually};

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_reel");

pub(crate) use crate::origin::{Gate, Object, Origin};

// ---------------------------------------------------------------------------------------
// Client

/// A parsed response.
#[derive(Debug)]
pub(crate) struct Resp {
    /// Status code.
    pub status: u16,
    /// Header fields, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body (chunked transfer coding removed).
    pub body: Vec<u8>,
}

impl Resp {
    /// The first value of a header.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The `cache-status` header, or "".
    pub(crate) fn cache_status(&self) -> &str {
        self.header("cache-status").unwrap_or("")
    }
}

/// A keep-alive client connection.
pub(crate) struct Conn {
    pub(crate) w: TcpStream,
    pub(crate) r: BufReader<TcpStream>,
}

impl Conn {
    /// Connects.
    pub(crate) fn open(addr: SocketAddr) -> io::Result<Conn> {
        Conn::from_stream(TcpStream::connect(addr)?)
    }

    /// Wraps a connected stream.
    pub(crate) fn from_stream(s: TcpStream) -> io::Result<Conn> {
        s.set_read_timeout(Some(PATIENCE))?;
        s.set_nodelay(true)?;
        Ok(Conn { w: s.try_clone()?, r: BufReader::new(s) })
    }

    /// Sends one request and reads its response.
    pub(crate) fn request(
        &mut self,
        method: &str,
        host: &str,
        target: &str,
        headers: &[(&str, &str)],
    ) -> io::Result<Resp> {
        let mut req = format!("{method} {target} HTTP/1.1\r\nhost: {host}\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if method == "POST" || method == "PUT" {
            req.push_str("content-length: 0\r\n");
        }
        req.push_str("\r\n");
        self.w.write_all(req.as_bytes())?;
        read_response(&mut self.r, method == "HEAD")
    }

    /// `GET target` with `Host: host`.
    pub(crate) fn get(&mut self, host: &str, target: &str) -> io::Result<Resp> {
        self.request("GET", host, target, &[])
    }

    /// Reads the next response (of a request written through `w`).
    pub(crate) fn read_response(&mut self) -> io::Result<Resp> {
        read_response(&mut self.r, false)
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut l = String::new();
    if r.read_line(&mut l)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    Ok(l.trim_end_matches(['\r', '\n']).to_string())
}

fn read_response(r: &mut impl BufRead, head_only: bool) -> io::Result<Resp> {
    let status_line = read_line(r)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let l = read_line(r)?;
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').ok_or_else(|| bad(format!("bad header {l:?}")))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if head_only || status / 100 == 1 || status == 204 || status == 304 {
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let size = read_line(r)?;
            let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| bad(format!("bad chunk size {size:?}")))?;
            if n == 0 {
                while !read_line(r)?.is_empty() {}
                break;
            }
            let start = body.len();
            body.resize(start + n, 0);
            r.read_exact(&mut body[start..])?;
            read_line(r)?;
        }
    } else if let Some(n) = get("content-length") {
        let n: usize = n.parse().map_err(|_| bad("bad content-length"))?;
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(Resp { status, headers, body })
}

/// One request on a new connection.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    host: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Resp {
    Conn::open(addr)
        .and_then(|mut c| c.request(method, host, target, headers))
        .unwrap_or_else(|e| panic!("{method} {target} on {addr}: {e}"))
}

/// `GET target` on a new connection with `Host: 127.0.0.1`.
pub(crate) fn get(addr: SocketAddr, target: &str) -> Resp {
    request(addr, "GET", "127.0.0.1", target, &[])
}

// ---------------------------------------------------------------------------------------
// Config

/// A test config: everything small, in a temp dir, on port 0, JSON process log.
#[derive(Clone)]
pub(crate) struct Conf {
    /// The temp dir holding the store, the access log and the config file.
    pub dir: PathBuf,
    /// The origin hosts of the single origin group.
    pub origins: Vec<SocketAddr>,
    /// `[[listener]]`s: (name, address).
    pub listeners: Vec<(String, String)>,
    /// `[[cache.rule]]` tables, verbatim.
    pub rules: String,
    /// Lines of `[health]`.
    pub health: String,
    /// Lines of `[admin]`, besides the address unless they set it.
    pub admin: String,
    /// Lines of `[http]`.
    pub http: String,
    /// Lines of `[access_log]` besides the path.
    pub access_log: String,
    /// `store.size`.
    pub store_size: String,
    /// `store.volume_size`.
    pub volume_size: String,
    /// Extra lines of `[store]`.
    pub store: String,
    /// `server.shutdown_timeout`.
    pub shutdown_timeout: String,
    /// `cache.negative_ttl`.
    pub negative_ttl: String,
    /// `log.level`.
    pub log_level: String,
    /// Extra lines of the `[[origin_group]]` table.
    pub origin_group: String,
    /// Extra lines of its `[[origin_group.tier]]` table.
    pub tier: String,
    /// Its `retries`.
    pub retries: u32,
    /// Its `connect_timeout`.
    pub connect_timeout: String,
    /// Lines of `[server]` besides `shutdown_timeout`.
    pub server: String,
    /// Extra lines per listener name (e.g. its TLS keys).
    pub listener_lines: HashMap<String, String>,
    /// Lines of the `[[site]]` table after its hosts and group, verbatim (its keys, then
    /// its sub-tables such as `[site.access]` or `[site.cors]`).
    pub site: String,
    /// Top-level tables appended verbatim (e.g. `[[certificate]]`).
    pub extra: String,
    /// Extra arguments of `reel serve`.
    pub serve_args: Vec<String>,
    /// Start `reel --config F ARGS` without naming `serve` (the default subcommand).
    pub bare: bool,
    /// The whole file instead of what the fields above render (a shipped config).
    pub raw: Option<String>,
}

impl Conf {
    /// The defaults for a test against `origin`.
    pub(crate) fn new(dir: &Path, origin: &Origin) -> Conf {
        Conf {
            dir: dir.to_path_buf(),
            origins: vec![origin.addr],
            listeners: vec![("http".into(), "127.0.0.1:0".into())],
            rules: "[[cache.rule]]\nmatch = \"*.ts\"\nttl = \"1h\"\noverride = true\n".into(),
            health: String::new(),
            admin: String::new(),
            http: String::new(),
            access_log: "flush_interval = \"100ms\"\n".into(),
            store_size: "64MiB".into(),
            volume_size: "4MiB".into(),
            store: String::new(),
            shutdown_timeout: "20s".into(),
            negative_ttl: "0s".into(),
            log_level: "info".into(),
            origin_group: String::new(),
            tier: String::new(),
            retries: 0,
            connect_timeout: "5s".into(),
            server: String::new(),
            listener_lines: HashMap::new(),
            site: String::new(),
            extra: String::new(),
            serve_args: Vec::new(),
            bare: false,
            raw: None,
        }
    }

    /// The TOML text with the store on `disks` (`[[store.disk]]` tables of 32 MiB each,
    /// 4 MiB volumes, at most 5 I/O errors a disk) instead of one directory.
    pub(crate) fn with_disks(&self, disks: &[&Path]) -> String {
        let d = self.dir.display();
        let old = format!(
            "[store]\npath = \"{d}/store\"\nsize = \"{}\"\nvolume_size = \"{}\"\nio = \"threads\"\n",
            self.store_size, self.volume_size
        );
        let mut new =
            "[store]\nvolume_size = \"4MiB\"\nio = \"threads\"\ndisk_error_limit = 5\n".to_owned();
        for p in disks {
            new.push_str(&format!(
                "\n[[store.disk]]\npath = \"{}\"\nsize = \"32MiB\"\n",
                p.display()
            ));
        }
        let text = self.render();
        assert!(text.contains(&old), "the store section moved: {text}");
        text.replace(&old, &new)
    }

    /// The TOML text.
    pub(crate) fn render(&self) -> String {
        if let Some(raw) = &self.raw {
            return raw.clone();
        }
        let d = self.dir.display();
        let mut s = format!(
            "[server]\nshutdown_timeout = \"{}\"\n{}\n[log]\nlevel = \"{}\"\nformat = \"json\"\n\n",
            self.shutdown_timeout, self.server, self.log_level
        );
        for (name, addr) in &self.listeners {
            let more = self.listener_lines.get(name).map(String::as_str).unwrap_or("");
            s.push_str(&format!(
                "[[listener]]\nname = \"{name}\"\naddress = \"{addr}\"\n{more}\n\n"
            ));
        }
        s.push_str("[cores]\nnic = []\nirq = \"auto\"\nworkers = \"auto\"\nsteer = \"hash\"\n\n");
        s.push_str(&format!("[http]\n{}\n", self.http));
        s.push_str(&format!("[health]\n{}\n", self.health));
        if self.admin.contains("address =") {
            s.push_str(&format!("[admin]\n{}\n", self.admin));
        } else {
            s.push_str(&format!("[admin]\naddress = \"127.0.0.1:0\"\n{}\n", self.admin));
        }
        s.push_str(&format!(
            "[access_log]\nenabled = true\npath = \"{d}/access.log\"\nformat = \"json\"\n{}\n",
            self.access_log
        ));
        s.push_str(&format!(
            "[store]\npath = \"{d}/store\"\nsize = \"{}\"\nvolume_size = \"{}\"\nio = \"threads\"\n{}\n",
            self.store_size, self.volume_size, self.store
        ));
        s.push_str(&format!(
            "[cache]\nnegative_ttl = \"{}\"\n\n{}\n",
            self.negative_ttl, self.rules
        ));
        s.push_str(&format!(
            "[[site]]\nhosts = [\"127.0.0.1\", \"localhost\", \"*.example.test\"]\norigin_group = \"o\"\n{}\n\n",
            self.site
        ));
        let hosts: Vec<String> = self.origins.iter().map(|a| format!("\"{a}\"")).collect();
        s.push_str(&format!(
            "[[origin_group]]\nname = \"o\"\nconnect_timeout = \"{}\"\nfirst_byte_timeout = \"20s\"\nretries = {}\n{}\n  [origin_group.health]\n  enabled = false\n\n  [[origin_group.tier]]\n  hosts = [{}]\n{}\n",
            self.connect_timeout,
            self.retries,
            self.origin_group,
            hosts.join(", "),
            self.tier
        ));
        s.push_str("[demo_origin]\nenabled = false\n");
        s.push_str(&self.extra);
        s
    }

    /// Where [`Conf::write`] puts the file.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join("reel.toml")
    }

    /// Writes the config file (atomically, so a reload never reads half a file).
    pub(crate) fn write(&self) {
        let tmp = self.dir.join("reel.toml.tmp");
        std::fs::write(&tmp, self.render()).expect("write config");
        std::fs::rename(&tmp, self.path()).expect("rename config");
    }
}

// ---------------------------------------------------------------------------------------
// The reel process

/// The parsed JSON lines of a child's stderr.
#[derive(Default)]
pub(crate) struct Logs {
    lines: Mutex<Vec<Value>>,
    raw: Mutex<Vec<String>>,
    cv: Condvar,
}

impl Logs {
    /// Waits for a log line that satisfies `pred`.
    pub(crate) fn wait_for(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        let mut g = self.lines.lock().unwrap();
        loop {
            if let Some(v) = g.iter().find(|v| pred(v)) {
                return v.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for log line: {what}\n{}", self.dump());
            g = self.cv.wait_timeout(g, left.min(Duration::from_millis(200))).unwrap().0;
        }
    }

    /// Every line logged with this message.
    pub(crate) fn with_message(&self, msg: &str) -> Vec<Value> {
        self.lines.lock().unwrap().iter().filter(|v| message(v) == msg).cloned().collect()
    }

    /// Everything logged so far, raw.
    pub(crate) fn dump(&self) -> String {
        self.raw.lock().map(|r| r.join("\n")).unwrap_or_default()
    }
}

/// The `fields.message` of a JSON log line.
pub(crate) fn message(v: &Value) -> &str {
    v["fields"]["message"].as_str().unwrap_or("")
}

/// A running `reel serve`, killed when dropped.
pub(crate) struct Reel {
    child: Option<Child>,
    /// Its process log.
    pub logs: Arc<Logs>,
    /// The bound address of the first listener.
    pub data: SocketAddr,
    /// The bound admin address.
    pub admin: SocketAddr,
    /// The admin token to send, if any.
    pub token: Option<String>,
    /// The config it runs.
    pub conf: Conf,
}

impl Reel {
    /// Writes `conf` and starts `reel serve` on it.
    pub(crate) fn start(conf: &Conf) -> Reel {
        Reel::start_env(conf, &[])
    }

    /// Like [`Reel::start`] with extra environment variables.
    pub(crate) fn start_env(conf: &Conf, env: &[(&str, &str)]) -> Reel {
        Reel::start_with(conf, Path::new(BIN), env)
    }

    /// Like [`Reel::start_env`] with the binary (or a wrapper script) at `bin`.
    pub(crate) fn start_with(conf: &Conf, bin: &Path, env: &[(&str, &str)]) -> Reel {
        conf.write();
        let mut cmd = Command::new(bin);
        if !conf.bare {
            cmd.arg("serve");
        }
        cmd.arg("--config")
            .arg(conf.path())
            .args(&conf.serve_args)
            .current_dir(&conf.dir)
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn reel");
        let logs = Arc::new(Logs::default());
        let stderr = child.stderr.take().expect("stderr");
        let l = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str::<Value>(&line).ok();
                l.raw.lock().unwrap().push(line);
                if let Some(v) = v {
                    l.lines.lock().unwrap().push(v);
                }
                l.cv.notify_all();
            }
            l.cv.notify_all();
        });
        let mut reel = Reel {
            child: Some(child),
            logs,
            data: SocketAddr::from(([0, 0, 0, 0], 0)),
            admin: SocketAddr::from(([0, 0, 0, 0], 0)),
            token: None,
            conf: conf.clone(),
        };
        reel.logs.wait_for("reel is serving", |v| message(v) == "reel is serving");
        let first = &conf.listeners[0].0;
        reel.data = reel.listener_addr(first).expect("first listener address");
        reel.admin = addr_field(
            &reel.logs.wait_for("admin listening", |v| message(v) == "admin listening"),
            "address",
        );
        reel
    }

    /// The bound address of listener `name` as last logged.
    pub(crate) fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.logs
            .with_message("listening")
            .iter()
            .rev()
            .find(|v| v["fields"]["listener"] == name)
            .map(|v| addr_field(v, "address"))
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).expect("running")
    }

    /// Sends a signal.
    pub(crate) fn signal(&self, sig: i32) {
        // Our own child's pid; it has not been reaped yet (we hold the Child and only wait
        // in `wait_exit` / drop), so the pid cannot have been reused.
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("a pid");
        let signal = rustix::process::Signal::from_named_raw(sig).expect("a signal");
        rustix::process::kill_process(pid, signal).unwrap_or_else(|e| panic!("kill({sig}): {e}"));
    }

    /// Waits for the process to exit.
    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + PATIENCE * 2;
        loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("reel did not exit\n{}", self.logs.dump());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn auth(&self) -> Vec<(&str, String)> {
        self.token.iter().map(|t| ("authorization", format!("Bearer {t}"))).collect()
    }

    /// A request to the admin listener (with the token, if set, and the `X-Reel-Admin`
    /// header state-changing requests need).
    pub(crate) fn admin_req(&self, method: &str, target: &str) -> Resp {
        let a = self.auth();
        let mut h: Vec<(&str, &str)> = a.iter().map(|(k, v)| (*k, v.as_str())).collect();
        h.push(("x-reel-admin", "1"));
        request(self.admin, method, "127.0.0.1", target, &h)
    }

    /// `GET /status` as JSON.
    pub(crate) fn status(&self) -> Value {
        let r = self.admin_req("GET", "/status");
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }

    /// `GET /metrics` as text.
    pub(crate) fn metrics(&self) -> String {
        let r = self.admin_req("GET", "/metrics");
        assert_eq!(r.status, 200, "{}", r.text());
        r.text()
    }

    /// Number of workers (from `/status`).
    pub(crate) fn workers(&self) -> usize {
        self.status()["plan"]["workers"].as_array().map(|a| a.len()).unwrap_or(0)
    }

    /// Sends SIGHUP and waits until the reload it triggers was recorded.
    pub(crate) fn sighup_reload(&self) -> Value {
        let before = self.status()["reload"]["attempts"].as_u64().unwrap_or(0);
        self.signal(libc::SIGHUP);
        eventually("the SIGHUP reload", || {
            let st = self.status();
            (st["reload"]["attempts"].as_u64().unwrap_or(0) > before).then_some(st)
        })
    }

    /// Rewrites the config file from `conf` (and remembers it).
    pub(crate) fn rewrite(&mut self, conf: &Conf) {
        conf.write();
        self.conf = conf.clone();
    }
}

impl Drop for Reel {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The failed test's output then shows what the process (and any successor
            // writing to the same standard error) said.
            println!("--- reel's log:\n{}\n---", self.logs.dump());
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A socket address in a log line's fields.
pub(crate) fn addr_field(v: &Value, name: &str) -> SocketAddr {
    v["fields"][name]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no address field {name} in {v}"))
}

/// The value of an unlabelled (or first matching) sample in Prometheus text.
pub(crate) fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `config/reel.toml` as shipped, with its fixed ports moved to free ones, a JSON process
/// log for the test to read, a small store, and its origin group pointed at `origin` (an
/// origin the test runs, or nothing). `demo`: the built-in demo origin stays enabled (on a
/// free port); else it is off and the test runs the origin.
pub(crate) fn shipped_demo_config(origin: SocketAddr, demo: bool) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/reel.toml");
    let text = std::fs::read_to_string(p).unwrap();
    let mut out = String::new();
    let mut in_demo = false;
    for line in text.lines() {
        if line.starts_with('[') {
            in_demo = line.starts_with("[demo_origin]");
        }
        let line = match line.trim_start() {
            l if l.starts_with("address = \"127.0.0.1:") => "address = \"127.0.0.1:0\"".into(),
            l if l.starts_with("hosts = [\"127.0.0.1:8081\"]") => format!("hosts = [\"{origin}\"]"),
            l if l.starts_with("enabled = true") && !demo && in_demo => "enabled = false".into(),
            l if l.starts_with("format = \"human\"") => "format = \"json\"".into(),
            l if l.starts_with("size = \"1GiB\"") => "size = \"64MiB\"".into(),
            l if l.starts_with("volume_size = ") => "volume_size = \"4MiB\"".into(),
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    let code: String = out.lines().map(|l| l.split('#').next().unwrap_or("")).collect();
    for gone in ["127.0.0.1:8080", "127.0.0.1:9090", "127.0.0.1:8081", "\"human\""] {
        assert!(!code.contains(gone), "{gone} left in the config:\n{out}");
    }
    let cfg = reel_config::Config::parse_and_validate(&out, "reel.toml").expect("still valid");
    assert_eq!(cfg.demo_origin.enabled, demo, "the demo origin as asked");
    out
}
