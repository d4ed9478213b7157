// arca ui: the little script the pages need. Forms marked data-api are sent as JSON with the
// CSRF token; elements marked data-job follow a job's progress. Everything else is plain HTML.
"use strict";
(function () {
  const csrf = (document.querySelector('meta[name="arca-csrf"]') || {}).content || "";

  async function post(url, body) {
    const r = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Arca-CSRF": csrf },
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try { data = await r.json(); } catch (e) { data = { error: "the server answered " + r.status }; }
    if (!r.ok) { throw new Error(data.error || ("the server answered " + r.status)); }
    return data;
  }

  // Form fields as an object: name[] → array, checkbox → boolean, number → number,
  // data-json → parsed JSON, empty text → left out (unless data-keep-empty).
  function formObject(form) {
    const o = {};
    for (const el of form.elements) {
      if (!el.name || el.disabled) continue;
      let name = el.name;
      const many = name.endsWith("[]");
      if (many) name = name.slice(0, -2);
      let v;
      if (el.type === "checkbox" && !many) v = el.checked;
      else if ((el.type === "checkbox" || el.type === "radio") && !el.checked) continue;
      else if (el.dataset.json !== undefined) { try { v = JSON.parse(el.value); } catch (e) { v = el.value; } }
      else if (el.type === "number") { if (el.value === "") continue; v = Number(el.value); }
      else if (el.tagName === "BUTTON" || el.type === "submit") continue;
      else { if (el.value === "" && !many && el.dataset.keepEmpty === undefined) continue; v = el.value; }
      if (many) { (o[name] = o[name] || []).push(v); } else { o[name] = v; }
    }
    return o;
  }

  function showError(form, msg) {
    let box = form.querySelector(".form-error");
    if (!box) {
      box = document.createElement("div");
      box.className = "form-error alert";
      box.setAttribute("role", "alert");
      form.prepend(box);
    }
    box.textContent = msg;
    box.focus && box.setAttribute("tabindex", "-1");
    box.focus && box.focus();
  }

  document.addEventListener("submit", async function (ev) {
    const form = ev.target;
    if (!form.dataset || !form.dataset.api) return;
    ev.preventDefault();
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    const box = form.querySelector(".form-error");
    if (box) box.textContent = "";
    try {
      const body = formObject(form);
      if (ev.submitter && ev.submitter.name) body[ev.submitter.name] = ev.submitter.value === "true" ? true : ev.submitter.value === "false" ? false : ev.submitter.value;
      const data = await post(form.dataset.api, body);
      if (data.job) { location.assign("/jobs/" + data.job.id); return; }
      if (form.dataset.then) { location.assign(form.dataset.then); return; }
      location.reload();
    } catch (e) {
      showError(form, e.message);
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  });

  // "Back" on error pages: the previous page (a `javascript:` link is refused by the CSP);
  // without scripts, or with no page to go back to, the link leads to the overview.
  document.addEventListener("click", function (ev) {
    const a = ev.target.closest && ev.target.closest("a[data-back]");
    if (!a || window.history.length < 2) return;
    ev.preventDefault();
    window.history.back();
  });

  document.addEventListener("click", async function (ev) {
    const b = ev.target.closest && ev.target.closest("button[data-post]");
    if (!b) return;
    ev.preventDefault();
    b.disabled = true;
    try { await post(b.dataset.post, {}); } catch (e) { alert(e.message); }
    b.disabled = false;
  });

  // Select-all checkboxes: data-select-all="NAME" toggles every checkbox named NAME.
  document.addEventListener("change", function (ev) {
    const el = ev.target;
    if (!el.dataset || !el.dataset.selectAll) return;
    document.querySelectorAll('input[type=checkbox][name="' + el.dataset.selectAll + '"]').forEach((c) => (c.checked = el.checked));
  });

  function fmtDuration(s) {
    s = Math.max(0, Math.round(s));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const pad = (n) => String(n).padStart(2, "0");
    return h > 0 ? h + ":" + pad(m) + ":" + pad(r) : m + ":" + pad(r);
  }

  function update(el, job) {
    const set = (field, text) => el.querySelectorAll('[data-field="' + field + '"]').forEach((n) => (n.textContent = text));
    const p = job.progress || {};
    set("state", job.state + (job.cancel_requested && job.state === "running" ? " (cancelling)" : ""));
    el.querySelectorAll('[data-field="state"]').forEach((n) => (n.className = "state-" + job.state));
    set("phase", p.phase || "");
    set("text", p.text || "");
    set("percent", p.fraction == null ? "" : (p.fraction * 100).toFixed(1) + "%");
    set("eta", p.eta_seconds == null ? "" : "about " + fmtDuration(p.eta_seconds) + " left");
    set("elapsed", fmtDuration(job.elapsed_seconds || 0));
    el.querySelectorAll("progress").forEach((bar) => {
      if (p.fraction == null) bar.removeAttribute("value");
      else bar.value = p.fraction;
    });
    el.querySelectorAll('[data-field="log"]').forEach((n) => (n.textContent = (job.log || []).join("\n")));
  }

  function follow(el) {
    const id = el.dataset.job;
    let was = el.dataset.state || "running";
    async function tick() {
      let job;
      try {
        const r = await fetch("/api/jobs/" + id, { credentials: "same-origin" });
        job = await r.json();
        if (!r.ok) throw new Error(job.error || r.status);
      } catch (e) {
        el.querySelectorAll('[data-field="text"]').forEach((n) => (n.textContent = "cannot reach the server: " + e.message));
        setTimeout(tick, 2000);
        return;
      }
      update(el, job);
      if (job.state !== "running") {
        if (was === "running" && el.dataset.reload !== undefined) location.reload();
        return;
      }
      was = job.state;
      setTimeout(tick, 400);
    }
    tick();
  }

  document.querySelectorAll("[data-job]").forEach(follow);
})();
