// The jobs list: its filters, paging, and bulk actions over the selected or the matching jobs.
import { h, routeSerial, say, show, statusBadge } from "./view.js";
import { scheduleWords, shorten, tagsOf, utc } from "./format.js";
import { allPages, api, errorText } from "./api.js";

const LIST_PAGE = 20; // jobs shown per page of the list

// ---------- jobs list ----------
function parseTagFilter(text) {
  // "team:ops, env:prod" -> every tag must match (the API's repeatable tag=key:value).
  return text.split(",").map((x) => x.trim()).filter(Boolean);
}
export async function jobsPage(serial, params) {
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
