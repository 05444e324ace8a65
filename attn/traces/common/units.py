"""Times, sizes and counts as the site and the terminal print them: one format for each. And the
bytes of one element of each dtype a run records."""

from __future__ import annotations

# Bytes per element, by the dtype's name in torch (a summary's "dtype") and by the name the
# profiler gives it in an op's "Input type".
DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}
PROFILER_DTYPES = {"double": "float64", "float": "float32", "c10::BFloat16": "bfloat16",
                   "c10::Half": "float16"}  # fmt: skip
ELEMENT_BYTES = {name: DTYPE_BYTES[dtype] for name, dtype in PROFILER_DTYPES.items()}
# Every "Input type" a mask, a bias or an index is recorded with, too.
RECORDED_BYTES = ELEMENT_BYTES | {"bool": 1, "long int": 8, "int": 4, "unsigned char": 1,
                                  "signed char": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}  # fmt: skip


def time_text(us: float, digits: int = 2) -> str:
    """Microseconds as `12.3 µs` or, from a millisecond up, `4.56 ms`."""
    return f"{us / 1000:.{digits}f} ms" if us >= 1000 else f"{us:.1f} µs"


def bytes_text(n: float) -> str:
    """Bytes as `1.5 MiB`, `12 KiB` or `512 B`."""
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 2**10:.0f} KiB" if n >= 2**10 else f"{n:.0f} B"


def count_text(n: float) -> str:
    """A count per forward (a mean over ranges): `5`, or `2.33` when it is not whole."""
    return f"{n:g}" if float(n).is_integer() else f"{n:.2f}"
