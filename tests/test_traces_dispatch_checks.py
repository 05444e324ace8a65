"""attn.traces.claims.dispatch_checks, and the specs' dispatch claims, on hand-made dispatch rows."""

from __future__ import annotations

import pytest
from test_traces_benchmark_checks import benchmark_claims
from test_traces_dispatch_tables import cpu_rows, dispatch_row

from attn import specs
from attn.traces.claims.benchmark_checks import BenchmarkEvidence
from attn.traces.claims.claim import evaluate
from attn.traces.claims.dispatch_checks import ran, refused


def ev(rows: list[dict]) -> BenchmarkEvidence:
    return BenchmarkEvidence("sdpa_flash", rows)


def test_ran_holds_when_every_selected_case_ran_one_of_the_backends():
    rows = cpu_rows()
    holds, observed = ran(("sdpa_flash",), inputs=("none", "bool mask"))(ev(rows))
    assert holds is True and observed == "unpinned, ran flash in every case (8)"
    holds, observed = ran(("sdpa_flash",))(ev(rows))  # dropout ran math
    assert holds is False and "math in inputs dropout (4)" in observed
    assert ran(("sdpa_math",), inputs="dropout")(ev(rows))[0] is True


def test_refused_holds_when_the_pinned_backend_refused_every_selected_case():
    rows = cpu_rows()
    holds, observed = refused("flash", inputs="dropout")(ev(rows))
    assert holds is True
    assert observed.startswith("pinned flash refused 4 of 4 cases, saying: Flash attention")
    holds, observed = refused("flash", dtype="float32")(ev(rows))
    assert holds is False and observed.startswith("pinned flash refused 2 of 10 cases")
    assert refused("math")(ev(rows)) == (False, "pinned math refused 0 of 20 cases")


@pytest.mark.parametrize("check", [ran(("sdpa_flash",), head_dim=96), refused("flash", dtype="x")])
def test_no_selected_case_cannot_tell(check):
    holds, observed = check(ev(cpu_rows()))
    assert holds is None and observed.startswith("no case in dispatch.json with ")
    assert check(ev([]))[0] is None


def verdicts(rows: list[dict], device_type: str) -> dict[tuple[str, str], bool | None]:
    """Every dispatch claim about a device type, checked on these rows, by (variant, key)."""
    return {
        (s.name, r["key"]): r["holds"]
        for s in specs.SPECS
        for r in evaluate(
            [c for c in benchmark_claims(s) if c.figure == "dispatch"], device_type, ev(rows)
        )
    }


def test_the_cpu_claims_hold_on_a_cpu_set_as_torch_gives_it():
    assert verdicts(cpu_rows(), "cpu") == {
        ("sdpa_math", "unpinned-with-dropout"): True,
        ("sdpa_efficient", "refuses-every-case"): True,
        ("sdpa_flash", "unpinned-runs-flash"): True,
        ("sdpa_cudnn", "refuses-every-case"): True,
    }
    mask_to_math = [  # a torch that sent a masked call to math
        dispatch_row(r["dtype"], r["head_dim"], r["inputs"], "math")
        if r["inputs"] == "bool mask"
        else r
        for r in cpu_rows()
    ]
    assert verdicts(mask_to_math, "cpu")[("sdpa_flash", "unpinned-runs-flash")] is False
    assert set(verdicts([], "cpu").values()) == {None}


def test_the_gpu_claims_read_flashs_refusals():
    def gpu_row(dtype, dim, inputs):
        says = ["Flash attention does not support it."]
        no = dtype == "float32" or dim > 256 or inputs in ("bool mask", "float mask")
        row = dispatch_row(
            dtype, dim, inputs, "math" if no else "flash", flash=says if no else None
        )
        if no:  # the memory-efficient backend ran instead
            row["backend"] = "sdpa_efficient"
        return row

    rows = [gpu_row(d, h, i) for d in ("float32", "bfloat16") for h in (64, 320) for i in
            ("none", "bool mask", "float mask")]  # fmt: skip
    assert verdicts(rows, "cuda") == {
        ("sdpa_flash", "gpu-refuses-a-mask"): True,
        ("sdpa_flash", "gpu-refuses-float32"): True,
        ("sdpa_flash", "gpu-refuses-head-dim-over-256"): True,
    }
    # A CPU set's rows: flash takes masks, float32 and head_dim 320 there.
    assert set(verdicts(cpu_rows(), "cuda").values()) == {False}
