//! The pages that start and follow jobs: restore form, profiles to back up, check, forget with
//! its preview and prune, the job list and one job's live progress and result.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use arca_format::text::count;

use crate::data::{self, SnapshotRow};
use crate::html::{alert, bytes, duration, esc, page};
use crate::jobs::JobState;
use crate::pages::{error_page, html_response, render};
use crate::query::RawQuery;
use crate::state::{ApiError, App, blocking};
use crate::tasks::{self, PolicyFields};

fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
        esc(name),
        esc(value)
    )
}

/// `GET /restore?snapshot=ID&path=P...` (paths percent-encoded as the listings' `path_q`).
pub async fn restore_page(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    let Some(spec) = q.text("snapshot") else {
        return error_page(
            &app,
            &ApiError::bad("choose a snapshot to restore from: open it in the snapshot list"),
        );
    };
    let paths: Vec<String> = q
        .all("path")
        .into_iter()
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .collect();
    let a = Arc::clone(&app);
    let r = blocking(move || {
        let repo = a.repo()?;
        let (id, s) = data::find_snapshot(&repo, &spec)?;
        Ok(SnapshotRow::new(&id, &s))
    })
    .await;
    render(&app, "/snapshots", "Restore", r, |s| {
        restore_body(s, &paths)
    })
}

fn restore_body(s: &SnapshotRow, paths: &[String]) -> String {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    let target = format!("{}/arca-restore-{}", home.trim_end_matches('/'), s.short_id);
    let mut chosen = String::new();
    let mut fields = hidden("snapshot", &s.id);
    if paths.is_empty() {
        chosen.push_str("<li>the whole snapshot</li>");
    }
    for p in paths {
        let shown: Vec<u8> = percent_encoding::percent_decode_str(p).collect();
        let _ = write!(
            chosen,
            "<li class=\"mono\">{}</li>",
            esc(&String::from_utf8_lossy(&shown))
        );
        fields.push_str(&hidden("paths[]", p));
    }
    format!(
        "<h1>Restore from snapshot {short}</h1>\
         <p class=\"muted\">{time} · {host} · {spaths}</p>\
         <h2>What</h2><ul>{chosen}</ul>\
         <form method=\"post\" class=\"stack\" data-api=\"/api/restore\">\
         <div class=\"form-error alert\" role=\"alert\"></div>{fields}\
         <div class=\"field\"><label for=\"target\">Target folder</label>\
         <input id=\"target\" name=\"target\" type=\"text\" value=\"{target}\" required aria-describedby=\"target-help\">\
         <small id=\"target-help\">An absolute path. The chosen entries are restored below it with their full paths.</small></div>\
         <div class=\"field\"><label for=\"overwrite\">Files that already exist</label>\
         <select id=\"overwrite\" name=\"overwrite\">\
         <option value=\"if-changed\" selected>replace if changed (size or time differ; checks content)</option>\
         <option value=\"always\">check every file's content and replace what differs</option>\
         <option value=\"if-newer\">replace only if the snapshot's copy is newer</option>\
         <option value=\"never\">never touch existing files</option></select></div>\
         <label class=\"check\"><input type=\"checkbox\" name=\"delete\"> Delete files in the target that the snapshot does not have</label>\
         <div class=\"actions\"><button type=\"submit\" name=\"dry_run\" value=\"true\">Preview (dry run)</button>\
         <button type=\"submit\" name=\"dry_run\" value=\"false\" class=\"secondary\">Restore now</button></div>\
         <p class=\"muted\">The preview lists what would change and changes nothing; you can restore from its page.</p></form>",
        short = s.short_id,
        time = esc(&s.local_time()),
        host = esc(&s.hostname),
        spaths = esc(&s.paths.join(", ")),
        target = esc(&target),
    )
}

/// `GET /backup`: the profiles, each with a button.
pub async fn backup_page(State(app): State<Arc<App>>) -> Response {
    let dir = app.profiles_dir.clone();
    // Reading profiles reads their list files: off the async threads.
    let (d, location, check) = (dir.clone(), app.location.clone(), app.profile_check.clone());
    let list = match blocking(move || {
        Ok(crate::profiles::list(
            d.as_deref(),
            &location,
            check.as_ref(),
        ))
    })
    .await
    {
        Ok(list) => list,
        Err(e) => return error_page(&app, &e),
    };
    let folder = dir
        .as_deref()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "(unknown: set XDG_CONFIG_HOME or HOME)".into());
    let mut b = format!(
        "<h1>Back up</h1><p>Profiles are the <code>*.toml</code> files in <span class=\"mono\">{}</span> \
         with a <code>[backup]</code> section, read as <code>arca -P NAME backup</code> reads them (which \
         looks for <code>NAME.toml</code> in the current folder first: the page reads only this folder).</p>",
        esc(&folder)
    );
    if list.is_empty() {
        let _ = write!(
            b,
            "<div class=\"note\"><p>No profile yet. Create for example <span class=\"mono\">{}/home.toml</span>:</p>\
             <pre class=\"log\">[global]\nrepo = \"{}\"\n\n[backup]\npaths = [\"/home/me/Documents\"]\nexclude = [\"*.tmp\"]\ntag = [\"ui\"]</pre>\
             <p>then reload this page.</p></div>",
            esc(&folder),
            esc(&app.location)
        );
        return html_response(
            StatusCode::OK,
            page("Back up", "/backup", &app.sec.csrf, &b),
        );
    }
    b.push_str(
        "<div class=\"table-wrap\"><table><thead><tr><th scope=\"col\">Profile</th><th scope=\"col\">Paths</th>\
         <th scope=\"col\" class=\"hide-narrow\">Excludes</th><th scope=\"col\" class=\"hide-narrow\">Tags</th><th scope=\"col\">Run</th></tr></thead><tbody>",
    );
    for p in &list {
        let run = match &p.problem {
            Some(why) => format!("<span class=\"bad\">{}</span>", esc(why)),
            None => format!(
                "<form method=\"post\" class=\"inline\" data-api=\"/api/backup\" aria-label=\"Back up {n}\">{h}\
                 <button type=\"submit\" name=\"dry_run\" value=\"false\">Back up now</button>\
                 <button type=\"submit\" name=\"dry_run\" value=\"true\" class=\"secondary\">Dry run</button></form>",
                n = esc(&p.name),
                h = hidden("profile", &p.name)
            ),
        };
        let _ = write!(
            b,
            "<tr><td><strong>{}</strong></td><td class=\"mono\">{}</td><td class=\"mono hide-narrow\">{}</td><td class=\"hide-narrow\">{}</td><td>{run}</td></tr>",
            esc(&p.name),
            esc(&p.paths.join(", ")),
            esc(&p.excludes.join(", ")),
            esc(&p.tags.join(", ")),
        );
    }
    b.push_str("</tbody></table></div>");
    html_response(
        StatusCode::OK,
        page("Back up", "/backup", &app.sec.csrf, &b),
    )
}

/// `GET /check`.
pub async fn check_page(State(app): State<Arc<App>>) -> Response {
    let last = app.last_check.lock().map(|c| c.clone()).unwrap_or(None);
    let mut b = String::from(
        "<h1>Check the repository</h1>\
         <form method=\"post\" class=\"stack\" data-api=\"/api/check\"><div class=\"form-error alert\" role=\"alert\"></div>\
         <fieldset><legend>What to verify</legend>\
         <label class=\"check\"><input type=\"checkbox\" name=\"read_data\"> Read and verify all data (slow: reads every pack)</label>\
         <div class=\"field\"><label for=\"subset\">Or read only a part of the packs</label>\
         <input id=\"subset\" name=\"read_data_subset\" type=\"text\" placeholder=\"e.g. 10% or 1/5 or 500M\" aria-describedby=\"subset-help\">\
         <small id=\"subset-help\">n/m reads group n of m; x% a random share; a size random packs adding up to it.</small></div></fieldset>\
         <div class=\"actions\"><button type=\"submit\">Start the check</button></div></form>",
    );
    if let Some(c) = last {
        b.push_str("<h2>Last check</h2>");
        b.push_str(&check_result(&c));
    }
    html_response(StatusCode::OK, page("Check", "/check", &app.sec.csrf, &b))
}

fn list_items(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| format!("<li>{}</li>", esc(x.as_str().unwrap_or(""))))
                .collect()
        })
        .unwrap_or_default()
}

fn check_result(c: &Value) -> String {
    let ok = c["ok"].as_bool().unwrap_or(false);
    let mut b = format!(
        "<p class=\"{}\"><strong>{}</strong> <span class=\"muted\">({})</span></p>\
         <p>Checked {}, {}, {}; read {} ({}).</p>",
        if ok { "ok" } else { "bad" },
        if ok {
            "No errors were found."
        } else {
            "The check found errors."
        },
        esc(c["finished"].as_str().unwrap_or("")),
        count(c["snapshots"].as_u64().unwrap_or(0), "snapshot"),
        count(c["trees"].as_u64().unwrap_or(0), "tree"),
        count(c["packs"].as_u64().unwrap_or(0), "pack"),
        count(c["packs_read"].as_u64().unwrap_or(0), "pack"),
        bytes(c["bytes_read"].as_u64().unwrap_or(0)),
    );
    if c["errors"].as_array().is_some_and(|a| !a.is_empty()) {
        let _ = write!(
            b,
            "<h3>Errors</h3><ul class=\"bad\">{}</ul>",
            list_items(&c["errors"])
        );
    }
    if c["notes"].as_array().is_some_and(|a| !a.is_empty()) {
        let _ = write!(b, "<h3>Notes</h3><ul>{}</ul>", list_items(&c["notes"]));
    }
    for a in c["affected"].as_array().into_iter().flatten() {
        let _ = write!(
            b,
            "<h3>Snapshot {} is damaged</h3><ul class=\"mono\">{}</ul>",
            esc(&a["snapshot"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(8)
                .collect::<String>()),
            list_items(&a["paths"])
        );
    }
    let repairs: String = c["repair"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "<li><code>{}</code>: {}</li>",
                esc(r["command"].as_str().unwrap_or("")),
                esc(r["reason"].as_str().unwrap_or(""))
            )
        })
        .collect();
    if !repairs.is_empty() {
        let _ = write!(b, "<h3>To repair</h3><ul>{repairs}</ul>");
    }
    b
}

const POLICY_KEYS: [(&str, &str); 6] = [
    ("keep_last", "Keep the last"),
    ("keep_hourly", "Hourly"),
    ("keep_daily", "Daily"),
    ("keep_weekly", "Weekly"),
    ("keep_monthly", "Monthly"),
    ("keep_yearly", "Yearly"),
];

/// `GET /forget?keep_last=..`: the policy form, and with a policy its preview and the button
/// that removes what the preview shows.
pub async fn forget_page(State(app): State<Arc<App>>, q: RawQuery) -> Response {
    let fields = PolicyFields::from_query(&q);
    let asked = q.text("preview").is_some();
    let mut form = String::from(
        "<h1>Forget snapshots and prune</h1><form class=\"stack\" method=\"get\" action=\"/forget\">\
         <input type=\"hidden\" name=\"preview\" value=\"1\"><fieldset><legend>Keep, per host and paths</legend>\
         <div class=\"cards\">",
    );
    for (k, label) in POLICY_KEYS {
        let _ = write!(
            form,
            "<div class=\"field\"><label for=\"{k}\">{label}</label><input id=\"{k}\" name=\"{k}\" type=\"text\" inputmode=\"numeric\" size=\"6\" value=\"{}\" placeholder=\"0\"></div>",
            esc(&q.text(k).unwrap_or_default())
        );
    }
    form.push_str("</div><div class=\"cards\">");
    for (k, label, v) in fields.spans() {
        let _ = write!(
            form,
            "<div class=\"field\"><label for=\"{k}\">{label}</label><input id=\"{k}\" name=\"{k}\" type=\"text\" size=\"8\" value=\"{}\" placeholder=\"e.g. 7d or 1y2m\"></div>",
            esc(v.as_deref().unwrap_or_default())
        );
    }
    let _ = write!(
        form,
        "</div><div class=\"field\"><label for=\"keep_tag\">Keep snapshots tagged</label>\
         <input id=\"keep_tag\" name=\"keep_tag\" type=\"text\" value=\"{}\" placeholder=\"e.g. keep\"></div>\
         <div class=\"field\"><label for=\"host\">Only snapshots of host</label>\
         <input id=\"host\" name=\"host\" type=\"text\" value=\"{}\"></div></fieldset>\
         <div class=\"actions\"><button type=\"submit\">Preview</button></div>\
         <p class=\"muted\">The preview changes nothing. Counts are numbers or \"unlimited\"; \
         spans count back from the newest snapshot (\"Daily within 7d\": the newest of each day of the last 7 days).</p></form>",
        esc(&q.text("keep_tag").unwrap_or_default()),
        esc(&q.text("host").unwrap_or_default()),
    );
    let prune_form = "<h2>Prune</h2><p>Prune deletes the data no snapshot uses any more.</p>\
         <form method=\"post\" class=\"inline\" data-api=\"/api/prune\"><div class=\"form-error alert\" role=\"alert\"></div>\
         <button type=\"submit\" name=\"dry_run\" value=\"true\" class=\"secondary\">Prune dry run</button>\
         <button type=\"submit\" name=\"dry_run\" value=\"false\">Prune now</button></form>";
    if !asked {
        form.push_str(prune_form);
        return html_response(
            StatusCode::OK,
            page("Forget", "/forget", &app.sec.csrf, &form),
        );
    }
    let f2 = fields.clone();
    let a = Arc::clone(&app);
    let r = blocking(move || tasks::forget_preview(&*a.repo()?, &f2)).await;
    match r {
        Ok(v) => {
            form.push_str(&preview_body(&v, &fields));
            form.push_str(prune_form);
        }
        Err(e) if e.needs_password => return error_page(&app, &e),
        Err(e) => {
            form.push_str(&alert(&e.message));
            form.push_str(prune_form);
        }
    }
    html_response(
        StatusCode::OK,
        page("Forget", "/forget", &app.sec.csrf, &form),
    )
}

fn snapshot_rows(rows: &[(&Value, String)]) -> String {
    let mut b = String::from(
        "<div class=\"table-wrap\"><table><thead><tr><th scope=\"col\">ID</th><th scope=\"col\">Time</th>\
         <th scope=\"col\">Tags</th><th scope=\"col\">Reasons</th></tr></thead><tbody>",
    );
    for (s, why) in rows {
        let time = chrono::DateTime::parse_from_rfc3339(s["time"].as_str().unwrap_or(""))
            .map(|t| {
                t.with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default();
        let tags: Vec<&str> = s["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let _ = write!(
            b,
            "<tr><td><a class=\"mono\" href=\"/snapshots/{id}\">{short}</a></td><td>{time}</td><td>{}</td><td>{}</td></tr>",
            esc(&tags.join(", ")),
            esc(why),
            id = esc(s["id"].as_str().unwrap_or("")),
            short = esc(s["short_id"].as_str().unwrap_or("")),
        );
    }
    b.push_str("</tbody></table></div>");
    b
}

fn preview_body(v: &Value, fields: &PolicyFields) -> String {
    let mut b = format!(
        "<h2>Preview</h2><p>Policy: {}.</p>",
        esc(v["policy"].as_str().unwrap_or(""))
    ) + &crate::pages::damaged_alert_json(&v["damaged"]);
    for g in v["groups"].as_array().into_iter().flatten() {
        let key = &g["group_key"];
        let paths: Vec<&str> = key["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let _ = write!(
            b,
            "<h3>Host {} · {}</h3>",
            esc(key["hostname"].as_str().unwrap_or("(any)")),
            esc(&paths.join(", "))
        );
        let keep: Vec<(&Value, String)> = g["keep"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|k| {
                let why: Vec<&str> = k["reasons"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                (&k["snapshot"], why.join("; "))
            })
            .collect();
        let remove: Vec<(&Value, String)> = g["remove"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| (s, String::new()))
            .collect();
        let _ = write!(
            b,
            "<p>Keep {}:</p>{}",
            count(keep.len(), "snapshot"),
            snapshot_rows(&keep)
        );
        if !remove.is_empty() {
            let _ = write!(
                b,
                "<p class=\"bad\">Remove {}:</p>{}",
                count(remove.len(), "snapshot"),
                snapshot_rows(&remove)
            );
        }
    }
    let ids: Vec<&str> = v["remove"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if ids.is_empty() {
        b.push_str("<p class=\"ok\">The policy removes no snapshot.</p>");
        return b;
    }
    let mut hidden_fields = String::new();
    let text = |v: &Option<Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let spans = fields
        .spans()
        .map(|(k, _, v)| (k, v.clone().unwrap_or_default()));
    for (k, val) in [
        ("keep_last", text(&fields.keep_last)),
        ("keep_hourly", text(&fields.keep_hourly)),
        ("keep_daily", text(&fields.keep_daily)),
        ("keep_weekly", text(&fields.keep_weekly)),
        ("keep_monthly", text(&fields.keep_monthly)),
        ("keep_yearly", text(&fields.keep_yearly)),
        ("host", fields.host.clone().unwrap_or_default()),
    ]
    .into_iter()
    .chain(spans)
    {
        if !val.is_empty() {
            hidden_fields.push_str(&hidden(k, &val));
        }
    }
    // Even empty (no grouping): the job must group as the preview did, so the page's
    // script sends it empty too (it leaves out other empty fields).
    if let Some(g) = &fields.group_by {
        hidden_fields
            .push_str(&hidden("group_by", g).replace("<input ", "<input data-keep-empty "));
    }
    for t in &fields.keep_tag {
        hidden_fields.push_str(&hidden("keep_tag[]", t));
    }
    for id in &ids {
        hidden_fields.push_str(&hidden("expect[]", id));
    }
    let _ = write!(
        b,
        "<form method=\"post\" class=\"stack\" data-api=\"/api/forget\"><div class=\"form-error alert\" role=\"alert\"></div>{hidden_fields}\
         <label class=\"check\"><input type=\"checkbox\" name=\"prune\" checked> Then prune (delete the data only these snapshots used)</label>\
         <div class=\"actions\"><button type=\"submit\" class=\"danger\">Remove {}</button></div></form>",
        count(ids.len(), "snapshot")
    );
    b
}

/// `GET /jobs`.
pub async fn jobs_page(State(app): State<Arc<App>>) -> Response {
    let jobs = app.jobs.list();
    let mut b = String::from("<h1>Jobs</h1>");
    if jobs.is_empty() {
        b.push_str("<p>No job has run since the server started.</p>");
    } else {
        b.push_str(
            "<div class=\"table-wrap\"><table><thead><tr><th scope=\"col\">#</th><th scope=\"col\">What</th>\
             <th scope=\"col\">State</th><th scope=\"col\">Progress</th><th scope=\"col\" class=\"hide-narrow\">Started</th></tr></thead><tbody>",
        );
        for j in &jobs {
            let v = j.json();
            let _ = write!(
                b,
                "<tr data-job=\"{id}\" data-state=\"{st}\"><td><a href=\"/jobs/{id}\">{id}</a></td><td><a href=\"/jobs/{id}\">{title}</a></td>\
                 <td><span data-field=\"state\" class=\"state-{st}\">{st}</span></td>\
                 <td><progress max=\"1\" aria-label=\"Progress of job {id}\"{val}></progress> <span data-field=\"percent\"></span></td>\
                 <td class=\"hide-narrow\">{started}</td></tr>",
                id = j.id,
                title = esc(&j.title),
                st = state_name(j.state()),
                val = fraction_attr(&v),
                started = esc(v["started"].as_str().unwrap_or("").get(..19).unwrap_or("")),
            );
        }
        b.push_str("</tbody></table></div>");
    }
    html_response(StatusCode::OK, page("Jobs", "/jobs", &app.sec.csrf, &b))
}

fn state_name(s: JobState) -> &'static str {
    match s {
        JobState::Running => "running",
        JobState::Done => "done",
        JobState::Incomplete => "incomplete",
        JobState::Failed => "failed",
        JobState::Cancelled => "cancelled",
    }
}

fn fraction_attr(v: &Value) -> String {
    v["progress"]["fraction"]
        .as_f64()
        .map(|f| format!(" value=\"{f:.4}\""))
        .unwrap_or_default()
}

/// `GET /jobs/{id}`: a job's live progress, then its result.
pub async fn job_page(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> Response {
    let Some(job) = id.parse::<u64>().ok().and_then(|n| app.jobs.get(n)) else {
        return error_page(
            &app,
            &ApiError::not_found(format!(
                "no job {id:?} (jobs are forgotten when the server stops)"
            )),
        );
    };
    let v = job.json();
    let state = job.state();
    let p = &v["progress"];
    let mut b = format!(
        "<h1>{}</h1><div data-job=\"{id}\" data-state=\"{st}\" data-reload>\
         <p>Job #{id} · <span data-field=\"state\" class=\"state-{st}\" role=\"status\">{st}</span> · \
         <span data-field=\"elapsed\">{el}</span> elapsed</p>\
         <div class=\"progress-line\" aria-live=\"polite\"><span data-field=\"phase\">{phase}</span>\
         <span data-field=\"percent\"></span><span data-field=\"eta\"></span></div>\
         <progress max=\"1\" aria-label=\"Progress\"{val}></progress>\
         <p data-field=\"text\">{text}</p>",
        esc(&job.title),
        id = job.id,
        st = state_name(state),
        el = duration(v["elapsed_seconds"].as_f64().unwrap_or(0.0)),
        phase = esc(p["phase"].as_str().unwrap_or("")),
        val = fraction_attr(&v),
        text = esc(p["text"].as_str().unwrap_or("")),
    );
    if state == JobState::Running {
        let _ = write!(
            b,
            "<div class=\"actions\"><button type=\"button\" class=\"danger\" data-post=\"/api/jobs/{}/cancel\">Cancel</button></div>",
            job.id
        );
    }
    b.push_str("<h2>Log</h2><pre class=\"log\" data-field=\"log\">");
    b.push_str(&esc(&list_text(&v["log"])));
    b.push_str("</pre></div>");
    if let Some(e) = v["error"].as_str() {
        b.push_str(&alert(e));
    }
    // Also the result of a job that ended with errors (an incomplete backup, a check that
    // found damage): what it did and what went wrong.
    if state != JobState::Running && v["result"].is_object() {
        b.push_str("<h2>Result</h2>");
        b.push_str(&result_body(job.kind, &v["result"], &v["params"]));
    }
    b.push_str("<p><a href=\"/jobs\">All jobs</a></p>");
    html_response(StatusCode::OK, page(&job.title, "/jobs", &app.sec.csrf, &b))
}

fn list_text(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

fn result_body(kind: &str, r: &Value, params: &Value) -> String {
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    match kind {
        "restore" => restore_result(r, params),
        "backup" => {
            let mut b = format!(
                "<p>Files: {} new, {} changed, {} unmodified. Added {} ({} stored). Processed {}, {}.</p>",
                n("files_new"),
                n("files_changed"),
                n("files_unmodified"),
                bytes(n("data_added")),
                bytes(n("data_added_packed")),
                count(n("total_files_processed"), "file"),
                bytes(n("total_bytes_processed"))
            );
            match r["snapshot_id"].as_str() {
                Some(id) => {
                    let _ = write!(
                        b,
                        "<p class=\"{}\">Snapshot <a class=\"mono\" href=\"/snapshots/{id}\">{}</a> saved{}.</p>",
                        if n("errors") > 0 { "bad" } else { "ok" },
                        esc(id.get(..8).unwrap_or(id)),
                        if n("errors") > 0 {
                            format!(
                                ", INCOMPLETE: {} could not be read",
                                count(n("errors"), "entry")
                            )
                        } else {
                            String::new()
                        }
                    );
                }
                None => b.push_str("<p>Dry run: nothing was written to the repository.</p>"),
            }
            b
        }
        "check" => check_result(r),
        "forget" => {
            let mut b = format!(
                "<p>Removed {}.</p>",
                count(r["removed"].as_array().map_or(0, Vec::len), "snapshot")
            );
            if r["prune"].is_object() {
                b.push_str(&prune_result(&r["prune"]));
            }
            b
        }
        "prune" => prune_result(r),
        _ => format!("<pre class=\"log\">{}</pre>", esc(&r.to_string())),
    }
}

fn prune_result(r: &Value) -> String {
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    let mut b = format!(
        "<p>Used: {}, {}. Unused: {}, {}. Packs: keep {}, repack {}, delete {}.</p>",
        count(n("used_blobs"), "blob"),
        bytes(n("used_bytes")),
        count(n("unused_blobs"), "blob"),
        bytes(n("unused_bytes")),
        n("packs_keep"),
        n("packs_repack"),
        n("packs_delete")
    );
    if r["dry_run"].as_bool() == Some(true) {
        let _ = write!(
            b,
            "<p>Dry run: would free about {}.</p>",
            bytes(n("would_free"))
        );
    } else {
        let _ = write!(b, "<p class=\"ok\">Freed {}.</p>", bytes(n("freed_bytes")));
    }
    b
}

fn restore_result(r: &Value, params: &Value) -> String {
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    let p = &r["plan"];
    let pn = |k: &str| p[k].as_u64().unwrap_or(0);
    let target = esc(r["target"].as_str().unwrap_or(""));
    if r["dry_run"].as_bool() != Some(true) {
        let errors = n("errors");
        let mut b = format!(
            "<p class=\"{}\">Restored {}, {}, {} ({}) into <span class=\"mono\">{target}</span>{}.</p>",
            if errors > 0 { "bad" } else { "ok" },
            count(n("files_restored"), "file"),
            count(n("dirs_restored"), "folder"),
            count(n("others_restored"), "other entry"),
            bytes(n("bytes_restored")),
            if errors > 0 {
                format!("; {} could not be restored", count(errors, "entry"))
            } else {
                String::new()
            }
        );
        if errors > 0 {
            let _ = write!(b, "<ul class=\"bad\">{}</ul>", list_items(&r["issues"]));
        }
        return b;
    }
    let mut b = format!(
        "<p>Would restore {}, update {} ({} to put in place), fix the metadata of {}, leave {} unchanged; create {}; delete {} in <span class=\"mono\">{target}</span>.</p>",
        count(pn("files_new"), "file"),
        pn("files_updated"),
        bytes(pn("bytes_to_place")),
        match pn("dirs_metadata") + pn("others_metadata") {
            0 => pn("files_metadata").to_string(),
            more => format!(
                "{} (and of {})",
                pn("files_metadata"),
                count(more, "other entry")
            ),
        },
        pn("files_unchanged"),
        count(pn("dirs_new"), "folder"),
        count(pn("deletes"), "entry"),
    );
    let planned = r["planned"].as_array().cloned().unwrap_or_default();
    if !planned.is_empty() {
        b.push_str(
            "<div class=\"table-wrap\"><table><thead><tr><th scope=\"col\">Action</th><th scope=\"col\">Type</th>\
             <th scope=\"col\">Path</th><th scope=\"col\" class=\"num\">Size</th></tr></thead><tbody>",
        );
        for e in &planned {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td class=\"mono name\">{}</td><td class=\"num\">{}</td></tr>",
                esc(e["action"].as_str().unwrap_or("")),
                esc(e["type"].as_str().unwrap_or("")),
                esc(e["path"].as_str().unwrap_or("")),
                bytes(e["size"].as_u64().unwrap_or(0))
            );
        }
        b.push_str("</tbody></table></div>");
        if n("planned_more") > 0 {
            let _ = write!(
                b,
                "<p class=\"muted\">and {} more.</p>",
                count(n("planned_more"), "entry")
            );
        }
    }
    // The snapshot previewed, by id: `latest` as given could be another one by now.
    let previewed = r["snapshot_id"]
        .as_str()
        .or(params["snapshot"].as_str())
        .unwrap_or("");
    let mut fields = hidden("snapshot", previewed);
    for p in params["paths"].as_array().into_iter().flatten() {
        fields.push_str(&hidden("paths[]", p.as_str().unwrap_or("")));
    }
    fields.push_str(&hidden("target", params["target"].as_str().unwrap_or("")));
    fields.push_str(&hidden(
        "overwrite",
        params["overwrite"].as_str().unwrap_or("if-changed"),
    ));
    if params["delete"].as_bool() == Some(true) {
        fields.push_str("<input type=\"hidden\" name=\"delete\" value=\"true\" data-json>");
    }
    let _ = write!(
        b,
        "<form method=\"post\" class=\"stack\" data-api=\"/api/restore\"><div class=\"form-error alert\" role=\"alert\"></div>{fields}\
         <div class=\"actions\"><button type=\"submit\" name=\"dry_run\" value=\"false\">Restore now</button></div></form>"
    );
    b
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// "Restore now" under a dry run's result restores the snapshot previewed, by its id: it
    /// sent the snapshot as given (`latest`), another one once a backup had landed.
    #[test]
    fn restore_now_names_the_snapshot_previewed() {
        let id = "ab".repeat(32);
        let dry = result_body(
            "restore",
            &json!({"dry_run": true, "snapshot_id": id, "plan": {}}),
            &json!({"snapshot": "latest", "target": "/t"}),
        );
        assert!(
            dry.contains(&format!("name=\"snapshot\" value=\"{id}\"")),
            "{dry}"
        );
        assert!(!dry.contains("value=\"latest\""), "{dry}");
    }

    /// A job's summary counts one thing in the singular ("1 snapshot"), others in the plural.
    #[test]
    fn summaries_count_in_the_singular_for_one() {
        let check = check_result(&json!({
            "ok": true, "snapshots": 1, "trees": 2, "packs": 1, "packs_read": 0, "bytes_read": 0
        }));
        assert!(
            check.contains("Checked 1 snapshot, 2 trees, 1 pack; read 0 packs"),
            "{check}"
        );
        let forget = result_body("forget", &json!({"removed": ["a"]}), &json!({}));
        assert!(forget.contains("Removed 1 snapshot."), "{forget}");
        let restore = result_body(
            "restore",
            &json!({"files_restored": 1, "dirs_restored": 2, "others_restored": 1, "errors": 1}),
            &json!({}),
        );
        assert!(
            restore.contains("Restored 1 file, 2 folders, 1 other entry")
                && restore.contains("; 1 entry could not be restored"),
            "{restore}"
        );
        let dry = result_body(
            "restore",
            &json!({"dry_run": true, "plan": {"files_new": 1, "dirs_new": 1, "deletes": 3}}),
            &json!({}),
        );
        assert!(
            dry.contains("Would restore 1 file, update 0 (0 B to put in place)")
                && dry.contains("create 1 folder; delete 3 entries in"),
            "{dry}"
        );
        let prune = result_body(
            "prune",
            &json!({"used_blobs": 1, "unused_blobs": 0}),
            &json!({}),
        );
        assert!(
            prune.contains("Used: 1 blob,") && prune.contains("Unused: 0 blobs,"),
            "{prune}"
        );
    }
}
