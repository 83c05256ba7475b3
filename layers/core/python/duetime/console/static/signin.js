// Signing in: a pasted bearer token, or the user pool's hosted UI (AWS) by authorization code with PKCE.
import { h, nav, say, show } from "./view.js";
import { TOKEN_KEY, api, errorText, token } from "./api.js";

// ---------- sign-in through the user pool's hosted UI (AWS): authorization code with PKCE ----------
const PKCE_KEY = "duetime.pkce";
let hostedSignIn = null; // {hostedUi, clientId} from config.json, which only the AWS deployment writes
export async function loadConfig() {
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
export async function finishHostedSignIn() {
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


export function signInPage() {
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
