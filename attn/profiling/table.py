"""The profiler's own table (table.txt) and its top rows as Markdown (table.md)."""

from __future__ import annotations

import torch

ROWS = 15


def sort_key(on_gpu: bool) -> str:
    return "device_time_total" if on_gpu else "cpu_time_total"


def profiler_table(prof: torch.profiler.profile, on_gpu: bool) -> str:
    """`key_averages().table()`, sorted by device time on GPU and CPU time on CPU."""
    return prof.key_averages().table(
        sort_by=sort_key(on_gpu), row_limit=ROWS, max_name_column_width=60
    )


def _ms(us: float) -> str:
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} us"


def markdown_table(prof: torch.profiler.profile, on_gpu: bool) -> str:
    """The same top rows as a Markdown table, for the docs."""
    averages = sorted(
        prof.key_averages(), key=lambda a: getattr(a, sort_key(on_gpu)), reverse=True
    )[:ROWS]
    header = ["Name", "Self CPU", "CPU total", "CPU avg"]
    if on_gpu:
        header += ["Self device", "Device total", "Device avg"]
    header.append("Calls")
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for a in averages:
        name = a.key.replace("|", "\\|")
        row = [f"`{name}`", _ms(a.self_cpu_time_total), _ms(a.cpu_time_total), _ms(a.cpu_time)]
        if on_gpu:
            row += [_ms(a.self_device_time_total), _ms(a.device_time_total), _ms(a.device_time)]
        row.append(str(a.count))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
