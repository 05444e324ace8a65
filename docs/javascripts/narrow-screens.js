// What a reader needs on a phone, set up on every page (Material's document$ fires on each one):
// - every cell of a table knows its column's name, so that the stylesheet can show a table too wide
//   for the screen as one card per row, each value beside its name;
// - a long generated name in a table (an Inductor kernel, a templated CUDA kernel) may break after
//   its underscores, colons and commas instead of widening the table;
// - code wraps under its own indentation, between tokens only; text drawn in columns keeps its
//   lines (a phone opens it on a tap);
// - a picture wider than the screen says that it scrolls, and opens at the part it marks; a figure
//   keeps its legend and its y axis in view.
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
      if (code.textContent.length <= 24) return;  // train_custom_cpu_recompute (26) may break
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
  wholeTokens();
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

// Where code wraps (a page column), a token with a hyphen or a bracket in it (--device, "-inf",
// s[n][0]) stays whole: a browser may break a line after a hyphen or between brackets, and "--"
// then "device", or "s[n]" then "[0]", on two lines read as two words. The token, across the
// highlighter's spans, goes into one span that does not wrap (reader.css).
function wholeTokens() {
  var units = document.querySelectorAll(
    '.md-typeset pre > code > span[id^="__span"], .md-typeset pre > code:not(:has(> span[id^="__span"])), ' +
    ".md-content .jupyter-wrapper .jp-InputArea pre"
  );
  units.forEach(function (unit) {
    if (unit.hasAttribute("data-tokens")) return; // done before
    unit.setAttribute("data-tokens", "");
    var walker = document.createTreeWalker(unit, NodeFilter.SHOW_TEXT), nodes = [], text = "";
    while (walker.nextNode()) {
      nodes.push({ node: walker.currentNode, start: text.length });
      text += walker.currentNode.nodeValue;
    }
    var at = function (i) {
      for (var k = nodes.length - 1; k >= 0; k--) if (nodes[k].start <= i) return nodes[k];
    };
    // Where a browser may break inside a token: after a hyphen, before or after a bracket; and
    // after the indentation, which would leave a line of spaces. Each [start, end) of the text.
    var spans = Array.from(text.matchAll(/\S{2,}/g)).filter(function (m) {
      return /[-[\](){}]/.test(m[0]) && /[^-]/.test(m[0]); // "--" alone is an operator
    }).map(function (m) { return [m.index, m.index + m[0].length]; });
    var lead = /^[ \t]+\S+/.exec(unit.matches("pre") ? "" : text); // a notebook cell is one unit
    if (lead) {
      if (spans.length && spans[0][0] < lead[0].length) spans[0][0] = 0;
      else spans.unshift([0, lead[0].length]);
    }
    spans.reverse().forEach(function (span) { // from the end: earlier offsets stay right
      var first = at(span[0]), last = at(span[1] - 1), range = document.createRange();
      range.setStart(first.node, span[0] - first.start);
      range.setEnd(last.node, span[1] - last.start);
      var token = document.createElement("span");
      token.className = "attn-token";
      token.appendChild(range.extractContents());
      range.insertNode(token);
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
    if (/\.svg$/.test(img.getAttribute("src"))) keys(img, frame);
  };
  // Its width and height attributes give a picture its size before it loads.
  images.forEach(place);
}

// A figure that scrolls sideways keeps what reads it in view: its legend is shown again above it,
// and the strip left of its axes (the y axis's ticks and label, a timeline's lane names) stays at
// the left edge while the rest scrolls under it. Both are cut from the figure itself, where its
// SVG (matplotlib's: axes_N, each drawn on its patch, and legend_N) says they are.
function keys(img, frame) {
  var scrolled = frame.scrollLeft; // where place() opened it: moving the frame resets it
  fetch(img.src).then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); }).then(function (text) {
    var svg = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
    var box = (svg.getAttribute("viewBox") || "").split(/[ ,]+/).map(parseFloat);
    if (box.length !== 4 || !(box[2] > 0)) return;
    // getBBox needs the drawing laid out: in the page, out of sight, for a moment.
    var probe = document.createElement("div");
    probe.style.cssText = "position:absolute;left:-10000px;top:0;visibility:hidden";
    probe.appendChild(document.importNode(svg, true));
    document.body.appendChild(probe);
    var drawn = probe.firstChild, edge = box[2], top = box[3];
    // The leftmost plot's edge: what is left of it is the axis (a column of plots shares it).
    drawn.querySelectorAll('g[id^="axes_"] > g[id^="patch_"]:first-of-type > path').forEach(function (patch) {
      var plot = patch.getBBox();
      edge = Math.min(edge, plot.x);
      top = Math.max(0, Math.min(top, plot.y - 8)); // the top tick's label, half above the plot
    });
    var legend = drawn.querySelector('g[id^="legend_"]');
    var where = legend && legend.getBBox();
    probe.remove();
    // A question may have hidden the figure meanwhile (guess.js): drawn once it shows again.
    whenShown(img, function () {
      var scale = img.clientWidth / box[2], note = frame.nextElementSibling; // its scroll note
      var wrap = document.createElement("div");
      wrap.className = "attn-figure";
      frame.before(wrap);
      if (where && where.width) {
        var pad = 8; // a legend's handles reach past what getBBox counts of their markers
        var key = cut(img, scale, where.x - pad, where.y - pad / 2, where.width + 2 * pad, where.height + pad);
        key.className = "attn-figure-legend";
        key.setAttribute("role", "img");
        key.setAttribute("aria-label", "the figure's legend");
        var shelf = document.createElement("div"); // a legend wider than the screen scrolls too
        shelf.className = "attn-figure-shelf";
        shelf.appendChild(key);
        wrap.appendChild(shelf);
      }
      wrap.appendChild(frame);
      if (note && note.matches(".attn-scroll-note")) wrap.appendChild(note); // still right under it
      frame.scrollLeft = scrolled;
      if (!(edge > 0 && edge < box[2])) return; // no plot drawn on a patch
      var axis = cut(img, scale, 0, top, edge, box[3] - top);
      axis.className = "attn-figure-axis";
      axis.style.top = img.offsetTop + top * scale + "px"; // the wrapper is its offset parent
      wrap.appendChild(axis);
      var follow = function () { axis.hidden = frame.scrollLeft < 1; };
      frame.addEventListener("scroll", follow, { passive: true });
      follow();
    });
  }).catch(function () {}); // no legend or axis drawn again: the figure still scrolls
}

// Calls back once the element has a size (now, or when what hides it shows it).
function whenShown(el, callback) {
  if (el.clientWidth) return callback();
  var watch = new ResizeObserver(function () {
    if (!el.clientWidth) return;
    watch.disconnect();
    callback();
  });
  watch.observe(el);
}

// The part of a picture at (x, y, width, height), in its own units, as a block at its shown scale.
function cut(img, scale, x, y, width, height) {
  var part = document.createElement("div");
  part.style.width = width * scale + "px";
  part.style.height = height * scale + "px";
  part.style.backgroundImage = 'url("' + img.src + '")';
  part.style.backgroundSize = img.clientWidth + "px " + img.clientHeight + "px";
  part.style.backgroundPosition = -x * scale + "px " + -y * scale + "px";
  return part;
}
