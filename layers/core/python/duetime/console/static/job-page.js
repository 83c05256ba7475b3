// One job: its definition, schedule health, next runs, recent runs' chart and execution history.
import { POLL_MS, h, keepPolling, routeSerial, s, say, show, statusBadge } from "./view.js";
import { duration, ms, scheduleWords, shorten, tagsOf, utc } from "./format.js";
import { api, errorText } from "./api.js";
import { NOTE_MAX_CHARS, PREVIEW_COUNT, field, localInput, previewList } from "./job-form.js";

export const HISTORY_PAGE = 20;

// ---------- one job ----------
export function lateness(execution) {
  const first = (execution.attempts || [])[0];
  return ms(execution.scheduledAt, first ? first.startedAt : execution.startedAt);
}
export function runTime(execution) {
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
export async function jobPage(serial, jobId) {
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
  keepPolling(setInterval(() => {
    if (!document.hidden) refresh().catch(() => {});
  }, POLL_MS));
}
