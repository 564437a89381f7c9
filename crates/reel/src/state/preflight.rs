//! Everything a valid config must also find on this host and in this process before it can
//! run: the parts it asks for compiled into this binary, the environment variables it
//! names, the certificates it names, the CIDRs of the sites' access rules and the `[geo]`
//! database, the CPUs of `[cores]`, the descriptor limit against `http.reserved_fds`, the
//! store's directory and disk, listener addresses this host has, the access log's file,
//! ports below 1024 without `CAP_NET_BIND_SERVICE`, and HTTP/3's UDP ports held by another
//! process. One function, [`check`], makes every one of these checks for `reel check`,
//! `reel serve` and every reload, so `check` refuses what `serve` would; each problem
//! names its key's file, line and column like the validator's. Only what cannot be known
//! before binding (a TCP address another process holds) is left to start-up.

mod host;
mod probe;

use reel_config::{Config, ConfigErrors, ConfigProblem};
use reel_runtime::CorePlan;

use crate::listeners::tls::TlsState;
use crate::state::fds::FdBudget;
use crate::state::options::{self, ConnectionLimits};

/// What the checks built on the way, for the caller to run with.
pub(crate) struct Ready {
    /// The certificates, loaded.
    pub tls: TlsState,
    /// The core plan for `[cores]`.
    pub plan: CorePlan,
    /// The connection limits `[http]` leaves with the descriptor budget.
    pub limits: ConnectionLimits,
    /// Keys that do nothing where they stand ([`Config::warnings`]) and certificates that
    /// expire soon (or have), as `file:line:column: key: message`; the core plan's own
    /// notes are in `plan.warnings`.
    pub warnings: Vec<String>,
    /// What start-up will do that an operator should know of (a store directory it
    /// creates, and by which rule), as `file:line:column: key: message`.
    pub notes: Vec<String>,
}

/// Runs every check on `cfg`. `origin_flag`: `--origin` was given (the demo origin is not
/// started); `fds`: the descriptor budget to hold `http.reserved_fds` against (a running
/// server's own, or [`FdBudget::estimate`] before start).
pub(crate) fn check(
    cfg: &Config,
    origin_flag: bool,
    tickets: &reel_tls::Tickets,
    fds: &FdBudget,
) -> Result<Ready, ConfigErrors> {
    let mut problems: Vec<ConfigProblem> = Vec::new();
    problems.extend(check_build(cfg, origin_flag));
    problems.extend(check_environment(cfg));
    let mut warnings: Vec<String> = cfg.warnings().iter().map(ToString::to_string).collect();
    let tls = match TlsState::build(cfg, tickets) {
        Ok(t) => {
            for w in t.warnings(std::time::SystemTime::now()) {
                warnings.push(cfg.problem(&w.key, w.message).to_string());
            }
            Some(t)
        }
        Err(tls) => {
            problems.extend(tls.iter().map(|p| cfg.problem(&p.key, &p.message)));
            None
        }
    };
    let plan = match host::core_plan(cfg) {
        Ok(p) => Some(p),
        Err(p) => {
            problems.push(p);
            None
        }
    };
    let limits = match options::connection_limits(cfg, fds) {
        Ok(l) => Some(l),
        Err(e) => {
            problems.push(cfg.problem("http.reserved_fds", e));
            None
        }
    };
    let mut notes = Vec::new();
    problems.extend(host::store(cfg, &mut notes));
    problems.extend(crate::state::access::check(cfg));
    problems.extend(host::addresses(cfg, origin_flag));
    problems.extend(probe::access_log(cfg));
    problems.extend(probe::privileged_ports(cfg, origin_flag));
    problems.extend(probe::quic_ports(cfg));
    match (tls, plan, limits) {
        (Some(tls), Some(plan), Some(limits)) if problems.is_empty() => {
            Ok(Ready { tls, plan, limits, warnings, notes })
        }
        _ => Err(ConfigErrors { problems }),
    }
}

/// Parts of the config that need a cargo feature this binary lacks. With `--origin`
/// (`origin_flag`) the demo origin is not started, so it needs no feature.
fn check_build(cfg: &Config, origin_flag: bool) -> Option<ConfigProblem> {
    (cfg.demo_origin.enabled && !origin_flag && !cfg!(feature = "demo")).then(|| {
        cfg.problem(
            "demo_origin.enabled",
            "this reel was built without the demo origin (cargo feature `demo`); \
             set `enabled = false` or use a build with default features",
        )
    })
}

/// Environment variables the config names: `admin.token_env` naming a variable that is
/// unset or empty would run the admin API without authentication.
pub(crate) fn check_environment(cfg: &Config) -> Option<ConfigProblem> {
    (!cfg.admin.token_env.is_empty() && cfg.admin.resolved_token().is_none()).then(|| {
        cfg.problem(
            "admin.token_env",
            format!(
                "names {:?}, which is not set (or empty) in the environment: the admin API \
                 would run without its token",
                cfg.admin.token_env
            ),
        )
    })
}
