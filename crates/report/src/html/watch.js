// Runs first, in <head>: records script errors and requests blocked by the page's security policy from
// the very start, for the render status that page.js writes.
window.__alloclensStatus = { errors: [], blocked: [] };
window.addEventListener("error", function (e) { window.__alloclensStatus.errors.push(String(e.message || "resource failed to load")); }, true);
window.addEventListener("unhandledrejection", function (e) { window.__alloclensStatus.errors.push("rejection: " + String(e.reason)); });
document.addEventListener("securitypolicyviolation", function (e) {
  window.__alloclensStatus.blocked.push(e.violatedDirective + " " + e.blockedURI);
});
