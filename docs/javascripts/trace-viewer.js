/* "Open here": show a published trace in the trace viewer that ships with the site.
 *
 * A link written in Markdown as
 *   [Open here](../profiles/cpu/naive/trace.json.gz){ data-trace-viewer }
 * may also carry data-trace-range="attn_fwd" (zoom to the middle one) and
 * data-trace-select="aten::clone" (select that event inside it). It stays a plain download link
 * until we know the viewer is published (trace-viewer/index.html is there, see
 * attn/profiling/viewer.py); then it opens trace-viewer/index.html?trace=... in a new tab.
 * Nothing comes from outside the site, so it works offline once the site is served. A page opened
 * from a file cannot fetch the trace, so there the links stay downloads.
 *
 * When done with a page, <html data-trace-viewer="ready|absent"> says which way it went.
 */
(function () {
  "use strict";

  // The viewer sits at the site root, as javascripts/ (where this file is) does.
  var VIEWER = new URL("../trace-viewer/index.html", document.currentScript.src);
  var available; // a Promise<boolean>, asked once per page load

  function viewerAvailable() {
    if (!available) {
      // A GET of the small index.html, read to the end: a HEAD request, or a body left unread,
      // is reported by Chromium as an aborted request even when the server answered 200.
      available = fetch(VIEWER.href).then(
        function (response) {
          return response.text().then(function () { return response.ok; });
        },
        function () { return false; }
      );
    }
    return available;
  }

  function viewerUrl(link) {
    var trace = new URL(link.getAttribute("data-trace-href"), location.href);
    var query = new URLSearchParams();
    query.set("trace", trace.origin === VIEWER.origin ? trace.pathname : trace.href);
    ["range", "select", "title"].forEach(function (key) {
      var value = link.getAttribute("data-trace-" + key);
      if (value) query.set(key, value);
    });
    return VIEWER.href + "?" + query.toString();
  }

  function upgrade(link) {
    if (!link.hasAttribute("data-trace-href")) {
      link.setAttribute("data-trace-href", link.getAttribute("href")); // keep the download address
    }
    link.href = viewerUrl(link);
    link.target = "_blank";
    link.rel = "noopener";
  }

  function upgradeLinks() {
    var links = document.querySelectorAll("a[data-trace-viewer]");
    var done = function (state) { document.documentElement.setAttribute("data-trace-viewer", state); };
    if (!links.length) return done("ready");
    if (location.protocol === "file:") return done("absent");
    viewerAvailable().then(function (ok) {
      if (ok) links.forEach(upgrade);
      done(ok ? "ready" : "absent");
    });
  }

  // Material's instant navigation swaps pages without a load event; document$ fires on each page.
  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(upgradeLinks);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", upgradeLinks);
  } else {
    upgradeLinks();
  }
})();
