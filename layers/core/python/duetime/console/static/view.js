// The page's frame: building DOM nodes, the notice line, and which route is showing.

export const POLL_MS = 2000;
export const view = document.getElementById("view");
const notice = document.getElementById("notice");
export const nav = document.getElementById("nav");
let pollTimer = null; // the current page's refresh, stopped when the route changes
export let routeSerial = 0; // answers that arrive after the user moved on are dropped

export function nextRoute() {
  // A new route: the last page's refresh stops, and its answers still on their way are dropped.
  clearInterval(pollTimer);
  pollTimer = null;
  routeSerial += 1;
  return routeSerial;
}
export function keepPolling(timer) {
  // The page's refresh (a setInterval), until the route changes.
  pollTimer = timer;
}

// ---------- DOM ----------
export function h(tag, attrs, ...children) {
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
export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
export function show(...nodes) {
  view.replaceChildren(...nodes);
}
export function say(message, isError) {
  notice.textContent = message;
  notice.classList.toggle("error", Boolean(isError));
  notice.hidden = !message;
}
export function statusBadge(status) {
  return h("span", { class: `status status-${status}`, "data-status": status }, status);
}
