"""attn.traces.claims.dispatch_tables: the backend an op list says, and the dispatch rows as the page's tables."""

from __future__ import annotations

from attn.traces.claims.dispatch_tables import INPUTS, backend_of, cases_text, dispatch_table, short

FLASH_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"
MATH = "aten::_scaled_dot_product_attention_math"
NO_KERNEL = "No available kernel. Aborting execution."
NOT_VIABLE = "No viable backend for scaled_dot_product_attention was found."


def dispatch_row(dtype: str, head_dim: int, inputs: str, backend: str, **refused) -> dict:
    """One case as attn.profiling.dispatch writes it: the ops say `backend` (flash or math)."""
    op = {"flash": FLASH_CPU, "math": MATH}[backend]
    pinned = {"math": None, "efficient": [NOT_VIABLE], "flash": None, "cudnn": [NOT_VIABLE]}
    return {
        "dtype": dtype, "head_dim": head_dim, "inputs": inputs, "batch": 2, "heads": 2, "seq": 16,
        "ops": ["aten::scaled_dot_product_attention", op], "backend": f"sdpa_{backend}",
        "refused": {**pinned, **refused},
    }  # fmt: skip


def cpu_rows() -> list[dict]:
    """A CPU set's rows as torch 2.13 gives them: flash but with dropout, where math runs."""
    dropout = ["Flash attention kernel not used because:", "Both fused kernels do not support "
               "non-zero dropout.", NO_KERNEL]  # fmt: skip
    return [
        dispatch_row(dtype, dim, inputs, "math", flash=dropout)
        if inputs == "dropout"
        else dispatch_row(dtype, dim, inputs, "flash")
        for dtype in ("float32", "bfloat16")
        for dim in (64, 320)
        for inputs in INPUTS
    ]


def test_the_backend_is_read_from_the_first_backend_op():
    assert backend_of(["aten::scaled_dot_product_attention", FLASH_CPU]) == "sdpa_flash"
    assert backend_of(["aten::scaled_dot_product_attention", MATH]) == "sdpa_math"
    assert backend_of(["aten::_scaled_dot_product_efficient_attention"]) == "sdpa_efficient"
    assert backend_of(["aten::_scaled_dot_product_cudnn_attention"]) == "sdpa_cudnn"
    assert backend_of(["aten::scaled_dot_product_attention"]) is None  # the front op says nothing
    assert backend_of([]) is None
    assert short("sdpa_flash") == "flash" and short(None) == "–"


def test_cases_are_said_by_what_sets_them_apart():
    rows = cpu_rows()
    dropout = [r for r in rows if r["inputs"] == "dropout"]
    assert cases_text(rows, rows) == "every case (20)"
    assert cases_text(rows, dropout) == "inputs dropout (4)"
    one = [r for r in dropout if r["dtype"] == "float32" and r["head_dim"] == 64]
    assert cases_text(rows, one) == "inputs dropout; dtype float32; head_dim 64 (1)"


def test_the_table_shows_what_ran_and_torchs_words_once_per_refusal():
    table = dispatch_table(cpu_rows())
    assert "the backend that ran at head_dim 64, 320," in table
    assert "| inputs | float32 | bfloat16 |" in table
    assert "| dropout | math | math |" in table and "| bool mask | flash | flash |" in table
    assert f"`{FLASH_CPU}` (flash); `{MATH}` (math)" in table
    refusal = ("| flash | inputs dropout (4) | Flash attention kernel not used because:<br>Both "
               f"fused kernels do not support non-zero dropout.<br>{NO_KERNEL} |")  # fmt: skip
    assert refusal in table
    assert table.count(NOT_VIABLE) == 2  # efficient and cudnn: one row each, every case
    assert "| efficient | every case: float32 and bfloat16, 20 of 20 |" in table
    assert "Never refused here: math." in table


def test_a_cell_names_each_backend_with_its_head_dims_where_they_differ():
    rows = [dispatch_row("bfloat16", 320, "none", "math"), dispatch_row("bfloat16", 64, "none", "flash"),
            dispatch_row("bfloat16", 128, "none", "flash")]  # fmt: skip
    assert "| none | flash: 64, 128<br>math: 320 |" in dispatch_table(rows)
    assert dispatch_table([]) == "No case in this set's dispatch.json."


def test_an_unpinned_call_that_raised_is_a_dash_and_torchs_error():
    rows = cpu_rows()
    rows[0] = {**rows[0], "ops": [], "backend": None, "error": "No viable backend."}
    table = dispatch_table(rows)
    assert "| none | –: 64<br>flash: 320 | flash |" in table
    assert (
        "Unpinned, torch raised in inputs none; dtype float32; head_dim 64 (1): No viable" in table
    )


def test_a_refusal_is_text_not_markup():
    rows = [dispatch_row("float32", 64, "none", "flash", flash=["a <b>tag</b> | a pipe"])]
    table = dispatch_table(rows)
    assert "<b>" not in table and "&lt;b>" in table and "\\|" in table
