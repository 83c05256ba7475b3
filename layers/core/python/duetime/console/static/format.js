// Shared formatting: times in UTC and in a job's zone, durations, schedules in words, tags.

// ---------- time ----------
export function utc(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/Z$/, " UTC") : "—";
}
export function zoned(iso, timeZone) {
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
export function ms(a, b) {
  return a && b ? new Date(b).getTime() - new Date(a).getTime() : null;
}
export function duration(value) {
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
export const pad = (n) => String(n).padStart(2, "0");
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
export function scheduleWords(schedule) {
  const zone = schedule.timeZone || "UTC";
  if (schedule.cron) return `${cronWords(schedule.cron)} (${zone})`;
  if (schedule.every) return everyWords(schedule.every);
  if (schedule.at) return `once, at ${utc(schedule.at)}`;
  return "—";
}

export function tagsOf(job) {
  const tags = job.tags;
  if (!tags) return [];
  if (Array.isArray(tags)) return tags.map(String);
  return Object.entries(tags).map(([k, v]) => `${k}=${v}`);
}
export function shorten(text, most) {
  return text.length > most ? `${text.slice(0, most - 1)}…` : text;
}
