"""What each JSON artifact of a profile set may hold, checked before anything of it reaches a page:
the schema beside the artifact contract (artifacts.py), which the docs hooks ask.

A set arrives as a pull request: its files are a stranger's data. Each schema below gives the type
and range of every field a page shows: numbers are finite numbers (never a bool, never a string),
names attn.profiling writes in a known shape (a dtype, a commit, a folder) match that shape, and
sentences and names other programs chose (a CPU model, a kernel, a reason) are strings, which the
pages show as text through attn.traces.common.markdown. Fields no page reads are left as they are: they
are published in the JSON files only. A field outside its schema raises Refused naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from attn.traces.common import artifacts

Schema = Callable[[object, str], None]  # checks a value found at a field (dotted path), or raises
MISSING = object()


class Refused(ValueError):
    """A field outside its schema; `field` is its dotted path ('load.cpu_count', 'rows[3].dtype')."""

    def __init__(self, field: str, value: object, wanted: str) -> None:
        self.field = field or "the file"
        said = "missing" if value is MISSING else f"{_short(repr(value))}, not {wanted}"
        super().__init__(f"{self.field} is {said}")


def _short(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _at(where: str, key: str | int) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key


# --- the vocabulary -------------------------------------------------------------------------------


def number(low: float = 0, integer: bool = False) -> Schema:
    """A finite number, not below `low` (an integer if asked): "nan µs" and "-5 ops" never show."""
    wanted = ("a whole number" if integer else "a number") + (
        f" >= {low}" if low > -math.inf else ""
    )

    def check(value, where):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < low
            or (integer and value != int(value))
        ):
            raise Refused(where, value, wanted)

    return check


def string(pattern: str | None = None, wanted: str = "a string", longest: int = 20_000) -> Schema:
    """A string; with a pattern, one that matches it whole (a name Markdown and HTML leave alone)."""
    shape = re.compile(pattern) if pattern else None

    def check(value, where):
        if not isinstance(value, str) or len(value) > longest:
            raise Refused(where, value, wanted)
        if shape is not None and not shape.fullmatch(value):
            raise Refused(where, value, wanted)

    return check


def boolean(value, where) -> None:
    if not isinstance(value, bool):
        raise Refused(where, value, "true or false")


def optional(schema: Schema) -> Schema:
    """The schema, or null."""
    return lambda value, where: None if value is None else schema(value, where)


def either(*schemas: Schema, wanted: str) -> Schema:
    def check(value, where):
        for schema in schemas:
            try:
                return schema(value, where)
            except Refused:
                pass
        raise Refused(where, value, wanted)

    return check


def items(schema: Schema, least: int = 0, most: int = 1_000_000) -> Schema:
    """A list whose every item fits the schema."""

    def check(value, where):
        if not isinstance(value, list) or not least <= len(value) <= most:
            raise Refused(where, value, "a list" + (f" of {least} to {most}" if least else ""))
        for i, item in enumerate(value):
            schema(item, _at(where, i))

    return check


def mapping(key: Schema, schema: Schema) -> Schema:
    """An object whose every key fits `key` and every value `schema`."""

    def check(value, where):
        if not isinstance(value, dict):
            raise Refused(where, value, "an object")
        for k, v in value.items():
            key(k, f"{where}'s key")
            schema(v, _at(where, k))

    return check


def fields(known: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    """An object: the required keys there, each known key that is there fitting its schema."""

    def check(value, where):
        if not isinstance(value, dict):
            raise Refused(where, value, "an object")
        for key in required:
            if key not in value:
                raise Refused(_at(where, key), MISSING, "")
        for key, schema in known.items():
            if key in value:
                schema(value[key], _at(where, key))

    return check


# --- names and numbers ----------------------------------------------------------------------------

SIZE = number()  # a time, a count, bytes: finite and not negative
COUNT = number(integer=True)
FINITE = number(low=-math.inf)
TEXT = string()  # shown as text; whatever it holds
SLUG = string(r"[a-z0-9][a-z0-9._-]*", "a folder's name (lowercase letters, digits, . _ -)", 200)
DTYPE = string(r"[a-z][a-z0-9_]*", "a dtype's name (float32, bfloat16, ...)", 40)
DEVICE = string(r"[a-z]+", "a device type (cpu, cuda)", 20)
VERSION = string(r"[0-9A-Za-z][0-9A-Za-z.+_-]*", "a version (2.13.0+cpu, 12.8)", 80)
COMMIT = string(r"[0-9a-f]{4,40}(-dirty)?", "a commit (hex, maybe -dirty)", 60)
DATE = string(r"\d{4}-\d{2}-\d{2}", "a date (YYYY-MM-DD)", 10)
DIRECTION = string(r"\w+|\?", "a memcpy direction (DtoD, HtoD, ...)", 40)
SHAPE = fields(
    {k: COUNT for k in ("batch", "heads", "seq_q", "seq_k", "head_dim")},
    required=("batch", "heads", "seq_q", "seq_k", "head_dim"),
)
CLAIM_FIELDS = {
    "key": optional(TEXT), "text": TEXT, "holds": optional(boolean), "observed": optional(TEXT),
}  # fmt: skip
MARK = fields({"left": SIZE, "right": SIZE}, required=("left", "right"))
LOAD = fields({
    "load_avg_before": optional(items(SIZE, most=3)), "load_avg_after": optional(items(SIZE, most=3)),
    "steal_share": optional(SIZE), "others_share": optional(SIZE), "cpu_count": optional(COUNT),
    "busy": optional(boolean),
})  # fmt: skip

# --- the artifacts --------------------------------------------------------------------------------

ENVIRONMENT = fields({
    "hardware": optional(SLUG), "device_name": optional(TEXT), "device_type": optional(DEVICE),
    "cpu_model": optional(TEXT), "threads": optional(COUNT), "cpu_count": optional(COUNT),
    "cuda_version": optional(VERSION), "torch_version": optional(VERSION),
    "cudnn_version": optional(either(COUNT, VERSION, wanted="a version")),
    "date": optional(DATE), "git_commit": optional(COMMIT), "load": optional(LOAD),
})  # fmt: skip

INDEX = fields(
    {
        "hardware": optional(SLUG), "device_name": optional(TEXT), "device_type": optional(DEVICE),
        "one_shape": optional(boolean), "overview": optional(boolean), "timing": optional(boolean),
        "claims": optional(boolean),
        "variants": fields({}),  # each entry's name and files: profile_sets._check_variant
        "figures": items(string("|".join(artifacts.FIGURES), "one of " + ", ".join(artifacts.FIGURES))),
        "diffs": items(string(r"[a-z0-9_]+__[a-z0-9_]+\.json", "a diff's file (a__b.json)", 200)),
    },
    required=("variants",),
)  # fmt: skip

SET_CLAIMS = fields(  # claims.json: the figure and timing claims' verdicts (set_claims.py)
    {
        "device_type": DEVICE,
        "variants": mapping(SLUG, mapping(TEXT, fields(
            {**CLAIM_FIELDS, "figure": TEXT}, required=("text", "holds", "observed")))),
        "not_measured": mapping(SLUG, items(TEXT)),
    },
    required=("variants",),
)  # fmt: skip

UNAVAILABLE = fields({"variant": SLUG, "available": boolean, "reason": optional(TEXT)})
PER_PASS = {  # what a forward (or, with its names, a backward) counts
    "cpu_time_us": SIZE, "device_time_us": optional(SIZE), "peak_memory_bytes": optional(SIZE),
    "memset_per_forward": optional(SIZE), "kernels_per_forward": optional(SIZE),
    "memcpy_per_forward": optional(mapping(DIRECTION, SIZE)), "kernels": optional(items(TEXT)),
}  # fmt: skip
BACKWARD = fields({
    **{k.replace("forward", "backward"): v for k, v in PER_PASS.items()},
    "ops_per_backward": optional(SIZE), "saved_for_backward_bytes": optional(SIZE),
    "peak_memory_step_bytes": optional(SIZE),
})  # fmt: skip
RANK = fields(  # one rank's row in a summary across ranks (attn.traces.ranks.folder)
    {
        "rank": COUNT, "compute_us_per_range": items(SIZE, least=1), "communication_us": SIZE,
        "recv_wait_us": SIZE, "sends_per_range": SIZE, "blocks": optional(SIZE),
        "hidden_share": optional(SIZE), "bytes_per_send": optional(items(SIZE)),
    },
    required=("rank", "compute_us_per_range", "communication_us", "recv_wait_us",
              "sends_per_range"),
)  # fmt: skip
IMBALANCE = fields(
    {"value": SIZE, "low": SIZE, "high": SIZE, "ranges": COUNT, "straggler": COUNT},
    required=("value", "low", "high", "ranges", "straggler"),
)
FIRST_CALLS = fields({"first": SIZE, "second": optional(SIZE)}, required=("first",))  # seconds
FIRST_CALLS_AFTER = fields(  # on the caches the run's earlier compiles left (attn.profiling.run)
    {"variants": items(SLUG, least=1), "cold_start_variant": optional(SLUG),
     "cold_start_seconds": optional(SIZE)},
    required=("variants",),
)  # fmt: skip
SUMMARY = fields(
    {
        "ranks": optional(items(RANK, least=1)), "imbalance": optional(IMBALANCE),
        **PER_PASS, "variant": SLUG, "available": boolean, "hardware": optional(SLUG),
        "device_name": optional(TEXT), "device_type": optional(DEVICE),
        "torch_version": optional(VERSION), "dtype": optional(DTYPE), "shape": SHAPE,
        "is_causal": optional(boolean), "ops_per_forward": SIZE,
        "kernels_not_listed": optional(COUNT), "ops": optional(items(TEXT)),
        "claims": optional(items(fields(CLAIM_FIELDS, ("text",)))),
        "viewer": optional(fields({"selected": optional(TEXT), "mark": optional(MARK),
                                   "missing": optional(TEXT)})),
        "backward": optional(BACKWARD), "first_calls_seconds": optional(FIRST_CALLS),
        "cold_first_calls_seconds": optional(FIRST_CALLS),
        "first_calls_after": optional(FIRST_CALLS_AFTER),
    },
    required=("cpu_time_us", "ops_per_forward", "shape"),
)  # fmt: skip

TIMED = {"median_us": SIZE, "low_us": SIZE, "high_us": SIZE, "repeats": optional(COUNT)}
TIMING = fields(
    {
        "rows": items(fields({
            **TIMED, "variant": TEXT, "what": optional(TEXT), "dtype": optional(DTYPE),
            "shape": optional(SHAPE), "is_causal": optional(boolean), "calls": optional(COUNT),
        })),
        "score_clone": optional(fields({**TIMED, "bytes": SIZE})),
        "load": optional(LOAD), "threads": optional(COUNT), "interval": optional(TEXT),
    },
    required=("rows",),
)  # fmt: skip

ROW_NUMBERS = (  # the numbers a figure's rows may carry; a page shows some, its claims read others
    "time_us", "low_us", "high_us", "tflops", "matmul_tflops", "ceiling_share", "ratio_to_flash",
    "ratio_low", "ratio_high", "peak_memory_bytes", "saved_for_backward_bytes",
    "peak_memory_step_bytes", "gb_per_s", "gflop_per_s", "bandwidth_ratio", "overhead_share",
    "overhead_us", "bytes", "kv_bytes", "flops", "intensity", "compute_ratio", "ratio_to_copy",
    "peak_tflops", "peak_share", "mm_tflops", "mm_peak_share",
)  # fmt: skip
NAME = string(r"[A-Za-z0-9][A-Za-z0-9_]*", "a name (fp32_fma, amx, AVX512, ...)", 40)
PEAKS = fields({  # the peaks a benchmark measured (attn.profiling.peaks)
    "fp32_fma_tflops": optional(SIZE), "fp32_isa": optional(NAME), "bf16_tflops": optional(SIZE),
    "bf16_path": optional(NAME), "amx_tflops": optional(SIZE), "avx512_bf16_tflops": optional(SIZE),
    "triad_gbs": optional(SIZE), "threads": optional(COUNT),
})  # fmt: skip
ROW_COUNTS = ("batch", "heads", "kv_heads", "seq", "head_dim", "cache_len", "repeats", "calls",
              "threads")  # fmt: skip
ROW = {
    **{k: optional(SIZE) for k in ROW_NUMBERS}, **{k: optional(COUNT) for k in ROW_COUNTS},
    "variant": TEXT, "dtype": optional(DTYPE), "is_causal": optional(boolean),
    "cpu_capability": optional(TEXT), "impl": TEXT, "name": TEXT,
    "kind": string(r"[a-z_]+", "a row's kind (ceiling, probe, step)", 40),
    "peaks": optional(PEAKS), "peak": optional(NAME), "path": optional(NAME),
}  # fmt: skip
BACKEND = string(r"sdpa_[a-z]+", "an SDPA implementation's name (sdpa_ and its backend)", 40)
DISPATCH = {  # one case of the dispatch sweep (attn.profiling.dispatch)
    "dtype": DTYPE, "head_dim": COUNT, "batch": optional(COUNT), "heads": optional(COUNT),
    "seq": optional(COUNT), "inputs": TEXT, "ops": items(TEXT), "backend": optional(BACKEND),
    "error": optional(TEXT),
    "refused": mapping(string(r"[a-z]+", "a backend (math, flash, ...)", 40), optional(items(TEXT))),
}  # fmt: skip
FIGURES = {
    "benchmark": items(fields(ROW, ("variant", "seq", "head_dim", "is_causal", "time_us"))),
    "decoding": items(fields(ROW, ("kind",))),
    "scaling": items(fields(ROW, ("variant", "seq"))),
    "training": items(fields(ROW, ("variant", "seq"))),
    "dispatch": items(
        fields(DISPATCH, ("dtype", "head_dim", "inputs", "ops", "backend", "refused"))
    ),
    "overhead": items(
        fields(  # rows that join a set made earlier: each says where it was made
            {
                **ROW,
                "cpu_model": TEXT,
                "date": TEXT,
                "torch_version": TEXT,
                "git_commit": optional(TEXT),
                "page_faults": optional(SIZE),
            },
            (
                "kind",
                "name",
                "variant",
                "batch",
                "heads",
                "seq",
                "dtype",
                "time_us",
                "low_us",
                "high_us",
                "cpu_model",
            ),  # fmt: skip
        )
    ),
}

REPOSITORY = string(r"https://github\.com/[\w.-]+/[\w.-]+", "a GitHub repository's address", 200)
REPO_PATH = string(
    r"(?!.*(?:^|/)\.\.?(?:/|$))[\w.-]+(?:/[\w.-]+)*", "a path in the repository", 500
)
PAGE = string(r"[\w-]+(?:/[\w-]+)*\.(?:md|ipynb)", "a page of the site (sdpa.md)", 200)
CALL = fields(
    {
        "implementation": TEXT, "compiled": boolean, "where": TEXT, "pass": TEXT,
        "shapes": optional(TEXT), "calls": SIZE, "kernels_per_call": optional(SIZE),
        "device_time_us_per_call": optional(SIZE),
        "device_time_us_range": optional(items(SIZE, least=2, most=2)),
        "share_of_device_time": optional(SIZE), "kernels": items(TEXT),
    },
    required=("implementation", "compiled", "where", "pass", "calls", "kernels_per_call",
              "device_time_us_per_call"),
)  # fmt: skip
DIAGNOSIS = fields(
    {
        "folder": SLUG, "chapter": PAGE,
        "source": fields(
            {"repository": REPOSITORY, "path": REPO_PATH, "commit": string(
                r"[0-9a-f]{7,40}", "a commit (hex)", 40), "license": TEXT, "GPU": TEXT,
             "torch": TEXT},
            required=("repository", "path", "commit", "license", "GPU", "torch"),
        ),
        "attention": items(CALL),
        "attention_share_of_device_time": optional(SIZE),
        "findings": items(fields(
            {"kind": TEXT, "count": SIZE, "chapter": PAGE, "advice": TEXT},
            required=("kind", "count", "chapter", "advice"),
        )),
        "not_checked": items(fields({"kind": TEXT, "why": TEXT}, required=("kind", "why"))),
        "lint": items(TEXT),
        "claims": items(fields(CLAIM_FIELDS, ("text", "holds"))),
        "screenshot": fields(
            {"where": TEXT, "select": TEXT, "band": TEXT, "from_us": FINITE, "to_us": FINITE},
            required=("where", "select"),
        ),
        "viewer": optional(fields({"mark": optional(MARK)})),
    },
    required=("source", "attention", "findings", "not_checked", "claims"),
)  # fmt: skip
