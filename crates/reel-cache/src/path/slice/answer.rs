//! Answering a request from slices: the plan (whole object, one range, multipart), the
//! head read once, slices read or fetched in order with read-ahead, and the source the
//! codec pulls their bytes from.

use super::*;

impl WorkerCache {
    /// This worker's cache as an owned handle (the same shared state, settings, client
    /// pool and per-worker caches), for tasks that outlive a request.
    pub(in crate::path) fn owned(&self) -> WorkerCache {
        WorkerCache {
            shared: self.shared.clone(),
            settings: self.settings.clone(),
            client: self.client.clone(),
            metas: self.metas.clone(),
            read_ahead: self.read_ahead.clone(),
            statuses: self.statuses.clone(),
        }
    }

    /// GET or HEAD on a site with slicing, when no whole object is stored for the URL.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::path) async fn get_sliced(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        key: &CacheKey,
        size: u64,
        req_cc: &RequestCacheControl,
        m: &WorkerMetrics,
    ) -> Response {
        let Some(job) = Job::new(self, req, site, key, size, req_cc) else { return local(400) };
        let job = Rc::new(job);
        let range = match (req.method(), req.header("range")) {
            (Method::Get, Some(v)) => parse_range(v),
            _ => None,
        };
        // What this request's own fetch did, once it made one.
        let mut fetched: Option<Answer> = None;
        for _ in 0..MAX_ROUNDS {
            let Some(head) = job.head().await else {
                if req_cc.only_if_cached {
                    return Answer::ONLY_IF_CACHED.on(Response::error(504), &self.statuses);
                }
                // Learn the object from the slice where the request starts.
                let k = first_byte_hint(range.as_ref()) / size;
                match self.slice_round((req, &mut *body), &job, k, None, m).await {
                    Ok(ans) => fetched = ans.or(fetched),
                    Err(resp) => return resp,
                }
                continue;
            };
            let now = unix_now();
            let ans = match (fetched, decide(req_cc, &head.prep.meta, now)) {
                (Some(a), _) => a,
                (None, Decision::Fresh) => Answer::HIT,
                (None, Decision::StaleServable) => Answer::HIT_STALE,
                (None, Decision::StaleWhileRevalidate) => {
                    self.refresh_sliced(&job, &head, range.as_ref());
                    Answer::HIT_SWR
                }
                (None, Decision::GatewayTimeout) => {
                    return Answer::ONLY_IF_CACHED.on(Response::error(504), &self.statuses);
                }
                (None, Decision::MustRevalidate) => {
                    let k = first_byte(range.as_ref(), head.total) / size;
                    match self.slice_round((req, &mut *body), &job, k, Some(&head), m).await {
                        Ok(ans) => fetched = ans.or(fetched),
                        Err(resp) => return resp,
                    }
                    continue;
                }
            };
            let src = SliceSource { job: job.clone(), head: head.clone(), first: None };
            if let Some(resp) =
                self.answer_from((req, &mut *body), &job, &head, range.as_ref(), ans, src).await
            {
                return resp;
            }
        }
        self.fetch_pass(req, body, site, Answer::PASS_NOT_STORED).await
    }

    /// One fetch of slice `k` for a request that needs the head (none, or `stale`): leads
    /// it or waits for the request leading it. `Ok`: go round again (with what this
    /// request's fetch did, if it made one); `Err`: the answer.
    async fn slice_round(
        &self,
        (req, body): (&Request, &mut RequestBody<'_>),
        job: &Rc<Job>,
        k: u64,
        stale: Option<&Head>,
        m: &WorkerMetrics,
    ) -> Result<Option<Answer>, Response> {
        let shared = &self.shared;
        let mut lead = match shared.inflight.join(&lock_key_of(job, k)) {
            Role::Lead(lead) => lead,
            Role::Follow(f) => {
                m.coalesced_waiters.fetch_add(1, Relaxed);
                let s = tokio::time::timeout(self.settings.lock_timeout, f.wait()).await;
                m.coalesced_waiters.fetch_sub(1, Relaxed);
                return match s {
                    Ok(State::Failed(st)) if stale.is_none() && job.head().await.is_none() => {
                        Err(Answer::ORIGIN_ERROR.on(local(st), &self.statuses))
                    }
                    Ok(_) => Ok(None),
                    Err(_) => {
                        Err(self.fetch_pass(req, body, &job.site, Answer::LOCK_TIMEOUT).await)
                    }
                };
            }
        };
        if stale.is_none() && job.head().await.is_some() {
            // Another request's fetch stored the head meanwhile: go round with it.
            lead.publish(State::Done);
            return Ok(None);
        }
        shared.slices.viewer_fetches.fetch_add(1, Relaxed);
        let conditional = stale.is_some_and(|h| job.has_slice(h, k));
        let (fetched, t) = job.fetch_slice(k, stale, stale.is_some(), conditional, lead).await;
        let refreshed = if stale.is_some() { Answer::REFRESHED } else { Answer::MISS_STORED };
        match fetched {
            Fetched::Filling(f) if f.key() == job.primary() => {
                // The origin ignored Range; the whole object is being stored.
                let Some(prep) = self.prepared(f.meta()) else { return Err(local(502)) };
                Err(self.serve_filling(req, f, prep, Answer::MISS_STORED.after(t)).await)
            }
            Fetched::Filling(_) => Ok(Some(refreshed.after(t))),
            Fetched::Freshened(_) => Ok(Some(Answer::REVALIDATED.after(t))),
            Fetched::StaleIfError => Ok(Some(Answer::STALE_IF_ERROR.after(t))),
            Fetched::NotStored(resp) => Err(self.not_stored((req, body), &job.site, resp, t).await),
            Fetched::Failed(st) => match stale {
                Some(h) if stale_if_error_ok(&job.cc, &h.prep.meta, unix_now()) => {
                    Ok(Some(Answer::STALE_IF_ERROR.after(t)))
                }
                _ => Err(Answer::ORIGIN_ERROR.after(t).on(Response::error(st), &self.statuses)),
            },
        }
    }

    /// An origin answer to a slice request that was not stored: a 206 (of the slice, not
    /// of what the client asked for) makes the client's own request pass; anything else
    /// (a 200 too large for the store, a 416, an error) goes to the client as it is.
    async fn not_stored(
        &self,
        (req, body): (&Request, &mut RequestBody<'_>),
        site: &Site,
        resp: OriginResponse,
        t: Option<Duration>,
    ) -> Response {
        let status = resp.status.as_u16();
        if status == 206 || (status == 416 && req.header("range").is_none()) {
            drop(resp);
            return self.fetch_pass(req, body, site, Answer::MISS_NOT_STORED).await;
        }
        let ans = Answer::MISS_NOT_STORED.after(t);
        stream_origin(req, resp, ans, &self.statuses, &self.shared.pass_buffered)
    }

    /// Stale-while-revalidate of a sliced object: the head is revalidated in the
    /// background with the request's first slice, at most once at a time.
    fn refresh_sliced(&self, job: &Rc<Job>, head: &Head, range: Option<&RangeSet>) {
        let k = first_byte(range, head.total) / job.size;
        let Some(lead) = self.shared.inflight.try_lead(&lock_key_of(job, k)) else {
            return;
        };
        let (job, head) = (job.clone(), head.clone());
        tokio::task::spawn_local(async move {
            let conditional = job.has_slice(&head, k);
            let _ = job.fetch_slice(k, Some(&head), true, conditional, lead).await;
        });
    }

    /// Answers from `head`'s version, whose pieces `src` holds: conditionals, HEAD, the
    /// range plan, then the first piece before the response head is committed, and the
    /// walk of the rest. `None`: the object changed at the origin before anything was
    /// sent; go round with the new head.
    pub(in crate::path) async fn answer_from<S: Source>(
        &self,
        (req, body): (&Request, &mut RequestBody<'_>),
        job: &Rc<Job>,
        head: &Head,
        range: Option<&RangeSet>,
        ans: Answer,
        mut src: S,
    ) -> Option<Response> {
        let now = unix_now();
        let prep = head.prep.clone();
        let (t, cs) = (ans.tag(), self.statuses.get(ans.status));
        let hdrs = ReqHeaders(req);
        let v = Validators::of(&prep.meta);
        match conditional::evaluate(req.method().as_str().as_bytes(), 200, &hdrs, &v, now) {
            Outcome::Proceed => {}
            Outcome::NotModified => return Some(not_modified(&prep, now, &cs).tagged(t)),
            Outcome::PreconditionFailed => return Some(precondition_failed(&prep, &cs).tagged(t)),
        }
        let total = head.total;
        if *req.method() == Method::Head {
            return Some(prep.head(200, now, &cs).with_content_length(total).tagged(t));
        }
        let parts = match range {
            Some(set) if conditional::if_range_holds(&hdrs, &v) => Some(set.parts(total)),
            _ => None,
        };
        let plan = match parts.as_deref() {
            None if total == 0 => return Some(prep.head(200, now, &cs).tagged(t)),
            None => Plan::Whole,
            Some([]) => {
                let r = prep.head(416, now, &cs);
                let r = r.header("content-range", content_range_unsatisfied(total));
                return Some(r.tagged(t));
            }
            Some([r]) => Plan::Single(*r),
            Some(many) => {
                let ct = prep.meta.headers().get_first("content-type");
                let m = Multipart::new(many, total, ct, fresh_boundary(job.primary()));
                Plan::Multi(m)
            }
        };
        let first = match &plan {
            Plan::Whole => ByteRange { start: 0, end: total - 1 },
            Plan::Single(r) => *r,
            Plan::Multi(m) => m.parts()[0].range,
        };
        if job.cc.only_if_cached && !src.has(first.start) {
            // RFC 9111 5.2.1.7.
            return Some(Answer::ONLY_IF_CACHED.on(Response::error(504), &self.statuses));
        }
        let got = match src.prime(first.start, first.end).await {
            Ok(x) => x,
            Err(Lost::Changed) => return None,
            Err(Lost::Whole(f)) => {
                let prep = self.prepared(f.meta())?;
                return Some(self.serve_filling(req, f, prep, Answer::MISS_STORED).await);
            }
            Err(Lost::NotStored(resp)) => {
                return Some(self.not_stored((req, body), &job.site, *resp, None).await);
            }
            Err(Lost::Failed(st)) => {
                return Some(Answer::ORIGIN_ERROR.on(Response::error(st), &self.statuses));
            }
            Err(Lost::LockTimeout) => {
                return Some(self.fetch_pass(req, body, &job.site, Answer::LOCK_TIMEOUT).await);
            }
        };
        let ans = match got {
            Got::Stored => ans,
            Got::Joined if ans.result == Answer::HIT.result => Answer::MISS_COLLAPSED,
            Got::Joined => ans,
            Got::Led(t) => Answer::MISS_STORED.after(t),
        };
        let (t, cs) = (ans.tag(), self.statuses.get(ans.status));
        let r = match plan {
            Plan::Whole => {
                let all = ByteRange { start: 0, end: total - 1 };
                prep.head(200, now, &cs)
                    .stream(pieces::stream(src, pieces::single(all)), Some(total))
            }
            Plan::Single(r) => prep
                .head(206, now, &cs)
                .header("content-range", content_range(r, Some(total)))
                .stream(pieces::stream(src, pieces::single(r)), Some(r.len())),
            Plan::Multi(m) => {
                let len = m.content_length();
                pieces::multipart_head(&prep, now, &cs, &m)
                    .stream(pieces::stream(src, pieces::multipart(&m)), Some(len))
            }
        };
        Some(r.tagged(t))
    }
}

/// What a sliced response sends.
enum Plan {
    Whole,
    Single(ByteRange),
    Multi(Multipart),
}

/// The first byte a request needs, before the length is known: its first explicit range
/// start (a suffix range needs the length: the object is learnt from slice 0).
fn first_byte_hint(range: Option<&RangeSet>) -> u64 {
    use crate::policy::range::RangeSpec;
    match range.and_then(|r| r.specs().first()) {
        Some(RangeSpec::FromTo(f, _) | RangeSpec::From(f)) => *f,
        _ => 0,
    }
}

/// The first byte a request needs of an object of `total` bytes.
fn first_byte(range: Option<&RangeSet>, total: u64) -> u64 {
    range.and_then(|r| r.parts(total).first().map(|p| p.start)).unwrap_or(0)
}

/// The slices of one version, for the body walk: the first slice as the request located
/// it, the others located (or fetched) as the walk reaches them, read-ahead started as it
/// enters a slice it reads to the end.
struct SliceSource {
    job: Rc<Job>,
    head: Head,
    first: Option<(u64, PieceData)>,
}

/// The pieces of one version of an object, as a response needs them.
pub(in crate::path) trait Source: Pieces {
    /// Whether the piece holding `pos` is stored.
    fn has(&self, pos: u64) -> bool;
    /// Gets the piece holding `pos` (the response's first byte; the first range ends at
    /// `until`) before the response head is committed, keeping it for the walk.
    async fn prime(&mut self, pos: u64, until: u64) -> Result<Got, Lost>;
}

impl Source for SliceSource {
    fn has(&self, pos: u64) -> bool {
        self.job.has_slice(&self.head, pos / self.job.size)
    }

    async fn prime(&mut self, pos: u64, _until: u64) -> Result<Got, Lost> {
        let k = pos / self.job.size;
        let (data, got) = self.job.locate(&self.head, k).await?;
        self.first = Some((k, data));
        Ok(got)
    }
}

impl Pieces for SliceSource {
    async fn piece_at(&mut self, pos: u64, until: u64) -> Result<Piece, String> {
        let size = self.job.size;
        let k = pos / size;
        let data = match self.first.take() {
            Some((fk, d)) if fk == k => d,
            _ => match self.job.locate(&self.head, k).await {
                Ok((d, got)) => {
                    if matches!(got, Got::Led(_)) {
                        self.job.cache.shared.slices.waits.fetch_add(1, Relaxed);
                    }
                    d
                }
                Err(lost) => return Err(lost.describe()),
            },
        };
        let (start, len) = (k * size, slice_len(size, self.head.total, k));
        if until >= start + len - 1 {
            // The viewer reads this slice to its end: it is reading sequentially.
            crate::path::readahead::schedule(&self.job, &self.head, k);
        }
        Ok(Piece { data, start, len })
    }
}
