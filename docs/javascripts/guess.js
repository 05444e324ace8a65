// Guess first: each question of a guess box is answered on the page (docs/hooks/guesses.py writes
// the question, the measured answer and what a miss means). What follows a question states what was
// measured (the evidence, the checks, tables, figures, the explanation), so it stays hidden to the
// end of the question's own section, until the reader answers or skips; answering, or skipping,
// shows it and opens the answer and the evidence in it; the measured answer is not there to open
// before. A link to a heading in it (the table of contents, a search result) shows it too. Nothing
// is sent or kept anywhere. Without JavaScript nothing is hidden, the form stays hidden, and the
// reader opens the answer and the evidence by hand.
document$.subscribe(function () {
  mergeTabs();
  var boxes = Array.from(document.querySelectorAll(".attn-guess"));
  var group = function (box) { return box.closest(".tabbed-set") || box; };
  var isHeading = function (el) { return /^H[1-6]$/.test(el.tagName); };
  // The part of the page that holds el: its ancestor right under the article.
  var partOf = function (el) {
    var article = el.closest("article");
    while (el.parentElement && el.parentElement !== article) el = el.parentElement;
    return el;
  };

  var level = function (heading) { return Number(heading.tagName.slice(1)); };
  // The level of the section that holds el: that of the nearest heading above it (1: the page's).
  var sectionLevel = function (el) {
    for (el = el.previousElementSibling; el; el = el.previousElementSibling) {
      if (isHeading(el)) return level(el);
    }
    return 1;
  };

  // Each question group, and the parts of the page after it that state what was measured: its
  // siblings to the end of its own section (the next heading of its section's level or above),
  // or up to the next question's section (the heading above the next question), if sooner. The
  // rest of the page, unrelated to the question, is never hidden by it.
  var groups = [];
  boxes.forEach(function (box) {
    var top = partOf(group(box));
    if (!groups.length || groups[groups.length - 1].top !== top) groups.push({ top: top, parts: [] });
  });
  groups.forEach(function (g, i) {
    var next = groups[i + 1] ? groups[i + 1].top : null;
    var stop = next, own = sectionLevel(g.top);
    for (var el = next && next.previousElementSibling; el && el !== g.top; el = el.previousElementSibling) {
      if (isHeading(el)) { stop = el; break; }
    }
    for (var part = g.top.nextElementSibling; part && part !== stop && part !== next; part = part.nextElementSibling) {
      if (isHeading(part) && level(part) <= own) break;
      g.parts.push(part);
    }
  });

  // Questions asked together (one tab set holds them) share what follows: shown once each one
  // of the tab the reader is on has been answered or skipped.
  var reveal = function (g, box) {
    var tab = box.closest(".tabbed-block") || box;
    var asked = tab.querySelectorAll(".attn-guess");
    if (Array.prototype.some.call(asked, function (b) { return !b.hasAttribute("data-done"); })) return;
    g.parts.forEach(function (part) { part.classList.remove("attn-unanswered"); });
    if (g.note) { g.note.remove(); g.note = null; }
  };
  groups.forEach(function (g) {
    if (!g.parts.length) return;
    g.parts.forEach(function (part) { part.classList.add("attn-unanswered"); });
    g.note = document.createElement("p");
    g.note.className = "attn-guess-waiting";
    g.note.textContent = "The evidence, and what it shows, appear here once you answer or skip the question.";
    g.top.after(g.note);
  });

  // A link to a part that is hidden: show its group's parts, then go there.
  var follow = function () {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    var hidden = groups.find(function (g) {
      return g.note && g.parts.some(function (part) { return part.contains(target); });
    });
    if (!hidden) return;
    hidden.parts.forEach(function (part) { part.classList.remove("attn-unanswered"); });
    hidden.note.remove();
    hidden.note = null;
    target.scrollIntoView();
  };
  follow();
  window.addEventListener("hashchange", follow);

  // Every closed evidence block after this box's group, up to the next question's group.
  var openEvidence = function (box) {
    var mine = group(box);
    var items = Array.from(document.querySelectorAll(".attn-guess, details.evidence"));
    var seen = false;
    for (var i = 0; i < items.length; i++) {
      var item = items[i];
      if (item.classList.contains("attn-guess")) {
        if (group(item) === mine) { seen = true; continue; }
        if (seen) break;
      } else if (seen) {
        item.open = true;
      }
    }
  };

  var verdict = function (box, guess) {
    var answer = box.dataset.answer;
    if (box.dataset.kind === "choice") {
      return guess === answer ? box.dataset.right : box.dataset.under;
    }
    var number = parseFloat(answer);
    var off = parseFloat(guess) - number;
    var room = parseFloat(box.dataset.tolerance) * Math.abs(number);
    if (Math.abs(off) <= room + 1e-9) return box.dataset.right;
    return off < 0 ? box.dataset.under : box.dataset.over;
  };

  boxes.forEach(function (box) {
    var form = box.querySelector("form");
    var result = box.querySelector(".attn-guess-result");
    var answer = box.querySelector(".attn-guess-answer");
    var mine = groups.find(function (g) { return g.top === partOf(group(box)); });
    form.hidden = false;
    answer.hidden = true; // the answer opens once the reader answers or skips, never before
    var show = function (guess) {
      result.textContent = "";
      if (guess !== null) {
        var line = document.createElement("strong");
        line.textContent = "Your guess: " + guess + " · measured: " + box.dataset.answer + ". ";
        result.appendChild(line);
        var gap = verdict(box, guess);
        result.appendChild(document.createTextNode(gap.charAt(0).toUpperCase() + gap.slice(1) + "."));
      } else {
        result.appendChild(document.createTextNode("Skipped: compare the evidence with what you wrote down."));
      }
      result.hidden = false;
      answer.hidden = false;
      answer.open = true;
      box.setAttribute("data-done", "");
      reveal(mine, box);
      openEvidence(box);
    };
    form.addEventListener("submit", function (event) {
      event.preventDefault();  // nothing goes to a server
      var checked = form.querySelector("input:checked");
      var field = checked || form.querySelector("input[type=number]");
      show(field.value.trim());
    });
    form.querySelector("[data-skip]").addEventListener("click", function () { show(null); });
  });
});

// Questions in a row, each in a tab set of its own with the same tabs (one per hardware set): one
// tab set, each tab holding its questions in order, instead of the same bar of tabs again and again.
function mergeTabs() {
  var labels = function (set) {
    return Array.from(set.querySelectorAll(":scope > .tabbed-labels > label")).map(function (l) {
      return l.textContent;
    }).join("\n");
  };
  var asks = function (el) {
    return el && el.matches(".tabbed-set") && el.querySelector(":scope > .tabbed-content .attn-guess");
  };
  // An emptied tab set stays in the page, hidden: Material's tabs keep track of every set.
  document.querySelectorAll("article .tabbed-set").forEach(function (first) {
    if (first.hidden || !asks(first)) return; // merged into one before it
    var blocks = first.querySelectorAll(":scope > .tabbed-content > .tabbed-block");
    var next = first.nextElementSibling;
    for (; asks(next) && labels(next) === labels(first); next = next.nextElementSibling) {
      next.querySelectorAll(":scope > .tabbed-content > .tabbed-block").forEach(function (block, i) {
        while (block.firstChild) blocks[i].appendChild(block.firstChild);
      });
      next.hidden = true;
    }
  });
}
