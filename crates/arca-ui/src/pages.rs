//! The read pages, rendered on the server from the same data the JSON API returns: overview,
//! password form, snapshot list (filters, sorting), folder browser with downloads, diff.

use std::fmt::Write;
use std::sync::Arc;

use arca_format::text::count;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::data::{self, DiffView, Listing, Overview, SnapshotList, SnapshotRow};
use crate::html::{self, alert, bytes, esc, page, url};
use crate::query::RawQuery;
use crate::state::{ApiError, App, blocking};

/// An HTML page with a status.
pub fn html_response(status: StatusCode, body: String) -> Response {
    (status, Html(body)).into_response()
}

/// A redirect (303) to `to`.
pub fn redirect(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// The page for an error: the password form when the repository is not open, else the
/// message.
pub fn error_page(app: &App, e: &ApiError) -> Response {
    if e.needs_password {
        return redirect("/open");
    }
    let body = format!(
        "<h1>Something went wrong</h1>{}<p><a href=\"/\" data-back>Back</a> · \
         <a href=\"/\">Overview</a></p>",
        alert(&e.message)
    );
    html_response(e.status, page("Error", "", &app.sec.csrf, &body))
}

/// Renders `r` with `body` as page `title` in section `current`, or the error page.
pub fn render<T>(
    app: &App,
    current: &str,
    title: &str,
    r: Result<T, ApiError>,
    body: impl FnOnce(&T) -> String,
) -> Response {
    match r {
        Ok(v) => html_response(
            StatusCode::OK,
            page(title, current, &app.sec.csrf, &body(&v)),
        ),
        Err(e) => error_page(app, &e),
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}×"))
}

fn paths_cell(paths: &[String]) -> String {
    paths
        .iter()
        .map(|p| format!("<span class=\"mono\">{}</span>", esc(p)))
        .collect::<Vec<_>>()
        .join("<br>")
}

fn tags_cell(tags: &[String]) -> String {
    tags.iter()
        .map(|t| format!("<span class=\"tag\">{}</span>", esc(t)))
        .collect()
}

fn snapshot_link(s: &SnapshotRow) -> String {
    format!(
        "<a class=\"mono\" href=\"/snapshots/{}\">{}</a>{}",
        s.id,
        s.short_id,
        if s.complete {
            ""
        } else {
            " <span class=\"bad\" title=\"some entries could not be read\">incomplete</span>"
        }
    )
}

/// `GET /`.
pub async fn overview_page(State(app): State<Arc<App>>) -> Response {
    let a = Arc::clone(&app);
    let r = blocking(move || {
        let repo = a.repo()?;
        let index = a.index(&repo)?;
        let last = a.last_check.lock().map(|c| c.clone()).unwrap_or(None);
        data::overview(&repo, &index, last)
    })
    .await;
    let running = app
        .jobs
        .list()
        .into_iter()
        .filter(|j| j.state() == crate::jobs::JobState::Running)
        .map(|j| {
            format!(
                "<li><a href=\"/jobs/{}\">{} #{}: {}</a></li>",
                j.id,
                esc(j.kind),
                j.id,
                esc(&j.title)
            )
        })
        .collect::<String>();
    render(&app, "/", "Overview", r, |o| overview_body(o, &running))
}

/// The snapshot files left out of a list, as an alert naming each (empty when none).
fn damaged_alert(damaged: &[data::DamagedFile]) -> String {
    let messages: Vec<&str> = damaged.iter().map(|d| d.message.as_str()).collect();
    damaged_messages_alert(&messages)
}

/// [`damaged_alert`] of a JSON answer's `damaged` list (the forget preview's).
pub(crate) fn damaged_alert_json(damaged: &serde_json::Value) -> String {
    let messages: Vec<&str> = damaged
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["message"].as_str())
        .collect();
    damaged_messages_alert(&messages)
}

fn damaged_messages_alert(damaged: &[&str]) -> String {
    if damaged.is_empty() {
        return String::new();
    }
    let items: String = damaged
        .iter()
        .map(|m| format!("<li>{}</li>", esc(m)))
        .collect();
    format!(
        "<div class=\"alert\" role=\"alert\"><strong>{} could not be read and {} left out:\
         </strong><ul>{items}</ul></div>",
        count(damaged.len(), "snapshot file"),
        if damaged.len() == 1 { "is" } else { "are" }
    )
}

fn overview_body(o: &Overview, running: &str) -> String {
    let mut b = String::from("<h1>Repository overview</h1>");
    b.push_str(&damaged_alert(&o.damaged));
    if !running.is_empty() {
        let _ = write!(
            b,
            "<div class=\"note\"><strong>Running now:</strong><ul>{running}</ul></div>"
        );
    }
    let check = match &o.last_check {
        Some(c) => {
            let ok = c["ok"].as_bool().unwrap_or(false);
            format!(
                "<span class=\"{}\">{}</span> <span class=\"muted\">{}</span>",
                if ok { "ok" } else { "bad" },
                if ok { "no errors" } else { "errors found" },
                esc(c["finished"].as_str().unwrap_or(""))
            )
        }
        None => "<a href=\"/check\">not run from here yet</a>".into(),
    };
    let packs = o.files.get("packs").copied().unwrap_or_default();
    let _ = write!(
        b,
        "<dl class=\"cards\">\
         <div><dt>Location</dt><dd class=\"mono\">{}</dd></div>\
         <div><dt>Size on disk</dt><dd>{}</dd></div>\
         <div><dt>Snapshots</dt><dd><a href=\"/snapshots\">{}</a></dd></div>\
         <div><dt>Packs</dt><dd>{}</dd></div>\
         <div><dt>Deduplication</dt><dd>{}</dd></div>\
         <div><dt>Compression</dt><dd>{}</dd></div>\
         <div><dt>Data stored</dt><dd>{}</dd></div>\
         <div><dt>Last check</dt><dd>{check}</dd></div></dl>",
        esc(&o.location),
        bytes(o.size_on_disk),
        o.snapshots,
        packs.count,
        ratio(o.dedup_ratio),
        ratio(o.compression_ratio),
        bytes(o.data.stored_bytes),
    );
    let _ = write!(
        b,
        "<p class=\"muted\">The snapshots hold {} of files; the repository stores {} of unique \
         data ({} before compression) in {}, and {} of folder listings.</p>",
        bytes(o.snapshot_bytes),
        bytes(o.data.stored_bytes),
        bytes(o.data.raw_bytes),
        count(o.data.blobs, "blob"),
        bytes(o.trees.stored_bytes)
    );
    b.push_str("<h2>Last backup per host and paths</h2>");
    if o.last_backups.is_empty() {
        b.push_str("<p>No snapshots yet. <a href=\"/backup\">Back up a profile</a>.</p>");
        return b;
    }
    b.push_str(
        "<div class=\"table-wrap\"><table><thead><tr><th scope=\"col\">Host</th>\
         <th scope=\"col\">Paths</th><th scope=\"col\">Last backup</th><th scope=\"col\">\
         Snapshot</th><th scope=\"col\" class=\"num\">Snapshots</th></tr></thead><tbody>",
    );
    for l in &o.last_backups {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            esc(&l.hostname),
            paths_cell(&l.paths),
            esc(&l.snapshot.local_time()),
            snapshot_link(&l.snapshot),
            l.count
        );
    }
    b.push_str("</tbody></table></div>");
    b
}

/// `GET /open`: the password form (and why the repository is not open).
pub async fn open_page(State(app): State<Arc<App>>) -> Response {
    let a = Arc::clone(&app);
    let r = blocking(move || a.repo().map(|_| ())).await;
    let message = match r {
        Ok(()) => return redirect("/"),
        Err(e) => e.message,
    };
    let body = format!(
        "<h1>Open the repository</h1><p>Repository <span class=\"mono\">{}</span>.</p>{}\
         <form method=\"post\" class=\"stack\" data-api=\"/api/open\" data-then=\"/\">\
         <div class=\"form-error alert\" role=\"alert\"></div>\
         <div class=\"field\"><label for=\"password\">Password</label>\
         <input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required autofocus></div>\
         <div class=\"actions\"><button type=\"submit\">Open</button></div></form>",
        esc(&app.location),
        alert(&message)
    );
    html_response(
        StatusCode::OK,
        page("Open the repository", "", &app.sec.csrf, &body),
    )
}

/// `GET /snapshots`.
pub async fn snapshots_page(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    let a = Arc::clone(&app);
    // The page's "any tag" choice sends an empty `tag`: any, not the untagged (the API's).
    let q2 = q.without_empty("tag");
    let r = blocking(move || data::snapshots(&*a.repo()?, &q2)).await;
    render(&app, "/snapshots", "Snapshots", r, |l| {
        snapshots_body(l, &q)
    })
}

fn snapshots_body(l: &SnapshotList, q: &RawQuery) -> String {
    let sort = l.query["sort"].as_str().unwrap_or("time");
    let order = l.query["order"].as_str().unwrap_or("desc");
    let host = q.text("host").unwrap_or_default();
    let tag = q.text("tag").unwrap_or_default();
    let path = q.text("path").unwrap_or_default();
    let mut b = String::from("<h1>Snapshots</h1>");
    b.push_str(&damaged_alert(&l.damaged));
    let mut hosts = String::from("<option value=\"\">any host</option>");
    for h in &l.hosts {
        let sel = if *h == host { " selected" } else { "" };
        let _ = write!(hosts, "<option{sel}>{}</option>", esc(h));
    }
    let mut tags = String::from("<option value=\"\">any tag</option>");
    for t in &l.tags {
        let sel = if *t == tag { " selected" } else { "" };
        let _ = write!(tags, "<option{sel}>{}</option>", esc(t));
    }
    let _ = write!(
        b,
        "<form class=\"inline\" method=\"get\" action=\"/snapshots\" role=\"search\" aria-label=\"Filter snapshots\">\
         <div class=\"field\"><label for=\"f-host\">Host</label><select id=\"f-host\" name=\"host\">{hosts}</select></div>\
         <div class=\"field\"><label for=\"f-tag\">Tag</label><select id=\"f-tag\" name=\"tag\">{tags}</select></div>\
         <div class=\"field\"><label for=\"f-path\">Path</label><input id=\"f-path\" name=\"path\" type=\"text\" value=\"{}\" placeholder=\"/home/me\"></div>\
         <input type=\"hidden\" name=\"sort\" value=\"{}\"><input type=\"hidden\" name=\"order\" value=\"{}\">\
         <button type=\"submit\">Filter</button> <a class=\"button secondary\" href=\"/snapshots\">Clear</a></form>",
        esc(&path),
        esc(sort),
        esc(order)
    );
    let _ = write!(
        b,
        "<p class=\"muted\" aria-live=\"polite\">{}. Pick two (A and B) to compare them.</p>",
        count(l.snapshots.len(), "snapshot")
    );
    let head = |key: &str, label: &str, num: bool| -> String {
        let (next, mark, aria) = if key == sort {
            if order == "desc" {
                ("asc", " ▼", " aria-sort=\"descending\"")
            } else {
                ("desc", " ▲", " aria-sort=\"ascending\"")
            }
        } else {
            (if key == "time" { "desc" } else { "asc" }, "", "")
        };
        format!(
            "<th scope=\"col\"{aria}{}><a href=\"/snapshots?host={}&amp;tag={}&amp;path={}&amp;sort={key}&amp;order={next}\">{label}{mark}</a></th>",
            if num { " class=\"num\"" } else { "" },
            url(&host),
            url(&tag),
            url(&path)
        )
    };
    b.push_str(
        "<form id=\"diff-form\" method=\"get\" action=\"/diff\"></form>\
         <div class=\"table-wrap\"><table><caption class=\"muted\">Snapshots (sortable columns)</caption><thead><tr>\
         <th scope=\"col\">A</th><th scope=\"col\">B</th><th scope=\"col\">ID</th>",
    );
    b.push_str(&head("time", "Time", false));
    b.push_str(&head("host", "Host", false));
    b.push_str(&head("paths", "Paths", false));
    b.push_str("<th scope=\"col\" class=\"hide-narrow\">Tags</th>");
    b.push_str(&head("files", "Files", true));
    b.push_str(&head("size", "Size", true));
    b.push_str("<th scope=\"col\">Actions</th></tr></thead><tbody>");
    for s in &l.snapshots {
        let _ = write!(
            b,
            "<tr><td><input type=\"radio\" form=\"diff-form\" name=\"a\" value=\"{id}\" aria-label=\"A: {short}\"></td>\
             <td><input type=\"radio\" form=\"diff-form\" name=\"b\" value=\"{id}\" aria-label=\"B: {short}\"></td>\
             <td>{link}</td><td>{time}</td><td>{host}</td><td>{paths}</td><td class=\"hide-narrow\">{tags}</td>\
             <td class=\"num\">{files}</td><td class=\"num\">{size}</td>\
             <td><a href=\"/snapshots/{id}\">Browse</a> · <a href=\"/restore?snapshot={id}\">Restore</a></td></tr>",
            id = s.id,
            short = s.short_id,
            link = snapshot_link(s),
            time = esc(&s.local_time()),
            host = esc(&s.hostname),
            paths = paths_cell(&s.paths),
            tags = tags_cell(&s.tags),
            files = s.files,
            size = bytes(s.bytes),
        );
    }
    b.push_str("</tbody></table></div>");
    b.push_str(
        "<div class=\"actions\"><button type=\"submit\" form=\"diff-form\">Compare A with B</button></div>",
    );
    b
}

/// `GET /snapshots/{id}?path=P`: a folder of a snapshot.
pub async fn browse_page(
    State(app): State<Arc<App>>,
    UrlPath(spec): UrlPath<String>,
    q: RawQuery,
) -> Response {
    let a = Arc::clone(&app);
    let path = q.bytes("path").unwrap_or(b"/").to_vec();
    let r = blocking(move || {
        let repo = a.repo()?;
        let index = a.index(&repo)?;
        data::listing(&repo, &index, &spec, &path)
    })
    .await;
    let title = match &r {
        Ok(l) => format!("{} in {}", l.path, l.snapshot.short_id),
        Err(_) => "Snapshot".into(),
    };
    render(&app, "/snapshots", &title, r, browse_body)
}

fn crumbs(l: &Listing) -> String {
    let id = &l.snapshot.id;
    let mut b = format!(
        "<nav aria-label=\"Folder path\"><ol class=\"crumbs\"><li><a href=\"/snapshots/{id}\">{}</a></li>",
        l.snapshot.short_id
    );
    // The encoded path splits on `/` like the raw one (a `/` is never encoded).
    let mut so_far = String::new();
    let parts: Vec<&str> = l.path_q.split('/').filter(|p| !p.is_empty()).collect();
    let names: Vec<&str> = l.path.split('/').filter(|p| !p.is_empty()).collect();
    for (i, (enc, name)) in parts.iter().zip(names.iter()).enumerate() {
        so_far.push('/');
        so_far.push_str(enc);
        if i + 1 == parts.len() {
            let _ = write!(b, "<li aria-current=\"page\">{}</li>", esc(name));
        } else {
            let _ = write!(
                b,
                "<li><a href=\"/snapshots/{id}?path={so_far}\">{}</a></li>",
                esc(name)
            );
        }
    }
    b.push_str("</ol></nav>");
    b
}

fn browse_body(l: &Listing) -> String {
    let s = &l.snapshot;
    let id = &s.id;
    let mut b = format!(
        "<h1>Snapshot {} <span class=\"muted\">{}</span></h1><p class=\"muted\">{} · {} · {}</p>",
        s.short_id,
        esc(&s.local_time()),
        esc(&s.hostname),
        s.paths
            .iter()
            .map(|p| esc(p))
            .collect::<Vec<_>>()
            .join(", "),
        tags_cell(&s.tags)
    );
    b.push_str(&crumbs(l));
    let _ = write!(
        b,
        "<div class=\"actions\"><a class=\"button secondary\" href=\"/snapshots/{id}/download?path={p}&amp;format=tar\">Download this folder (tar)</a>\
         <a class=\"button secondary\" href=\"/snapshots/{id}/download?path={p}&amp;format=zip\">Download this folder (zip)</a>\
         <a class=\"button secondary\" href=\"/restore?snapshot={id}&amp;path={pp}\">Restore this folder…</a></div>",
        p = l.path_q,
        pp = url(&l.path_q)
    );
    let _ = write!(
        b,
        "<form id=\"restore-form\" method=\"get\" action=\"/restore\"><input type=\"hidden\" name=\"snapshot\" value=\"{id}\"></form>\
         <div class=\"table-wrap\"><table><caption class=\"muted\">{} in {}</caption><thead><tr>\
         <th scope=\"col\"><input type=\"checkbox\" data-select-all=\"path\" aria-label=\"Select all\"></th>\
         <th scope=\"col\">Name</th><th scope=\"col\" class=\"num\">Size</th><th scope=\"col\">Modified</th>\
         <th scope=\"col\" class=\"hide-narrow\">Mode</th><th scope=\"col\" class=\"hide-narrow\">Owner</th><th scope=\"col\">Download</th></tr></thead><tbody>",
        count(l.entries.len(), "entry"),
        esc(&l.path)
    );
    if l.entries.is_empty() {
        b.push_str("<tr><td colspan=\"7\" class=\"muted\">This folder is empty.</td></tr>");
    }
    for e in &l.entries {
        let name = match e.kind {
            "dir" => format!(
                "<a href=\"/snapshots/{id}?path={}\">{}/</a>",
                e.path_q,
                esc(&e.name)
            ),
            "symlink" => format!(
                "{} <span class=\"muted\">→ {}</span>",
                esc(&e.name),
                esc(e.link_target.as_deref().unwrap_or(""))
            ),
            "file" => esc(&e.name),
            k => format!("{} <span class=\"muted\">({k})</span>", esc(&e.name)),
        };
        let size = if e.kind == "file" {
            bytes(e.size)
        } else {
            String::new()
        };
        let dl = match e.kind {
            "file" => format!(
                "<a href=\"/snapshots/{id}/download?path={}\" download aria-label=\"Download {}\">file</a>",
                e.path_q,
                esc(&e.name)
            ),
            "dir" => format!(
                "<a href=\"/snapshots/{id}/download?path={q}&amp;format=tar\" aria-label=\"Download {n} as tar\">tar</a> · \
                 <a href=\"/snapshots/{id}/download?path={q}&amp;format=zip\" aria-label=\"Download {n} as zip\">zip</a>",
                q = e.path_q,
                n = esc(&e.name)
            ),
            _ => String::new(),
        };
        let _ = write!(
            b,
            "<tr><td><input type=\"checkbox\" form=\"restore-form\" name=\"path\" value=\"{}\" aria-label=\"Select {}\"></td>\
             <td class=\"name\">{name}</td><td class=\"num\">{size}</td><td>{}</td>\
             <td class=\"mono hide-narrow\">{}</td><td class=\"hide-narrow\">{}:{}</td><td>{dl}</td></tr>",
            esc(&e.path_q),
            esc(&e.name),
            html::time(e.mtime_parts.0, e.mtime_parts.1),
            e.permissions,
            esc(&e.user),
            esc(&e.group),
        );
    }
    b.push_str("</tbody></table></div>");
    b.push_str(
        "<div class=\"actions\"><button type=\"submit\" form=\"restore-form\">Restore the selected entries…</button></div>",
    );
    b
}

/// `GET /diff?a=ID&b=ID`.
pub async fn diff_page(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    let (Some(a_id), Some(b_id)) = (q.text("a"), q.text("b")) else {
        let e = ApiError::bad("choose two snapshots, A and B, in the list to compare them");
        return html_response(
            StatusCode::BAD_REQUEST,
            page(
                "Compare snapshots",
                "/snapshots",
                &app.sec.csrf,
                &format!(
                    "<h1>Compare snapshots</h1>{}<p><a href=\"/snapshots\">Snapshots</a></p>",
                    alert(&e.message)
                ),
            ),
        );
    };
    let metadata = q.text("metadata").is_some_and(|m| m == "1" || m == "true");
    let a = Arc::clone(&app);
    let r = blocking(move || {
        let repo = a.repo()?;
        let index = a.index(&repo)?;
        data::diff(&repo, &index, &a_id, &b_id, metadata)
    })
    .await;
    render(&app, "/snapshots", "Compare snapshots", r, diff_body)
}

fn diff_body(d: &DiffView) -> String {
    let mut b = format!(
        "<h1>Changes from {} to {}</h1><p class=\"muted\">A: {} {} · B: {} {}</p>",
        snapshot_link(&d.a),
        snapshot_link(&d.b),
        esc(&d.a.local_time()),
        esc(&d.a.hostname),
        esc(&d.b.local_time()),
        esc(&d.b.hostname)
    );
    let _ = write!(
        b,
        "<dl class=\"cards\"><div><dt>Files changed</dt><dd>{}</dd></div>\
         <div><dt>Added</dt><dd>{}, {}, {} other</dd></div>\
         <div><dt>Removed</dt><dd>{}, {}, {} other</dd></div>\
         <div><dt>Data added</dt><dd>{} ({})</dd></div>\
         <div><dt>Data removed</dt><dd>{} ({})</dd></div></dl>",
        d.changed_files,
        count(d.added.files, "file"),
        count(d.added.dirs, "folder"),
        d.added.others,
        count(d.removed.files, "file"),
        count(d.removed.dirs, "folder"),
        d.removed.others,
        bytes(d.added.bytes),
        count(d.added.data_blobs, "blob"),
        bytes(d.removed.bytes),
        count(d.removed.data_blobs, "blob"),
    );
    b.push_str(
        "<p class=\"muted\">+ added, − removed, M content modified, T type changed, U metadata changed.</p>",
    );
    if d.changes.is_empty() {
        b.push_str("<p>No differences.</p>");
        return b;
    }
    b.push_str(
        "<div class=\"table-wrap\"><table><thead><tr><th scope=\"col\">Change</th><th scope=\"col\">Path</th></tr></thead><tbody>",
    );
    for c in &d.changes {
        let _ = write!(
            b,
            "<tr><td class=\"mono\">{}</td><td class=\"mono name\">{}</td></tr>",
            esc(&c.modifier),
            esc(&c.path)
        );
    }
    b.push_str("</tbody></table></div>");
    if d.truncated {
        let _ = write!(
            b,
            "<p class=\"muted\">Only the first {} changes are listed.</p>",
            data::DIFF_LIMIT
        );
    }
    b
}
