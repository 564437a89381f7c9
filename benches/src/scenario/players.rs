//! Scenarios of viewers that behave like players: a live stream's viewers, VOD viewers of
//! a catalog with Zipf popularity, and the Zipf-popular objects of a library.

use super::*;

/// Fetches and parses a playlist; failures are counted and yield `None`.
async fn fetch_playlist(
    client: &mut Client,
    stats: &mut Stats,
    target: &Target,
    headers: &[String],
    text: &mut Vec<u8>,
) -> Option<playlist::MediaPlaylist> {
    text.clear();
    let req = build_get(&target.host_header, &target.path, headers);
    let t = Instant::now();
    let res = client.get(&req, Body::Capture(text)).await;
    account(stats, t, &res).await;
    match res {
        Ok(r) if r.status == 200 => {}
        _ => return None,
    }
    stats.playlists += 1;
    let parsed = std::str::from_utf8(text)
        .ok()
        .and_then(|s| playlist::parse(s, &target.path, &target.host_header).ok());
    if parsed.is_none() {
        stats.error(ErrorKind::Protocol);
    }
    parsed
}

/// Fetches one media segment, counting it (and its time to first byte) when it is a 2xx.
pub(super) async fn fetch_segment(
    client: &mut Client,
    stats: &mut Stats,
    target: &Target,
    path: &str,
    headers: &[String],
) {
    let req = build_get(&target.host_header, path, headers);
    let t = Instant::now();
    let res = client.get(&req, Body::Discard).await;
    account(stats, t, &res).await;
    if let Ok(r) = &res
        && (200..300).contains(&r.status)
    {
        stats.record_segment(r.first_byte.saturating_duration_since(t.into_std()));
    }
}

/// Runs the live scenario. A viewer connects, waits for its start instant, then
/// every target duration reloads the playlist; on the first load it fetches
/// the newest segment (joining at the live edge), afterwards every segment
/// with a higher media sequence number than the last one it fetched.
pub async fn run_live(cfg: &LiveConfig) -> Result<Report, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.viewers, "viewers must be 1..=1000000")?;
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    // Give every viewer time to connect first, so a synchronized start is a herd of
    // requests, not of connects; bounded by the run's own duration.
    let t0 = start + (cfg.common.duration / 10).min(Duration::from_millis(500));
    let mut set = JoinSet::new();
    for _ in 0..cfg.viewers {
        let target = cfg.playlist.clone();
        let headers = cfg.common.headers.clone();
        let timeout = cfg.common.timeout;
        let offset = match cfg.jitter {
            Some(j) if !j.is_zero() => {
                Duration::from_secs_f64(rand::rng().random::<f64>() * j.as_secs_f64())
            }
            _ => Duration::ZERO,
        };
        set.spawn(async move {
            let mut stats = Stats::new();
            let mut client = Client::new(target.endpoint(), timeout);
            if let Err(kind) = client.connect().await {
                stats.error(kind);
            }
            let mut next = t0 + offset;
            let mut last: Option<u64> = None;
            let mut text = Vec::new();
            while next < deadline {
                tokio::time::sleep_until(next).await;
                let poll = Instant::now();
                let Some(pl) =
                    fetch_playlist(&mut client, &mut stats, &target, &headers, &mut text).await
                else {
                    next = poll + Duration::from_secs(1);
                    continue;
                };
                let fresh: Vec<_> = match last {
                    None => pl.segments.last().into_iter().collect(),
                    Some(l) => pl.segments.iter().filter(|s| s.msn > l).collect(),
                };
                for seg in fresh {
                    if Instant::now() >= deadline {
                        break;
                    }
                    fetch_segment(&mut client, &mut stats, &target, &seg.path, &headers).await;
                    last = Some(seg.msn);
                }
                next = poll + Duration::from_secs_f64(pl.target_duration.max(0.1));
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    Ok(stats.report("live", &cfg.playlist.url(), cfg.viewers, start.elapsed()))
}

/// Expands the first `{i}` or `{i:0N}` of `template` with `rank`; `None` without a placeholder.
pub fn title_path(template: &str, rank: usize) -> Option<String> {
    let open = template.find("{i")?;
    let close = open + template[open..].find('}')?;
    let spec = &template[open + 2..close];
    let num = match spec.strip_prefix(":0") {
        None if spec.is_empty() => rank.to_string(),
        Some(w) => format!("{rank:0width$}", width = w.parse::<usize>().ok()?.min(20)),
        None => return None,
    };
    Some(format!("{}{}{}", &template[..open], num, &template[close + 1..]))
}

/// Runs the VOD scenario.
pub async fn run_vod(cfg: &VodConfig) -> Result<Report, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.viewers, "viewers must be 1..=1000000")?;
    check_count(cfg.titles, "titles must be 1..=1000000")?;
    if !cfg.title_template.starts_with('/') || title_path(&cfg.title_template, 0).is_none() {
        return Err(ScenarioError::Invalid(
            "title template must start with / and contain {i} or {i:0N}",
        ));
    }
    let zipf = Zipf::new(cfg.titles, cfg.zipf_exponent);
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for v in 0..cfg.viewers {
        let server = cfg.server.clone();
        let headers = cfg.common.headers.clone();
        let timeout = cfg.common.timeout;
        let template = cfg.title_template.clone();
        let zipf = zipf.clone();
        let realtime = cfg.realtime;
        let seed = cfg.seed.wrapping_add(v as u64);
        set.spawn(async move {
            let mut stats = Stats::new();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut client = Client::new(server.endpoint(), timeout);
            let mut text = Vec::new();
            while Instant::now() < deadline {
                let rank = zipf.sample(&mut rng);
                let title = server.with_path(title_path(&template, rank).unwrap_or_default());
                let Some(pl) =
                    fetch_playlist(&mut client, &mut stats, &title, &headers, &mut text).await
                else {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                };
                if pl.segments.is_empty() {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
                let mut due = Instant::now();
                for seg in &pl.segments {
                    if realtime {
                        if due >= deadline {
                            break;
                        }
                        tokio::time::sleep_until(due).await;
                        due += Duration::from_secs_f64(seg.duration.max(0.0));
                    } else if Instant::now() >= deadline {
                        break;
                    }
                    fetch_segment(&mut client, &mut stats, &title, &seg.path, &headers).await;
                }
                if realtime {
                    // The next title starts when this one has finished playing.
                    tokio::time::sleep_until(due.min(deadline)).await;
                }
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    let url = cfg.server.with_path(cfg.title_template.clone()).url();
    Ok(stats.report("vod", &url, cfg.viewers, start.elapsed()))
}

/// Runs the `zipf` scenario (see [`ZipfConfig`]). Latency counts from the send: a viewer
/// never has more than one request out.
pub async fn run_zipf(cfg: &ZipfConfig) -> Result<Report, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.viewers, "viewers must be 1..=1000000")?;
    check_count(cfg.objects, "objects must be 1..=1000000")?;
    if !cfg.target.path.starts_with('/') || title_path(&cfg.target.path, 0).is_none() {
        return Err(ScenarioError::Invalid("the URL's path must contain {i} or {i:0N}"));
    }
    if cfg.interval.is_some_and(|i| i.is_zero()) {
        return Err(ScenarioError::Invalid("interval must be > 0"));
    }
    if !(0.0..=1.0).contains(&cfg.one_hit_share) {
        return Err(ScenarioError::Invalid("one-hit share must be 0..=1"));
    }
    // One-hit numbers: past any catalog, a range of their own per seed.
    let one_hit = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(
        2_000_000 + (cfg.seed % 1_000_000) as usize * 1_000_000_000,
    ));
    let zipf = Zipf::new(cfg.objects, cfg.exponent);
    let reqs: std::sync::Arc<Vec<(Vec<u8>, Option<bool>)>> = std::sync::Arc::new(
        (0..cfg.objects)
            .map(|i| {
                let path = title_path(&cfg.target.path, i).unwrap_or_default();
                let get = build_get(&cfg.target.host_header, &path, &cfg.common.headers);
                (get, cfg.common.mark.on().then(|| cfg.common.mark.url_marks(&path)))
            })
            .collect(),
    );
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for v in 0..cfg.viewers {
        let (zipf, reqs, one_hit) = (zipf.clone(), reqs.clone(), one_hit.clone());
        let (share, target, mark) =
            (cfg.one_hit_share, cfg.target.clone(), cfg.common.mark.clone());
        let headers = cfg.common.headers.clone();
        let mut client =
            Client::marking(cfg.target.endpoint(), cfg.common.timeout, &cfg.common.mark);
        let interval = cfg.interval;
        let seed = cfg.seed.wrapping_add(v as u64);
        let viewers = cfg.viewers as u32;
        set.spawn(async move {
            let mut stats = Stats::new();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut due = start + interval.map_or(Duration::ZERO, |i| i * v as u32 / viewers);
            loop {
                tokio::time::sleep_until(due).await;
                if Instant::now() >= deadline {
                    break;
                }
                // No draw without one-hit URLs: the catalog sequence stays that of a seed.
                if share > 0.0 && rng.random::<f64>() < share {
                    let n = one_hit.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let path = title_path(&target.path, n).unwrap_or_default();
                    let req = build_get(&target.host_header, &path, &headers);
                    let url_mark = mark.on().then(|| mark.url_marks(&path));
                    let t = Instant::now();
                    let res = client.get(&req, Body::Discard).await;
                    account_marked(&mut stats, t, &res, url_mark).await;
                    if let Ok(r) = &res {
                        stats.one_hit += 1;
                        stats.one_hit_marked += u64::from(r.marked);
                    }
                } else {
                    let (req, mark) = &reqs[zipf.sample(&mut rng)];
                    let t = Instant::now();
                    let res = client.get(req, Body::Discard).await;
                    account_marked(&mut stats, t, &res, *mark).await;
                }
                // Late viewers do not catch up with a burst.
                due = interval.map_or_else(Instant::now, |i| (due + i).max(Instant::now()));
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    Ok(stats.report("zipf", &cfg.target.url(), cfg.viewers, start.elapsed()))
}
