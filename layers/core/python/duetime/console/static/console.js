// duetime console: a static page over the public API (API.md). No framework, no inline script, no CDN.
"use strict";

(() => {
  const TOKEN_KEY = "duetime.token";
  const POLL_MS = 2000;
  const LIST_PAGE = 20; // jobs shown per page of the list (filtered client-side)
  const FETCH_PAGE = 100; // the API's largest page
  const MAX_FETCH_PAGES = 20; // a bound on client-side filtering: 2000 jobs or executions
  const HISTORY_PAGE = 20;
  const PREVIEW_COUNT = 5;
  const apiBase = (document.querySelector('meta[name="duetime-api"]')?.content || "").replace(/\/$/, "");
  const view = document.getElementById("view");
  const notice = document.getElementById("notice");
  const nav = document.getElementById("nav");
  let pollTimer = null; // the current page's refresh, stopped when the route changes
  let routeSerial = 0; // answers that arrive after the user moved on are dropped

  // ---------- DOM ----------
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const SVG_NS = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function show(...nodes) {
    view.replaceChildren(...nodes);
  }
  function say(message, isError) {
    notice.textContent = message;
    notice.classList.toggle("error", Boolean(isError));
    notice.hidden = !message;
  }
  function statusBadge(status) {
    return h("span", { class: `status status-${status}`, "data-status": status }, status);
  }

  // ---------- time ----------
  function utc(iso) {
    return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/Z$/, " UTC") : "—";
  }
  function zoned(iso, timeZone) {
    // A time in the job's zone with that zone's UTC offset at that instant (DST-aware, by the browser's tz data).
    const parts = {};
    const format = new Intl.DateTimeFormat("en-GB", {
      timeZone, weekday: "short", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "longOffset",
    });
    for (const part of format.formatToParts(new Date(iso))) parts[part.type] = part.value;
    const offset = parts.timeZoneName === "GMT" ? "+00:00" : parts.timeZoneName.replace("GMT", "");
    return {
      local: `${parts.weekday} ${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}`,
      offset: `UTC${offset}`,
    };
  }
  function ms(a, b) {
    return a && b ? new Date(b).getTime() - new Date(a).getTime() : null;
  }
  function duration(value) {
    if (value === null || value === undefined) return "—";
    const sign = value < 0 ? "−" : "";
    const abs = Math.abs(value);
    if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
    if (abs < 60000) return `${sign}${(abs / 1000).toFixed(1)} s`;
    if (abs < 3600000) return `${sign}${Math.floor(abs / 60000)} min ${Math.round((abs % 60000) / 1000)} s`;
    return `${sign}${(abs / 3600000).toFixed(1)} h`;
  }

  // ---------- schedule in words ----------
  const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
  const MONTHS = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December"];
  const pad = (n) => String(n).padStart(2, "0");
  function listWords(field, names) {
    return field.split(",").map((part) => {
      const [a, b] = part.split("-");
      const name = (x) => (names && /^\d+$/.test(x) ? names[Number(x)] : x);
      return b === undefined ? name(a) : `${name(a)} to ${name(b)}`;
    }).join(", ");
  }
  function cronWords(cron) {
    const fields = cron.trim().split(/\s+/);
    if (fields.length !== 5) return `cron ${cron}`;
    const [minute, hour, dom, month, dow] = fields;
    let when;
    if (minute === "*" && hour === "*") when = "every minute";
    else if (/^\*\/\d+$/.test(minute) && hour === "*") when = `every ${minute.slice(2)} minutes`;
    else if (/^\d+$/.test(minute) && hour === "*") when = `at minute ${minute} of every hour`;
    else if (/^\d+$/.test(minute) && /^\d+$/.test(hour)) when = `at ${pad(hour)}:${pad(minute)}`;
    else if (/^\d+$/.test(minute) && /^\*\/\d+$/.test(hour)) when = `at minute ${minute} every ${hour.slice(2)} hours`;
    else if (/^\d+$/.test(minute) && /^[\d,-]+$/.test(hour)) when = `at minute ${minute} past hour ${listWords(hour)}`;
    else return `cron ${cron}`;
    const days = [];
    if (dom !== "*" && dom !== "?") days.push(`on day ${listWords(dom)} of the month`);
    if (month !== "*") days.push(`in ${listWords(month, MONTHS)}`);
    if (dow !== "*" && dow !== "?") {
      if (!/^[\d,-]+$/.test(dow)) return `cron ${cron}`;
      days.push(`on ${listWords(dow, DAYS)}`);
    }
    if (!days.length && when.startsWith("at ") && /^\d+$/.test(hour)) days.push("every day");
    return [when, ...days].join(" ");
  }
  function scheduleWords(schedule) {
    const zone = schedule.timeZone || "UTC";
    if (schedule.cron) return `${cronWords(schedule.cron)} (${zone})`;
    if (schedule.every) return `every ${schedule.every}`;
    if (schedule.at) return `once, at ${utc(schedule.at)}`;
    return "—";
  }

  // ---------- API ----------
  class ApiError extends Error {
    constructor(status, error) {
      super(error.message || `HTTP ${status}`);
      this.status = status;
      this.code = error.code;
      this.field = error.field;
    }
  }
  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }
  async function api(method, path, body, headers) {
    const response = await fetch(apiBase + path, {
      method,
      headers: {
        Authorization: `Bearer ${token()}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        ...(headers || {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (response.status === 401) {
      signOut("Your token was refused (401): sign in again.");
      throw new ApiError(401, (data && data.error) || {});
    }
    if (!response.ok) throw new ApiError(response.status, (data && data.error) || {});
    return data;
  }
  async function allPages(path, key) {
    // Every page of a listing (up to MAX_FETCH_PAGES), for filtering on this side.
    const items = [];
    let cursor = null;
    for (let page = 0; page < MAX_FETCH_PAGES; page += 1) {
      const query = `limit=${FETCH_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const data = await api("GET", `${path}?${query}`);
      items.push(...data[key]);
      cursor = data.nextCursor;
      if (!cursor) return { items, complete: true };
    }
    return { items, complete: false };
  }
  function errorText(error) {
    const where = error.field ? ` (field ${error.field})` : "";
    return `${error.message}${where}`;
  }

  // ---------- sign-in through the user pool's hosted UI (AWS): authorization code with PKCE ----------
  const PKCE_KEY = "duetime.pkce";
  let hostedSignIn = null; // {hostedUi, clientId} from config.json, which only the AWS deployment writes
  async function loadConfig() {
    try {
      const response = await fetch("config.json", { cache: "no-store" });
      hostedSignIn = response.ok ? (await response.json()).signIn || null : null;
    } catch {
      hostedSignIn = null;
    }
  }
  function base64url(bytes) {
    return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function redirectUri() {
    return location.origin + location.pathname;
  }
  async function startHostedSignIn() {
    const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
    const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
    sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
    const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
    const query = new URLSearchParams({
      response_type: "code", client_id: hostedSignIn.clientId, redirect_uri: redirectUri(),
      scope: "openid email profile", state, code_challenge: challenge, code_challenge_method: "S256",
    });
    location.assign(`${hostedSignIn.hostedUi}/oauth2/authorize?${query}`);
  }
  async function finishHostedSignIn() {
    // Back from the hosted UI with ?code=&state=: trade the code (and this tab's verifier) for tokens.
    const params = new URLSearchParams(location.search);
    const code = params.get("code");
    if (!code || !hostedSignIn) return;
    const pending = JSON.parse(sessionStorage.getItem(PKCE_KEY) || "null");
    sessionStorage.removeItem(PKCE_KEY);
    history.replaceState(null, "", `${location.pathname}#/jobs`);
    if (!pending || pending.state !== params.get("state")) {
      say("Sign-in failed: the answer does not match a sign-in started in this tab.", true);
      return;
    }
    const response = await fetch(`${hostedSignIn.hostedUi}/oauth2/token`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code", client_id: hostedSignIn.clientId, code,
        redirect_uri: redirectUri(), code_verifier: pending.verifier,
      }),
    });
    if (!response.ok) {
      say(`Sign-in failed: the user pool answered ${response.status}.`, true);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, (await response.json()).id_token);
    say("Signed in.");
  }

  // ---------- sign-in ----------
  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    nav.hidden = true;
    location.hash = "#/signin";
    say(message || "", Boolean(message));
  }
  function signInPage() {
    nav.hidden = true;
    const input = h("textarea", { id: "token", rows: "3", autocomplete: "off", spellcheck: "false",
      "aria-describedby": "token-hint" });
    const error = h("p", { id: "token-error", class: "error-text", role: "alert" });
    const form = h("form", { id: "sign-in", onsubmit: async (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      try {
        await api("GET", "/jobs?limit=1");
        say("Signed in.");
        location.hash = "#/jobs";
      } catch (err) {
        error.textContent = `Sign-in failed: ${errorText(err)}`;
      }
    } },
    h("div", { class: "field" }, h("label", { for: "token" }, "Bearer token"), input,
      h("p", { id: "token-hint", class: "hint" },
        "`duetime local` prints a console link that signs you in; or paste the token it prints, or one from ",
        h("code", {}, "duetime token --owner NAME"), ".")),
    error,
    h("button", { type: "submit" }, "Sign in"));
    if (hostedSignIn) {
      const button = h("button", { type: "button", id: "hosted-sign-in", onclick: () => startHostedSignIn() },
        "Sign in with your account");
      show(h("h1", {}, "Sign in"), h("div", { class: "actions" }, button),
        h("details", {}, h("summary", {}, "Or paste a bearer token"), form));
      button.focus();
      return;
    }
    show(h("h1", {}, "Sign in"), form);
    input.focus();
  }

  // ---------- jobs list ----------
  async function recentRuns(jobId) {
    // The listing carries no nextRunAt: a job's newest executions give its waiting run and its last result.
    const data = await api("GET", `/jobs/${jobId}/executions?limit=5`);
    const waiting = data.executions.filter((e) => e.status === "scheduled").map((e) => e.dueAt).sort();
    const last = data.executions.find((e) => !["scheduled", "running"].includes(e.status)) || null;
    return { next: waiting[0] || null, last };
  }
  function tagsOf(job) {
    const tags = job.tags;
    if (!tags) return [];
    if (Array.isArray(tags)) return tags.map(String);
    return Object.entries(tags).map(([k, v]) => `${k}=${v}`);
  }
  async function jobsPage(serial, params) {
    show(h("h1", {}, "Jobs"), h("p", {}, "Loading…"));
    const { items: jobs, complete } = await allPages("/jobs", "jobs");
    if (serial !== routeSerial) return;
    let page = Number(params.get("page") || "1");
    const search = h("input", { id: "search", type: "search", value: params.get("q") || "",
      placeholder: "name, handler, id or tag" });
    const statusSelect = h("select", { id: "status-filter" },
      ["all", "active", "paused", "cancelled"].map((v) => h("option", { value: v }, v)));
    statusSelect.value = params.get("status") || "all";
    const body = h("tbody");
    const summary = h("p", { class: "hint", id: "jobs-summary", "aria-live": "polite" });
    const pager = h("div", { class: "pager" });

    function filtered() {
      const q = search.value.trim().toLowerCase();
      return jobs.filter((job) => {
        if (statusSelect.value !== "all" && job.status !== statusSelect.value) return false;
        if (!q) return true;
        const hay = [job.name, job.handler, job.jobId, ...tagsOf(job)].join(" ").toLowerCase();
        return hay.includes(q);
      });
    }
    function render() {
      const rows = filtered();
      const pages = Math.max(1, Math.ceil(rows.length / LIST_PAGE));
      page = Math.min(Math.max(1, page), pages);
      const shown = rows.slice((page - 1) * LIST_PAGE, page * LIST_PAGE);
      summary.textContent = `${rows.length} of ${jobs.length} jobs${complete ? "" : " (first pages only)"}` +
        ` · page ${page} of ${pages}`;
      body.replaceChildren(...shown.map((job) => {
        const result = h("td", { "data-col": "last" }, "…");
        const next = h("td", { "data-col": "next" }, job.status === "active" ? utc(job.nextRunAt) : "—");
        recentRuns(job.jobId).then(({ next: due, last: e }) => {
          result.replaceChildren(e ? statusBadge(e.status) : "—");
          if (e && (e.finishedAt || e.startedAt)) result.append(" ", h("span", { class: "hint" }, utc(e.finishedAt || e.startedAt)));
          if (job.status === "active" && !job.nextRunAt) next.textContent = utc(due);
        }).catch(() => { result.textContent = "?"; });
        return h("tr", { "data-job-id": job.jobId },
          h("td", {}, h("a", { href: `#/jobs/${job.jobId}` }, job.name)),
          h("td", {}, statusBadge(job.status)),
          h("td", {}, scheduleWords(job.schedule)),
          next,
          result,
          h("td", { class: "hide-narrow" }, tagsOf(job).map((t) => h("span", { class: "tag" }, t))));
      }));
      if (!shown.length) body.append(h("tr", {}, h("td", { colspan: "6" }, jobs.length ? "No job matches." : "No jobs yet.")));
      pager.replaceChildren(
        h("button", { type: "button", class: "secondary", disabled: page <= 1, onclick: () => { page -= 1; render(); } }, "Previous"),
        h("button", { type: "button", class: "secondary", disabled: page >= pages, onclick: () => { page += 1; render(); } }, "Next"));
    }
    search.addEventListener("input", () => { page = 1; render(); });
    statusSelect.addEventListener("change", () => { page = 1; render(); });
    show(
      h("h1", {}, "Jobs"),
      h("div", { class: "actions" }, h("a", { class: "button", href: "#/new" }, "New job")),
      h("div", { class: "filters", role: "search" },
        h("div", {}, h("label", { for: "search" }, "Search"), search),
        h("div", {}, h("label", { for: "status-filter" }, "Status"), statusSelect)),
      summary,
      h("div", { class: "table-wrap" }, h("table", { id: "jobs" },
        h("caption", { class: "hint" }, "Your jobs, newest first"),
        h("thead", {}, h("tr", {}, ["Name", "Status", "Schedule", "Next run", "Last result"].map((c) => h("th", { scope: "col" }, c)),
          h("th", { scope: "col", class: "hide-narrow" }, "Tags"))),
        body)),
      pager);
    render();
  }

  // ---------- create ----------
  function field(id, labelText, input, hint) {
    input.id = id;
    const error = h("p", { class: "error-text", id: `${id}-error` });
    input.setAttribute("aria-describedby", `${id}-error${hint ? ` ${id}-hint` : ""}`);
    return h("div", { class: "field", "data-for": id },
      h("label", { for: id }, labelText), input, hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null, error);
  }
  function previewList(runs, timeZone) {
    return h("ol", { class: "runs" }, runs.map((iso) => {
      const z = zoned(iso, timeZone);
      return h("li", { "data-run": iso }, `${z.local} `, h("strong", {}, z.offset), h("span", { class: "hint" }, ` · ${utc(iso)}`));
    }));
  }
  function createPage() {
    const kind = { value: "cron" };
    const inputs = {
      name: h("input", { type: "text", required: true, maxlength: "128" }),
      handler: h("input", { type: "text", required: true, value: "demo.echo", list: "handlers" }),
      cron: h("input", { type: "text", value: "0 9 * * 1-5", spellcheck: "false" }),
      every: h("input", { type: "text", value: "15m", spellcheck: "false" }),
      at: h("input", { type: "datetime-local", step: "1" }),
      timeZone: h("input", { type: "text", value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", list: "zones" }),
      exclude: h("input", { type: "text", spellcheck: "false", placeholder: "2026-12-24/2026-12-26, 2027-01-01" }),
      payload: h("textarea", { rows: "3", spellcheck: "false" }, "{}"),
      maxAttempts: h("input", { type: "number", min: "1", max: "100", value: "3" }),
      baseDelaySeconds: h("input", { type: "number", min: "0", value: "30" }),
      timeoutSeconds: h("input", { type: "number", min: "1", value: "600" }),
      overlap: h("select", {}, ["forbid", "allow", "replace"].map((v) => h("option", { value: v }, v))),
      catchUp: h("select", {}, ["latest", "all", "none"].map((v) => h("option", { value: v }, v))),
    };
    // Which input shows an error the API names by field (a job's fields, or the preview's top-level ones).
    const byField = {
      name: "name", handler: "handler", payload: "payload", "schedule.cron": "cron", cron: "cron",
      "schedule.every": "every", every: "every", "schedule.at": "at", at: "at", "schedule.timeZone": "timeZone",
      timeZone: "timeZone", exclude: "exclude", "retry.maxAttempts": "maxAttempts", "retry.baseDelaySeconds": "baseDelaySeconds", timeoutSeconds: "timeoutSeconds",
      overlap: "overlap", catchUp: "catchUp", schedule: "cron",
    };
    const idempotencyKey = crypto.randomUUID();
    const preview = h("div", { id: "preview", "aria-live": "polite" });
    const formError = h("p", { class: "error-text", role: "alert", id: "form-error" });

    // The form's own error lines (not the document's): a preview answered after the user moved on finds none.
    const errorOf = (key) => form.querySelector(`#f-${key}-error`) || document.createElement("p");
    function clearErrors() {
      for (const [key, input] of Object.entries(inputs)) {
        input.removeAttribute("aria-invalid");
        errorOf(key).textContent = "";
      }
      formError.textContent = "";
    }
    function showError(err) {
      const key = byField[err.field] || byField[(err.field || "").split(".").slice(0, 2).join(".")];
      if (key) {
        inputs[key].setAttribute("aria-invalid", "true");
        errorOf(key).textContent = err.message;
      } else formError.textContent = errorText(err);
    }
    function atIso() {
      // datetime-local has no zone: the value is read in the browser's zone, sent as UTC.
      return inputs.at.value ? new Date(inputs.at.value).toISOString() : "";
    }
    function excluded() {
      return inputs.exclude.value.split(",").map((x) => x.trim()).filter(Boolean);
    }
    function schedule() {
      const zone = inputs.timeZone.value.trim() || "UTC";
      if (kind.value === "cron") return { cron: inputs.cron.value.trim(), timeZone: zone };
      if (kind.value === "every") return { every: inputs.every.value.trim(), timeZone: zone };
      return { at: atIso(), timeZone: zone };
    }
    let previewSerial = 0;
    let previewTimer = null;
    async function refreshPreview() {
      if (!form.isConnected) return; // the form was left before its debounce ran out
      const mine = ++previewSerial;
      const sched = schedule();
      for (const key of ["cron", "every", "at", "timeZone", "exclude"]) {
        inputs[key].removeAttribute("aria-invalid");
        errorOf(key).textContent = "";
      }
      if ((kind.value === "at" && !sched.at) || (kind.value !== "at" && !sched[kind.value])) {
        preview.replaceChildren(h("p", { class: "hint" }, "Fill in the schedule to see its next runs."));
        return;
      }
      try {
        const data = await api("POST", "/schedules/preview", { ...sched, exclude: excluded(), count: PREVIEW_COUNT });
        if (mine !== previewSerial) return;
        preview.replaceChildren(h("p", {}, `${scheduleWords(sched)} — next runs in ${sched.timeZone}:`),
          previewList(data.runs, sched.timeZone));
      } catch (err) {
        if (mine !== previewSerial || err.status === 401) return;
        showError(err);
        preview.replaceChildren(h("p", { class: "error-text" }, `No preview: ${errorText(err)}`));
      }
    }
    function schedulePreview() {
      clearTimeout(previewTimer);
      previewTimer = setTimeout(refreshPreview, 250);
    }
    const kindFields = {
      cron: field("f-cron", "Cron expression", inputs.cron, "minute hour day-of-month month day-of-week, in the time zone below"),
      every: field("f-every", "Every", inputs.every, "an interval such as 30s, 15m, 2h"),
      at: field("f-at", "At (your browser's local time)", inputs.at),
    };
    function showKind() {
      for (const [name, node] of Object.entries(kindFields)) node.hidden = name !== kind.value;
      schedulePreview();
    }
    const radios = h("div", { class: "radios" }, [["cron", "Cron"], ["every", "Interval"], ["at", "Once"]].map(([value, text]) =>
      h("label", {}, h("input", { type: "radio", name: "kind", value, id: `kind-${value}`, checked: value === "cron",
        onchange: () => { kind.value = value; showKind(); } }), text)));
    for (const key of ["cron", "every", "at", "timeZone", "exclude"]) inputs[key].addEventListener("input", schedulePreview);
    inputs.payload.addEventListener("input", () => {
      try {
        JSON.parse(inputs.payload.value || "{}");
        inputs.payload.removeAttribute("aria-invalid");
        errorOf("payload").textContent = "";
      } catch (err) {
        inputs.payload.setAttribute("aria-invalid", "true");
        errorOf("payload").textContent = `not JSON: ${err.message}`;
      }
    });
    const submit = h("button", { type: "submit", id: "create" }, "Create job");
    const form = h("form", { id: "create-form", novalidate: true, onsubmit: async (event) => {
      event.preventDefault();
      clearErrors();
      let payload;
      try {
        payload = JSON.parse(inputs.payload.value || "{}");
      } catch (err) {
        showError({ field: "payload", message: `not JSON: ${err.message}` });
        return;
      }
      const spec = {
        name: inputs.name.value.trim(),
        handler: inputs.handler.value.trim(),
        payload,
        schedule: schedule(),
        exclude: excluded(),
        retry: { maxAttempts: Number(inputs.maxAttempts.value), baseDelaySeconds: Number(inputs.baseDelaySeconds.value) },
        timeoutSeconds: Number(inputs.timeoutSeconds.value),
        overlap: inputs.overlap.value,
        catchUp: inputs.catchUp.value,
      };
      submit.disabled = true;
      try {
        const job = await api("POST", "/jobs", spec, { "Idempotency-Key": idempotencyKey });
        say(`Created job “${job.name}” (${job.jobId}); next run ${utc(job.nextRunAt)}.`);
        location.hash = `#/jobs/${job.jobId}`;
      } catch (err) {
        if (err.status !== 401) showError(err);
        submit.disabled = false;
      }
    } },
    field("f-name", "Name", inputs.name),
    field("f-handler", "Handler", inputs.handler, "a registered handler; built in: demo.echo, demo.sleep, demo.fail"),
    h("datalist", { id: "handlers" }, ["demo.echo", "demo.sleep", "demo.fail"].map((v) => h("option", { value: v }))),
    h("fieldset", {}, h("legend", {}, "Schedule"), radios, kindFields.cron, kindFields.every, kindFields.at,
      field("f-timeZone", "Time zone", inputs.timeZone, "an IANA zone, e.g. America/New_York"),
      field("f-exclude", "Excluded dates", inputs.exclude,
        "optional: local dates or inclusive ranges in that zone, comma-separated; or calendar:NAME"),
      h("datalist", { id: "zones" }, ["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Asia/Tokyo"].map((v) => h("option", { value: v }))),
      h("h2", {}, "Preview"), preview),
    field("f-payload", "Payload (JSON)", inputs.payload),
    h("div", { class: "grid" },
      field("f-maxAttempts", "Max attempts", inputs.maxAttempts),
      field("f-baseDelaySeconds", "First retry after (seconds)", inputs.baseDelaySeconds),
      field("f-timeoutSeconds", "Timeout (seconds)", inputs.timeoutSeconds),
      field("f-overlap", "Overlap", inputs.overlap),
      field("f-catchUp", "Catch-up", inputs.catchUp)),
    formError,
    submit);
    for (const [key, input] of Object.entries(inputs)) input.id = `f-${key}`;
    show(h("h1", {}, "New job"), form);
    showKind();
    inputs.name.focus();
  }

  // ---------- one job ----------
  function lateness(execution) {
    const first = (execution.attempts || [])[0];
    return ms(execution.scheduledAt, first ? first.startedAt : execution.startedAt);
  }
  function runTime(execution) {
    const last = (execution.attempts || []).at(-1);
    return last ? ms(last.startedAt, last.finishedAt) : ms(execution.startedAt, execution.finishedAt);
  }
  function chart(executions) {
    // Start lateness and duration of recent runs, oldest on the left: two bars a run, one scale.
    const runs = executions.filter((e) => e.startedAt || (e.attempts || []).length).slice(0, 30).reverse();
    if (!runs.length) return h("p", { class: "hint", id: "chart" }, "No run has started yet.");
    const width = 720;
    const height = 220;
    const left = 60;
    const bottom = 30;
    const top = 12;
    const values = runs.flatMap((e) => [Math.max(0, lateness(e) || 0), Math.max(0, runTime(e) || 0)]);
    const max = Math.max(1, ...values);
    const slot = (width - left - 10) / runs.length;
    const bar = Math.max(2, Math.min(14, slot / 2 - 2));
    const y = (v) => height - bottom - (Math.max(0, v) / max) * (height - bottom - top);
    const svg = s("svg", { class: "chart", id: "chart", viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `Start lateness and duration of the last ${runs.length} runs; the largest is ${duration(max)}.` },
    s("line", { x1: left, y1: height - bottom, x2: width - 5, y2: height - bottom }),
    s("line", { x1: left, y1: top, x2: left, y2: height - bottom }),
    s("text", { x: left - 6, y: top + 8, "text-anchor": "end" }, duration(max)),
    s("text", { x: left - 6, y: height - bottom, "text-anchor": "end" }, "0"),
    s("text", { x: left, y: height - 8 }, "older"),
    s("text", { x: width - 10, y: height - 8, "text-anchor": "end" }, "newer"));
    runs.forEach((e, i) => {
      const x = left + 4 + i * slot;
      const late = Math.max(0, lateness(e) || 0);
      const took = Math.max(0, runTime(e) || 0);
      svg.append(
        s("rect", { class: "lateness", x, y: y(late), width: bar, height: height - bottom - y(late) },
          s("title", {}, `${utc(e.scheduledAt)}: started ${duration(late)} late`)),
        s("rect", { class: "duration", x: x + bar + 1, y: y(took), width: bar, height: height - bottom - y(took) },
          s("title", {}, `${utc(e.scheduledAt)}: ran ${duration(took)}`)));
    });
    return h("figure", {}, svg, h("figcaption", { class: "legend" },
      h("span", {}, h("span", { class: "swatch lateness" }), "start lateness"),
      h("span", {}, h("span", { class: "swatch duration" }), "duration")));
  }
  function resultText(value) {
    if (value === null || value === undefined) return "—";
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > 120 ? `${text.slice(0, 117)}…` : text;
  }
  function executionRows(jobId, e) {
    const note = e.error || (e.skipReason ? `skipped: ${e.skipReason}${e.skippedCount ? ` (${e.skippedCount} runs)` : ""}` : "");
    const rows = [h("tr", { "data-execution-id": e.executionId, "data-status": e.status },
      h("td", {}, h("a", { href: `#/jobs/${jobId}/executions/${encodeURIComponent(e.executionId)}` }, utc(e.scheduledAt)),
        e.kind && e.kind !== "scheduled" ? h("span", { class: "tag" }, e.kind) : null),
      h("td", {}, statusBadge(e.status)),
      h("td", { class: "num" }, String(e.attempt)),
      h("td", { class: "hide-narrow" }, e.workerId || "—"),
      h("td", { class: "hide-narrow" }, utc(e.startedAt)),
      h("td", { class: "hide-narrow" }, utc(e.finishedAt)),
      h("td", { class: "num" }, duration(lateness(e))),
      h("td", {}, note || "—"),
      h("td", { class: "hide-narrow" }, resultText(e.result)))];
    const attempts = e.attempts || [];
    if (attempts.length > 1 || (attempts.length === 1 && attempts[0].error)) {
      for (const a of attempts) {
        const late = a.attempt === 1 ? ms(e.scheduledAt, a.startedAt) : null;
        rows.push(h("tr", { class: "attempt" },
          h("td", {}, `↳ attempt ${a.attempt}`),
          h("td", {}, a.outcome || "running"),
          h("td", { class: "num" }, String(a.attempt)),
          h("td", { class: "hide-narrow" }, a.workerId),
          h("td", { class: "hide-narrow" }, utc(a.startedAt)),
          h("td", { class: "hide-narrow" }, utc(a.finishedAt)),
          h("td", { class: "num" }, late === null ? `ran ${duration(ms(a.startedAt, a.finishedAt))}` : duration(late)),
          h("td", {}, a.error || "—"),
          h("td", { class: "hide-narrow" }, "")));
      }
    }
    return rows;
  }
  function historyHead() {
    return h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Scheduled"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Attempt"),
      h("th", { scope: "col", class: "hide-narrow" }, "Worker"), h("th", { scope: "col", class: "hide-narrow" }, "Started"),
      h("th", { scope: "col", class: "hide-narrow" }, "Finished"), h("th", { scope: "col" }, "Lateness"),
      h("th", { scope: "col" }, "Error / reason"), h("th", { scope: "col", class: "hide-narrow" }, "Result")));
  }
  function specList(job) {
    const rows = [
      ["Job id", job.jobId], ["Handler", job.handler], ["Schedule", scheduleWords(job.schedule)],
      ["Time zone", job.schedule.timeZone || "UTC"],
      ["Next run", job.status === "active" ? utc(job.nextRunAt) : "—"],
      ["Retry", `${job.retry.maxAttempts} attempts, ${job.retry.baseDelaySeconds}–${job.retry.maxDelaySeconds} s apart`],
      ["Timeout", `${job.timeoutSeconds} s`], ["Overlap", job.overlap], ["Catch-up", job.catchUp],
      ["Job class", job.jobClass], ["Created", utc(job.createdAt)],
    ];
    if (job.schedule.cron) rows.splice(3, 0, ["Cron", job.schedule.cron]);
    if ((job.exclude || []).length) rows.push(["Excluded", job.exclude.join(", ")]);
    if (tagsOf(job).length) rows.push(["Tags", tagsOf(job).join(", ")]);
    return h("dl", { class: "spec", id: "spec" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }
  async function jobPage(serial, jobId) {
    show(h("p", {}, "Loading…"));
    const title = h("h1", {});
    const statusLine = h("p", { id: "job-status" });
    const actions = h("div", { class: "actions", id: "job-actions" });
    const spec = h("div", { class: "panel" });
    const nextRuns = h("div", { id: "next-runs" });
    const chartBox = h("div", {});
    const history = h("tbody", { id: "history" });
    const pager = h("div", { class: "pager" });
    const cursors = [null]; // the cursor of each page seen: Previous goes back one
    let pageIndex = 0;
    let job = null;
    let previewFor = null;
    let shownHistory = null;
    let shownJob = null;

    async function loadPreview() {
      const sched = job.schedule;
      const key = `${job.status}|${job.nextRunAt}`;
      if (previewFor === key) return;
      previewFor = key;
      if (job.status !== "active") {
        nextRuns.replaceChildren(h("p", { class: "hint" }, `No runs while the job is ${job.status}.`));
        return;
      }
      const request = { timeZone: sched.timeZone || "UTC", count: PREVIEW_COUNT, exclude: job.exclude || [] };
      for (const k of ["cron", "every", "at", "startAt"]) if (sched[k]) request[k] = sched[k];
      try {
        const data = await api("POST", "/schedules/preview", request);
        nextRuns.replaceChildren(data.runs.length ? previewList(data.runs, request.timeZone)
          : h("p", { class: "hint" }, "No further runs."));
      } catch (err) {
        nextRuns.replaceChildren(h("p", { class: "error-text" }, errorText(err)));
      }
    }
    async function act(label, work) {
      try {
        const message = await work();
        say(message);
        await refresh();
      } catch (err) {
        if (err.status !== 401) say(`${label} failed: ${errorText(err)}`, true);
      }
    }
    function renderActions() {
      const buttons = [];
      if (job.status === "active") {
        buttons.push(h("button", { type: "button", id: "pause", class: "secondary", onclick: () => act("Pause", async () => {
          await api("PATCH", `/jobs/${jobId}`, { status: "paused" });
          return `Paused “${job.name}”: no run starts until you resume it.`;
        }) }, "Pause"));
      }
      if (job.status === "paused") {
        buttons.push(h("button", { type: "button", id: "resume", onclick: () => act("Resume", async () => {
          const resumed = await api("PATCH", `/jobs/${jobId}`, { status: "active" });
          return `Resumed “${job.name}”; next run ${utc(resumed.nextRunAt)}.`;
        }) }, "Resume"));
      }
      if (job.status !== "cancelled") {
        buttons.push(h("button", { type: "button", id: "run-now", onclick: () => act("Run now", async () => {
          const run = await api("POST", `/jobs/${jobId}/run`);
          return `Run now: execution ${run.executionId} is due at ${utc(run.dueAt)}.`;
        }) }, "Run now"));
        const cancel = h("button", { type: "button", id: "cancel", class: "danger", onclick: () => {
          const confirmBox = h("div", { class: "confirm", role: "alertdialog", "aria-labelledby": "confirm-text" },
            h("p", { id: "confirm-text" }, `Cancel “${job.name}”? Its waiting runs are cancelled too; this cannot be undone.`),
            h("div", { class: "actions" },
              h("button", { type: "button", id: "confirm-cancel", class: "danger", onclick: () => act("Cancel", async () => {
                await api("DELETE", `/jobs/${jobId}`);
                return `Cancelled “${job.name}” and its waiting runs.`;
              }) }, "Yes, cancel the job"),
              h("button", { type: "button", class: "secondary", onclick: () => { renderActions(); } }, "Keep it")));
          actions.replaceChildren(confirmBox);
          confirmBox.querySelector("button").focus();
        } }, "Cancel job…");
        buttons.push(cancel);
      }
      buttons.push(h("a", { href: `#/jobs/${jobId}/failed`, id: "failed-link" }, "Failed executions"));
      actions.replaceChildren(...buttons);
    }
    async function loadHistory() {
      const cursor = cursors[pageIndex];
      const query = `limit=${HISTORY_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const data = await api("GET", `/jobs/${jobId}/executions?${query}`);
      if (serial !== routeSerial) return;
      // Polling redraws only what changed: a keyboard user's focus in the table survives a quiet refresh.
      const shown = `${pageIndex}|${JSON.stringify(data)}`;
      if (shown === shownHistory) return;
      shownHistory = shown;
      cursors[pageIndex + 1] = data.nextCursor;
      history.replaceChildren(...data.executions.flatMap((e) => executionRows(jobId, e)));
      if (!data.executions.length) history.append(h("tr", {}, h("td", { colspan: "9" }, "No executions yet.")));
      if (pageIndex === 0) chartBox.replaceChildren(chart(data.executions));
      pager.replaceChildren(
        h("button", { type: "button", class: "secondary", disabled: pageIndex === 0,
          onclick: () => { pageIndex -= 1; loadHistory(); } }, "Newer"),
        h("span", { class: "hint" }, `page ${pageIndex + 1}`),
        h("button", { type: "button", class: "secondary", disabled: !data.nextCursor,
          onclick: () => { pageIndex += 1; loadHistory(); } }, "Older"));
    }
    async function refresh() {
      const fresh = await api("GET", `/jobs/${jobId}`);
      if (serial !== routeSerial) return;
      const statusChanged = !job || job.status !== fresh.status;
      job = fresh;
      if (JSON.stringify(job) !== shownJob) {
        shownJob = JSON.stringify(job);
        title.textContent = job.name;
        statusLine.replaceChildren(statusBadge(job.status), " ", scheduleWords(job.schedule));
        spec.replaceChildren(specList(job));
      }
      if (statusChanged && !actions.querySelector(".confirm")) renderActions();
      await Promise.all([loadPreview(), loadHistory()]);
    }
    try {
      await refresh();
    } catch (err) {
      if (err.status === 404) show(h("h1", {}, "Job not found"), h("p", {}, errorText(err)), h("a", { href: "#/jobs" }, "All jobs"));
      else if (err.status !== 401) show(h("h1", {}, "Could not load the job"), h("p", { class: "error-text" }, errorText(err)));
      return;
    }
    if (serial !== routeSerial) return;
    show(
      h("p", {}, h("a", { href: "#/jobs" }, "← All jobs")),
      title, statusLine, actions,
      h("div", { class: "grid" },
        h("section", { "aria-labelledby": "spec-h" }, h("h2", { id: "spec-h" }, "Definition"), spec,
          h("details", {}, h("summary", {}, "Payload"), h("pre", {}, JSON.stringify(job.payload, null, 2)))),
        h("section", { "aria-labelledby": "next-h" }, h("h2", { id: "next-h" }, `Next runs (${job.schedule.timeZone || "UTC"})`), nextRuns)),
      h("section", { "aria-labelledby": "chart-h" }, h("h2", { id: "chart-h" }, "Recent runs"), chartBox),
      h("section", { "aria-labelledby": "history-h" }, h("h2", { id: "history-h" }, "Executions, newest first"),
        h("div", { class: "table-wrap" }, h("table", { id: "executions" }, historyHead(), history)), pager));
    pollTimer = setInterval(() => {
      if (!document.hidden) refresh().catch(() => {});
    }, POLL_MS);
  }

  // ---------- failed executions and one execution ----------
  async function failedPage(serial, jobId) {
    show(h("p", {}, "Loading…"));
    const job = await api("GET", `/jobs/${jobId}`);
    const { items, complete } = await allPages(`/jobs/${jobId}/executions`, "executions");
    if (serial !== routeSerial) return;
    const failed = items.filter((e) => e.status === "failed");
    // Retry, redrive and backfill (issue 16) belong in this page's actions row once the API offers them.
    show(
      h("p", {}, h("a", { href: `#/jobs/${jobId}` }, `← ${job.name}`)),
      h("h1", {}, `Failed executions of ${job.name}`),
      h("p", { class: "hint" }, `${failed.length} failed of ${items.length} executions${complete ? "" : " (the newest only)"}.`),
      h("div", { class: "table-wrap" }, h("table", { id: "failed" }, historyHead(),
        h("tbody", {}, failed.length ? failed.flatMap((e) => executionRows(jobId, e))
          : h("tr", {}, h("td", { colspan: "9" }, "No failed executions."))))));
  }
  async function executionPage(serial, jobId, executionId) {
    show(h("p", {}, "Loading…"));
    const job = await api("GET", `/jobs/${jobId}`);
    const { items } = await allPages(`/jobs/${jobId}/executions`, "executions");
    if (serial !== routeSerial) return;
    const e = items.find((x) => x.executionId === executionId);
    if (!e) {
      show(h("h1", {}, "Execution not found"), h("p", {}, h("a", { href: `#/jobs/${jobId}` }, `← ${job.name}`)));
      return;
    }
    const zone = job.schedule.timeZone || "UTC";
    const z = zoned(e.scheduledAt, zone);
    const rows = [
      ["Execution id", e.executionId], ["Status", statusBadge(e.status)], ["Kind", e.kind || "scheduled"],
      ["Scheduled", `${utc(e.scheduledAt)} (${z.local} ${z.offset} in ${zone})`], ["Due", utc(e.dueAt)],
      ["Attempts", String(e.attempt)], ["Worker", e.workerId || "—"], ["Started", utc(e.startedAt)],
      ["Finished", utc(e.finishedAt)], ["Start lateness", duration(lateness(e))], ["Duration", duration(runTime(e))],
    ];
    if (e.error) rows.push(["Error", h("span", { id: "execution-error" }, e.error)]);
    if (e.skipReason) rows.push(["Skipped because", e.skipReason]);
    show(
      h("p", {}, h("a", { href: `#/jobs/${jobId}` }, `← ${job.name}`), " · ", h("a", { href: `#/jobs/${jobId}/failed` }, "failed executions")),
      h("h1", {}, `Execution of ${job.name}`),
      h("dl", { class: "spec panel", id: "execution" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("h2", {}, "Attempts"),
      h("div", { class: "table-wrap" }, h("table", { id: "attempts" },
        h("thead", {}, h("tr", {}, ["Attempt", "Worker", "Started", "Finished", "Ran", "Outcome", "Error"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, (e.attempts || []).map((a) => h("tr", {},
          h("td", { class: "num" }, String(a.attempt)), h("td", {}, a.workerId), h("td", {}, utc(a.startedAt)),
          h("td", {}, utc(a.finishedAt)), h("td", { class: "num" }, duration(ms(a.startedAt, a.finishedAt))),
          h("td", {}, a.outcome || "running"), h("td", {}, a.error || "—")))))),
      h("h2", {}, "Result"),
      h("pre", { id: "result" }, e.result === null || e.result === undefined ? "—" : JSON.stringify(e.result, null, 2)));
  }

  // ---------- routing ----------
  async function route() {
    clearInterval(pollTimer);
    pollTimer = null;
    const serial = ++routeSerial;
    const hash = location.hash || "#/jobs";
    if (hash.startsWith("#token=")) {
      // The start-up link: keep the token for this tab and drop it from the address bar and history.
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(hash.slice("#token=".length)));
      history.replaceState(null, "", `${location.pathname}#/jobs`);
      say("Signed in with the local token.");
      return route();
    }
    if (!token() || hash === "#/signin") {
      signInPage();
      return;
    }
    nav.hidden = false;
    const [path, query] = hash.slice(1).split("?");
    const params = new URLSearchParams(query || "");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    try {
      if (parts[0] === "new") createPage();
      else if (parts[0] === "jobs" && parts.length === 2) await jobPage(serial, parts[1]);
      else if (parts[0] === "jobs" && parts[2] === "failed") await failedPage(serial, parts[1]);
      else if (parts[0] === "jobs" && parts[2] === "executions" && parts[3]) await executionPage(serial, parts[1], parts[3]);
      else await jobsPage(serial, params);
    } catch (err) {
      if (err.status !== 401 && serial === routeSerial) {
        show(h("h1", {}, "Something went wrong"), h("p", { class: "error-text" }, errorText(err)));
      }
    }
  }
  document.getElementById("sign-out").addEventListener("click", () => signOut(""));
  window.addEventListener("hashchange", () => {
    route();
    view.focus();
  });
  loadConfig().then(finishHostedSignIn).finally(route);
})();
