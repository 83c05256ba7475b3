// Failed executions and dead letters: retry one, redrive a selection, and one execution's page.
import { h, routeSerial, say, show, statusBadge } from "./view.js";
import { duration, ms, utc, zoned } from "./format.js";
import { allPages, api, errorText } from "./api.js";
import { HISTORY_PAGE, lateness, runTime } from "./job-page.js";

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
export async function failedPage(serial, jobId) {
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
export async function deadLettersPage(serial) {
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
export async function executionPage(serial, jobId, executionId) {
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
