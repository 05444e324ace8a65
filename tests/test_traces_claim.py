"""Claims as a whole: how a list of them is evaluated and combined, and every spec's claims on
fresh tiny runs and on the committed profiles."""

import json

import pytest
from committed import PROFILES

from attn import specs
from attn.traces.claims.claim import Claim, both, evaluate
from attn.traces.claims.trace_checks import Evidence
from attn.traces.read.trace import read_trace
from attn.traces.sets.analyze import summarize

# As HEAD holds them: a profile run here rewrites the work tree's set of this CPU model.
COMMITTED = PROFILES / "cpu-amd-epyc"
XEON = PROFILES / "cpu-intel-xeon-family-6-model-167"


def check(name: str, device_type: str, ev: Evidence) -> dict[str, dict]:
    """The variant's trace claims about a device type, evaluated on `ev`, by key."""
    results = evaluate(specs.spec(name).trace_claims, device_type, ev)
    return {r["key"]: r for r in results}


def at_scale(name: str) -> set[str]:
    return {c.key for c in specs.spec(name).trace_claims if c.at_scale}


def says(holds, observed: str):
    """A check that answers the same whatever it is shown."""
    return lambda ev: (holds, observed)


def test_evaluate_checks_only_the_claims_about_its_device_type():
    shown = []
    claims = [
        Claim("first", "cpu", "A first sentence.", lambda ev: (shown.append(ev) or True, "seen")),
        Claim("gpu", "cuda", "A GPU sentence.", says(False, "never asked")),
        Claim("second", "cpu", "A second sentence.", says(None, "cannot tell")),
    ]
    assert evaluate(claims, "cpu", "the evidence") == [
        {"key": "first", "text": "A first sentence.", "holds": True, "observed": "seen"},
        {"key": "second", "text": "A second sentence.", "holds": None, "observed": "cannot tell"},
    ]
    assert shown == ["the evidence"]  # each check is given the evidence itself
    assert evaluate(claims, "cuda", None)[0]["holds"] is False
    assert evaluate([], "cpu", None) == []


def test_both_fails_if_one_fails_and_cannot_tell_if_one_cannot():
    yes, no, unknown = says(True, "a"), says(False, "b"), says(None, "c")
    assert both(yes, says(True, "d"))(None) == (True, "a; d")
    assert both(yes, no, unknown)(None) == (False, "a; b; c")  # a failure outweighs a doubt
    assert both(yes, unknown)(None) == (None, "a; c")
    assert both(yes, says(True, "a"))(None) == (True, "a")  # the same words once


def test_a_claim_defaults_to_any_run_size():
    claim = Claim("key", "cpu", "A sentence.", says(True, "x"))
    assert claim.at_scale is False
    with pytest.raises(AttributeError):  # frozen: a spec's claims are data
        claim.text = "another"


def test_every_variant_has_claims_with_keys_unique_within_it():
    for spec in specs.SPECS:
        keys = [c.key for c in spec.claims]
        assert keys and len(keys) == len(set(keys)), spec.name
        assert all(c.device_type in ("cpu", "cuda") for c in spec.claims), spec.name


def test_every_cpu_claim_holds_on_a_fresh_tiny_run(cpu_evidence):
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(cpu_evidence)
    for name, ev in cpu_evidence.items():
        for key, result in check(name, "cpu", ev).items():
            assert result["observed"]
            if key == specs.COLD_FIRST_CALL.key:  # only an example's run on empty caches tells
                assert result["holds"] is None, (name, result)
                continue
            if key in at_scale(name):  # a tiny run times noise; tile buffers outweigh scores
                # a verdict, or "cannot tell" where the noisy steps' times allow either
                spread = "profiled steps allow" in result["observed"]
                assert result["holds"] is not None or spread, (name, result)
                continue
            assert result["holds"] is True, (name, result)


def test_claims_are_only_about_their_device_type():
    results = evaluate(specs.spec("naive").trace_claims, "cpu", Evidence({}, []))
    cpu_keys = {c.key for c in specs.spec("naive").trace_claims if c.device_type == "cpu"}
    assert {r["key"] for r in results} == cpu_keys
    assert check("sdpa_efficient", "cpu", Evidence({}, [])) == {}


@pytest.mark.parametrize("name", [s.name for s in specs.SPECS if any(c.at_scale for c in s.claims)])
def test_at_scale_claims_hold_on_the_committed_profile(name):
    """The committed runs (scores of 64 MiB): the clone well ahead of the scale step, the long
    gaps where score-sized tensors are freed, the fused ops' peak far under one score matrix."""
    # The first CPU set that measured it: a set may say it did not (a variant added since).
    found = [d / name for d in (COMMITTED, XEON) if (d / name / "trace.json.gz").is_file()]
    if not found:
        pytest.skip(f"no committed CPU trace of {name} in this checkout")
    trace = read_trace(found[0] / "trace.json.gz")
    stored = json.loads((found[0] / "summary.json").read_text())  # its shape, as recheck
    results = check(name, "cpu", Evidence(*summarize(trace, spec=specs.spec(name), base=stored)))
    found = [results[key] for key in at_scale(name) if key in results]
    assert found and all(r["holds"] is True for r in found), found


def test_committed_cpu_profiles_carry_claims_that_hold():
    folder = COMMITTED
    if not folder.is_dir():
        pytest.skip("no profiles/cpu-amd-epyc/ in this checkout")
    checked, summaries = {}, {}
    for path in sorted(folder.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if summary["available"]:
            checked[summary["variant"]] = summary["claims"]
            summaries[summary["variant"]] = summary
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(checked)
    for name, claims in checked.items():
        spec = specs.spec(name)  # a folder of ranks carries its rank claims, one of one trace
        kind = spec.rank_claims if (folder / name / "rank0").is_dir() else spec.trace_claims
        expected = [(c.key, c.text) for c in kind if c.device_type == "cpu"]
        assert [(c["key"], c["text"]) for c in claims] == expected, name
        # A set made before the cold run cannot tell its claim; every other claim holds.
        cold = "cold_first_calls_seconds" in summaries[name]
        judged = [c for c in claims if cold or c["key"] != specs.COLD_FIRST_CALL.key]
        assert all(c["holds"] is True and c["observed"] for c in judged), (name, claims)
