// The API client: the bearer token this tab keeps, requests, every page of a listing, errors as text.
import { nav, say } from "./view.js";

export const TOKEN_KEY = "duetime.token";
const FETCH_PAGE = 100; // the API's largest page
const MAX_FETCH_PAGES = 20; // a bound on client-side filtering: 2000 jobs or executions
const apiBase = (document.querySelector('meta[name="duetime-api"]')?.content || "").replace(/\/$/, "");

// ---------- API ----------
class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code;
    this.field = error.field;
  }
}
export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}
export async function api(method, path, body, headers) {
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
export async function allPages(path, key) {
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
export function errorText(error) {
  const where = error.field ? ` (field ${error.field})` : "";
  return `${error.message}${where}`;
}

// ---------- signing out (a refused token does too) ----------
export function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  nav.hidden = true;
  location.hash = "#/signin";
  say(message || "", Boolean(message));
}
