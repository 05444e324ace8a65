"""The docs hook on a fake profiles tree: tab order, reasons, unknown names, files to copy."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[1]
KNOWN = ["naive", "inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash", "sdpa_cudnn"]


def load_hook():
    spec = importlib.util.spec_from_file_location("profiles_hook", ROOT / "docs/hooks/profiles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = load_hook()

TIMELINE = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'
TABLE = "| Name | Self CPU | CPU total | Calls |\n|---|---:|---:|---:|\n| `aten::bmm` | 1 ms | 1 ms | 6 |\n"


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, dict):
        path.write_text(json.dumps(data), encoding="utf-8")
    elif isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")


def write_fake_profiles(root: Path) -> Path:
    """A CPU set and an H200 set: naive everywhere, sdpa_cudnn unavailable on the CPU."""
    sets = {
        "cpu": {"device_name": "Fake CPU Model", "device_type": "cpu", "cuda_version": None},
        "nvidia-h200": {
            "device_name": "NVIDIA H200",
            "device_type": "cuda",
            "cuda_version": "12.8",
        },
    }
    for slug, extra in sets.items():
        env = {
            "hardware": slug,
            "cpu_model": "Fake CPU Model",
            "threads": 2,
            "torch_version": "2.13.0",
            "cudnn_version": None,
            "date": "2026-01-02",
            "git_commit": "abc123def456",
            **extra,
        }
        _write(root / slug / "environment.json", env)
        on_gpu = extra["device_type"] == "cuda"
        summary = {
            "available": True,
            "hardware": slug,
            "device_name": extra["device_name"],
            "device_type": extra["device_type"],
            "torch_version": "2.13.0",
            "dtype": "bfloat16" if on_gpu else "float32",
            "shape": {"batch": 1, "heads": 2, "seq_q": 64, "seq_k": 64, "head_dim": 16},
            "is_causal": True,
            "cpu_time_us": 1234.5,
            "device_time_us": 456.0 if on_gpu else None,
            "ops_per_forward": 45.0,
            "kernels_per_forward": 6 if on_gpu else None,
            "kernels": ["ampere_bf16_s16816gemm", "Memcpy DtoD (Device -> Device)"]
            if on_gpu
            else [],
            "claims": [
                {
                    "text": "Masking clones: aten::clone under aten::masked_fill.",
                    "holds": True,
                    "observed": "aten::clone found under aten::masked_fill",
                },
                {"text": "5 kernels per forward.", "holds": not on_gpu, "observed": "6 kernels"},
            ],
        }
        for variant in ("naive", "sdpa_cudnn"):
            folder = root / slug / variant
            if variant == "sdpa_cudnn" and not on_gpu:
                reason = "the cudnn backend has no CPU kernel for float32 in torch 2.13.0"
                _write(
                    folder / "summary.json",
                    {"variant": variant, "available": False, "reason": reason},
                )
                continue
            _write(folder / "summary.json", {**summary, "variant": variant})
            _write(folder / "table.md", TABLE)
            _write(folder / "table.txt", "the profiler's own table\n")
            _write(folder / "timeline.svg", TIMELINE)
            _write(folder / "trace.json.gz", gzip.compress(b'{"traceEvents": []}'))
    return root


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    return write_fake_profiles(tmp_path / "profiles")


def test_gpu_tabs_come_before_cpu_in_a_set_of_their_own(profiles):
    out = hook.render_variant("naive", profiles, "naive.md")
    assert out.index('"NVIDIA H200"') < out.index('"CPU"\n')
    # `===!` starts a new tab set, so prose tabs right before or after never merge into it
    assert out.startswith('===! "NVIDIA H200"') and '=== "CPU"' in out


def test_available_tab_shows_environment_table_timeline_and_trace(profiles):
    out = hook.render_variant("naive", profiles, "naive.md")
    cpu = out[out.index('"CPU"\n') :]
    assert "torch 2.13.0" in cpu and "2026-01-02" in cpu and "abc123def456" in cpu
    assert "    | `aten::bmm` | 1 ms | 1 ms | 6 |" in cpu  # the table, indented into the tab
    assert "(profiles/cpu/naive/timeline.svg)" in cpu
    assert "(profiles/cpu/naive/trace.json.gz)" in cpu
    assert "45 ATen ops" in cpu and "1.23 ms CPU time" in cpu
    gpu = out[: out.index('"CPU"\n')]
    assert "6 kernels" in gpu and "`Memcpy DtoD (Device -> Device)`" in gpu and "CUDA 12.8" in gpu


def test_claims_are_shown_with_what_was_observed(profiles):
    out = hook.render_variant("naive", profiles, "naive.md")
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert '!!! success "Claims checked against this trace: all hold"' in cpu
    assert "✓ Masking clones: `aten::clone` under `aten::masked_fill`." in cpu
    assert '!!! warning "Claims checked against this trace: not all hold"' in gpu
    assert "✗ 5 kernels per forward. <small>(observed: 6 kernels)</small>" in gpu


def test_links_are_relative_to_the_page(profiles):
    out = hook.render_variant("naive", profiles, "chapters/naive.md")
    assert "(../profiles/cpu/naive/timeline.svg)" in out


def test_unavailable_variant_shows_its_reason(profiles):
    out = hook.render_variant("sdpa_cudnn", profiles, "sdpa.md")
    cpu = out[out.index('"CPU"\n') :]
    assert '!!! note "Not available on CPU"' in cpu
    assert "The cudnn backend has no CPU kernel for float32 in torch 2.13.0." in cpu
    assert "timeline.svg" not in cpu


def test_unknown_variant_fails_the_build_naming_page_and_marker(profiles):
    with pytest.raises(PluginError, match=r"sdpa\.md.*'sdpa_magic'"):
        hook.expand("text\n<!-- profile: sdpa_magic -->\n", "sdpa.md", profiles, KNOWN)
    with pytest.raises(PluginError, match="sdpa_magic"):
        hook.expand("<!-- profile-compare: naive sdpa_magic -->\n", "sdpa.md", profiles, KNOWN)


def test_known_variant_without_artifacts_gets_a_note_not_an_error(profiles):
    out = hook.expand("<!-- profile: sdpa_flash -->\n", "sdpa.md", profiles, KNOWN)
    assert "Not profiled yet" in out and "`sdpa_flash`" in out
    empty = hook.expand("<!-- profile: naive -->\n", "naive.md", profiles.parent / "missing", KNOWN)
    assert "Not profiled yet" in empty


def test_only_markers_on_their_own_line_are_replaced(profiles):
    text = "Write `<!-- profile: naive -->` in a chapter.\n"
    assert hook.expand(text, "reproduce.md", profiles, KNOWN) == text


def test_compare_and_env_markers(profiles):
    out = hook.expand("<!-- profile-compare: naive sdpa_cudnn -->\n", "sdpa.md", profiles, KNOWN)
    assert out.index('"NVIDIA H200"') < out.index('"CPU"\n')
    assert "| `sdpa_cudnn` | not available here |" in out
    cpu = out[out.index('"CPU"\n') :]
    assert "device time" not in cpu and "kernels" not in cpu  # columns a CPU set never fills
    env = hook.expand("<!-- profile-env -->\n", "reproduce.md", profiles, KNOWN)
    assert env.index("`profiles/nvidia-h200/`") < env.index("`profiles/cpu/`")


def test_artifacts_are_registered_as_site_files(profiles, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_PROFILES_DIR", str(profiles))
    (tmp_path / "docs").mkdir()
    config = MkDocsConfig(config_file_path=str(ROOT / "mkdocs.yml"))
    config.load_dict({
        "site_name": "t",
        "docs_dir": str(tmp_path / "docs"),
        "site_dir": str(tmp_path / "site"),
        "hooks": [str(ROOT / "docs/hooks/profiles.py")],
    })  # fmt: skip
    assert config.validate() == ([], [])
    config = config.plugins.on_config(config)  # the events as MkDocs runs them
    files = config.plugins.on_files(Files([]), config=config)
    uris = {f.src_uri for f in files}
    assert "profiles/nvidia-h200/naive/timeline.svg" in uris
    assert "profiles/cpu/naive/trace.json.gz" in uris
    assert "profiles/cpu/sdpa_cudnn/summary.json" in uris
    assert not any(u.endswith(".md") for u in uris)  # table.md is inlined, never a page
    svg = files.get_file_from_path("profiles/cpu/naive/timeline.svg")
    assert Path(svg.abs_src_path) == profiles / "cpu/naive/timeline.svg"
    assert Path(svg.abs_dest_path) == tmp_path / "site/profiles/cpu/naive/timeline.svg"


def test_strict_build_with_fake_profiles_copies_artifacts(profiles, tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "ATTN_PROFILES_DIR": str(profiles), "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (site / "profiles/nvidia-h200/naive/trace.json.gz").exists()
    assert (site / "profiles/cpu/naive/timeline.svg").read_text() == TIMELINE
    page = (site / "naive/index.html").read_text(encoding="utf-8")
    assert page.index("NVIDIA H200") < page.index("Fake CPU Model")
    assert 'src="../profiles/cpu/naive/timeline.svg"' in page


def test_glance_marker_tabulates_every_variant_with_speedup(profiles):
    hook._state["known"] = KNOWN
    (profiles / "nvidia-h200" / "overview.svg").write_text(TIMELINE)
    out = hook.expand("<!-- profile-glance -->", "at-a-glance.md", profiles, KNOWN)
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert "| `naive` | 6 | 1.23 ms | 456.0 µs | 1.00× |" in gpu
    assert "(profiles/nvidia-h200/overview.svg)" in gpu
    assert "`sdpa_cudnn` | not available here" in cpu
    assert "ATen ops / forward" in cpu and "device time" not in cpu


def test_figure_marker_shows_the_picture_and_rejects_unknown_figures(profiles):
    (profiles / "cpu" / "scaling.svg").write_text(TIMELINE)
    (profiles / "cpu" / "scaling.json").write_text("[]")
    out = hook.expand("<!-- profile-figure: scaling -->", "sdpa.md", profiles, KNOWN)
    assert "(profiles/cpu/scaling.svg)" in out and "(profiles/cpu/scaling.json)" in out
    assert "NVIDIA H200" not in out  # that set has no scaling picture
    with pytest.raises(PluginError, match="unknown figure"):
        hook.expand("<!-- profile-figure: roofline -->", "sdpa.md", profiles, KNOWN)


def test_benchmark_figure_lists_ratios_to_flash(profiles):
    rows = [
        {
            "variant": v,
            "seq": 512,
            "head_dim": 64,
            "is_causal": True,
            "dtype": "float32",
            "time_us": t,
            "tflops": 0.1,
        }
        for v, t in (("sdpa_flash", 200.0), ("custom_cpu", 150.0), ("inplace", 900.0))
    ]
    (profiles / "cpu" / "benchmark.json").write_text(json.dumps(rows))
    (profiles / "cpu" / "benchmark.svg").write_text(TIMELINE)
    out = hook.expand("<!-- profile-figure: benchmark -->", "custom-kernels.md", profiles, KNOWN)
    assert "| `custom_cpu` | 512 | 64 | yes | 150.0 µs | 0.100 | 0.75 |" in out
    assert "`inplace` |" not in out  # only our kernels get a ratio row


def test_claims_marker_keeps_the_indent_of_its_admonition(profiles):
    page = '!!! question "Guess first"\n\n    <!-- profile-claims: naive -->\n'
    out = hook.expand(page, "naive.md", profiles, KNOWN)
    lines = [line for line in out.splitlines() if line.strip().startswith("- ")]
    assert lines and all(line.startswith("    - *On ") for line in lines)
    assert any("*On CPU:*" in line and "`aten::clone`" in line for line in lines)
    assert any("*On a GPU:*" in line and "Memcpy" in line for line in lines)
