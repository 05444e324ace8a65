"""The questions of the guess-first boxes, and their answers read from a set's summaries.

A question asks for a count the trace fixes (operators, score matrices held, bytes, whether a
variant runs at all, which backend ran), never a time: counts do not move with the machine's load.
Each kind knows how to phrase itself for its variants, how to read the measured answer from their
summary.json (or, for a figure's question, from the set's rows of that figure), and what a guess
below or above it means. Reads artifacts only; no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from attn.traces.claims.dispatch_tables import cases_text, short
from attn.traces.common import markdown as md
from attn.traces.common.units import DTYPE_BYTES

MIB = 1 << 20


class Answer(NamedTuple):
    """What a set measured: the value a guess is compared with, and how the page says it."""

    value: float | str  # a number, or the right choice
    text: str  # the measured answer in words (HTML-safe: names come from specs, numbers from JSON)


class Question(NamedTuple):
    """A kind of question: how many variants it names, its wording, its answer, what a miss means."""

    variants: int
    ask: str  # formatted with a, b: the variants' names
    choices: tuple[str, ...]  # empty: a number; else the choices ("{a}", "{b}" are the variants)
    tolerance: float  # a number within this share of the answer counts as right
    under: str  # a guess below the answer (a choice: a wrong one) means this
    over: str
    answer: Callable[[list[dict]], Answer | None]  # from the summaries; None: they cannot say
    figure: str | None = None  # answered from this figure's rows (<figure>.json), not summaries


def _score_matrix_bytes(s: dict) -> int | None:
    shape, size = s.get("shape") or {}, DTYPE_BYTES.get(s.get("dtype"))
    dims = [shape.get(k) for k in ("batch", "heads", "seq_q", "seq_k")]
    if size is None or not all(isinstance(d, int) and d > 0 for d in dims):
        return None
    return size * dims[0] * dims[1] * dims[2] * dims[3]


def _ran(summaries: list[dict]) -> bool:
    return all(s and s.get("available") for s in summaries)


def _score_matrices(summaries: list[dict]) -> Answer | None:
    s = summaries[0]
    one, peak = _score_matrix_bytes(s), s.get("peak_memory_bytes") if _ran(summaries) else None
    if not one or not peak:
        return None
    n = peak / one
    return Answer(
        round(n, 2),
        f"{n:.2f} score matrices: a peak of {peak / MIB:.1f} MiB, one is {one / MIB:g} MiB",
    )


def _top_ops(summaries: list[dict]) -> Answer | None:
    ops = summaries[0].get("ops") if _ran(summaries) else None
    if ops is None:
        return None
    names = ", ".join(f"<code>{md.html(op)}</code>" for op in ops)
    return Answer(len(ops), f"{len(ops)} operator{'s' * (len(ops) != 1)}: {names}")


def _aten_ops(summaries: list[dict]) -> Answer | None:
    n = summaries[0].get("ops_per_forward") if _ran(summaries) else None
    return None if n is None else Answer(n, f"{n:g} ATen ops per forward, at every level")


def _bytes(key: str, what: str):
    def read(summaries: list[dict]) -> Answer | None:
        s = summaries[0] if _ran(summaries) else {}
        n = (s.get("backward") or {}).get(key) if key != "peak_memory_bytes" else s.get(key)
        if not n:
            return None
        return Answer(round(n / MIB, 1), f"{n / MIB:.1f} MiB {what}")

    return read


def _runs_here(summaries: list[dict]) -> Answer | None:
    s = summaries[0]
    if s.get("available"):
        return Answer("yes", "yes: it ran on this set")
    reason = (s.get("reason") or "no reason was recorded").strip().rstrip(".")
    return Answer("no", f"no: {md.html(reason)}")


def _fewer_ops(summaries: list[dict]) -> Answer | None:
    if not _ran(summaries) or any(s.get("ops_per_forward") is None for s in summaries):
        return None
    (a, na), (b, nb) = ((s["variant"], s["ops_per_forward"]) for s in summaries)
    if na == nb:
        return Answer("same", f"the same: {na:g} ATen ops each")
    counts = f"<code>{a}</code> {na:g}, <code>{b}</code> {nb:g} ATen ops per forward"
    return Answer(a if na < nb else b, f"<code>{a if na < nb else b}</code>: {counts}")


def _ranks(summaries: list[dict]) -> list[dict] | None:
    ranks = summaries[0].get("ranks") if _ran(summaries) else None
    return ranks if isinstance(ranks, list) and ranks else None


def _busiest_rank(summaries: list[dict]) -> Answer | None:
    ranks = _ranks(summaries)
    if not ranks or any(r.get("blocks") is None for r in ranks):
        return None
    blocks = [r["blocks"] for r in ranks]
    counts = ", ".join(f"rank {r['rank']} {r['blocks']:g}" for r in ranks)
    if len(set(blocks)) == 1:
        return Answer("every rank the same", f"every rank the same: {counts} blocks per forward")
    most = max(blocks)
    which = "the last rank" if blocks[-1] == most else "the first rank" if blocks[0] == most else ""
    return Answer(
        which or "another rank", f"{which or 'a rank in between'}: {counts} blocks per forward"
    )


def _rank0_blocks(summaries: list[dict]) -> Answer | None:
    ranks = _ranks(summaries)
    n = ranks[0].get("blocks") if ranks else None
    return None if n is None else Answer(n, f"{n:g} block{'s' * (n != 1)} per forward on rank 0")


def _sends(summaries: list[dict]) -> Answer | None:
    ranks = _ranks(summaries)
    sends = {r.get("sends_per_range") for r in ranks} if ranks else {None}
    if len(sends) != 1 or None in sends:
        return None
    n = sends.pop()
    return Answer(
        n, f"{n:g} send{'s' * (n != 1)} per forward on every one of the {len(ranks)} ranks"
    )


def _send_mib(summaries: list[dict]) -> Answer | None:
    ranks = _ranks(summaries)
    sizes = {b for r in ranks for b in r.get("bytes_per_send") or []} if ranks else set()
    if len(sizes) != 1:
        return None
    n = sizes.pop()
    return Answer(round(n / MIB, 2), f"{n / MIB:g} MiB ({n:,} bytes) in every send")


HELD_LESS = (
    "it holds less than you counted: something you expected to be stored is a view, is computed "
    "a tile at a time, or was fused away"
)
HELD_MORE = (
    "it holds more than you counted: look in the evidence for a copy or a buffer the code does "
    "not spell out"
)
QUESTIONS = {
    "score-matrices": Question(
        1,
        "At its peak, how many <code>[seq_q, seq_k]</code> score matrices does one forward of "
        "<code>{a}</code> hold in memory (the peak ÷ one score matrix)?",
        (),
        0.15,
        HELD_MORE,
        HELD_LESS,
        _score_matrices,
    ),
    "top-ops": Question(
        1,
        "How many operators does one <code>attn_fwd</code> of <code>{a}</code> call directly "
        "(the ops one level under the label)?",
        (),
        0,
        "more ran than you counted: a step you read as one call is two, or a view counts too",
        "fewer ran than you counted: several steps of the code are one op",
        _top_ops,
    ),
    "aten-ops": Question(
        1,
        "How many ATen ops does one forward of <code>{a}</code> run, counting the ops that ops "
        "call?",
        (),
        0.1,
        "more ran than you counted: ops call ops (dispatch, views, copies); the evidence's table "
        "lists them",
        "fewer ran than you counted: the work happens inside ops the profiler does not see as ATen",
        _aten_ops,
    ),
    "peak-mib": Question(
        1,
        "How many MiB does one forward of <code>{a}</code> hold at its peak?",
        (),
        0.15,
        HELD_MORE,
        HELD_LESS,
        _bytes("peak_memory_bytes", "at the peak"),
    ),
    "saved-mib": Question(
        1,
        "How many MiB does autograd save from the forward of <code>{a}</code> for its backward?",
        (),
        0.15,
        "it keeps more than you counted: look in the evidence for what the backward needs besides "
        "q, k and v",
        "it keeps less than you counted: something you expected to be saved is recomputed",
        _bytes("saved_for_backward_bytes", "saved for the backward"),
    ),
    "step-peak-mib": Question(
        1,
        "How many MiB does one training step of <code>{a}</code> hold at its peak, from the start "
        "of the forward to the end of the backward?",
        (),
        0.15,
        "it holds more than you counted: the backward makes tensors of its own, gradients and what "
        "it recomputes",
        "it holds less than you counted: something you expected the backward to hold whole is "
        "made a tile at a time",
        _bytes("peak_memory_step_bytes", "at the step's peak"),
    ),
    "runs-here": Question(
        1,
        "Does <code>{a}</code> run on this set's hardware?",
        ("yes", "no"),
        0,
        "not what ran: the evidence says why",
        "not what ran: the evidence says why",
        _runs_here,
    ),
    "fewer-ops": Question(
        2,
        "Which runs fewer ATen ops per forward: <code>{a}</code> or <code>{b}</code>?",
        ("{a}", "{b}", "same"),
        0,
        "not what the trace counts: the evidence's tables list every op each one ran",
        "not what the trace counts: the evidence's tables list every op each one ran",
        _fewer_ops,
    ),
    "busiest-rank": Question(
        1,
        "With <code>{a}</code> and the causal mask, which rank computes the most K/V blocks per "
        "forward, and so finishes its compute last?",
        ("the first rank", "the last rank", "every rank the same"),
        0,
        "not what the trace counts: the evidence's table lists each rank's blocks",
        "not what the trace counts: the evidence's table lists each rank's blocks",
        _busiest_rank,
    ),
    "rank0-blocks": Question(
        1,
        "How many K/V blocks does rank 0 of <code>{a}</code> compute per forward, its own "
        "included?",
        (),
        0,
        "it computes more than you counted: a block you took for the future is seen in part",
        "it computes fewer than you counted: a block wholly in its future is skipped",
        _rank0_blocks,
    ),
    "sends-per-rank": Question(
        1,
        "How many sends does each rank of <code>{a}</code> make per forward?",
        (),
        0,
        "more than you counted: a block travels on at every step but the last",
        "fewer than you counted: the last step's block is not passed on",
        _sends,
    ),
    "send-mib": Question(
        1,
        "How many MiB does each send of <code>{a}</code> carry?",
        (),
        0.05,
        "more than you counted: a send carries K and V, a whole shard of each",
        "less than you counted: a send carries one rank's shard, not the whole sequence",
        _send_mib,
    ),
}


def _unpinned(inputs: str):
    """The backend the dispatch rows of a kind of input ran, or "it depends" where cases differ."""

    def read(rows: list[dict]) -> Answer | None:
        by_backend: dict[str, list[dict]] = {}
        for r in rows:
            if r.get("inputs") == inputs:
                by_backend.setdefault(short(r.get("backend")), []).append(r)
        if not by_backend or "–" in by_backend:  # no case, or one that ran no backend op
            return None
        mine = [r for of in by_backend.values() for r in of]
        seen = "; ".join(
            f"<code>{md.html(b)}</code> in {md.html(cases_text(mine, of))}"
            for b, of in by_backend.items()
        )
        backends = list(by_backend)
        return Answer(backends[0] if len(backends) == 1 else DEPENDS, seen)

    return read


DEPENDS = "it depends on dtype or head_dim"
BACKEND_CHOICES = ("flash", "efficient", "cudnn", "math", DEPENDS)
UNPINNED_MISS = "not what ran here: the evidence says which op ran, and why the others refused"
FIGURE_QUESTIONS = {
    "unpinned-mask": Question(
        1,
        "With an explicit boolean padding mask and nothing pinned, which backend runs here?",
        BACKEND_CHOICES, 0, UNPINNED_MISS, UNPINNED_MISS, _unpinned("bool mask"), "dispatch",
    ),
    "unpinned-dropout": Question(
        1,
        "With <code>dropout_p=0.1</code> and nothing pinned, which backend runs here?",
        BACKEND_CHOICES, 0, UNPINNED_MISS, UNPINNED_MISS, _unpinned("dropout"), "dispatch",
    ),
}  # fmt: skip
QUESTIONS.update(FIGURE_QUESTIONS)

RIGHT = "right: the trace agrees with your reading of the code"


def form(question: Question, names: list[str], answer: Answer, key: str) -> str:
    """The question, a form to answer it (shown by guess.js; without JavaScript the reader opens
    the answer and the evidence by hand) and the measured answer, closed, as one HTML block."""
    a, b = (*names, "")[:2]
    ask = question.ask.format(a=a, b=b)
    if question.choices:
        choices = [c.format(a=a, b=b) for c in question.choices]
        field = " ".join(
            f'<label><input type="radio" name="{key}" value="{c}" required> '
            f"{f'<code>{c}</code>' if c in names else c}</label>"
            for c in choices
        )
    else:
        field = (
            '<label>Your guess <input type="number" step="any" min="0" inputmode="decimal" '
            "required></label>"
        )
    attrs = {
        "data-kind": "choice" if question.choices else "number",
        "data-answer": answer.value,
        "data-tolerance": question.tolerance,
        "data-right": RIGHT,
        "data-under": question.under,
        "data-over": question.over,
    }
    data = " ".join(f'{k}="{md.html(v)}"' for k, v in attrs.items())
    return (
        f'<div class="attn-guess" {data}>\n<p>{ask}</p>\n<form hidden>{field} '
        '<button type="submit" class="md-button md-button--primary">Check</button> '
        '<button type="button" class="md-button" data-skip>Skip, show me</button></form>\n'
        '<p class="attn-guess-result" role="status" hidden></p>\n'
        '<details class="attn-guess-answer"><summary>The measured answer</summary>'
        f"<p>{answer.text}</p></details>\n</div>"
    )
