// What a reader needs on a phone, set up on every page (Material's document$ fires on each one):
// - every cell of a table knows its column's name, so that the stylesheet can show a table too wide
//   for the screen as one card per row, each value beside its name;
// - a long generated name in a table (an Inductor kernel, a templated CUDA kernel) may break after
//   its underscores, colons and commas instead of widening the table;
// - code wraps under its own indentation, text drawn in columns keeps its lines (a phone opens it
//   on a tap);
// - a picture wider than the screen says that it scrolls, and opens at the part it marks.
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
  codeLines();
  shellWords();
  drawnText();
  pictures();
  // What is in closed evidence or a tab not shown has no width yet: measured once shown.
  document.querySelectorAll(".md-typeset details, .tabbed-set > input").forEach(function (el) {
    el.addEventListener(el.tagName === "DETAILS" ? "toggle" : "change", function () {
      drawnText();
      pictures();
    });
  });
});

var narrow = window.matchMedia("screen and (max-width: 44.984375em)");

// Each line of a code block knows its indentation, so that a wrapped line continues further in
// than the line itself starts (reader.css).
function codeLines() {
  document.querySelectorAll('.md-typeset pre > code > span[id^="__span"]').forEach(function (line) {
    var lead = /^[ \t]*/.exec(line.textContent)[0];
    if (lead) line.style.setProperty("--indent", lead.replace(/\t/g, "    ").length);
  });
}

// A command's words with a hyphen in them (--device, --no-venv) wrap whole: a browser may break
// after a hyphen, and "--" then "device" on the next line reads as two words.
function shellWords() {
  document.querySelectorAll(".md-typeset .language-shell pre > code").forEach(function (code) {
    var walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT), texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    texts.forEach(function (node) {
      if (node.parentElement.classList.contains("attn-word")) return; // done before
      var parts = node.nodeValue.split(/(\S*-\S*)/);
      if (parts.length < 2) return;
      var words = document.createDocumentFragment();
      parts.forEach(function (part, i) {
        if (!part) return;
        if (i % 2 === 0) return words.appendChild(document.createTextNode(part));
        var word = document.createElement("span");
        word.className = "attn-word";
        word.textContent = part;
        words.appendChild(word);
      });
      node.replaceWith(words);
    });
  });
}

// Text drawn in columns (a table or a tree printed in characters): box-drawing characters, or two
// lines that line a word up after a run of spaces. Code is not looked at: its comments align too.
function isDrawn(text) {
  if (/[\u2500-\u257f]/.test(text)) return true;
  return text.split("\n").filter(function (line) { return /\S {2,}\S/.test(line); }).length >= 2;
}

// A phone keeps such text whole and puts it in a closed block that says it scrolls sideways,
// instead of in the flow of the page, where it hid what was past the edge.
function drawnText() {
  var blocks = document.querySelectorAll(
    ".md-typeset .language-text pre, .md-typeset .language-console pre, " +
    ".md-content .jupyter-wrapper .jp-OutputArea-output pre"
  );
  blocks.forEach(function (pre) {
    if (!pre.hasAttribute("data-drawn") && isDrawn(pre.textContent)) pre.setAttribute("data-drawn", "");
  });
  if (!narrow.matches) return;
  blocks.forEach(function (pre) {
    var box = pre.closest(".highlight") || pre;
    if (!pre.hasAttribute("data-drawn") || box.closest("details.attn-wide")) return;
    var code = pre.querySelector("code") || pre;
    if (!pre.clientWidth || code.scrollWidth <= code.clientWidth + 1) return; // not shown, or fits
    var columns = Math.max.apply(null, pre.textContent.split("\n").map(function (l) { return l.length; }));
    var details = document.createElement("details");
    details.className = "attn-wide";
    var summary = document.createElement("summary");
    summary.textContent = "Text drawn in columns, " + columns + " characters wide: open it, then swipe sideways";
    details.appendChild(summary);
    box.before(details);
    details.appendChild(box);
  });
}

// A picture wider than the screen scrolls sideways, and says so under it. A picture with a mark
// (data-mark: its left and right edges, as fractions of the picture's width: the event a
// trace-viewer screenshot boxes in red, the part of a figure its text is about) opens scrolled to
// it: the mark whole, as far left as it allows (a screenshot's details panel is on its left), or its
// middle where it is wider than the screen.
function pictures() {
  var images = document.querySelectorAll('.md-typeset p > a.glightbox > img[src*="profiles/"]');
  var place = function (img) {
    var frame = img.closest("p");
    if (!frame.clientWidth || img.hasAttribute("data-placed")) return; // not shown yet, or done
    img.setAttribute("data-placed", "");
    if (frame.scrollWidth <= frame.clientWidth + 1) return;
    var mark = (img.getAttribute("data-mark") || "").split(" ").map(parseFloat);
    var width = img.clientWidth, view = frame.clientWidth, pad = 12;
    var scrolled = false;
    if (mark.length === 2 && mark.every(isFinite)) {
      var left = mark[0] * width, right = mark[1] * width;
      var to = right - left + 2 * pad <= view ? right + pad - view : (left + right - view) / 2;
      frame.scrollLeft = Math.max(0, Math.min(to, width - view));
      scrolled = frame.scrollLeft > 0;
    }
    var text = document.createElement("p");
    text.className = "attn-scroll-note";
    var shot = /\/viewer\.png$/.test(img.getAttribute("src"));
    text.textContent = !scrolled
      ? "Wider than the screen: swipe sideways for the rest of the picture."
      : shot
        ? "Wider than the screen: scrolled to the event boxed in red, which the panel below names and times; swipe sideways for the rest."
        : "Wider than the screen: scrolled to the part the text is about; swipe sideways for the rest.";
    frame.after(text);
  };
  // Its width and height attributes give a picture its size before it loads.
  images.forEach(place);
}
