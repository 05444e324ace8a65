// What a reader needs on a phone, set up on every page (Material's document$ fires on each one):
// - every cell of a table knows its column's name, so that the stylesheet can show a table too wide
//   for the screen as one card per row, each value beside its name;
// - a long generated name in a table (an Inductor kernel, a templated CUDA kernel) may break after
//   its underscores, colons and commas instead of widening the table;
// - a picture wider than the screen says that it scrolls.
document$.subscribe(function () {
  document.querySelectorAll(".md-typeset table:not([class])").forEach(function (table) {
    var names = Array.from(table.querySelectorAll("thead th")).map(function (th) {
      return th.textContent.trim();
    });
    table.querySelectorAll("tbody tr").forEach(function (row) {
      Array.from(row.children).forEach(function (cell, i) {
        cell.setAttribute("data-label", names[i] || "");
      });
    });
    table.querySelectorAll("td code").forEach(function (code) {
      if (code.textContent.length <= 32) return;
      code.setAttribute("data-long", "");
      var parts = code.textContent.split(/(?<=[_:,<(])/);
      code.textContent = "";
      parts.forEach(function (part, i) {
        if (i) code.appendChild(document.createElement("wbr"));
        code.appendChild(document.createTextNode(part));
      });
    });
    // Too wide for its frame; in a tab not shown (nothing to measure), four columns or more.
    var frame = table.closest(".md-typeset__scrollwrap") || table.parentElement;
    var wide = frame.clientWidth ? frame.scrollWidth > frame.clientWidth + 1 : names.length >= 4;
    if (wide) table.setAttribute("data-cards", "");
  });
  // A picture wider than the screen scrolls sideways, and says so under it. A trace-viewer
  // screenshot stays at its left edge, where the details panel names and times the selected event
  // (scrolled to the event, the panel was off-screen); the note says the event is further right.
  var pictures = document.querySelectorAll('.md-typeset p > a.glightbox > img[src*="profiles/"]');
  var note = function (img) {
    var frame = img.closest("p");
    var old = frame.nextElementSibling;
    if (old && old.classList.contains("attn-scroll-note")) old.remove();
    if (!frame.clientWidth || frame.scrollWidth <= frame.clientWidth + 1) return;
    var focus = parseFloat(img.getAttribute("data-focus"));
    var text = document.createElement("p");
    text.className = "attn-scroll-note";
    text.textContent = focus * img.clientWidth > frame.clientWidth
      ? "Wider than the screen: the panel shows the selected event; swipe sideways to see it boxed in red."
      : "Wider than the screen: swipe sideways for the rest of the picture.";
    frame.after(text);
  };
  var noteAll = function () { pictures.forEach(note); };
  pictures.forEach(function (img) { img.addEventListener("load", function () { note(img); }); });
  // A picture in closed evidence or a tab not shown has no width yet: measured once shown.
  document.querySelectorAll(".md-typeset details, .tabbed-set > input").forEach(function (el) {
    el.addEventListener(el.tagName === "DETAILS" ? "toggle" : "change", noteAll);
  });
  noteAll();
});
