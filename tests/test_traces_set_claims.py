"""attn.traces.sets.set_claims: every claim a page shows is stored in its set with its verdict, and
recheck --check fails when an edited row flips one."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from committed import CPU, PROFILES  # the committed sets, as HEAD holds them

from attn import specs
from attn.profiling import cli
from attn.traces.claims.benchmark_checks import BenchmarkClaim
from attn.traces.common import artifacts
from attn.traces.sets.set_claims import set_claims

ROOT = Path(__file__).resolve().parents[1]
CLAIM_MARKER = re.compile(r"^[ \t]*<!--\s*profile-claim:\s*(\S+)\s+(\S+)\s*-->", re.M)


def page_claims() -> list[tuple[str, str]]:
    """(variant, key) of every claim marker on the site's pages."""
    return [
        (m[1], m[2])
        for page in sorted((ROOT / "docs").glob("*.md"))
        for m in CLAIM_MARKER.finditer(page.read_text(encoding="utf-8"))
    ]


def _device_type(hw: Path) -> str:
    return json.loads((hw / artifacts.ENVIRONMENT).read_text())["device_type"]


def test_every_claim_on_a_page_is_stored_in_each_set_with_its_verdict_or_listed_as_not_measured():
    claims = page_claims()
    assert len(claims) > 20  # the pages' markers were found
    sets = artifacts.hardware_dirs(PROFILES)
    assert {hw.name for hw in sets} >= {CPU}
    for hw in sets:
        stored = json.loads((hw / artifacts.CLAIMS).read_text())
        for name, key in claims:
            claim = specs.claim(name, key)
            assert claim is not None, f"a page shows {name} {key}, which no spec has"
            if claim.device_type != _device_type(hw):
                continue  # about other hardware: the page says no set here has run it
            if isinstance(claim, BenchmarkClaim):
                found = stored["variants"].get(name, {}).get(key)
                waiting = key in stored["not_measured"].get(name, [])
                assert found is not None or waiting, f"{hw.name}/claims.json lacks {name} {key}"
                assert found is None or found["holds"] in (True, False, None) and found["observed"]
                continue
            ran = json.loads((hw / artifacts.MANIFEST).read_text())["variants"].get(name)
            if ran and ran["available"]:  # else the page says the set has not run it
                summary = artifacts.read_summary(hw / name / artifacts.SUMMARY)
                keys = [c.get("key") for c in summary.get("claims") or []]
                assert key in keys, f"{hw.name}/{name}/summary.json lacks its claim {key}"


def test_the_stored_verdicts_are_the_ones_the_rows_give():
    for hw in artifacts.hardware_dirs(PROFILES):
        stored = json.loads((hw / artifacts.CLAIMS).read_text())
        assert stored == set_claims(hw, specs), f"run: python -m attn.profiling recheck ({hw})"


def test_recheck_check_fails_when_an_edited_benchmark_row_flips_a_figure_claim(tmp_path, capsys):
    root = tmp_path / "profiles"
    shutil.copytree(PROFILES / CPU, root / CPU)
    claim = specs.claim("custom_cpu", "under-flash-causal-head-dim-64")
    before = json.loads((root / CPU / artifacts.CLAIMS).read_text())
    assert before["variants"]["custom_cpu"][claim.key]["holds"] is True
    assert cli.main(["recheck", str(root), "--check"]) == 0  # as committed: nothing differs
    path = root / CPU / "benchmark.json"
    rows = json.loads(path.read_text())
    for r in rows:  # one causal head_dim-64 shape now twice sdpa_flash's time
        if r["variant"] == "custom_cpu" and r.get("is_causal") and r["head_dim"] == 64:
            r.update(ratio_to_flash=2.0, ratio_low=1.9, ratio_high=2.1)
            break
    path.write_text(json.dumps(rows))
    capsys.readouterr()
    assert cli.main(["recheck", str(root), "--check"]) == 1
    out = " ".join(capsys.readouterr().err.split())  # as rich wrapped it
    assert f"differs: {root / CPU / artifacts.CLAIMS}" in out
    assert "'key': 'under-flash-causal-head-dim-64'" in out and "'holds': False" in out
    stored = json.loads((root / CPU / artifacts.CLAIMS).read_text())
    assert stored == before  # --check changes nothing
    assert cli.main(["recheck", str(root)]) == 0  # mended: the flipped verdict stored
    after = json.loads((root / CPU / artifacts.CLAIMS).read_text())
    assert after["variants"]["custom_cpu"][claim.key]["holds"] is False
    assert cli.main(["recheck", str(root), "--check"]) == 0
