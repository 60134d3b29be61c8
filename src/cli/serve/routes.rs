//! The routes of `lab serve` and what each reads from the store. Store calls are
//! blocking: each runs on tokio's blocking pool.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use super::access::{Access, guard};
use super::cancel::QueuedCampaign;
use super::live::{ForPage, Live};
use super::live_parts::{history_link, percent_decoded};
use super::pages;
use super::raw_file::{RawFileError, open_beneath};
use super::report_cache::ReportCache;
use super::submitted::SubmittedCampaign;
use crate::cli::lab_view::{self as status_view, StatusView};
use crate::config::Lab;
use crate::report;
use crate::store::{MANIFEST, Place, RawFiles, RawFilesError, Store};

/// What every request shares.
#[derive(Clone)]
pub struct Shared {
    pub lab: Arc<Lab>,
    pub store: Store,
    pub access: Arc<Access>,
    pub live: Arc<Live>,
    /// The `lab run`s a cancel was sent to.
    pub asked: Arc<super::cancel::Asked>,
    /// Finished campaigns' report pages, drawn once (shared with the live pages' watcher).
    pub reports: Arc<ReportCache>,
    /// Wrong tokens per client address.
    pub logins: Arc<super::login_limit::LoginLimit>,
    /// Where raw files are read from: the artifacts folder, or the lab's bucket for the
    /// files the store has confirmed there.
    pub raw: Arc<RawFiles>,
}

pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/", get(lab_page))
        .route("/status.json", get(status_json))
        .route("/campaigns", get(campaigns_page))
        .route("/campaigns/{id}", get(campaign_page))
        .route("/campaigns/{id}/{file}", get(campaign_file))
        .route("/campaigns/{id}/cancel", axum::routing::post(cancel))
        .route("/submit", get(submit_page).post(submit))
        .route("/history", get(history_list))
        .route("/history/{runbook}", get(history_page))
        .route("/artifacts/{*path}", get(artifact))
        .route("/events", get(events))
        .route("/steps", get(steps_page))
        .route("/steps/{id}", axum::routing::post(answer))
        .route("/login", get(login_page).post(login))
        // Inside the guard: a refused request's body is never waited for.
        .layer(axum::middleware::from_fn_with_state(shared.clone(), super::connections::body_in_time))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        // Forms are small: a bigger body is refused (413) before it is read whole.
        .layer(axum::extract::DefaultBodyLimit::max(shared.lab.serve.max_body_bytes as usize))
        .with_state(shared)
}

/// A request's failure as the page shows it: a status and one line saying why.
#[derive(Debug)]
pub struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{}\n", self.1)).into_response()
    }
}

fn bad(why: impl Into<String>) -> Failure {
    Failure(StatusCode::BAD_REQUEST, why.into())
}

fn not_found(why: impl Into<String>) -> Failure {
    Failure(StatusCode::NOT_FOUND, why.into())
}

/// Runs `f` on the blocking pool; its error becomes a 500 with the error's own text
/// (store errors never carry the password).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Failure> + Send + 'static) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Failure(StatusCode::INTERNAL_SERVER_ERROR, format!("the request's task failed: {e}")))?
}

pub(super) fn internal(e: impl std::fmt::Display) -> Failure {
    Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// A campaign id as the store makes them: letters, digits, `-`, `_`, `.`; never `..`.
pub(super) fn campaign_id(id: &str) -> Result<&str, Failure> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && id != "."
        && !id.contains("..")
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(id) } else { Err(bad(format!("`{}` is not a campaign id", id.escape_default()))) }
}

/// A runbook name as a history page takes it: at most 200 printable characters.
pub(super) fn runbook_name(name: &str) -> Result<&str, Failure> {
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(bad("a runbook name has 1 to 200 printable characters"));
    }
    Ok(name)
}

/// What the lab and campaigns pages show: `lab status`'s view, the campaigns queued for
/// their devices by a `lab run`, and those submitted to the agents and not over.
pub(super) type LabView = (StatusView, Vec<QueuedCampaign>, Vec<SubmittedCampaign>);

/// The [`LabView`] now.
pub(super) fn lab_view(lab: &Lab, store: &Store) -> Result<LabView, Failure> {
    let view = status_view::collect(lab, Some(store)).map_err(|e| internal(e.message))?;
    let queued = super::cancel::queued_campaigns(store).map_err(internal)?;
    let submitted = super::submitted::submitted_campaigns(&view, store).map_err(internal)?;
    Ok((view, queued, submitted))
}

/// A campaign's report page as `lab report --format html` renders it.
pub(super) fn report_html(data: &report::CampaignData) -> String {
    report::render_html(&report::build_report(data), data, &report::battery_curves(data))
}

async fn lab_page(State(s): State<Shared>) -> Result<Html<String>, Failure> {
    let (view, queued, submitted) = blocking(move || lab_view(&s.lab, &s.store)).await?;
    Ok(Html(pages::lab(&view, &queued, &submitted)))
}

/// Cancels a campaign submitted to the agents as `lab cancel` does
/// (src/cli/serve/submitted.rs; 409 when it is over), else a campaign a `lab run` keeps
/// queued (src/cli/serve/cancel.rs): 404 when it is not queued, 409 when it waits on
/// another machine.
async fn cancel(State(s): State<Shared>, UrlPath(id): UrlPath<String>) -> Result<Html<String>, Failure> {
    use super::cancel::CancelError;
    use super::submitted::SubmittedCancelError;
    let id = campaign_id(&id)?.to_string();
    let lab = s.lab.name.clone();
    let said = blocking(move || {
        let at = crate::runner::now_rfc3339();
        match super::submitted::cancel_submitted(&s.store, &id, &at) {
            Ok(Some(said)) => return Ok(said),
            Ok(None) => {}
            Err(e @ SubmittedCancelError::Ended { .. }) => return Err(Failure(StatusCode::CONFLICT, e.to_string())),
            Err(e @ SubmittedCancelError::Store(_)) => return Err(internal(e)),
        }
        super::cancel::cancel(&s.store, &id, &crate::store::this_host(), &s.asked).map_err(|e| match e {
            CancelError::NotQueued(_) => not_found(e.to_string()),
            CancelError::Elsewhere { .. }
            | CancelError::Scheduled { .. }
            | CancelError::AlreadyAsked { .. }
            | CancelError::Unverified { .. } => Failure(StatusCode::CONFLICT, e.to_string()),
            CancelError::Signal { .. } | CancelError::Store(_) => internal(e),
        })
    })
    .await?;
    Ok(Html(pages::said("Cancelled", &lab, &said, "/")))
}

/// The Submit form: the runbook folder's runbooks and a priority.
async fn submit_page(State(s): State<Shared>) -> Result<Html<String>, Failure> {
    let (lab, dir) = (s.lab.name.clone(), s.lab.serve.runbooks.clone());
    // A folder that cannot be read is said on the page, with its fix.
    let names = blocking(move || Ok(super::submit::runbooks(&dir))).await?;
    Ok(Html(match names {
        Ok(names) => pages::submit(&lab, &names, None),
        Err(e) => pages::submit(&lab, &[], Some(&e.to_string())),
    }))
}

/// A runbook of the folder submitted to the agents (src/cli/serve/submit.rs): 400 for a
/// name the folder does not list, a bad priority or a runbook `lab submit` would refuse.
async fn submit(
    State(s): State<Shared>,
    axum::Form(form): axum::Form<std::collections::BTreeMap<String, String>>,
) -> Result<Html<String>, Failure> {
    use super::submit::SubmitError;
    let lab = s.lab.name.clone();
    let name = form.get("runbook").cloned().unwrap_or_default();
    let priority = form.get("priority").cloned().unwrap_or_default();
    let done = blocking(move || {
        super::submit::submit(&s.lab, &name, &priority).map_err(|e| match &e {
            SubmitError::NotListed { .. } | SubmitError::Priority(_) => bad(e.to_string()),
            SubmitError::Launch(l) => match l.failure() {
                crate::runner::LaunchFailure::BadInput => bad(e.to_string()),
                crate::runner::LaunchFailure::Unavailable => Failure(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
                _ => internal(e),
            },
            SubmitError::Folder { .. } => internal(e),
        })
    })
    .await?;
    Ok(Html(pages::submitted(&lab, &done)))
}

/// Every runbook with campaigns in the store, each linking its history.
async fn history_list(State(s): State<Shared>) -> Result<Html<String>, Failure> {
    let lab = s.lab.name.clone();
    let names = blocking(move || s.store.runbook_names().map_err(internal)).await?;
    Ok(Html(pages::histories(&lab, &names)))
}

/// A runbook's history (`lab history --format html`), each point linked to its campaign.
async fn history_page(State(s): State<Shared>, UrlPath(runbook): UrlPath<String>) -> Result<Html<String>, Failure> {
    runbook_name(&runbook)?;
    let html = blocking(move || {
        let history = report::history_for(&s.store, &s.lab, &runbook, &report::HistoryFilter::default()).map_err(
            |e| match e {
                report::HistoryError::UnknownRunbook { .. } => not_found(e.to_string()),
                report::HistoryError::Store(e) => internal(e),
            },
        )?;
        let html = report::render_history_html_linked(&history, &history_link);
        Ok(pages::history(&html))
    })
    .await?;
    Ok(Html(html))
}

async fn status_json(State(s): State<Shared>) -> Result<Response, Failure> {
    let view = blocking(move || status_view::collect(&s.lab, Some(&s.store)).map_err(|e| internal(e.message))).await?;
    let text = serde_json::to_string_pretty(&view).map_err(internal)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response())
}

async fn campaigns_page(State(s): State<Shared>) -> Result<Html<String>, Failure> {
    let (view, queued, submitted) = blocking(move || lab_view(&s.lab, &s.store)).await?;
    Ok(Html(pages::campaigns(&view, &queued, &submitted)))
}

/// Campaign `id` is in the store: else 404 (a store error is a 500).
fn known(store: &Store, id: &str) -> Result<(), Failure> {
    store.campaign(id).map(|_| ()).map_err(|e| store_failure(e, id))
}

/// A store error reading campaign `id`: 404 when there is no such campaign, else 500.
pub(super) fn store_failure(e: crate::store::StoreError, id: &str) -> Failure {
    match e {
        crate::store::StoreError::NoCampaign(_) => not_found(format!("no campaign {id} in this lab's store")),
        e => internal(e),
    }
}

/// The store's data of campaign `id`, or 404.
pub(super) fn load(store: &Store, id: &str) -> Result<report::CampaignData, Failure> {
    known(store, id)?;
    report::load(store, id).map_err(internal)
}

async fn campaign_page(State(s): State<Shared>, UrlPath(id): UrlPath<String>) -> Result<Html<String>, Failure> {
    let id = campaign_id(&id)?.to_string();
    let page = blocking(move || Ok(pages::campaign(&id, &s.reports.report(&s.store, &id)?))).await?;
    Ok(Html(page))
}

/// `results.csv`, `report.json`, `junit.xml` (rendered from the store) and `manifest.json`
/// (the campaign's own file).
async fn campaign_file(
    State(s): State<Shared>,
    UrlPath((id, file)): UrlPath<(String, String)>,
) -> Result<Response, Failure> {
    let id = campaign_id(&id)?.to_string();
    if file == MANIFEST {
        let (store, known_id) = (s.store.clone(), id.clone());
        blocking(move || known(&store, &known_id)).await?;
        // From the bucket once its upload is confirmed there, else the local folder.
        let bytes = s.raw.read(&s.store, &id, MANIFEST).await.map_err(|e| match e {
            RawFilesError::Local { .. } | RawFilesError::Missing { .. } => {
                not_found(format!("campaign {id} has no manifest yet"))
            }
            e => internal(e),
        })?;
        return Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response());
    }
    let (kind, body) = blocking(move || {
        let data = load(&s.store, &id)?;
        let rep = || report::build_report(&data);
        match file.as_str() {
            "report.json" => Ok(("application/json", report::render_json(&rep()).into_bytes())),
            "junit.xml" => Ok(("application/xml", report::render_junit(&rep()).into_bytes())),
            "results.csv" => {
                let mut out = Vec::new();
                report::write_results_csv(&data, &mut out).map_err(internal)?;
                Ok(("text/csv", out))
            }
            other => Err(not_found(format!(
                "no file `{}`; a campaign has results.csv, report.json, junit.xml and manifest.json",
                other.escape_default()
            ))),
        }
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, kind)], body).into_response())
}

/// A raw file of a campaign: `artifacts/ID/…` of a campaign in the store, nothing else of
/// the folder (the store's own file and whatever else lies beside the campaigns is not
/// served).
async fn artifact(State(s): State<Shared>, UrlPath(asked): UrlPath<String>) -> Result<Response, Failure> {
    let headers = [
        (header::CONTENT_TYPE, "application/octet-stream"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CONTENT_DISPOSITION, "attachment"),
    ];
    let (id, rest) = asked.split_once('/').unwrap_or((asked.as_str(), ""));
    let id = campaign_id(id)?.to_string();
    if rest.is_empty() {
        return Err(bad("name a file of a campaign: /artifacts/CAMPAIGN/FILE"));
    }
    let (store, known_id) = (s.store.clone(), id.clone());
    blocking(move || known(&store, &known_id)).await?;
    // A file the store has confirmed in the lab's bucket streams from there (a campaign
    // another machine ran); any other is opened beneath the local folder as below.
    match s.raw.place(&s.store, &id, rest).await {
        Ok(Place::Object { key, size }) => {
            let bucket = s.raw.bucket().expect("an object is in the lab's bucket");
            let chunks = bucket.get(&key).await.map_err(|e| match e {
                RawFilesError::Missing { .. } => not_found(e.to_string()),
                e => internal(e),
            })?;
            let body = axum::body::Body::from_stream(chunks);
            let length = (header::CONTENT_LENGTH, size.to_string());
            return Ok((headers, [length], body).into_response());
        }
        Ok(Place::Local(_)) => {}
        Err(e @ RawFilesError::OtherBucket { .. }) => return Err(not_found(e.to_string())),
        Err(e) => return Err(internal(e)),
    }
    let bytes = blocking(move || {
        // Opened in one step beneath the artifacts folder (the campaign's own folder
        // included), no link followed: nothing can be swapped in between a check and the
        // open (src/cli/serve/raw_file.rs).
        let mut file = open_beneath(&s.lab.artifacts_dir, &asked).map_err(|e| match e {
            RawFileError::NotInside(_) | RawFileError::Link(_) => bad(e.to_string()),
            RawFileError::Missing(_) | RawFileError::NotAFile(_) => not_found(e.to_string()),
            RawFileError::Folder { .. } | RawFileError::Open { .. } => internal(e),
        })?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(internal)?;
        Ok(bytes)
    })
    .await?;
    Ok((headers, bytes).into_response())
}

async fn steps_page(State(s): State<Shared>) -> Result<Html<String>, Failure> {
    let lab = s.lab.name.clone();
    let steps = blocking(move || s.store.pending_steps(None).map_err(internal)).await?;
    Ok(Html(pages::steps(&lab, &steps)))
}

/// An operator's answer from the steps page: the form's fields are the settings to attest
/// (`brightness=50`), and `by`. Checked and written as `lab confirm` does.
async fn answer(
    State(s): State<Shared>,
    UrlPath(id): UrlPath<String>,
    axum::Form(form): axum::Form<std::collections::BTreeMap<String, String>>,
) -> Result<Response, Failure> {
    let id: i64 = id.parse().map_err(|_| bad(format!("`{}` is not a step id", id.escape_default())))?;
    let by = form.get("by").map(|b| b.trim()).filter(|b| !b.is_empty()).unwrap_or("operator").to_string();
    if by.len() > 100 || by.chars().any(char::is_control) {
        return Err(bad("`by` must be a name of at most 100 printable characters"));
    }
    let attest: Vec<String> = form
        .iter()
        .filter(|(k, v)| k.as_str() != "by" && !v.trim().is_empty())
        .map(|(k, v)| format!("{k}={}", v.trim()))
        .collect();
    let said = blocking(move || {
        let step = s.store.step(id).map_err(internal)?.ok_or_else(|| not_found(format!("no operator step {id}")))?;
        crate::cli::step_answer::answer_step(&s.store, &step, &attest, &by).map_err(|e| bad(e.message))
    })
    .await?;
    Ok(Html(pages::answered(&said)).into_response())
}

async fn login_page(State(s): State<Shared>) -> Html<String> {
    Html(pages::login(&s.lab.name, None))
}

/// The token from the login form: right, it becomes the `lab_token` cookie (HttpOnly,
/// SameSite=Strict) and the browser goes to the steps; wrong, 401 and the form again.
/// Wrong tokens are limited per client address (src/cli/serve/login_limit.rs): a locked-out
/// address gets 429 and its token is not compared.
async fn login(
    State(s): State<Shared>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: axum::http::HeaderMap,
    axum::Form(form): axum::Form<std::collections::BTreeMap<String, String>>,
) -> Response {
    let client = s.access.client(peer.map(|p| p.0.0), &headers);
    if let Err(l) = s.logins.before_compare(client, std::time::Instant::now()) {
        return super::access::locked_out(client, l);
    }
    let given = form.get("token").map(|t| t.trim()).unwrap_or("");
    if !s.access.accepts(given) {
        super::access::wrong_token(&s, client);
        return (StatusCode::UNAUTHORIZED, Html(pages::login(&s.lab.name, Some("that is not this lab's token"))))
            .into_response();
    }
    s.logins.succeeded(client);
    let cookie = s.access.session_cookie();
    (StatusCode::SEE_OTHER, [(header::SET_COOKIE, cookie), (header::LOCATION, "/steps".to_string())]).into_response()
}

/// Which page `/events` is for: `?page=PATH`, a page that has a live part.
#[derive(serde::Deserialize)]
pub struct Watch {
    page: Option<String>,
}

/// A page path `/events` may watch: one of the live pages, with a valid campaign id.
fn watched(page: &str) -> Result<&str, Failure> {
    let fixed = ["/", "/campaigns", "/steps", "/history"];
    let ok = fixed.contains(&page)
        || page.strip_prefix("/campaigns/").is_some_and(|id| campaign_id(id).is_ok())
        || page.strip_prefix("/history/").and_then(percent_decoded).is_some_and(|n| runbook_name(&n).is_ok());
    if ok { Ok(page) } else { Err(bad(format!("`{}` is no page with live updates", page.escape_default()))) }
}

/// Server-sent events for one page (`?page=PATH`, default the lab page): `page` with its
/// new live part whenever the store moved, and a keep-alive comment every 15 s
/// (src/cli/serve/live.rs).
async fn events(
    State(s): State<Shared>,
    axum::extract::Query(w): axum::extract::Query<Watch>,
) -> Result<Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>>, Failure> {
    let page = watched(w.page.as_deref().unwrap_or("/"))?;
    let listener = s.live.listen(page);
    let stream = futures_util::stream::unfold(listener, |mut l| async move {
        loop {
            match l.rx.recv().await {
                Ok(msg) => {
                    let event = match msg.for_page(&l.path) {
                        // A carriage return cannot travel in an event's data.
                        Some(ForPage::Content(html)) => Event::default().event("page").data(html.replace('\r', "")),
                        Some(ForPage::KeepAlive) => Event::default().comment(""),
                        None => continue,
                    };
                    return Some((Ok(event), l));
                }
                // Messages were missed: the page gets its whole content at the next check.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => l.refresh(),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn campaign_ids_and_watched_pages_are_checked() {
        for id in ["..", "a/b", "a b", "", "%2e%2e"] {
            assert!(campaign_id(id).is_err(), "{id}");
        }
        assert!(campaign_id("aa-identical-20261206-032205").is_ok());
        for page in ["/", "/campaigns", "/steps", "/history", "/campaigns/c-1", "/history/envoy%20poll"] {
            assert!(watched(page).is_ok(), "{page}");
        }
        for page in ["/status.json", "/campaigns/..", "/history/", "/history/%ZZ", "/history/a%0Ab", "x"] {
            assert!(watched(page).is_err(), "{page}");
        }
    }
}
