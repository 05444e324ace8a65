// Guess first: each question of a guess box is answered on the page (docs/hooks/guesses.py writes
// the question, the measured answer and what a miss means). Answering, or skipping, opens the
// answer and the evidence below, up to the next question. Nothing is sent or kept anywhere.
// Without JavaScript the form stays hidden and the reader opens the answer and evidence by hand.
document$.subscribe(function () {
  var boxes = Array.from(document.querySelectorAll(".attn-guess"));
  var group = function (box) { return box.closest(".tabbed-set") || box; };

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
    form.hidden = false;
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
      answer.open = true;
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
