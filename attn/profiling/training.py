"""A training step, what autograd saves for its backward, and how both grow with the sequence.

python -m attn.profiling.training --out profiles [--device cuda]

The sweep writes training.json and training.svg: for each variant of the "training" sweep and each
sequence length, the bytes autograd keeps for the backward and the peak of forward and backward.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import Progress
from torch.profiler import record_function

from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.environment import device_name
from attn.profiling.flags import wide_console
from attn.profiling.memory import peak_memory
from attn.traces.figures.plot import figure, plain_log_ticks, save
from attn.traces.read.trace import BACKWARD_RANGE, FORWARD_RANGE
from attn.variant import Variant

SEQS = {"cpu": (256, 512, 1024, 2048), "cuda": (1024, 2048, 4096, 8192)}


def training_step(variant: Variant, q, k, v, *, is_causal: bool, saved: list | None = None) -> None:
    """One step as the training example takes it: the forward in attn_fwd, a loss, the backward in
    attn_bwd; then the gradients are dropped, as an optimizer's zero_grad(set_to_none=True) would.
    Given a list, `saved` gets what autograd saved for the backward during the forward."""
    with record_function(FORWARD_RANGE), saved_for_backward(saved):
        out = variant.forward(q, k, v, is_causal=is_causal)
    loss = out.float().square().mean()
    with record_function(BACKWARD_RANGE):
        loss.backward()
    for t in (q, k, v):
        t.grad = None


@contextlib.contextmanager
def saved_for_backward(rows: list | None) -> Iterator[None]:
    """Append to `rows` what autograd saves for the backward inside the block: one {shape, dtype,
    bytes} per storage (a view shares its tensor's storage, so it is counted once). None: nothing."""
    if rows is None:
        yield
        return
    found: dict[int, dict] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        dtype = str(t.dtype).removeprefix("torch.")
        found.setdefault(
            storage.data_ptr(), {"shape": list(t.shape), "dtype": dtype, "bytes": storage.nbytes()}
        )
        return t  # kept as it is: the hook only looks

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield
    rows.extend(found.values())


def measure(variant: Variant, config: ProfileConfig) -> dict:
    """Bytes saved for the backward and the peak of one training step at this config."""
    q, k, v = (t.requires_grad_() for t in config.make_inputs())

    def step():
        training_step(variant, q, k, v, is_causal=config.is_causal)

    step()  # first calls build masks and caches that later steps reuse
    saved: list[dict] = []
    training_step(variant, q, k, v, is_causal=config.is_causal, saved=saved)
    return {
        "saved_for_backward_bytes": sum(row["bytes"] for row in saved),
        "peak_memory_step_bytes": peak_memory(step, q.device),
    }


def sweep(device: str, seqs: tuple[int, ...], console: Console | None = None) -> list[dict]:
    """Rows {variant, seq, shape, saved_for_backward_bytes, peak_memory_step_bytes} at the
    chapter's shape (the device's default config), causal, one sequence length at a time."""
    base = default_config(device)
    variants = sweeps.available(specs.in_sweep("training"), device, base.torch_dtype)
    rows = []
    with Progress(console=console or wide_console(), transient=True) as progress:
        task = progress.add_task("training", total=len(variants) * len(seqs))
        for name, variant in variants.items():
            for seq in seqs:
                progress.update(task, description=f"training {name} seq={seq}")
                config = dataclasses.replace(base, seq_q=seq, seq_k=seq)
                shape = {k: getattr(config, k) for k in ("batch", "heads", "head_dim", "dtype")}
                rows.append({"variant": name, "seq": seq, **shape, **measure(variant, config)})
                progress.advance(task)
            progress.console.print(f"training: {name}, {len(seqs)} lengths")
    return rows


def score_matrix_bytes(row: dict) -> int:
    """Bytes of one [batch, heads, seq, seq] score matrix in the row's dtype."""
    element = torch.finfo(getattr(torch, row["dtype"])).bits // 8
    return row["batch"] * row["heads"] * row["seq"] ** 2 * element


def plot(rows: list[dict], title: str, path: Path) -> None:
    """Saved bytes and the step's peak against sequence length, log-log, one line per variant, and
    one score matrix's bytes dashed for scale; two panels stacked at the page's width."""
    fig, axes = figure(6.0, nrows=2, sharex=True)
    keys = ("saved_for_backward_bytes", "peak_memory_step_bytes")
    labels = ("MiB saved for the backward", "peak MiB, forward and backward")
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        for ax, key in zip(axes, keys, strict=True):
            seqs = [r["seq"] for r in mine]
            ax.plot(seqs, [max(r[key], 1) / 2**20 for r in mine], marker="o", label=name)
    first = [r for r in rows if r["variant"] == rows[0]["variant"]] if rows else []
    for ax, label in zip(axes, labels, strict=True):
        ax.plot(
            [r["seq"] for r in first], [score_matrix_bytes(r) / 2**20 for r in first],
            linestyle="--", color="grey", linewidth=1, label="one score matrix",
        )  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.set_ylabel(label)
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    axes[-1].set_xlabel("sequence length")
    axes[0].legend(frameon=False, ncol=2)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write training.json and training.svg into `<out>/<hardware>/`, each replaced atomically."""
    shape = rows[0] if rows else {}
    title = (
        f"What a training step keeps, on {device_name(device)}\n(causal, batch "
        f"{shape.get('batch')}, {shape.get('heads')} heads, head_dim {shape.get('head_dim')}, "
        f"{shape.get('dtype')})"
    )
    return sweeps.write(out_root, device, "training", rows, plot, title)


def main(argv: list[str] | None = None) -> int:
    return sweeps.seq_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
