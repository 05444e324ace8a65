/* "Open in Perfetto": hand a published trace to ui.perfetto.dev with its postMessage protocol.
 *
 * The hook renders each trace link as
 *   <a href="../profiles/cpu/naive/trace.json.gz" data-perfetto-trace data-perfetto-title="...">
 * so without JavaScript (or when this fails) the link still downloads the trace. On a click we open
 * the Perfetto UI in a new window, fetch the trace (the .json.gz bytes as served: Perfetto detects
 * gzip itself, as for a file opened from disk), send 'PING' every 100 ms until the UI answers 'PONG',
 * then post {perfetto: {buffer, title, fileName}}. See perfetto.dev/docs, "Deep linking to the
 * Perfetto UI".
 *
 * The UI's address is the button's data-perfetto-origin, else window.ATTN_PERFETTO_URL, else
 * https://ui.perfetto.dev (tests point it at a local stand-in page).
 */
(function () {
  "use strict";

  var DEFAULT_URL = "https://ui.perfetto.dev";
  var PING_EVERY_MS = 100;
  var GIVE_UP_AFTER_MS = 30000;  // a slow network may take long to load the UI
  var REACH_WITHIN_MS = 4000;  // but one that cannot reach it at all says so at once
  var FROM_FILE =
    "This page was opened from a file, and browsers do not let a file hand a trace to " +
    "another site. Serve the site (python -m http.server -d site) or download the trace " +
    "and drop it on ui.perfetto.dev.";

  function perfettoUrl(button) {
    return button.getAttribute("data-perfetto-origin") || window.ATTN_PERFETTO_URL || DEFAULT_URL;
  }

  /* The message line next to a button, made on first use. */
  function statusOf(button) {
    var next = button.nextElementSibling;
    if (next && next.classList.contains("attn-perfetto-status")) return next;
    var status = document.createElement("span");
    status.className = "attn-perfetto-status";
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    button.insertAdjacentElement("afterend", status);
    return status;
  }

  function say(button, text, isError) {
    var status = statusOf(button);
    status.textContent = text;
    status.classList.toggle("attn-perfetto-status--error", Boolean(isError));
  }

  function traceUrl(button) {
    return new URL(
      button.getAttribute("data-perfetto-trace") || button.getAttribute("href"),
      location.href
    );
  }

  function fileName(url) {
    // profiles/<hardware>/<variant>/trace.json.gz -> <hardware>-<variant>-trace.json.gz
    return url.pathname.split("/").filter(Boolean).slice(-3).join("-");
  }

  /* Resolves once `win` answers PING with PONG; rejects after GIVE_UP_AFTER_MS. */
  function handshake(win, origin) {
    return new Promise(function (resolve, reject) {
      var started = Date.now();
      function onMessage(event) {
        if (event.source !== win || event.origin !== origin || event.data !== "PONG") return;
        done();
        resolve();
      }
      function ping() {
        if (win.closed) {
          done();
          reject(new Error("the Perfetto window was closed"));
        } else if (Date.now() - started > GIVE_UP_AFTER_MS) {
          done();
          reject(new Error("Perfetto did not answer (are you offline?)"));
        } else {
          // Before the UI has loaded, the window is on another origin or about:blank: posting
          // with a target origin drops the message instead of delivering it to the wrong page.
          win.postMessage("PING", origin);
        }
      }
      var timer = setInterval(ping, PING_EVERY_MS);
      function done() {
        clearInterval(timer);
        window.removeEventListener("message", onMessage);
      }
      window.addEventListener("message", onMessage);
      ping();
    });
  }

  /* Rejects within REACH_WITHIN_MS when the UI's site cannot be reached at all (offline, blocked):
     the reader hears so in seconds, not after the handshake's long wait. */
  function reachable(ui) {
    if (navigator.onLine === false) return Promise.reject(new Error("you are offline"));
    var abort = new AbortController();
    var timer = setTimeout(function () { abort.abort(); }, REACH_WITHIN_MS);
    return fetch(ui.href, { mode: "no-cors", signal: abort.signal })
      .then(function () { clearTimeout(timer); })
      .catch(function () {
        clearTimeout(timer);
        throw new Error(ui.host + " cannot be reached (are you offline?)");
      });
  }

  function open(button) {
    if (location.protocol === "file:") {
      say(button, FROM_FILE, true);
      return;
    }
    var ui = new URL(perfettoUrl(button), location.href);
    var url = traceUrl(button);
    // Open the window now, inside the click: browsers block pop-ups opened later.
    var win = window.open(ui.href);
    if (!win) {
      say(
        button,
        "Your browser blocked the Perfetto window. Allow pop-ups for this site and click " +
          "again, or download the trace and drop it on ui.perfetto.dev.",
        true
      );
      return;
    }
    say(button, "Opening the trace in Perfetto…");
    var bytes = fetch(url).then(function (response) {
      if (!response.ok) throw new Error("the trace could not be fetched (HTTP " + response.status + ")");
      return response.arrayBuffer();
    });
    Promise.all([bytes, reachable(ui), handshake(win, ui.origin)])
      .then(function (results) {
        var buffer = results[0];
        var title = button.getAttribute("data-perfetto-title") || fileName(url);
        win.postMessage({ perfetto: { buffer: buffer, title: title, fileName: fileName(url) } }, ui.origin, [buffer]);
        say(button, "Sent to Perfetto: see the new tab.");
      })
      .catch(function (error) {
        var why = error instanceof TypeError ? "the trace could not be fetched" : error.message;
        say(button, "Could not open it in Perfetto: " + why + ". Download the trace and drop it on ui.perfetto.dev.", true);
      });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-perfetto-trace]");
    if (!button || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault(); // a modified click still downloads the trace
    open(button);
  });

  /* On a page opened from a file, say up front why the button cannot work. */
  function explainFromFile() {
    if (location.protocol !== "file:") return;
    document.querySelectorAll("[data-perfetto-trace]").forEach(function (button) {
      say(button, FROM_FILE, true);
    });
  }
  // Material's instant navigation swaps pages without a load event; document$ fires on each page.
  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(explainFromFile);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", explainFromFile);
  } else {
    explainFromFile();
  }
})();
