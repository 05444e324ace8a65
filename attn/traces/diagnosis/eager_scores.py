"""Eager attention by data flow: which product made the softmax's input, which one read its output.

A softmax over the scores reads a tensor of shape [.., Sq, Sk]. Q.K^T is the product whose output
has that shape (the first in the scope since the last attention: position-bias products and adds
come after it), P.V the first product after the softmax that reads a tensor of that shape; what
else reads the score matrix between them (a scale, a mask, a bias, a cast) is an extra term. The
shapes are the ones the profiler records (record_shapes); a product's output is worked out from
its inputs. Without shapes, the products next to the softmax are taken, and the row says so.
"""

from __future__ import annotations

import math
import re

from attn.traces.read import patterns
from attn.traces.read.trace import Trace

BY_SHAPES, BY_POSITION = "data flow (recorded shapes)", "position (no shapes recorded)"


def tensor_dims(args: dict) -> list[list[int]]:
    """Each tensor input's recorded shape, lists of tensors (einsum's) spread out; [] where an
    input is not a tensor or is spelled oddly."""
    found = args.get("Input Dims")
    if not isinstance(found, list):
        return []
    dims = []
    for d in found:
        if isinstance(d, list) and d and all(isinstance(x, list) for x in d):
            dims += [x if all(type(n) is int for n in x) else [] for x in d]
        else:
            dims.append(d if isinstance(d, list) and all(type(n) is int for n in d) else [])
    return dims


def _broadcast(a: list[int], b: list[int]) -> list[int] | None:
    """The batch dims two products' operands broadcast to, or None where they cannot."""
    width = max(len(a), len(b))
    a, b = [1] * (width - len(a)) + a, [1] * (width - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        return None
    return [max(x, y) for x, y in zip(a, b, strict=True)]


def _einsum(args: dict, operands: list[list[int]]) -> list[int] | None:
    """einsum's output shape, from its equation (recorded among the concrete inputs)."""
    concrete = args.get("Concrete Inputs")
    equation = concrete[0] if isinstance(concrete, list) and concrete else None
    if not isinstance(equation, str) or "->" not in equation or "." in equation:
        return None
    inputs, output = equation.replace(" ", "").split("->")
    sizes = {}
    for letters, dims in zip(inputs.split(","), operands, strict=False):
        if len(letters) != len(dims):
            return None
        sizes.update(zip(letters, dims, strict=True))
    return [sizes[c] for c in output] if all(c in sizes for c in output) else None


def product_output(name: str, args: dict) -> list[int] | None:
    """The shape a product (matmul, bmm, mm, baddbmm, einsum) writes, from its recorded inputs."""
    dims = [d for d in tensor_dims(args) if d]
    if name == patterns.EINSUM:
        return _einsum(args, dims)
    if name == patterns.BADDBMM:
        dims = dims[1:]
    if len(dims) < 2 or len(dims[0]) < 2 or len(dims[1]) < 2 or dims[0][-1] != dims[1][-2]:
        return None
    batch = _broadcast(dims[0][:-2], dims[1][:-2])
    return None if batch is None else [*batch, dims[0][-2], dims[1][-1]]


def same_scores(dims: list[int] | None, scores: list[int]) -> bool:
    """A tensor of the score matrix's size and shape (its heads and batch may be folded)."""
    return bool(dims) and dims[-2:] == scores[-2:] and math.prod(dims) == math.prod(scores)


def score_view(dims: list[int] | None, scores: list[int]) -> bool:
    """The score matrix, or a view of it whose query axis is split ([b, h, q_h, q_w, k], where
    relative-position terms are added over the rows and the columns of an image's queries)."""
    if not dims or dims[-1] != scores[-1] or math.prod(dims) != math.prod(scores):
        return False
    return any(math.prod(dims[j:-1]) == scores[-2] for j in range(len(dims) - 1))


def softmax_input(trace: Trace, row: int) -> list[int] | None:
    """The shape of the tensor a softmax reads, where recorded ([.., Sq, Sk])."""
    dims = tensor_dims(trace.args[row])
    return dims[0] if dims and len(dims[0]) >= 2 else None


def pick_qk(trace: Trace, products: list[int], scores: list[int] | None) -> tuple[int | None, str]:
    """Q.K^T among the products since the last attention, in order: the first whose output is
    the score matrix; without shapes, the last (next to the softmax)."""
    outputs = [product_output(trace.name[p], trace.args[p]) for p in products]
    if scores is None or all(o is None for o in outputs):
        return (products[-1] if products else None), BY_POSITION
    return next((p for p, o in zip(products, outputs, strict=True) if same_scores(o, scores)),
                None), BY_SHAPES  # fmt: skip


def pick_pv(trace: Trace, products: list[int], scores: list[int] | None, by: str) -> int | None:
    """P.V among the products after the softmax: the first that reads the probabilities."""
    if by == BY_POSITION or scores is None:
        return products[0] if products else None
    return next(
        (p for p in products if any(same_scores(d, scores) for d in tensor_dims(trace.args[p]))),
        None,
    )


def extra_terms(trace: Trace, ops: list[int], scores: list[int] | None) -> list[int]:
    """The ops between Q.K^T and P.V that work on the score matrix (or, for a product, write
    one): a scale, a mask, a bias, a cast; views and ops that only take its dtype left out."""
    if scores is None:
        return []
    found = []
    for r in ops:
        name = trace.name[r]
        if name in patterns.BOOKKEEPING_OPS or re.search(patterns.NEW_FROM_OPTIONS, name):
            continue
        dims = tensor_dims(trace.args[r])
        if (dims and score_view(dims[0], scores)) or (
            name in patterns.MATMUL_OPS and same_scores(product_output(name, trace.args[r]), scores)
        ):
            found.append(r)
    return found
