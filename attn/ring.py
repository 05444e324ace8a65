"""Ring attention: each rank keeps its queries while the K/V blocks travel around a ring of ranks.

Torch only: copy this file into any project (`from ring import RingAttention, shard, gather`).

The sequence is split over the ranks of a `torch.distributed` process group (context parallelism).
Each rank holds its shard of q, k and v, [batch, heads, seq_shard, head_dim]. At each of `world`
steps a rank attends its queries to the K/V block it holds while it already passes that block on to
the next rank and receives the previous rank's (`dist.batch_isend_irecv`): the transfer overlaps the
compute. After `world` steps every query has met every key. The partial results are merged by their
log-sum-exp, the way flash attention's online softmax merges the tiles of one row.

Two ways to cut the sequence (`shard` and `gather` do it for a full sequence):

- contiguous: rank r holds chunk r of `world` equal chunks. With a causal mask the blocks of later
  ranks lie entirely in the future and are skipped: rank 0 computes 1 block, rank world-1 computes
  `world`, and the last rank finishes last.
- zigzag: the sequence is cut into 2*world chunks and rank r holds chunks r and 2*world-1-r, one
  early and one late. Every rank then computes its own block under the causal mask and half a block
  at each other step: the same work on every rank.

Every rank passes `world - 1` blocks on (one message of K and V together per step), whatever the
sharding: the ring moves every block past every rank.

The same code runs on gloo (CPU tensors) and NCCL (CUDA tensors, after `torch.cuda.set_device`):
written for NCCL, not run on NCCL. Forward only: autograd does not flow through the sends.
Start the process group with a timeout (`init_process_group(..., timeout=timedelta(seconds=30))`)
so a lost rank ends the others instead of hanging them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

SHARDINGS = ("contiguous", "zigzag")
ALL = slice(None)  # every row (or column) of a block


# --- cutting a sequence into shards and putting it back -------------------------------------------


def chunk_count(world: int, sharding: str) -> int:
    """How many equal chunks the sequence is cut into."""
    return world if sharding == "contiguous" else 2 * world


def chunks_of(rank: int, world: int, sharding: str) -> tuple[int, ...]:
    """The chunks of the sequence a rank holds, in the order it holds them."""
    return (rank,) if sharding == "contiguous" else (rank, 2 * world - 1 - rank)


def shard(x: torch.Tensor, rank: int, world: int, sharding: str, dim: int = -2) -> torch.Tensor:
    """This rank's shard of a full sequence x (the sequence along `dim`, [b, h, seq, d] by default)."""
    if sharding not in SHARDINGS:
        raise ValueError(f"unknown sharding {sharding!r}; use one of {', '.join(SHARDINGS)}")
    length, n = x.shape[dim], chunk_count(world, sharding)
    if length % n:
        raise ValueError(
            f"{sharding} sharding over {world} ranks cuts the sequence into {n} equal chunks: "
            f"a length of {length} does not divide by {n}"
        )
    pieces = x.split(length // n, dim)
    return torch.cat([pieces[c] for c in chunks_of(rank, world, sharding)], dim)


def unshard(shards: Sequence[torch.Tensor], sharding: str, dim: int = -2) -> torch.Tensor:
    """The full sequence from every rank's shard (in rank order), each chunk back in its place."""
    world = len(shards)
    placed = {}
    for rank, part in enumerate(shards):
        ids = chunks_of(rank, world, sharding)
        placed.update(zip(ids, part.chunk(len(ids), dim), strict=True))
    return torch.cat([placed[c] for c in range(chunk_count(world, sharding))], dim)


def gather(x: torch.Tensor, sharding: str, group=None, dim: int = -2) -> torch.Tensor:
    """Every rank's shard, gathered onto every rank as the full sequence (every rank must call it)."""
    shards = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(shards, x.contiguous(), group=group)
    return unshard(shards, sharding, dim)


# --- one block, and merging two ---------------------------------------------------------------------


def block_attention(q, k, v, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q to one K/V block: the output and each query's log-sum-exp, in float32 or wider.

    `causal` masks the block as SDPA does (query i sees keys j <= i): for the diagonal block, where
    queries and keys are the same positions.
    """
    acc = torch.promote_types(q.dtype, torch.float32)  # bfloat16 and float16 accumulate in float32
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q.to(acc) * scale) @ k.to(acc).transpose(-2, -1)  # [b, h, sq, sk]
    if causal:  # in place: scores is ours; every row keeps its diagonal key, so no row is empty
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores.masked_fill_(future, float("-inf"))  # [b, h, sq, sk]
    row_max = scores.amax(dim=-1, keepdim=True)  # [b, h, sq, 1]: exp never overflows
    weights = torch.exp(scores - row_max)  # [b, h, sq, sk], unnormalised: each row's largest is 1
    row_sum = weights.sum(dim=-1, keepdim=True)  # [b, h, sq, 1]
    out = (weights @ v.to(acc)) / row_sum  # [b, h, sq, d]
    return out, row_max + torch.log(row_sum)  # and each row's log-sum-exp [b, h, sq, 1]


def merge(out, lse, block_out, block_lse) -> tuple[torch.Tensor, torch.Tensor]:
    """Two attentions of the same queries over disjoint keys, as one: each weighted by its exp(lse)."""
    new_lse = torch.logaddexp(lse, block_lse)  # [b, h, sq, 1]: log(exp(lse) + exp(block_lse))
    out = out * torch.exp(lse - new_lse) + block_out * torch.exp(block_lse - new_lse)
    return out, new_lse  # [b, h, sq, d], [b, h, sq, 1]


def visible_part(rank: int, source: int, length: int, is_causal: bool, sharding: str):
    """Which of this rank's query rows see which key rows of the source rank's block, and whether
    under the causal mask: (rows, cols, causal), or None when the whole block is in the future.

    `length` is the shard's; a zigzag shard's halves are its two chunks.
    """
    if not is_causal:
        return ALL, ALL, False
    if source == rank:  # the diagonal block: the causal mask inside it
        return ALL, ALL, True
    if sharding == "contiguous":  # an earlier rank's chunk is all past, a later one's all future
        return (ALL, ALL, False) if source < rank else None
    # zigzag: this rank holds chunks (rank, 2w-1-rank), the source (source, 2w-1-source)
    early, late = slice(0, length // 2), slice(length // 2, None)
    if source < rank:  # both our chunks see the source's early chunk, neither its late one
        return ALL, early, False
    return late, ALL, False  # only our late chunk sees the source's chunks, and sees both


# --- every rank checks the others' inputs before any block moves -----------------------------------


def local_problem(q, k, v, sharding: str) -> str | None:
    """What is wrong with this rank's own inputs, in words, or None."""
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return "q, k and v must be tensors"
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if q.dim() != 4 or 0 in q.shape:
        return f"q must be a non-empty [batch, heads, seq, head_dim] tensor: {shapes}"
    if not (q.shape == k.shape == v.shape):
        return f"q, k and v shards must have one shape: {shapes}"
    if not (q.dtype == k.dtype == v.dtype) or not q.is_floating_point():
        return f"q, k and v must share one floating dtype: q {q.dtype}, k {k.dtype}, v {v.dtype}"
    if not (q.device == k.device == v.device):
        return f"q, k and v must be on one device: q {q.device}, k {k.device}, v {v.device}"
    if sharding == "zigzag" and q.shape[2] % 2:
        return f"a zigzag shard holds two equal chunks, so its length must be even: {q.shape[2]}"
    return None


def agree(q, k, v, is_causal: bool, sharding: str, group=None) -> None:
    """Raise the same ValueError on every rank unless every rank's inputs are fine and alike.

    A collective: each rank's description is gathered (`all_gather_object`: two small all_gathers
    in a trace) before any block moves. A rank that raised alone would leave the others waiting on
    it until the group's timeout.
    """
    mine = {
        "shape": tuple(getattr(q, "shape", ())),
        "dtype": str(getattr(q, "dtype", type(q).__name__)).removeprefix("torch."),
        "is_causal": bool(is_causal),
        "sharding": sharding,
        "problem": local_problem(q, k, v, sharding),
    }
    every = [None] * dist.get_world_size(group)
    with peers_lost("while the ranks compared their inputs"):
        dist.all_gather_object(every, mine, group=group)
    ranks_with = {}  # each problem, and the ranks that have it
    for r, d in enumerate(every):
        if d["problem"]:
            ranks_with.setdefault(d["problem"], []).append(str(r))
    problems = [
        f"rank{'s' * (len(rs) > 1)} {', '.join(rs)}: {problem}"
        for problem, rs in ranks_with.items()
    ]
    for field in ("shape", "dtype", "is_causal", "sharding"):
        if len({d[field] for d in every}) > 1:
            values = ", ".join(f"rank {r} {d[field]}" for r, d in enumerate(every))
            problems.append(f"{field} differs between ranks: {values}")
    if problems:
        raise ValueError("ring attention: " + "; ".join(problems))


# --- the ring -------------------------------------------------------------------------------------


@dataclass
class RingCounts:
    """What one forward did on this rank."""

    blocks: int = 0  # block_attention calls
    scores: int = 0  # query-key scores per head: rows x cols of each block, masked ones included
    sends: int = 0  # messages passed to the next rank (K and V of one block each)
    bytes_sent: int = 0


class RingAttention(nn.Module):
    """Attention over a sequence sharded across the ranks of a process group, K/V passed in a ring.

    `RingAttention("zigzag")(q, k, v)` takes this rank's shards [batch, heads, seq_shard, head_dim]
    (cut with `shard`) and returns this rank's shard of the output, in q's dtype. Every rank of the
    group must call it with the same shapes, dtype, sharding and is_causal. `counts` holds what the
    last forward did on this rank.
    """

    def __init__(self, sharding: str = "contiguous", group=None) -> None:
        super().__init__()
        if sharding not in SHARDINGS:
            raise ValueError(f"unknown sharding {sharding!r}; use one of {', '.join(SHARDINGS)}")
        self.sharding, self.group = sharding, group
        self.counts = RingCounts()

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        # Every rank raises the same ValueError here, or none does: no rank is left waiting.
        agree(q, k, v, is_causal, self.sharding, self.group)
        rank, world = dist.get_rank(self.group), dist.get_world_size(self.group)
        send_to, recv_from = neighbours(self.group)  # the ring: 0 -> 1 -> ... -> world-1 -> 0
        kv = torch.stack((k, v))  # [2, b, h, s, d]: K and V travel as one message
        incoming = torch.empty_like(kv)  # [2, b, h, s, d]: the next block lands here
        self.counts = RingCounts()
        out = lse = None
        for step in range(world):
            source = (rank - step) % world  # the rank whose K/V block kv holds now
            if step < world - 1:  # pass kv on, receive the next block, then compute: they overlap
                transfer = self.pass_on(kv, incoming, send_to, recv_from, step)
            part = visible_part(rank, source, q.shape[2], is_causal, self.sharding)
            if part is not None:  # else the whole block is in this rank's future: skip it
                rows, cols, causal = part
                k_block, v_block = kv[0, :, :, cols], kv[1, :, :, cols]  # [b, h, sk, d] each
                block_out, block_lse = block_attention(q[:, :, rows], k_block, v_block, causal)
                if out is None:  # step 0: our own block, every row
                    out, lse = block_out, block_lse  # [b, h, s, d], [b, h, s, 1]
                else:  # fold the block into the rows it reached: [b, h, rows, d], [b, h, rows, 1]
                    merged = merge(out[:, :, rows], lse[:, :, rows], block_out, block_lse)
                    out[:, :, rows], lse[:, :, rows] = merged
                self.counts.blocks += 1
                self.counts.scores += block_lse.shape[2] * k_block.shape[2]  # rows x cols
            if step < world - 1:
                transfer()  # wait until kv has left and the next block has arrived
                kv, incoming = incoming, kv  # [2, b, h, s, d]: the sent buffer takes the next
        return out.to(q.dtype)  # [b, h, s, d]

    # --8<-- [end:forward]

    def pass_on(self, kv, incoming, send_to: int, recv_from: int, step: int):
        """Start sending kv to the next rank and receiving the previous rank's block into incoming;
        returns the wait for both."""
        ops = [
            dist.P2POp(dist.isend, kv, send_to, self.group),
            dist.P2POp(dist.irecv, incoming, recv_from, self.group),
        ]
        doing = f"at step {step} (to rank {send_to}, from rank {recv_from})"
        with peers_lost(doing):
            requests = dist.batch_isend_irecv(ops)  # one request each, under way
        self.counts.sends += 1
        self.counts.bytes_sent += kv.nbytes

        def wait() -> None:
            with peers_lost(doing):
                for request in requests:
                    request.wait()

        return wait


def neighbours(group=None) -> tuple[int, int]:
    """The global ranks this rank sends to and receives from, around the ring of the group."""
    group = group or dist.group.WORLD
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    return (
        dist.get_global_rank(group, (rank + 1) % world),
        dist.get_global_rank(group, (rank - 1) % world),
    )


@contextmanager
def peers_lost(doing: str) -> Iterator[None]:
    """A peer that ended or stopped answering (gloo raises when its connection closes or the group's
    timeout passes) becomes one line that says what this rank was doing."""
    try:
        yield
    except RuntimeError as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RuntimeError(f"ring attention: the ring broke {doing}: {reason}") from None
