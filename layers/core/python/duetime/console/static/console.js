// duetime console: a static page over the public API (API.md). No framework, no inline script, no CDN.
"use strict";

(() => {
  const TOKEN_KEY = "duetime.token";
  const POLL_MS = 2000;
  const LIST_PAGE = 20; // jobs shown per page of the list
  const FETCH_PAGE = 100; // the API's largest page
  const MAX_FETCH_PAGES = 20; // a bound on client-side filtering: 2000 jobs or executions
  const HISTORY_PAGE = 20;
  const PREVIEW_COUNT = 5;
  const NOTE_MAX_CHARS = 500; // JobChange.note's limit (API.md)
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
    if (fields.length === 6) {
      // Seconds first: at second 0 it reads as the five fields; every (few) second(s) of every day alone.
      const [second, ...rest] = fields;
      if (second === "0") return cronWords(rest.join(" "));
      const daily = rest.every((f) => f === "*" || f === "?");
      if (daily && second === "*") return "every second";
      if (daily && /^\*\/\d+$/.test(second)) return everyCount(Number(second.slice(2)), "second");
      return `cron ${cron}`;
    }
    if (fields.length !== 5) return `cron ${cron}`;
    const [minute, hour, dom, month, dow] = fields;
    let when;
    if (minute === "*" && hour === "*") when = "every minute";
    else if (/^\*\/\d+$/.test(minute) && hour === "*") when = everyCount(Number(minute.slice(2)), "minute");
    else if (/^\d+$/.test(minute) && hour === "*") when = `at minute ${minute} of every hour`;
    else if (/^\d+$/.test(minute) && /^\d+$/.test(hour)) when = `at ${pad(hour)}:${pad(minute)}`;
    else if (/^\d+$/.test(minute) && /^\*\/\d+$/.test(hour)) when = `at minute ${minute} ${everyCount(Number(hour.slice(2)), "hour")}`;
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
  // "every minute", "every 15 minutes": one of a unit reads as the unit alone.
  function everyCount(n, unit) {
    return n === 1 ? `every ${unit}` : `every ${n} ${unit}s`;
  }
  // An interval (90m, 1h30m, 2d, 30s, rate(1 hour)) in words: "every minute", "every 1 hour 30 minutes".
  function everyWords(every) {
    const rate = /^rate\((\d+) (second|minute|hour|day)s?\)$/.exec(every);
    const compact = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(every);
    let parts;
    if (rate) parts = [[Number(rate[1]), rate[2]]];
    else if (compact) {
      parts = [[Number(compact[1] || 0), "day"], [Number(compact[2] || 0), "hour"], [Number(compact[3] || 0), "minute"],
        [Number(compact[4] || 0), "second"]];
    }
    else return `every ${every}`;
    parts = parts.filter(([n]) => n > 0);
    if (parts.length === 1) return everyCount(parts[0][0], parts[0][1]);
    return `every ${parts.map(([n, unit]) => `${n} ${unit}${n === 1 ? "" : "s"}`).join(" ")}`;
  }
  function scheduleWords(schedule) {
    const zone = schedule.timeZone || "UTC";
    if (schedule.cron) return `${cronWords(schedule.cron)} (${zone})`;
    if (schedule.every) return everyWords(schedule.every);
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
    const joiner = path.includes("?") ? "&" : "?";
    for (let page = 0; page < MAX_FETCH_PAGES; page += 1) {
      const query = `limit=${FETCH_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const data = await api("GET", `${path}${joiner}${query}`);
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
  function tagsOf(job) {
    const tags = job.tags;
    if (!tags) return [];
    if (Array.isArray(tags)) return tags.map(String);
    return Object.entries(tags).map(([k, v]) => `${k}=${v}`);
  }
  function parseTagFilter(text) {
    // "team:ops, env:prod" -> every tag must match (the API's repeatable tag=key:value).
    return text.split(",").map((x) => x.trim()).filter(Boolean);
  }
  async function jobsPage(serial, params) {
    const search = h("input", { id: "search", type: "search", value: params.get("q") || "",
      placeholder: "name or job id", "aria-describedby": "search-hint" });
    const statusSelect = h("select", { id: "status-filter" },
      ["all", "active", "paused", "completed", "cancelled"].map((v) => h("option", { value: v }, v)));
    statusSelect.value = params.get("status") || "all";
    const handlerInput = h("input", { id: "handler-filter", type: "text", value: params.get("handler") || "",
      list: "handlers", spellcheck: "false", "aria-describedby": "handler-filter-error" });
    const tagInput = h("input", { id: "tag-filter", type: "text", value: params.getAll("tag").join(", "),
      placeholder: "team:ops, env:prod", spellcheck: "false", "aria-describedby": "tag-filter-hint tag-filter-error" });
    const filterErrors = { handler: h("p", { class: "error-text", id: "handler-filter-error" }),
      tag: h("p", { class: "error-text", id: "tag-filter-error" }) };
    const body = h("tbody");
    const summary = h("p", { class: "hint", id: "jobs-summary", "aria-live": "polite" });
    const pager = h("div", { class: "pager" });
    let cursors = [null]; // the server's cursor of each page seen (no search): Previous goes back one
    let pageIndex = 0;
    let searched = null; // {key, items, complete}: every page of the filtered listing, searched here
    let loadSerial = 0;

    function listingQuery() {
      const query = new URLSearchParams();
      if (statusSelect.value !== "all") query.set("status", statusSelect.value);
      if (handlerInput.value.trim()) query.set("handler", handlerInput.value.trim());
      for (const tag of parseTagFilter(tagInput.value)) query.append("tag", tag);
      return query;
    }
    function remember() {
      // The filters live in the address (a link or a reload keeps them) without a route change.
      const query = listingQuery();
      if (search.value.trim()) query.set("q", search.value.trim());
      const text = query.toString();
      history.replaceState(null, "", `${location.pathname}#/jobs${text ? `?${text}` : ""}`);
    }
    function row(job) {
      // The listing carries each job's nextRunAt and lastRun: no request per row.
      const e = job.lastRun;
      const result = h("td", { "data-col": "last" }, e ? statusBadge(e.status) : "—");
      if (e && (e.finishedAt || e.startedAt)) result.append(" ", h("span", { class: "hint" }, utc(e.finishedAt || e.startedAt)));
      const next = h("td", { "data-col": "next" }, job.status === "active" && job.nextRunAt ? utc(job.nextRunAt) : "—");
      return h("tr", { "data-job-id": job.jobId },
        h("td", {}, h("input", { type: "checkbox", class: "select", value: job.jobId, "aria-label": `Select ${job.name}` })),
        h("td", {}, h("a", { href: `#/jobs/${job.jobId}` }, job.name)),
        h("td", {}, statusBadge(job.status), job.note ? h("span", { class: "hint list-note" }, ` ${shorten(job.note, 80)}`) : null),
        h("td", {}, scheduleWords(job.schedule)),
        next,
        result,
        h("td", { class: "hide-narrow" }, job.handler),
        h("td", { class: "hide-narrow" }, tagsOf(job).map((t) => h("span", { class: "tag" }, t))));
    }
    async function load() {
      const mine = ++loadSerial;
      for (const [key, node] of Object.entries(filterErrors)) {
        node.textContent = "";
        (key === "tag" ? tagInput : handlerInput).removeAttribute("aria-invalid");
      }
      const query = listingQuery();
      const q = search.value.trim().toLowerCase();
      let shown;
      let hasNext;
      let total = "";
      try {
        if (q) {
          // The API has no name search: every page of the server-filtered listing, searched in the browser.
          const key = query.toString();
          if (!searched || searched.key !== key) {
            const { items, complete } = await allPages(`/jobs?${key}`, "jobs");
            if (mine !== loadSerial) return;
            searched = { key, items, complete };
          }
          const matches = searched.items.filter((job) => `${job.name} ${job.jobId}`.toLowerCase().includes(q));
          shown = matches.slice(pageIndex * LIST_PAGE, (pageIndex + 1) * LIST_PAGE);
          hasNext = (pageIndex + 1) * LIST_PAGE < matches.length;
          total = `${matches.length} of ${searched.items.length} jobs match “${search.value.trim()}”` +
            `${searched.complete ? "" : " (first pages only)"} · `;
        } else {
          searched = null;
          const cursor = cursors[pageIndex];
          query.set("limit", String(LIST_PAGE));
          if (cursor) query.set("cursor", cursor);
          const data = await api("GET", `/jobs?${query}`);
          if (mine !== loadSerial) return; // a newer filter or page asked meanwhile: its cursors count
          shown = data.jobs;
          cursors[pageIndex + 1] = data.nextCursor;
          hasNext = Boolean(data.nextCursor);
        }
      } catch (err) {
        if (mine !== loadSerial || err.status === 401) return;
        const key = (err.field || "").startsWith("tag") ? "tag" : err.field === "handler" ? "handler" : null;
        if (key) {
          (key === "tag" ? tagInput : handlerInput).setAttribute("aria-invalid", "true");
          filterErrors[key].textContent = err.message;
        } else summary.textContent = `Could not list the jobs: ${errorText(err)}`;
        table.removeAttribute("aria-busy");
        body.replaceChildren();
        return;
      }
      if (mine !== loadSerial || serial !== routeSerial) return;
      table.removeAttribute("aria-busy");
      summary.textContent = `${total}page ${pageIndex + 1}${hasNext ? "" : " (last)"}`;
      body.replaceChildren(...shown.map(row));
      const filtering = q || statusSelect.value !== "all" || handlerInput.value.trim() || tagInput.value.trim();
      selectAll.checked = false;
      if (!shown.length) body.append(h("tr", {}, h("td", { colspan: "8" }, filtering || pageIndex ? "No job matches." : "No jobs yet.")));
      pager.replaceChildren(
        h("button", { type: "button", class: "secondary", id: "jobs-previous", disabled: pageIndex === 0,
          onclick: () => { pageIndex -= 1; load(); } }, "Previous"),
        h("button", { type: "button", class: "secondary", id: "jobs-next", disabled: !hasNext,
          onclick: () => { pageIndex += 1; load(); } }, "Next"));
    }
    const selectAll = h("input", { type: "checkbox", id: "jobs-all", "aria-label": "Select every job shown" });
    selectAll.addEventListener("change", () => {
      for (const box of body.querySelectorAll("input.select")) box.checked = selectAll.checked;
    });
    const table = h("table", { id: "jobs" },
      h("caption", { class: "hint" }, "Your jobs, newest first"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, selectAll), ["Name", "Status", "Schedule", "Next run", "Last result"].map((c) => h("th", { scope: "col" }, c)),
        h("th", { scope: "col", class: "hide-narrow" }, "Handler"), h("th", { scope: "col", class: "hide-narrow" }, "Tags"))),
      body);
    let typing = null;
    function changed() {
      // Until the new filter's page is in, the old rows are marked busy and the pager is off (its cursors are gone).
      pageIndex = 0;
      cursors = [null];
      table.setAttribute("aria-busy", "true");
      for (const button of pager.querySelectorAll("button")) button.disabled = true;
      remember();
      clearTimeout(typing);
      typing = setTimeout(load, 300);
    }
    for (const input of [search, handlerInput, tagInput]) input.addEventListener("input", changed);
    statusSelect.addEventListener("change", changed);

    // Bulk actions (POST /jobs/bulk): the selected rows by id, or every job the server-side filters match,
    // after a dry run says how many; each failure is listed with its job.
    const BULK_WORDS = { pause: ["Pause", "paused"], resume: ["Resume", "resumed"], cancel: ["Cancel", "cancelled"] };
    const MAX_BULK_REQUESTS = 100; // 100 jobs a request: 10,000 jobs at most from one click
    const scopeSelect = h("select", { id: "bulk-scope" },
      h("option", { value: "selected" }, "the selected jobs"),
      h("option", { value: "matching" }, "all jobs matching the filters"));
    const bulkResult = h("div", { id: "bulk-result", "aria-live": "polite" });
    function bulkFilter() {
      const filter = {};
      if (statusSelect.value !== "all") filter.status = statusSelect.value;
      if (handlerInput.value.trim()) filter.handler = handlerInput.value.trim();
      const tags = parseTagFilter(tagInput.value);
      if (tags.length) filter.tag = tags;
      return filter;
    }
    function bulkReport(action, done) {
      const [, past] = BULK_WORDS[action];
      const failed = done.failed.length;
      say(`${past[0].toUpperCase()}${past.slice(1)} ${done.changed.length} jobs` +
        `${done.unchanged.length ? `, ${done.unchanged.length} unchanged` : ""}, ${failed} failed.`, failed > 0);
      bulkResult.replaceChildren(failed ? h("ul", { class: "refused" }, done.failed.map((f) =>
        h("li", {}, h("code", {}, f.jobId), `: ${f.message}`))) : "");
    }
    async function bulkAll(action, filter) {
      const done = { changed: [], unchanged: [], failed: [] };
      let cursor = null;
      for (let n = 0; n < MAX_BULK_REQUESTS; n += 1) {
        const answer = await api("POST", "/jobs/bulk", { action, filter, ...(cursor ? { cursor } : {}) });
        for (const key of Object.keys(done)) done[key].push(...answer[key]);
        cursor = answer.nextCursor;
        if (!cursor) break;
      }
      return done;
    }
    async function bulk(action, button) {
      const [verb] = BULK_WORDS[action];
      bulkResult.replaceChildren();
      button.disabled = true;
      try {
        if (scopeSelect.value === "selected") {
          const ids = [...body.querySelectorAll("input.select:checked")].map((box) => box.value);
          if (!ids.length) {
            say("Select the jobs first, or choose all jobs matching the filters.", true);
            return;
          }
          bulkReport(action, await api("POST", "/jobs/bulk", { action, jobIds: ids }));
          await load();
          return;
        }
        const filter = bulkFilter();
        const dry = await api("POST", "/jobs/bulk", { action, filter, dryRun: true });
        const count = `${dry.matched}${dry.nextCursor ? "+" : ""}`;
        if (!dry.matched) {
          say(`No job matching the filters would be ${BULK_WORDS[action][1]}.`);
          return;
        }
        const confirm = h("button", { type: "button", id: "bulk-confirm", onclick: async () => {
          confirm.disabled = true;
          try {
            bulkReport(action, await bulkAll(action, filter));
            await load();
          } catch (err) {
            if (err.status !== 401) say(`${verb} failed: ${errorText(err)}`, true);
          }
        } }, `${verb} ${count} jobs`);
        const abort = h("button", { type: "button", class: "secondary", id: "bulk-abort",
          onclick: () => bulkResult.replaceChildren() }, "Keep them");
        bulkResult.replaceChildren(h("p", { id: "bulk-question" },
          `${verb} ${count} jobs matching the filters (status, handler, tags; not the search)? `, confirm, " ", abort));
        confirm.focus();
      } catch (err) {
        if (err.status !== 401) say(`${verb} failed: ${errorText(err)}`, true);
      } finally {
        button.disabled = false;
      }
    }
    const bulkButtons = Object.entries(BULK_WORDS).map(([action, [verb]]) => {
      const button = h("button", { type: "button", class: "secondary", id: `bulk-${action}`,
        onclick: () => bulk(action, button) }, verb);
      return button;
    });
    const bulkBar = h("div", { class: "actions bulk", role: "group", "aria-label": "Bulk actions" },
      h("label", { for: "bulk-scope" }, "Act on"), scopeSelect, ...bulkButtons);
    show(
      h("h1", {}, "Jobs"),
      h("div", { class: "actions" }, h("a", { class: "button", href: "#/new" }, "New job")),
      h("form", { class: "filters", role: "search", "aria-label": "Filter jobs",
        onsubmit: (event) => { event.preventDefault(); clearTimeout(typing); load(); } },
      h("div", {}, h("label", { for: "search" }, "Search"), search,
        h("p", { class: "hint", id: "search-hint" }, "in the filtered jobs")),
      h("div", {}, h("label", { for: "status-filter" }, "Status"), statusSelect),
      h("div", {}, h("label", { for: "handler-filter" }, "Handler"), handlerInput, filterErrors.handler),
      h("div", {}, h("label", { for: "tag-filter" }, "Tags"), tagInput,
        h("p", { class: "hint", id: "tag-filter-hint" }, "key:value, comma-separated; all must match"), filterErrors.tag),
      h("datalist", { id: "handlers" }, ["demo.echo", "demo.sleep", "demo.fail"].map((v) => h("option", { value: v }))),
      h("button", { type: "submit", class: "secondary" }, "Apply")),
      summary,
      bulkBar,
      bulkResult,
      h("div", { class: "table-wrap" }, table),
      pager);
    await load();
  }

  // ---------- create and edit ----------
  function field(id, labelText, input, hint) {
    input.id = id;
    const error = h("p", { class: "error-text", id: `${id}-error` });
    input.setAttribute("aria-describedby", `${id}-error${hint ? ` ${id}-hint` : ""}`);
    return h("div", { class: "field", "data-for": id },
      h("label", { for: id }, labelText), input, hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null, error);
  }
  function forecastLine(forecast, jitter) {
    // What the schedule comes to (POST /schedules/preview's forecast): runs, AWS cost, and a herd's jitter.
    if (!forecast) return null;
    const count = (n) => (n >= 10 ? Math.round(n).toLocaleString("en") : String(Number(n.toFixed(2))));
    const cost = forecast.costPerMonthUsd < 0.01 ? "under $0.01" : `about $${forecast.costPerMonthUsd.toFixed(2)}`;
    const herd = forecast.herd && !jitter && forecast.suggestedJitterSeconds
      ? ` Its runs start a round minute with many others: a jitter of ${forecast.suggestedJitterSeconds} s would spread them.`
      : "";
    return h("p", { class: "hint", id: "forecast" }, `About ${count(forecast.runsPerDay)} runs a day, ` +
      `${count(forecast.runsPerMonth)} a month: ${cost} a month on AWS (prices of ${forecast.pricesAsOf}; ` +
      `your handler's own time not included).${herd}`);
  }
  function previewList(runs, timeZone) {
    return h("ol", { class: "runs" }, runs.map((iso) => {
      const z = zoned(iso, timeZone);
      return h("li", { "data-run": iso }, `${z.local} `, h("strong", {}, z.offset), h("span", { class: "hint" }, ` · ${utc(iso)}`));
    }));
  }
  function localInput(iso) {
    // An instant as a datetime-local value in the browser's zone (the zone the field is read in).
    if (!iso) return "";
    const d = new Date(iso);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function instantOf(input, original) {
    // datetime-local has no zone: read in the browser's zone, sent as UTC; untouched, the stored instant stays exact.
    if (!input.value) return null;
    if (original && input.value === localInput(original)) return original;
    return new Date(input.value).toISOString();
  }
  function tagsText(tags) {
    return Object.entries(tags || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  }
  function parseTags(text) {
    const tags = {};
    for (const item of text.split(",").map((x) => x.trim()).filter(Boolean)) {
      const at = item.indexOf("=");
      if (at < 1) throw new Error(`“${item}” is not key=value`);
      tags[item.slice(0, at).trim()] = item.slice(at + 1).trim();
    }
    return tags;
  }
  function canonical(value) {
    // JSON with every object's keys sorted: two values compare equal whatever order their fields came in.
    if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
    if (value && typeof value === "object") {
      return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
    }
    return JSON.stringify(value ?? null);
  }
  function withoutNulls(value) {
    return Object.fromEntries(Object.entries(value || {}).filter(([, v]) => v !== null && v !== undefined));
  }
  function createPage() {
    jobForm(null);
  }
  async function editPage(serial, jobId) {
    show(h("p", {}, "Loading…"));
    const job = await api("GET", `/jobs/${jobId}`);
    if (serial !== routeSerial) return;
    jobForm(job);
  }
  function jobForm(job) {
    // The New job form, or with `job` its edit: the same fields filled in, saved under the version read.
    const editing = Boolean(job);
    const sched = editing ? job.schedule : {};
    const kind = { value: sched.at ? "at" : sched.every ? "every" : "cron" };
    const inputs = {
      name: h("input", { type: "text", required: true, maxlength: "128", value: editing ? job.name : "" }),
      handler: h("input", { type: "text", required: true, value: editing ? job.handler : "demo.echo", list: "handlers" }),
      cron: h("input", { type: "text", value: sched.cron || "0 9 * * 1-5", spellcheck: "false" }),
      every: h("input", { type: "text", value: sched.every || "15m", spellcheck: "false" }),
      at: h("input", { type: "datetime-local", step: "1", value: localInput(sched.at) }),
      timeZone: h("input", { type: "text", list: "zones",
        value: editing ? sched.timeZone || "UTC" : Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" }),
      startAt: h("input", { type: "datetime-local", step: "1", value: localInput(sched.startAt) }),
      endAt: h("input", { type: "datetime-local", step: "1", value: localInput(sched.endAt) }),
      maxRuns: h("input", { type: "number", min: "1", value: sched.maxRuns ?? "" }),
      // A cron schedule's DST policy (schedule.dst); "" keeps the default of its kind.
      dstGap: h("select", {}, [["", "default (fixed times shift, others skip)"], ["shift", "shift: run when the gap ends"],
        ["skip", "skip: do not run"]].map(([v, t]) => h("option", { value: v }, t))),
      dstFold: h("select", {}, [["", "default (fixed times first, others both)"], ["first", "first occurrence"],
        ["last", "last occurrence"], ["both", "both occurrences"]].map(([v, t]) => h("option", { value: v }, t))),
      exclude: h("input", { type: "text", spellcheck: "false", placeholder: "2026-12-24/2026-12-26, 2027-01-01",
        value: editing ? (job.exclude || []).join(", ") : "" }),
      payload: h("textarea", { rows: editing ? "5" : "3", spellcheck: "false" }, editing ? JSON.stringify(job.payload || {}, null, 2) : "{}"),
      maxAttempts: h("input", { type: "number", min: "1", max: "100", value: editing ? job.retry.maxAttempts : "3" }),
      baseDelaySeconds: h("input", { type: "number", min: "0", value: editing ? job.retry.baseDelaySeconds : "30" }),
      maxDelaySeconds: h("input", { type: "number", min: "0", value: editing ? job.retry.maxDelaySeconds : "900" }),
      timeoutSeconds: h("input", { type: "number", min: "1", value: editing ? job.timeoutSeconds : "600" }),
      overlap: h("select", {}, ["forbid", "allow", "replace"].map((v) => h("option", { value: v }, v))),
      catchUp: h("select", {}, ["latest", "all", "none"].map((v) => h("option", { value: v }, v))),
      // at-most-once never starts a slot twice: no retries, so it sets Max attempts to 1.
      delivery: h("select", {}, ["at-least-once", "at-most-once"].map((v) => h("option", { value: v }, v))),
      jitterSeconds: h("input", { type: "number", min: "0", max: "3600", value: editing ? job.jitterSeconds ?? 0 : "0" }),
      lateAfterSeconds: h("input", { type: "number", min: "1", max: "604800", value: editing ? job.lateAfterSeconds ?? "" : "" }),
      pauseAfterFailures: h("input", { type: "number", min: "1", max: "100", value: editing ? job.pauseAfterFailures ?? "" : "" }),
      tags: h("input", { type: "text", spellcheck: "false", placeholder: "team=billing, env=prod", value: editing ? tagsText(job.tags) : "" }),
    };
    if (editing) {
      inputs.overlap.value = job.overlap;
      inputs.catchUp.value = job.catchUp;
      inputs.delivery.value = job.delivery || "at-least-once";
    }
    inputs.delivery.addEventListener("change", () => {
      if (inputs.delivery.value === "at-most-once") inputs.maxAttempts.value = "1";
    });
    inputs.dstGap.value = (sched.dst && sched.dst.gap) || "";
    inputs.dstFold.value = (sched.dst && sched.dst.fold) || "";
    // Which input shows an error the API names by field (a job's fields, or the preview's top-level ones).
    const byField = {
      name: "name", handler: "handler", payload: "payload", "schedule.cron": "cron", cron: "cron",
      "schedule.every": "every", every: "every", "schedule.at": "at", at: "at", "schedule.timeZone": "timeZone",
      timeZone: "timeZone", "schedule.startAt": "startAt", startAt: "startAt", "schedule.endAt": "endAt", endAt: "endAt",
      "schedule.maxRuns": "maxRuns", maxRuns: "maxRuns", exclude: "exclude", "retry.maxAttempts": "maxAttempts",
      "retry.baseDelaySeconds": "baseDelaySeconds", "retry.maxDelaySeconds": "maxDelaySeconds", retry: "maxAttempts",
      timeoutSeconds: "timeoutSeconds", overlap: "overlap", catchUp: "catchUp", schedule: "cron", delivery: "delivery",
      jitterSeconds: "jitterSeconds", pauseAfterFailures: "pauseAfterFailures", tags: "tags",
      lateAfterSeconds: "lateAfterSeconds",
      "schedule.dst": "dstGap", dst: "dstGap", "schedule.dst.gap": "dstGap", "dst.gap": "dstGap",
      "schedule.dst.fold": "dstFold", "dst.fold": "dstFold",
    };
    const idempotencyKey = crypto.randomUUID();
    const preview = h("div", { id: "preview", "aria-live": "polite" });
    const formError = h("p", { class: "error-text", role: "alert", id: "form-error" });
    const conflict = h("div", { id: "edit-conflict", role: "alert", class: "confirm", hidden: true });

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
        if (!formError.textContent) formError.textContent = `Not saved: ${err.message}`;
      } else formError.textContent = errorText(err);
    }
    function excluded() {
      return inputs.exclude.value.split(",").map((x) => x.trim()).filter(Boolean);
    }
    function schedule() {
      const zone = inputs.timeZone.value.trim() || "UTC";
      if (kind.value === "at") return { at: instantOf(inputs.at, sched.at) || "", timeZone: zone };
      const repeating = kind.value === "cron" ? { cron: inputs.cron.value.trim() } : { every: inputs.every.value.trim() };
      const bounds = {
        startAt: instantOf(inputs.startAt, sched.startAt),
        endAt: instantOf(inputs.endAt, sched.endAt),
        maxRuns: inputs.maxRuns.value ? Number(inputs.maxRuns.value) : null,
      };
      const dst = withoutNulls({ gap: inputs.dstGap.value || null, fold: inputs.dstFold.value || null });
      const policy = kind.value === "cron" && Object.keys(dst).length ? { dst } : {};
      return { ...repeating, timeZone: zone, ...withoutNulls(bounds), ...policy };
    }
    let previewSerial = 0;
    let previewTimer = null;
    async function refreshPreview() {
      if (!form.isConnected) return; // the form was left before its debounce ran out
      const mine = ++previewSerial;
      const wanted = schedule();
      for (const key of ["cron", "every", "at", "timeZone", "exclude", "startAt", "endAt", "maxRuns", "dstGap", "dstFold"]) {
        inputs[key].removeAttribute("aria-invalid");
        errorOf(key).textContent = "";
      }
      if ((kind.value === "at" && !wanted.at) || (kind.value !== "at" && !wanted[kind.value])) {
        preview.replaceChildren(h("p", { class: "hint" }, "Fill in the schedule to see its next runs."));
        return;
      }
      try {
        const data = await api("POST", "/schedules/preview", { ...wanted, exclude: excluded(), count: PREVIEW_COUNT, forecast: true });
        if (mine !== previewSerial) return;
        preview.replaceChildren(h("p", {}, `${scheduleWords(wanted)} — next runs in ${wanted.timeZone}:`),
          data.runs.length ? previewList(data.runs, wanted.timeZone) : h("p", { class: "hint" }, "No further runs."),
          forecastLine(data.forecast, Number(inputs.jitterSeconds.value || 0)));
      } catch (err) {
        if (mine !== previewSerial || err.status === 401) return;
        showError(err);
        formError.textContent = "";
        preview.replaceChildren(h("p", { class: "error-text" }, `No preview: ${errorText(err)}`));
      }
    }
    function schedulePreview() {
      clearTimeout(previewTimer);
      previewTimer = setTimeout(refreshPreview, 250);
    }
    const boundsBox = h("div", { class: "grid" },
      field("f-startAt", "Not before (optional)", inputs.startAt),
      field("f-endAt", "Not after (optional)", inputs.endAt),
      field("f-maxRuns", "At most this many runs (optional)", inputs.maxRuns));
    const kindFields = {
      cron: field("f-cron", "Cron expression", inputs.cron, "minute hour day-of-month month day-of-week, in the time zone below"),
      every: field("f-every", "Every", inputs.every, "an interval such as 30s, 15m, 2h"),
      at: field("f-at", "At (your browser's local time)", inputs.at),
    };
    const dstBox = h("div", { class: "grid", id: "dst-policy" },
      field("f-dstGap", "A time the clock skips (DST gap)", inputs.dstGap),
      field("f-dstFold", "A time the clock shows twice (DST fold)", inputs.dstFold));
    function showKind() {
      for (const [name, node] of Object.entries(kindFields)) node.hidden = name !== kind.value;
      boundsBox.hidden = kind.value === "at";
      dstBox.hidden = kind.value !== "cron";
      schedulePreview();
    }
    const radios = h("div", { class: "radios" }, [["cron", "Cron"], ["every", "Interval"], ["at", "Once"]].map(([value, text]) =>
      h("label", {}, h("input", { type: "radio", name: "kind", value, id: `kind-${value}`, checked: value === kind.value,
        onchange: () => { kind.value = value; showKind(); } }), text)));
    for (const key of ["cron", "every", "at", "timeZone", "exclude", "startAt", "endAt", "maxRuns"]) {
      inputs[key].addEventListener("input", schedulePreview);
    }
    for (const key of ["dstGap", "dstFold"]) inputs[key].addEventListener("change", schedulePreview);
    inputs.jitterSeconds.addEventListener("input", schedulePreview);
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
    function specOfForm() {
      // The job the form describes, or null (with the field's error shown) where it cannot be read.
      let payload;
      let tags;
      try {
        payload = JSON.parse(inputs.payload.value || "{}");
      } catch (err) {
        showError({ field: "payload", message: `not JSON: ${err.message}` });
        return null;
      }
      try {
        tags = parseTags(inputs.tags.value);
      } catch (err) {
        showError({ field: "tags", message: err.message });
        return null;
      }
      const spec = {
        name: inputs.name.value.trim(),
        handler: inputs.handler.value.trim(),
        payload,
        schedule: schedule(),
        exclude: excluded(),
        retry: { maxAttempts: Number(inputs.maxAttempts.value), baseDelaySeconds: Number(inputs.baseDelaySeconds.value),
          maxDelaySeconds: Number(inputs.maxDelaySeconds.value) },
        timeoutSeconds: Number(inputs.timeoutSeconds.value),
        overlap: inputs.overlap.value,
        catchUp: inputs.catchUp.value,
        delivery: inputs.delivery.value,
        jitterSeconds: Number(inputs.jitterSeconds.value || 0),
        pauseAfterFailures: inputs.pauseAfterFailures.value ? Number(inputs.pauseAfterFailures.value) : null,
        lateAfterSeconds: inputs.lateAfterSeconds.value ? Number(inputs.lateAfterSeconds.value) : null,
        tags,
      };
      if (!editing && spec.pauseAfterFailures === null) delete spec.pauseAfterFailures;
      if (!editing && spec.lateAfterSeconds === null) delete spec.lateAfterSeconds;
      return spec;
    }
    function changesOf(spec) {
      // Only the fields the user changed: an edit replaces each field it names, whole.
      const current = {
        ...job, schedule: withoutNulls(job.schedule), exclude: job.exclude || [], tags: job.tags || {},
        pauseAfterFailures: job.pauseAfterFailures ?? null, jitterSeconds: job.jitterSeconds ?? 0,
        lateAfterSeconds: job.lateAfterSeconds ?? null,
      };
      if (!current.schedule.timeZone) current.schedule.timeZone = "UTC";
      return Object.fromEntries(Object.entries(spec).filter(([key, value]) => canonical(value) !== canonical(current[key])));
    }
    function showConflict(err) {
      conflict.replaceChildren(
        h("p", {}, h("strong", {}, "Not saved: this job changed since you opened it. "),
          "Someone (or something: an auto-pause, another tab) saved it meanwhile. ",
          "Reload it to see what it is now, then make your change again."),
        h("p", { class: "hint" }, err.message),
        h("button", { type: "button", id: "reload-edit", onclick: async () => {
          say("");
          jobForm(await api("GET", `/jobs/${job.jobId}`));
        } }, "Reload the job"));
      conflict.hidden = false;
      conflict.querySelector("button").focus();
    }
    const submit = h("button", { type: "submit", id: editing ? "save" : "create" }, editing ? "Save changes" : "Create job");
    const form = h("form", { id: editing ? "edit-form" : "create-form", novalidate: true, onsubmit: async (event) => {
      event.preventDefault();
      clearErrors();
      conflict.hidden = true;
      const spec = specOfForm();
      if (!spec) return;
      if (editing) {
        const changes = changesOf(spec);
        if (!Object.keys(changes).length) {
          formError.textContent = "Nothing changed: there is nothing to save.";
          return;
        }
        submit.disabled = true;
        try {
          const saved = await api("PATCH", `/jobs/${job.jobId}`, { version: job.version, ...changes });
          say(`Saved “${saved.name}” (version ${saved.version}): changed ${Object.keys(changes).join(", ")}.`);
          location.hash = `#/jobs/${job.jobId}`;
        } catch (err) {
          submit.disabled = false;
          if (err.status === 401) return;
          if (err.status === 409 && err.field === "version") showConflict(err);
          else showError(err);
        }
        return;
      }
      submit.disabled = true;
      try {
        const created = await api("POST", "/jobs", spec, { "Idempotency-Key": idempotencyKey });
        say(`Created job “${created.name}” (${created.jobId}); next run ${utc(created.nextRunAt)}.`);
        location.hash = `#/jobs/${created.jobId}`;
      } catch (err) {
        if (err.status !== 401) showError(err);
        submit.disabled = false;
      }
    } },
    conflict,
    field("f-name", "Name", inputs.name),
    field("f-handler", "Handler", inputs.handler, "a registered handler; built in: demo.echo, demo.sleep, demo.fail"),
    h("datalist", { id: "handlers" }, ["demo.echo", "demo.sleep", "demo.fail"].map((v) => h("option", { value: v }))),
    h("fieldset", {}, h("legend", {}, "Schedule"), radios, kindFields.cron, kindFields.every, kindFields.at,
      field("f-timeZone", "Time zone", inputs.timeZone, "an IANA zone, e.g. America/New_York"),
      dstBox,
      boundsBox,
      field("f-exclude", "Excluded dates", inputs.exclude,
        "optional: local dates or inclusive ranges in that zone, comma-separated; or calendar:NAME"),
      field("f-jitterSeconds", "Jitter (seconds)", inputs.jitterSeconds, "each run starts up to this much after its slot, spread by job"),
      h("datalist", { id: "zones" }, ["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Asia/Tokyo"].map((v) => h("option", { value: v }))),
      h("h2", {}, "Preview"), preview),
    field("f-payload", "Payload (JSON)", inputs.payload),
    h("div", { class: "grid" },
      field("f-maxAttempts", "Max attempts", inputs.maxAttempts),
      field("f-baseDelaySeconds", "First retry after (seconds)", inputs.baseDelaySeconds),
      field("f-maxDelaySeconds", "Longest retry delay (seconds)", inputs.maxDelaySeconds),
      field("f-timeoutSeconds", "Timeout (seconds)", inputs.timeoutSeconds),
      field("f-overlap", "Overlap", inputs.overlap),
      field("f-delivery", "Delivery", inputs.delivery, "at-most-once: a slot never starts twice (no retries)"),
      field("f-lateAfterSeconds", "Late after (seconds)", inputs.lateAfterSeconds,
        "optional: a run not started this long after it is due is late; you are told, and the job shows its share"),
      field("f-catchUp", "Catch-up", inputs.catchUp),
      field("f-pauseAfterFailures", "Pause after failures in a row (optional)", inputs.pauseAfterFailures)),
    field("f-tags", "Tags", inputs.tags, "optional: key=value, comma-separated"),
    formError,
    h("div", { class: "actions" }, submit, editing ? h("a", { href: `#/jobs/${job.jobId}` }, "Back without saving") : null));
    for (const [key, input] of Object.entries(inputs)) input.id = `f-${key}`;
    if (editing) {
      show(h("p", {}, h("a", { href: `#/jobs/${job.jobId}` }, `← ${job.name}`)),
        h("h1", {}, `Edit ${job.name}`),
        h("p", { class: "hint", id: "edit-version" }, `Editing version ${job.version}; a change of schedule, jitter or class replaces the waiting run at once.`),
        form);
    } else show(h("h1", {}, "New job"), form);
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
  function shorten(text, most) {
    return text.length > most ? `${text.slice(0, most - 1)}…` : text;
  }
  function resultText(value) {
    if (value === null || value === undefined) return "—";
    return shorten(typeof value === "string" ? value : JSON.stringify(value), 120);
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
    const sched = job.schedule;
    const rows = [
      ["Job id", job.jobId], ["Handler", job.handler], ["Schedule", scheduleWords(sched)],
      ["Time zone", sched.timeZone || "UTC"],
      ["Next run", job.status === "active" ? utc(job.nextRunAt) : "—"],
      ["Retry", `${job.retry.maxAttempts} attempts, ${job.retry.baseDelaySeconds}–${job.retry.maxDelaySeconds} s apart`],
      ["Timeout", `${job.timeoutSeconds} s`], ["Overlap", job.overlap], ["Catch-up", job.catchUp],
      ["Delivery", h("span", { id: "spec-delivery" }, job.delivery === "at-most-once"
        ? "at-most-once: a slot never starts twice; a lost run's result is unknown" : "at-least-once")],
      ["Jitter", job.jitterSeconds ? `up to ${job.jitterSeconds} s after each slot` : "none"],
      ["Job class", job.jobClass], ["Version", String(job.version)], ["Created", utc(job.createdAt)], ["Updated", utc(job.updatedAt)],
    ];
    if (sched.cron) rows.splice(3, 0, ["Cron", sched.cron]);
    const bounds = [];
    if (sched.startAt) bounds.push(`not before ${utc(sched.startAt)}`);
    if (sched.endAt) bounds.push(`not after ${utc(sched.endAt)}`);
    if (sched.maxRuns) bounds.push(`at most ${sched.maxRuns} runs`);
    if (!sched.at) rows.push(["Bounds", h("span", { id: "spec-bounds" }, bounds.length ? bounds.join("; ") : "none")]);
    if (job.pauseAfterFailures) rows.push(["Auto-pause", `after ${job.pauseAfterFailures} failures in a row`]);
    if (job.startingDeadlineSeconds) rows.push(["Starting deadline", `${job.startingDeadlineSeconds} s`]);
    if ((job.exclude || []).length) rows.push(["Excluded", job.exclude.join(", ")]);
    rows.push(["Tags", h("span", { id: "spec-tags" }, tagsOf(job).length ? tagsOf(job).map((t) => h("span", { class: "tag" }, t)) : "none")]);
    return h("dl", { class: "spec", id: "spec" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }
  function healthList(job) {
    // The schedule's health the API derives from the newest executions: is it running, and on time?
    const run = (summary, what) => {
      if (!summary) return "—";
      const when = utc(summary.finishedAt || summary.startedAt || summary.scheduledAt);
      return h("span", {}, h("a", { href: `#/jobs/${job.jobId}/executions/${encodeURIComponent(summary.executionId)}` }, when),
        " ", statusBadge(summary.status), what && summary.error ? ` ${summary.error}` : "");
    };
    const rows = [
      ["Last run", run(job.lastRun)], ["Last success", run(job.lastSuccess)], ["Last failure", run(job.lastFailure, true)],
      ["Past due", job.pastDue ? h("strong", { class: "error-text", id: "past-due" },
        `a run due ${utc(job.pastDue.dueAt)} has not started`) : "no: nothing waiting is late"],
    ];
    if (job.lateAfterSeconds) {
      // The share of runs started within the job's lateness budget, over the last 7 and 30 days.
      const share = (s) => s.share === null ? `no runs counted in ${s.days} days`
        : `${(s.share * 100).toFixed(1)}% in ${s.days} days (${s.late} late of ${s.onTime + s.late})`;
      rows.push(["Started within budget", h("span", { id: "within-budget" },
        `${(job.withinBudget || []).map(share).join("; ")} — budget ${job.lateAfterSeconds} s after due`)]);
    }
    return h("dl", { class: "spec", id: "health" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }
  function noteField(id, labelText) {
    return field(id, labelText, h("textarea", { rows: "2", maxlength: String(NOTE_MAX_CHARS) }), `optional; shown on the job (at most ${NOTE_MAX_CHARS} characters)`);
  }
  async function jobPage(serial, jobId) {
    show(h("p", {}, "Loading…"));
    const title = h("h1", {});
    const statusLine = h("p", { id: "job-status" });
    const actions = h("div", { class: "actions", id: "job-actions" });
    const panel = h("div", { id: "action-panel" }); // the one open action form (pause note, payload, backfill, cancel)
    const spec = h("div", { class: "panel" });
    const health = h("div", { class: "panel" });
    const payloadBox = h("pre", { id: "job-payload" });
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
      const key = `${job.status}|${job.nextRunAt}|${job.version}`;
      if (previewFor === key) return;
      previewFor = key;
      if (job.status !== "active") {
        nextRuns.replaceChildren(h("p", { class: "hint" }, `No runs while the job is ${job.status}.`));
        return;
      }
      const request = { timeZone: sched.timeZone || "UTC", count: PREVIEW_COUNT, exclude: job.exclude || [] };
      for (const k of ["cron", "every", "at", "startAt", "endAt", "maxRuns"]) if (sched[k]) request[k] = sched[k];
      try {
        const data = await api("POST", "/schedules/preview", request);
        nextRuns.replaceChildren(data.runs.length ? previewList(data.runs, request.timeZone)
          : h("p", { class: "hint" }, "No further runs."));
      } catch (err) {
        nextRuns.replaceChildren(h("p", { class: "error-text" }, errorText(err)));
      }
    }
    function closePanel() {
      panel.replaceChildren();
    }
    async function act(label, work, fieldError) {
      // Runs an action; success: its confirmation in the notice, the panel closed. An error the API names
      // by a field the open form shows goes beside that field; any other goes in the notice.
      try {
        const message = await work();
        closePanel();
        say(message);
        await refresh();
      } catch (err) {
        if (err.status === 401) return;
        if (fieldError && fieldError(err)) return;
        say(`${label} failed: ${errorText(err)}`, true);
      }
    }
    function fieldErrorIn(form, byField) {
      // A handler for act(): puts an API error naming one of `byField`'s fields beside its input.
      return (err) => {
        const id = byField[err.field];
        if (!id) return false;
        const input = form.querySelector(`#${id}`);
        input.setAttribute("aria-invalid", "true");
        form.querySelector(`#${id}-error`).textContent = err.message;
        input.focus();
        return true;
      };
    }
    function openPanel(heading, form, first) {
      // Escape closes the form, as its Close button does, and gives the focus back to the actions row.
      panel.replaceChildren(h("section", { class: "panel action", "aria-labelledby": "panel-h",
        onkeydown: (event) => { if (event.key === "Escape") { closePanel(); actions.querySelector("button, a")?.focus(); } } },
      h("h2", { id: "panel-h" }, heading), form));
      (first || form.querySelector("input, textarea, select, button")).focus();
    }
    function cancelButton() {
      return h("button", { type: "button", class: "secondary", onclick: () => { closePanel(); actions.querySelector("button")?.focus(); } }, "Close");
    }
    function statusForm(toStatus) {
      // Pause or resume, with an optional note saying why (the job shows it).
      const pausing = toStatus === "paused";
      const note = noteField(pausing ? "pause-note" : "resume-note", pausing ? "Why pause? (note)" : "Note");
      const form = h("form", { id: pausing ? "pause-form" : "resume-form", onsubmit: (event) => {
        event.preventDefault();
        const text = form.querySelector("textarea").value.trim();
        act(pausing ? "Pause" : "Resume", async () => {
          const changed = await api("PATCH", `/jobs/${jobId}`, { status: toStatus, ...(text ? { note: text } : {}) });
          return pausing ? `Paused “${job.name}”: no run starts until you resume it.${text ? ` Note: ${text}` : ""}`
            : `Resumed “${job.name}”; next run ${utc(changed.nextRunAt)}.`;
        }, fieldErrorIn(form, { note: pausing ? "pause-note" : "resume-note" }));
      } }, note,
      h("div", { class: "actions" }, h("button", { type: "submit", id: pausing ? "confirm-pause" : "confirm-resume" },
        pausing ? "Pause the job" : "Resume the job"), cancelButton()));
      openPanel(pausing ? `Pause “${job.name}”` : `Resume “${job.name}”`, form);
    }
    function runWithPayloadForm() {
      const input = h("textarea", { rows: "5", spellcheck: "false" }, JSON.stringify(job.payload || {}, null, 2));
      const form = h("form", { id: "run-payload-form", novalidate: true, onsubmit: (event) => {
        event.preventDefault();
        input.removeAttribute("aria-invalid");
        form.querySelector("#run-payload-error").textContent = "";
        let payload;
        try {
          payload = JSON.parse(input.value);
        } catch (err) {
          fieldErrorIn(form, { payload: "run-payload" })({ field: "payload", message: `not JSON: ${err.message}` });
          return;
        }
        act("Run now", async () => {
          const run = await api("POST", `/jobs/${jobId}/run`, { payload });
          return `Run now with your payload: execution ${run.executionId} is due at ${utc(run.dueAt)}.`;
        }, fieldErrorIn(form, { payload: "run-payload" }));
      } },
      field("run-payload", "Payload for this run only (JSON)", input, "replaces the job's payload for this one execution; the job keeps its own"),
      h("div", { class: "actions" }, h("button", { type: "submit", id: "confirm-run-payload" }, "Run now with this payload"), cancelButton()));
      openPanel(`Run “${job.name}” now with a payload`, form, input);
    }
    function backfillForm() {
      const now = new Date();
      const from = h("input", { type: "datetime-local", step: "1", value: localInput(new Date(now.getTime() - 86400000).toISOString()) });
      const to = h("input", { type: "datetime-local", step: "1", value: localInput(now.toISOString()) });
      const overlap = h("select", {}, [["forbid", "forbid: one at a time, never beside another run"], ["allow", "allow: run them together"]]
        .map(([v, text]) => h("option", { value: v }, text)));
      const form = h("form", { id: "backfill-form", novalidate: true, onsubmit: (event) => {
        event.preventDefault();
        for (const id of ["backfill-from", "backfill-to", "backfill-overlap"]) {
          form.querySelector(`#${id}`).removeAttribute("aria-invalid");
          form.querySelector(`#${id}-error`).textContent = "";
        }
        const byField = { from: "backfill-from", to: "backfill-to", overlap: "backfill-overlap" };
        if (!from.value || !to.value) {
          fieldErrorIn(form, byField)({ field: from.value ? "to" : "from", message: "required" });
          return;
        }
        const body = { from: new Date(from.value).toISOString(), to: new Date(to.value).toISOString(), overlap: overlap.value };
        act("Backfill", async () => {
          const done = await api("POST", `/jobs/${jobId}/backfill`, body);
          const slots = done.firstSlot ? `; slots ${utc(done.firstSlot)} to ${utc(done.lastSlot)}` : "; the range holds no slot";
          return `Backfill of “${job.name}”: ${done.created} runs created, ${done.present} there already, ` +
            `${done.skipped} skipped (excluded dates)${slots}; overlap ${done.overlap}.`;
        }, fieldErrorIn(form, byField));
      } },
      h("p", { class: "hint" }, "Runs every slot of the schedule in [from, to) once, now (kind backfill); slots that ran already are left alone."),
      h("div", { class: "grid" },
        field("backfill-from", "From (your browser's local time)", from),
        field("backfill-to", "To, not included (your browser's local time)", to),
        field("backfill-overlap", "Overlap", overlap)),
      h("div", { class: "actions" }, h("button", { type: "submit", id: "confirm-backfill" }, "Backfill"), cancelButton()));
      openPanel(`Backfill “${job.name}”`, form, from);
    }
    function cancelForm() {
      const form = h("form", { class: "confirm", role: "alertdialog", "aria-labelledby": "confirm-text", onsubmit: (event) => {
        event.preventDefault();
        act("Cancel", async () => {
          await api("DELETE", `/jobs/${jobId}`);
          return `Cancelled “${job.name}” and its waiting runs.`;
        });
      } },
      h("p", { id: "confirm-text" }, `Cancel “${job.name}”? Its waiting runs are cancelled too; this cannot be undone.`),
      h("div", { class: "actions" },
        h("button", { type: "submit", id: "confirm-cancel", class: "danger" }, "Yes, cancel the job"),
        h("button", { type: "button", class: "secondary", onclick: closePanel }, "Keep it")));
      openPanel(`Cancel “${job.name}”`, form);
    }
    function renderActions() {
      const buttons = [];
      const live = job.status === "active" || job.status === "paused";
      if (job.status === "active") {
        buttons.push(h("button", { type: "button", id: "pause", class: "secondary", onclick: () => statusForm("paused") }, "Pause…"));
      }
      if (job.status === "paused") {
        buttons.push(h("button", { type: "button", id: "resume", onclick: () => statusForm("active") }, "Resume…"));
      }
      if (job.status === "active") {
        buttons.push(h("button", { type: "button", id: "run-now", onclick: () => act("Run now", async () => {
          const run = await api("POST", `/jobs/${jobId}/run`);
          return `Run now: execution ${run.executionId} is due at ${utc(run.dueAt)}.`;
        }) }, "Run now"));
        buttons.push(h("button", { type: "button", id: "run-payload-open", class: "secondary", onclick: runWithPayloadForm }, "Run with a payload…"));
        if (!job.schedule.at) buttons.push(h("button", { type: "button", id: "backfill", class: "secondary", onclick: backfillForm }, "Backfill…"));
      }
      if (live) {
        buttons.push(h("a", { class: "button secondary", href: `#/jobs/${jobId}/edit`, id: "edit" }, "Edit"));
        buttons.push(h("button", { type: "button", id: "cancel", class: "danger", onclick: cancelForm }, "Cancel job…"));
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
        h("button", { type: "button", class: "secondary", id: "history-newer", disabled: pageIndex === 0,
          onclick: () => { pageIndex -= 1; loadHistory(); } }, "Newer"),
        h("span", { class: "hint", id: "history-page" }, `page ${pageIndex + 1}`),
        h("button", { type: "button", class: "secondary", id: "history-older", disabled: !data.nextCursor,
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
        statusLine.replaceChildren(statusBadge(job.status), " ", scheduleWords(job.schedule),
          ...(job.note ? [h("span", { id: "job-note", class: "note" }, h("strong", {}, "Note: "), job.note)] : []));
        spec.replaceChildren(specList(job));
        health.replaceChildren(healthList(job));
        payloadBox.textContent = JSON.stringify(job.payload, null, 2);
      }
      if (statusChanged) renderActions();
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
      title, statusLine, actions, panel,
      h("div", { class: "grid" },
        h("section", { "aria-labelledby": "spec-h" }, h("h2", { id: "spec-h" }, "Definition"), spec,
          h("details", {}, h("summary", {}, "Payload"), payloadBox)),
        h("div", {},
          h("section", { "aria-labelledby": "health-h" }, h("h2", { id: "health-h" }, "Schedule health"), health),
          h("section", { "aria-labelledby": "next-h" }, h("h2", { id: "next-h" }, `Next runs (${job.schedule.timeZone || "UTC"})`), nextRuns))),
      h("section", { "aria-labelledby": "chart-h" }, h("h2", { id: "chart-h" }, "Recent runs"), chartBox),
      h("section", { "aria-labelledby": "history-h" }, h("h2", { id: "history-h" }, "Executions, newest first"),
        h("div", { class: "table-wrap" }, h("table", { id: "executions" }, historyHead(), history)), pager));
    pollTimer = setInterval(() => {
      if (!document.hidden) refresh().catch(() => {});
    }, POLL_MS);
  }

  // ---------- failed executions, dead letters, retry and redrive ----------
  function failureTable(tableId, executions, options) {
    // Failed executions with a checkbox each (for a redrive of the selection) and a Retry button;
    // `options.jobNames` (jobId -> name) adds a Job column, `options.onRetried` redraws after an action.
    const withJob = Boolean(options.jobNames);
    const selectAll = h("input", { type: "checkbox", id: `${tableId}-all`, "aria-label": "Select every execution shown" });
    const boxes = [];
    const rows = executions.map((e) => {
      const box = h("input", { type: "checkbox", class: "select", value: e.executionId,
        "aria-label": `Select the execution scheduled ${utc(e.scheduledAt)}` });
      boxes.push(box);
      const retry = h("button", { type: "button", class: "secondary retry", "data-execution-id": e.executionId,
        "aria-label": `Retry the execution scheduled ${utc(e.scheduledAt)}`, onclick: async () => {
          retry.disabled = true;
          try {
            const again = await api("POST", `/executions/${encodeURIComponent(e.executionId)}/retry`);
            say(`Retried execution ${again.executionId}: due ${utc(again.dueAt)} with a fresh retry budget (attempts go on from ${again.attempt + 1}).`);
            await options.onRetried();
          } catch (err) {
            retry.disabled = false;
            if (err.status !== 401) say(`Retry failed: ${errorText(err)}`, true);
          }
        } }, "Retry");
      return h("tr", { "data-execution-id": e.executionId },
        h("td", {}, box),
        h("td", {}, h("a", { href: `#/jobs/${e.jobId}/executions/${encodeURIComponent(e.executionId)}` }, utc(e.scheduledAt)),
          e.kind && e.kind !== "scheduled" ? h("span", { class: "tag" }, e.kind) : null),
        withJob ? h("td", {}, h("a", { href: `#/jobs/${e.jobId}` }, options.jobNames[e.jobId] || e.jobId)) : null,
        h("td", { class: "hide-narrow" }, utc(e.finishedAt)),
        h("td", { class: "num" }, String(e.attempt)),
        h("td", {}, e.error || "—"),
        h("td", {}, retry));
    });
    selectAll.addEventListener("change", () => { for (const box of boxes) box.checked = selectAll.checked; });
    const columns = ["Scheduled", ...(withJob ? ["Job"] : []), "Failed at", "Attempts", "Error", "Action"];
    const table = h("table", { id: tableId },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, selectAll),
        columns.map((c) => h("th", { scope: "col", class: c === "Failed at" ? "hide-narrow" : null }, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: String(columns.length + 1) }, "No failed executions."))));
    const selected = () => boxes.filter((b) => b.checked).map((b) => b.value);
    return { table: h("div", { class: "table-wrap" }, table), selected };
  }
  function redriveControls(selected, onDone) {
    // Redrive: retry the selected failed executions in one request; what was retried and what was refused, said.
    const result = h("div", { id: "redrive-result", "aria-live": "polite" });
    const button = h("button", { type: "button", id: "redrive-selected", onclick: async () => {
      const ids = selected();
      if (!ids.length) {
        say("Select the failed executions to redrive first.", true);
        return;
      }
      button.disabled = true;
      try {
        const done = await api("POST", "/dead-letters/redrive", { executionIds: ids });
        await onDone();
        say(`Redrive: ${done.retried.length} retried, ${done.refused.length} refused.`, done.refused.length > 0);
        result.replaceChildren(done.refused.length ? h("ul", { class: "refused" }, done.refused.map((r) =>
          h("li", {}, h("code", {}, r.executionId), `: ${r.message}`))) : "");
      } catch (err) {
        if (err.status !== 401) say(`Redrive failed: ${errorText(err)}`, true);
      } finally {
        button.disabled = false;
      }
    } }, "Redrive selected");
    return [h("div", { class: "actions" }, button, h("span", { class: "hint" }, "retries every selected execution, due now")), result];
  }
  async function failedPage(serial, jobId) {
    show(h("p", {}, "Loading…"));
    const box = h("div", {});
    let job = null;
    async function load() {
      job = await api("GET", `/jobs/${jobId}`);
      const { items, complete } = await allPages(`/jobs/${jobId}/executions`, "executions");
      if (serial !== routeSerial) return;
      const failed = items.filter((e) => e.status === "failed");
      const { table, selected } = failureTable("failed", failed, { onRetried: load });
      box.replaceChildren(
        h("p", { class: "hint", id: "failed-summary" }, `${failed.length} failed of ${items.length} executions${complete ? "" : " (the newest only)"}.`),
        ...(failed.length ? redriveControls(selected, load) : []), table);
    }
    await load();
    if (serial !== routeSerial) return;
    show(
      h("p", {}, h("a", { href: `#/jobs/${jobId}` }, `← ${job.name}`), " · ", h("a", { href: "#/dead-letters" }, "all dead letters")),
      h("h1", {}, `Failed executions of ${job.name}`), box);
  }
  async function deadLettersPage(serial) {
    show(h("h1", {}, "Dead letters"), h("p", {}, "Loading…"));
    const box = h("div", {});
    const pager = h("div", { class: "pager" });
    const names = {}; // jobId -> name, read once per job
    let cursors = [null];
    let pageIndex = 0;
    async function load() {
      const cursor = cursors[pageIndex];
      const data = await api("GET", `/dead-letters?limit=${HISTORY_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      const unknown = [...new Set(data.executions.map((e) => e.jobId))].filter((id) => !(id in names));
      await Promise.all(unknown.map((id) => api("GET", `/jobs/${id}`).then((j) => { names[id] = j.name; }).catch(() => { names[id] = id; })));
      if (serial !== routeSerial) return;
      cursors[pageIndex + 1] = data.nextCursor;
      const { table, selected } = failureTable("dead-letters", data.executions, { jobNames: names, onRetried: reload });
      box.replaceChildren(...(data.executions.length ? redriveControls(selected, reload) : []), table);
      pager.replaceChildren(
        h("button", { type: "button", class: "secondary", disabled: pageIndex === 0, onclick: () => { pageIndex -= 1; load(); } }, "Newer"),
        h("span", { class: "hint" }, `page ${pageIndex + 1}`),
        h("button", { type: "button", class: "secondary", disabled: !data.nextCursor, onclick: () => { pageIndex += 1; load(); } }, "Older"));
    }
    async function reload() {
      cursors = [null];
      pageIndex = 0;
      await load();
    }
    await load();
    if (serial !== routeSerial) return;
    show(h("h1", {}, "Dead letters"),
      h("p", { class: "hint" }, "Executions that failed for good, newest first: retry one, or select several and redrive them."),
      box, pager);
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
    const retry = e.status === "failed" && !["cancelled"].includes(job.status) ? h("div", { class: "actions" },
      h("button", { type: "button", id: "retry-execution", onclick: async () => {
        try {
          const again = await api("POST", `/executions/${encodeURIComponent(e.executionId)}/retry`);
          say(`Retried execution ${again.executionId}: due ${utc(again.dueAt)} with a fresh retry budget.`);
          location.hash = `#/jobs/${jobId}`;
        } catch (err) {
          if (err.status !== 401) say(`Retry failed: ${errorText(err)}`, true);
        }
      } }, "Retry this execution")) : null;
    show(
      h("p", {}, h("a", { href: `#/jobs/${jobId}` }, `← ${job.name}`), " · ", h("a", { href: `#/jobs/${jobId}/failed` }, "failed executions")),
      h("h1", {}, `Execution of ${job.name}`),
      retry,
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
      else if (parts[0] === "jobs" && parts[2] === "edit") await editPage(serial, parts[1]);
      else if (parts[0] === "dead-letters") await deadLettersPage(serial);
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
