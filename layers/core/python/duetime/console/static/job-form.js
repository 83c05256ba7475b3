// Creating and editing a job: the form, its checks, and the preview of the next runs.
import { h, routeSerial, s, say, show } from "./view.js";
import { pad, scheduleWords, utc, zoned } from "./format.js";
import { api, errorText } from "./api.js";

export const PREVIEW_COUNT = 5;
export const NOTE_MAX_CHARS = 500; // JobChange.note's limit (API.md)

// ---------- create and edit ----------
export function field(id, labelText, input, hint) {
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
export function previewList(runs, timeZone) {
  return h("ol", { class: "runs" }, runs.map((iso) => {
    const z = zoned(iso, timeZone);
    return h("li", { "data-run": iso }, `${z.local} `, h("strong", {}, z.offset), h("span", { class: "hint" }, ` · ${utc(iso)}`));
  }));
}
export function localInput(iso) {
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
export function createPage() {
  jobForm(null);
}
export async function editPage(serial, jobId) {
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
