// duetime console: a static page over the public API (API.md). No framework, no inline script, no CDN.
// Native ES modules, one per page or concern, loaded by index.html without a build step; this one routes.
import { h, nav, nextRoute, routeSerial, say, show, view } from "./view.js";
import { TOKEN_KEY, errorText, signOut, token } from "./api.js";
import { finishHostedSignIn, loadConfig, signInPage } from "./signin.js";
import { jobsPage } from "./jobs-list.js";
import { createPage, editPage } from "./job-form.js";
import { jobPage } from "./job-page.js";
import { deadLettersPage, executionPage, failedPage } from "./dead-letters.js";

// ---------- routing ----------
async function route() {
  const serial = nextRoute();
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
