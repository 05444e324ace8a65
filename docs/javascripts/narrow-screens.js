// What a reader needs on a phone, set up on every page (Material's document$ fires on each one):
// - every cell of a table knows its column's name, so that the stylesheet can show a table too wide
//   for the screen as one card per row, each value beside its name;
// - a long generated name in a table (an Inductor kernel, a templated CUDA kernel) may break after
//   its underscores, colons and commas instead of widening the table;
// - a trace-viewer picture wider than the screen scrolls to the event it marks.
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
  document.querySelectorAll(".md-typeset img[data-focus]").forEach(function (img) {
    var frame = img.closest("p");
    var center = function () {
      var at = parseFloat(img.getAttribute("data-focus")) * img.clientWidth;
      frame.scrollLeft = Math.max(0, at - frame.clientWidth / 2);
    };
    if (img.complete) center(); else img.addEventListener("load", center);
  });
});
