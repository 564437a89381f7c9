//! Which configuration changes a live reload cannot apply: anything bound, allocated or
//! pinned at startup (sockets, threads, the store's on-disk layout, the log formatter).

use serde::Serialize;
use toml::Value;

use crate::Config;

/// Key paths (sections or single keys) that need a restart to change; every other key
/// reloads live. A section name covers all keys below it.
pub const RESTART_KEYS: &[&str] = &[
    "server",
    "log.format",
    "listener",
    "cores",
    "admin.address",
    "admin.allow_non_loopback",
    "store.path",
    "store.size",
    "store.volume_size",
    "store.io",
    "demo_origin",
];

fn to_value<T: Serialize>(v: &T) -> Option<Value> {
    Value::try_from(v).ok()
}

/// Appends the paths below `path` where `a` and `b` differ: table keys and array-of-table
/// elements are compared one by one, anything else as a whole.
fn diff(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>) {
    match (a, b) {
        (Some(Value::Table(ta)), Some(Value::Table(tb))) => {
            let mut keys: Vec<&String> = ta.keys().chain(tb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff(&format!("{path}.{k}"), ta.get(k), tb.get(k), out);
            }
        }
        (Some(Value::Array(xa)), Some(Value::Array(xb)))
            if xa.iter().chain(xb).all(Value::is_table) && !(xa.is_empty() && xb.is_empty()) =>
        {
            for i in 0..xa.len().max(xb.len()) {
                diff(&format!("{path}[{i}]"), xa.get(i), xb.get(i), out);
            }
        }
        (a, b) if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

/// Keys of a `[[listener]]` that reload live although the listener section is
/// restart-only: the TLS settings are looked up per connection, so certificates can rotate.
pub const LIVE_LISTENER_KEYS: &[&str] = &["tls_cert", "tls_key", "sni_strict", "http2"];

pub(crate) fn needs_restart(old: &Config, new: &Config) -> Vec<String> {
    let (Some(Value::Table(mut a)), Some(Value::Table(mut b))) = (to_value(old), to_value(new))
    else {
        // Config always serializes to a table; if it somehow does not, the safe answer is
        // that everything may have changed.
        return vec!["*".to_owned()];
    };
    for t in [&mut a, &mut b] {
        if let Some(Value::Array(listeners)) = t.get_mut("listener") {
            for l in listeners.iter_mut().filter_map(Value::as_table_mut) {
                for k in LIVE_LISTENER_KEYS {
                    l.remove(*k);
                }
            }
        }
    }
    let mut out = Vec::new();
    for key in RESTART_KEYS {
        let (section, field) = key.split_once('.').map_or((*key, None), |(s, f)| (s, Some(f)));
        let pick = |t: &toml::Table| {
            let v = t.get(section);
            match field {
                Some(f) => v.and_then(|v| v.get(f)).cloned(),
                None => v.cloned(),
            }
        };
        diff(key, pick(&a).as_ref(), pick(&b).as_ref(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_array_diffs_by_element() {
        let mut a = Config::default();
        a.listener.push(crate::ListenerConfig::default());
        let mut b = a.clone();
        b.listener[0].address = "127.0.0.1:8181".parse().expect("addr");
        b.listener.push(crate::ListenerConfig { name: "two".into(), ..Default::default() });
        assert_eq!(needs_restart(&a, &b), vec!["listener[0].address", "listener[1]"]);
        assert!(needs_restart(&a, &a.clone()).is_empty());
        // TLS settings reload live.
        let mut c = a.clone();
        c.listener[0].tls_cert = Some(crate::TlsCert::SelfSigned);
        c.listener[0].sni_strict = true;
        assert!(needs_restart(&a, &c).is_empty());
    }
}
