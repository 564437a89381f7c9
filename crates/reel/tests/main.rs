//! Behaviour tests of the `reel` binary: each test runs the real executable as a child
//! process on a generated config (store and logs in a temp dir, every listener on port 0,
//! JSON process log parsed for the bound addresses) against an in-test origin.

mod access;
mod access_log;
mod admin;
mod admission;
mod browser_cors;
mod cgroup;
mod check_messages;
mod check_probes;
mod cli;
mod client;
mod cmcd;
mod common;
mod compress;
mod contrib;
mod cors;
mod dashboard;
mod defaults;
mod disks;
mod docs;
mod effective_config;
mod fair;
mod health;
mod http3;
mod interim;
mod ktls;
mod limits;
mod origin;
mod origin_auth;
mod parked;
mod readme;
mod reload;
mod restarts;
mod scrub;
mod serve;
mod shield;
mod sites;
mod store_dir;
mod systemd;
mod tls;
mod tls_origin;
mod tls_settings;
mod token;
mod workers;
