"""FlexAttention: the mask is a Python function, and torch.compile turns it into one attention kernel.

`flex_attention(q, k, v, score_mod=None, block_mask=None)` computes softmax(Q Kᵀ / sqrt(d)) V. A
`score_mod(score, b, h, q_idx, kv_idx)` may rewrite each score; a block mask says which scores
exist. The block mask comes from a `mask_mod(b, h, q_idx, kv_idx)` that is True where query q_idx
may see key kv_idx: `create_block_mask` evaluates it once per shape and records, for each tile of
128 x 128 scores, whether it is empty, full or partial. The compiled kernel skips empty tiles and
calls mask_mod only inside partial ones.

Eager, flex_attention runs (and warns) as ordinary ops that build every score; compiled, it is one
generated kernel. On CPU, torch 2.13 compiles the forward only (inference) and needs an x86 CPU
with AVX2.

Torch only: copy this file with attn/inductor.py into any project (keep that relative path).
"""

import sys

import torch
from torch import nn
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention

from attn.inductor import KERNEL_ROWS, inductor_problem, recompile_budget

WINDOW = 256  # keys a query sees in flex_sliding_window (itself and the 255 before it)


# --8<-- [start:mask_mods]
def causal(b, h, q_idx, kv_idx):
    """Query i sees key j when j <= i (SDPA's convention, top-left aligned)."""
    return q_idx >= kv_idx


def sliding_window(size: int = WINDOW):
    """Keys less than `size` positions from the query; with `causal`, i - size < j <= i."""

    def near(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx < size) & (kv_idx - q_idx < size)

    return near


def same_document(document_ids: torch.Tensor):
    """Packed sequences: query i sees key j only when both lie in one document."""

    def same(b, h, q_idx, kv_idx):
        return document_ids[q_idx] == document_ids[kv_idx]

    return same


# --8<-- [end:mask_mods]


def flex_problem(device: torch.device | str) -> str | None:
    """Why compiled FlexAttention cannot run on this device here, or None."""
    device = torch.device(device)
    if device.type == "cpu":
        # Inductor's CPU FlexAttention is a C++ template for x86 vector units (torch 2.13).
        capability = torch.backends.cpu.get_cpu_capability()
        if sys.platform == "darwin" or capability not in ("AVX2", "AVX512"):
            return (
                "compiled FlexAttention on CPU needs an x86 CPU with AVX2 (not macOS); "
                f"torch reports this CPU as {capability} on {sys.platform}"
            )
    return inductor_problem(device, "the FlexAttention variants")


def backward_problem(device: torch.device | str) -> str | None:
    """Why FlexAttention cannot compute gradients on this device, or None."""
    if torch.device(device).type == "cpu":  # flex_attention refuses CPU inputs that require grad
        return f"FlexAttention on CPU is inference only in torch {torch.__version__} (no backward)"
    return None


class FlexAttention(nn.Module):
    """flex_attention under torch.compile; `is_causal=True` also hides the future.

    `mask_mod` limits which keys a query sees besides causality (None: no other limit): with
    is_causal=False it alone decides, and with mask_mod=None as well every key is seen. Block masks
    are built once per (is_causal, seq_q, seq_k, device) and reused; flex_attention is compiled on
    the first call and kept.
    """

    dtypes = (torch.float16, torch.bfloat16, torch.float32)  # what the CPU kernel computes in

    def __init__(self, mask_mod=None) -> None:
        super().__init__()
        self.mask_mods = {
            True: causal if mask_mod is None else and_masks(causal, mask_mod),
            False: mask_mod,
        }
        self.block_masks = {}
        self.compiled = None  # torch.compile imports its compiler stack (seconds): first call

    def block_mask(self, is_causal: bool, seq_q: int, seq_k: int, device: torch.device):
        """The block mask for this shape (None: every key), built on first use."""
        mask_mod = self.mask_mods[is_causal]
        if mask_mod is None:
            return None
        key = (is_causal, seq_q, seq_k, str(device))
        if key not in self.block_masks:
            self.block_masks[key] = create_block_mask(
                mask_mod, B=None, H=None, Q_LEN=seq_q, KV_LEN=seq_k, device=device
            )
        return self.block_masks[key]

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        needs_grad = [n for n, t in zip("qkv", (q, k, v), strict=True) if t.requires_grad]
        if needs_grad and (why := backward_problem(q.device)):  # torch's refusal, said plainly
            raise ValueError(
                f"{why}: {', '.join(needs_grad)} requires grad; pass tensors that do not (.detach())"
            )
        if self.compiled is None:
            # One generated kernel; without torch.compile flex_attention runs unfused (and warns).
            self.compiled = torch.compile(
                flex_attention,
                fullgraph=True,
                # Static shapes: with dynamic ones, torch 2.13's CPU template fails to compile a
                # mask_mod that indexes a tensor (same_document), once a second shape was seen.
                dynamic=False,
                **recompile_budget(),  # its own budget, not shared with other compiled modules
                options=KERNEL_ROWS,
            )
        block_mask = self.block_mask(is_causal, q.shape[-2], k.shape[-2], q.device)
        return self.compiled(q, k, v, block_mask=block_mask)

    # --8<-- [end:forward]

    def why_unavailable(self, device: torch.device | str, dtype=None) -> str | None:
        """Why compiled FlexAttention cannot run on this device here, or None."""
        return flex_problem(device)
