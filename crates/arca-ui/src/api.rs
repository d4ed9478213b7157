//! The routes: pages, embedded assets and the JSON API under `/api/` (documented in
//! docs/UI.md), all behind the token guard.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::query::RawQuery;
use crate::state::{ApiError, App, blocking};
use crate::tasks::{self, PolicyFields};
use crate::{assets, auth, data, download, forms, pages, profiles};

/// Every route of the server.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(pages::overview_page))
        .route("/open", get(pages::open_page))
        .route("/snapshots", get(pages::snapshots_page))
        .route("/snapshots/{id}", get(pages::browse_page))
        .route("/snapshots/{id}/download", get(download::download))
        .route("/diff", get(pages::diff_page))
        .route("/restore", get(forms::restore_page))
        .route("/backup", get(forms::backup_page))
        .route("/check", get(forms::check_page))
        .route("/forget", get(forms::forget_page))
        .route("/jobs", get(forms::jobs_page))
        .route("/jobs/{id}", get(forms::job_page))
        .route("/static/app.css", get(assets::css))
        .route("/static/app.js", get(assets::js))
        .route("/api/status", get(status))
        .route("/api/open", post(open))
        .route("/api/overview", get(overview))
        .route("/api/snapshots", get(snapshots))
        .route("/api/snapshots/{id}/tree", get(tree))
        .route("/api/snapshots/{id}/download", get(download::download))
        .route("/api/diff", get(diff))
        .route("/api/profiles", get(profiles_list))
        .route("/api/forget/preview", get(forget_preview))
        .route("/api/restore", post(restore))
        .route("/api/backup", post(backup))
        .route("/api/check", post(check))
        .route("/api/forget", post(forget))
        .route("/api/prune", post(prune))
        .route("/api/jobs", get(jobs))
        .route("/api/jobs/{id}", get(job))
        .route("/api/jobs/{id}/cancel", post(cancel))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            auth::guard,
        ))
        .with_state(app)
}

/// Errors of `/api/` that the framework answers itself (a path segment that is not UTF-8, a
/// method the route does not take) come as the API's JSON `{"error": ...}` too.
async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let r = next.run(req).await;
    let status = r.status();
    let json = r
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !api || json || !(status.is_client_error() || status.is_server_error()) {
        return r;
    }
    let bytes = axum::body::to_bytes(r.into_body(), 64 << 10)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let message = match text.trim() {
        "" => status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_lowercase(),
        t => t.to_string(),
    };
    ApiError::with(status, message).into_response()
}

async fn not_found(State(app): State<Arc<App>>, uri: axum::http::Uri) -> Response {
    let e = ApiError::not_found(format!("no page at {}", uri.path()));
    if uri.path().starts_with("/api/") {
        e.into_response()
    } else {
        pages::error_page(&app, &e)
    }
}

/// A JSON body, with a readable error when it does not parse.
fn body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(if bytes.is_empty() { b"{}" } else { bytes })
        .map_err(|e| ApiError::bad(format!("invalid request: {e}")))
}

fn json_result<T: serde::Serialize>(r: Result<T, ApiError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /api/status`: where the repository is and whether it is open.
async fn status(State(app): State<Arc<App>>) -> Response {
    let a = Arc::clone(&app);
    let r = blocking(move || a.repo().map(|_| ())).await;
    let (open, error) = match r {
        Ok(()) => (true, None),
        Err(e) => (false, Some(e.message)),
    };
    Json(json!({"location": app.location, "open": open, "error": error})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenRequest {
    password: String,
}

/// `POST /api/open {"password": ...}`.
async fn open(State(app): State<Arc<App>>, raw: axum::body::Bytes) -> Response {
    let r: OpenRequest = match body(&raw) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let a = Arc::clone(&app);
    let res = blocking(move || a.open(&r.password)).await;
    json_result(res.map(|()| json!({"open": true})))
}

/// `GET /api/overview`.
async fn overview(State(app): State<Arc<App>>) -> Response {
    let a = Arc::clone(&app);
    json_result(
        blocking(move || {
            let repo = a.repo()?;
            let index = a.index(&repo)?;
            let last = a.last_check.lock().map(|c| c.clone()).unwrap_or(None);
            data::overview(&repo, &index, last)
        })
        .await,
    )
}

/// `GET /api/snapshots?host=&tag=&path=&sort=&order=`.
async fn snapshots(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    json_result(blocking(move || data::snapshots(&*app.repo()?, &q)).await)
}

/// `GET /api/snapshots/{id}/tree?path=`.
async fn tree(
    State(app): State<Arc<App>>,
    UrlPath(spec): UrlPath<String>,
    q: RawQuery,
) -> Response {
    let path = q.bytes("path").unwrap_or(b"/").to_vec();
    json_result(
        blocking(move || {
            let repo = app.repo()?;
            let index = app.index(&repo)?;
            data::listing(&repo, &index, &spec, &path)
        })
        .await,
    )
}

/// `GET /api/diff?a=&b=&metadata=1`.
async fn diff(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    let (Some(a), Some(b)) = (q.text("a"), q.text("b")) else {
        return ApiError::bad("give two snapshots: ?a=ID&b=ID").into_response();
    };
    let metadata = q.text("metadata").is_some_and(|m| m == "1" || m == "true");
    json_result(
        blocking(move || {
            let repo = app.repo()?;
            let index = app.index(&repo)?;
            data::diff(&repo, &index, &a, &b, metadata)
        })
        .await,
    )
}

/// `GET /api/profiles`.
async fn profiles_list(State(app): State<Arc<App>>) -> Response {
    let dir = app.profiles_dir.clone();
    // Reading profiles reads their list files: off the async threads.
    let (d, location, check) = (dir.clone(), app.location.clone(), app.profile_check.clone());
    match blocking(move || Ok(profiles::list(d.as_deref(), &location, check.as_ref()))).await {
        Ok(list) => Json(json!({"folder": dir, "profiles": list})).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /api/forget/preview?keep_last=..`.
async fn forget_preview(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    // The access token may come in the query, as for every request.
    let fields =
        q.0.iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| *k != "token");
    let checked = PolicyFields::refuse_unknown(fields.clone(), &[])
        .and_then(|()| PolicyFields::refuse_repeated(fields));
    if let Err(e) = checked {
        return json_result::<Value>(Err(e));
    }
    let fields = PolicyFields::from_query(&q);
    json_result(blocking(move || tasks::forget_preview(&*app.repo()?, &fields)).await)
}

/// Starts a job from a JSON body: `{"job": {...}}` with status 202.
async fn start<T, F>(app: Arc<App>, raw: &[u8], f: F) -> Response
where
    T: DeserializeOwned + Send + 'static,
    F: FnOnce(&Arc<App>, T) -> Result<Arc<crate::jobs::Job>, ApiError> + Send + 'static,
{
    let req: T = match body(raw) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let r = blocking(move || {
        // The repository must be open (else the page asks for the password first).
        app.repo()?;
        f(&app, req).map(|j| j.json())
    })
    .await;
    match r {
        Ok(job) => (StatusCode::ACCEPTED, Json(json!({ "job": job }))).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn restore(State(app): State<Arc<App>>, raw: axum::body::Bytes) -> Response {
    start(app, &raw, tasks::start_restore).await
}

async fn backup(State(app): State<Arc<App>>, raw: axum::body::Bytes) -> Response {
    start(app, &raw, tasks::start_backup).await
}

async fn check(State(app): State<Arc<App>>, raw: axum::body::Bytes) -> Response {
    start(app, &raw, tasks::start_check).await
}

async fn forget(State(app): State<Arc<App>>, raw: axum::body::Bytes) -> Response {
    start(app, &raw, tasks::start_forget).await
}

async fn prune(State(app): State<Arc<App>>, raw: axum::body::Bytes) -> Response {
    start(app, &raw, tasks::start_prune).await
}

/// `GET /api/jobs`.
async fn jobs(State(app): State<Arc<App>>) -> Response {
    let list: Vec<Value> = app.jobs.list().iter().map(|j| j.json()).collect();
    Json(json!({ "jobs": list })).into_response()
}

fn find_job(app: &App, id: &str) -> Result<Arc<crate::jobs::Job>, ApiError> {
    id.parse::<u64>()
        .ok()
        .and_then(|n| app.jobs.get(n))
        .ok_or_else(|| ApiError::not_found(format!("no job {id:?}")))
}

/// `GET /api/jobs/{id}`.
async fn job(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> Response {
    json_result(find_job(&app, &id).map(|j| j.json()))
}

/// `POST /api/jobs/{id}/cancel`.
async fn cancel(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> Response {
    json_result(find_job(&app, &id).map(|j| {
        j.cancel();
        j.json()
    }))
}
