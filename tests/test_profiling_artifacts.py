"""The harness's artifact folder: files, contents, scrubbing, atomic replacement."""

import getpass
import gzip
import json
import socket
import tempfile
from pathlib import Path

import pytest

import attn
from attn.profiling import ProfileConfig, ProfilingError, profile_variant, write_environment
from attn.profiling import artifacts as artifacts_module
from attn.profiling.scrub import scrub_trace

TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)
FILES = {"summary.json", "trace.json.gz", "table.txt", "table.md", "timeline.svg"}
SUMMARY_FIELDS = {
    "variant",
    "hardware",
    "device_name",
    "torch_version",
    "dtype",
    "shape",
    "is_causal",
    "cpu_time_us",
    "device_time_us",
    "ops_per_forward",
    "kernels_per_forward",
    "kernels",
}


@pytest.fixture(scope="module")
def naive_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("profiles")
    return profile_variant(attn.get_variant("naive"), TINY, out)


def test_folder_has_every_artifact(naive_folder):
    assert naive_folder.name == "naive" and naive_folder.parent.name == "cpu"
    assert {p.name for p in naive_folder.iterdir()} == FILES


def test_summary_has_the_contract_fields(naive_folder):
    s = json.loads((naive_folder / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(s)
    assert s["available"] is True
    assert s["shape"] == {"batch": 1, "heads": 2, "seq_q": 64, "seq_k": 64, "head_dim": 32}
    assert s["device_time_us"] is None and s["kernels_per_forward"] is None
    assert s["cpu_time_us"] > 0 and s["ops_per_forward"] >= 10


def test_tables_are_the_profilers(naive_folder):
    text = (naive_folder / "table.txt").read_text()
    assert "Self CPU" in text and "attn_fwd" in text and "aten::masked_fill" in text
    md = (naive_folder / "table.md").read_text().splitlines()
    assert md[0].startswith("| Name |") and md[1].startswith("|---")
    assert any("`aten::clone`" in line for line in md)


def test_trace_is_loadable_and_scrubbed(naive_folder):
    raw = gzip.decompress((naive_folder / "trace.json.gz").read_bytes()).decode()
    trace = json.loads(raw)
    assert any(e.get("name") == "attn_fwd" for e in trace["traceEvents"])
    assert "host_name" not in raw
    assert trace["traceName"] == "trace.json"
    for secret in (str(Path.home()) + "/", tempfile.gettempdir() + "/", str(Path.cwd()) + "/"):
        assert secret not in raw
    assert f'"{socket.gethostname()}"' not in raw
    assert f"/{getpass.getuser()}/" not in raw


def test_scrub_removes_names_and_paths_but_keeps_words():
    trace = {
        "host_name": "box7",
        "traceName": "/home/ann/p/trace.json",
        "traceEvents": [
            {"name": "device on box7", "args": {"file": "/home/ann/p/a.py", "who": "ann"}}
        ],
    }
    clean = scrub_trace(trace, paths=["/home/ann"], names=["box7", "ann"])
    text = json.dumps(clean)
    assert "box7" not in text and "/home/ann" not in text and '"ann"' not in text
    assert "device on" in text and "host_name" not in clean
    assert clean["traceName"] == "trace.json"


def test_timeline_is_small_and_shows_the_copy(naive_folder):
    svg = (naive_folder / "timeline.svg").read_text()
    assert len(svg.encode()) < 300_000
    assert "naive on" in svg and "attn_fwd" in svg
    assert "clone" in svg  # the red bar's label: the hidden copy of the scores


def test_unavailable_variant_is_recorded_with_its_reason(tmp_path):
    folder = profile_variant(attn.get_variant("sdpa_cudnn"), TINY, tmp_path)
    s = json.loads((folder / "summary.json").read_text())
    assert s["available"] is False
    assert "cudnn" in s["reason"]
    assert [p.name for p in folder.iterdir()] == ["summary.json"]


def test_failure_leaves_previous_artifacts_intact(tmp_path, monkeypatch):
    folder = profile_variant(attn.get_variant("inplace"), TINY, tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(artifacts_module, "draw_timeline", broken)
    with pytest.raises(ProfilingError, match="inplace.*disk full"):
        profile_variant(attn.get_variant("inplace"), TINY, tmp_path)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in (tmp_path / "cpu").iterdir()] == ["inplace"]  # no scratch left behind


def test_first_failure_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(
        artifacts_module, "capture", lambda *a: (_ for _ in ()).throw(RuntimeError("boom"))
    )
    with pytest.raises(ProfilingError, match="naive"):
        profile_variant(attn.get_variant("naive"), TINY, tmp_path)
    assert list((tmp_path / "cpu").iterdir()) == []


def test_environment_names_the_machine(tmp_path):
    env = json.loads(write_environment(tmp_path, "cpu").read_text())
    assert env["hardware"] == "cpu" and env["device_type"] == "cpu"
    assert env["threads"] >= 1 and env["torch_version"]
    assert env["cuda_version"] is None
    assert len(env["date"]) == 10 and env["cpu_model"]


def test_unsupported_head_dim_is_recorded_as_unavailable(tmp_path):
    class OnlyHeadDim64(attn.Variant):
        name, title, head_dims = "only64", "Only head_dim 64", (64,)

        def _attention(self, q, k, v, *, is_causal):
            return attn.reference_attention(q, k, v, is_causal=is_causal).to(q.dtype)

    folder = profile_variant(OnlyHeadDim64(), TINY, tmp_path)  # TINY has head_dim 32
    s = json.loads((folder / "summary.json").read_text())
    assert s["available"] is False and "head_dim 64" in s["reason"] and "32" in s["reason"]
