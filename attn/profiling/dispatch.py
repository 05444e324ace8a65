"""Which SDPA backend runs when none is pinned, and torch's own reasons for refusing the others.

python -m attn.profiling.dispatch --out profiles [--device cuda]

For each dtype, head_dim and kind of input (no mask, is_causal, a boolean padding mask, an additive
float mask, dropout), one unpinned call runs under the profiler: its backend op (attn.traces.read.patterns
names them) says which backend ran. Then each backend is pinned with sdpa_kernel, and what torch
warns and raises when that backend cannot run is kept, machine-specific paths removed. The shapes are
small: dispatch depends on dtype, head_dim, masks and flags, not on the sequence length.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.patches import Rectangle
from torch.nn.attention import sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from attn.profiling import sweep as sweeps
from attn.profiling.environment import device_name, hardware_slug
from attn.profiling.quiet import without_profiler_chatter
from attn.sdpa import BACKENDS
from attn.traces.claims.dispatch_tables import INPUTS, backend_of, short
from attn.traces.common import artifacts
from attn.traces.common.atomic import RefusedOutput
from attn.traces.common.terminal import say
from attn.traces.figures.plot import figure, save
from attn.traces.read.patterns import SDPA_BACKEND_OP, SDPA_FRONT
from attn.traces.read.scrub import PATH_LIKE

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
HEAD_DIMS = (64, 72, 128, 320)  # two common, one odd, one past FlashAttention's 256 on a GPU
BATCH, HEADS, SEQ = 2, 2, 16
DROPOUT = 0.1  # what a module passes in training mode; in eval mode it passes 0
# Where torch says which of its source lines warned: a path of the machine that built it.
TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)")


def make_inputs(device: str, dtype: torch.dtype, head_dim: int, inputs: str) -> tuple:
    """q, k, v of [BATCH, HEADS, SEQ, head_dim] and the keyword arguments the kind of input adds."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, head_dim, generator=gen) for _ in range(3))
    q, k, v = (t.to(device, dtype) for t in (q, k, v))
    keep = torch.ones(BATCH, 1, 1, SEQ, dtype=torch.bool, device=device)
    keep[1, ..., SEQ // 2 :] = False  # a model's padding: the second sequence is half as long
    kwargs = {
        "none": {},
        "is_causal": {"is_causal": True},
        "bool mask": {"attn_mask": keep},  # True: attend
        "float mask": {"attn_mask": torch.zeros_like(keep, dtype=dtype).masked_fill(~keep, -1e4)},
        "dropout": {"dropout_p": DROPOUT},
    }[inputs]
    return q, k, v, kwargs


def sdpa_ops(q, k, v, kwargs: dict) -> list[str]:
    """The SDPA ops one unpinned call runs, in the order they start (its front op, its backend's)."""
    with without_profiler_chatter(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, **kwargs)
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    names = [e.name for e in events]
    return [n for n in names if n == SDPA_FRONT or re.match(SDPA_BACKEND_OP, n)]


def plain(message: str) -> str:
    """torch's message without the build machine's paths, on one line."""
    text = TRIGGERED.sub("", message)
    return " ".join(PATH_LIKE.sub("<path>", text).split())


def refusal(backend: str, q, k, v, kwargs: dict) -> list[str] | None:
    """None when the pinned backend runs these inputs; else what torch warned, then what it raised."""
    with warnings.catch_warnings(record=True) as caught, sdpa_kernel(BACKENDS[backend]):
        warnings.simplefilter("always")
        try:
            F.scaled_dot_product_attention(q, k, v, **kwargs)
            return None
        except RuntimeError as e:
            raised = plain(str(e))
    said = [plain(str(w.message)) for w in caught]
    return [*dict.fromkeys(m for m in said if m), raised]


def sweep(device: str) -> list[dict]:
    """A row per dtype, head_dim and kind of input: the ops the unpinned call ran, the backend they
    say (None, and torch's error, where it raised), and each pinned backend's refusal (None: it
    ran)."""
    rows = []
    for dtype_name, dtype in DTYPES.items():
        for head_dim in HEAD_DIMS:
            for inputs in INPUTS:
                q, k, v, kwargs = make_inputs(device, dtype, head_dim, inputs)
                try:
                    ops, error = sdpa_ops(q, k, v, kwargs), None
                except RuntimeError as e:  # no backend at all: said in the row, not a crash
                    ops, error = [], plain(str(e))
                rows.append({
                    "dtype": dtype_name, "head_dim": head_dim, "inputs": inputs,
                    "batch": BATCH, "heads": HEADS, "seq": SEQ,
                    "ops": ops, "backend": backend_of(ops), "error": error,
                    "refused": {b: refusal(b, q, k, v, kwargs) for b in BACKENDS},
                })  # fmt: skip
    return rows


COLOURS = {"flash": "#4c9f70", "efficient": "#4a78b5", "cudnn": "#8e63b5", "math": "#d08a3c"}


def plot(rows: list[dict], title: str, path: Path) -> None:
    """A grid: a row per kind of input and dtype, a column per head_dim, each cell the backend that
    ran, named and coloured (a case that ran no backend op: a grey dash)."""
    keys = list(dict.fromkeys((r["inputs"], r["dtype"]) for r in rows))
    dims = sorted({r["head_dim"] for r in rows})
    fig, ax = figure(0.6 + 0.24 * len(keys))
    for y, key in enumerate(keys):
        for x, dim in enumerate(dims):
            row = next(
                (r for r in rows if (r["inputs"], r["dtype"]) == key and r["head_dim"] == dim), None
            )
            name = short(row and row["backend"])
            ax.add_patch(Rectangle((x, y), 0.96, 0.9, color=COLOURS.get(name, "#cccccc")))
            ax.text(x + 0.48, y + 0.45, name, ha="center", va="center", color="white")
    ax.set_xlim(0, len(dims))
    ax.set_ylim(len(keys), 0)
    ax.set_xticks([x + 0.48 for x in range(len(dims))], [f"head_dim {d}" for d in dims])
    ax.set_yticks([y + 0.45 for y in range(len(keys))], [f"{i}, {d}" for i, d in keys])
    ax.tick_params(length=0)
    ax.xaxis.tick_top()
    for side in ax.spines.values():
        side.set_visible(False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def write(out_root, device: str, rows: list[dict]):
    """dispatch.json and dispatch.svg into `<out>/<hardware>/`, each replaced atomically."""
    title = f"The backend SDPA runs unpinned on {device_name(device)}"
    return sweeps.write(out_root, device, "dispatch", rows, plot, title)


def main(argv: list[str] | None = None) -> int:
    args = sweeps.parser("attn.profiling.dispatch", __doc__).parse_args(argv)
    folder = artifacts.hardware_dir(args.out, hardware_slug(args.device))
    try:  # before the sweep: a folder at dispatch.svg is said now
        artifacts.check_figure(folder, "dispatch")
    except RefusedOutput as e:
        say(f"error: {e}", err=True)
        return 1
    rows = sweep(args.device)
    write(args.out, args.device, rows)
    print(f"dispatch: {len(rows)} rows written to {folder}/dispatch.json and dispatch.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
