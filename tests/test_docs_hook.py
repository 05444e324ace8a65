"""The docs hook on a fake profiles tree: tab order, reasons, claims, broken sets, files to copy.

Each fake hardware set is what a profile run leaves: variant folders and an index.json manifest
written by attn.profiling.layout, the same code a real run uses.
"""

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

from attn.profiling import layout
from attn.profiling.claims import BENCHMARK_CLAIMS, claims_for

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
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32  # enough for the hook: it checks the signature
SETS = {
    "cpu": {"device_name": "Fake CPU Model", "device_type": "cpu", "cuda_version": None},
    "nvidia-h200": {"device_name": "NVIDIA H200", "device_type": "cuda", "cuda_version": "12.8"},
}


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, (dict, list)):
        path.write_text(json.dumps(data), encoding="utf-8")
    elif isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")


def claims(variant: str, device_type: str, holds: list[bool | None]) -> list[dict]:
    """The variant's real claim sentences about a device type, with made-up verdicts."""
    texts = [c.text for c in claims_for(variant, device_type)]
    return [
        {"text": t, "holds": h, "observed": f"observed {i}"}
        for i, (t, h) in enumerate(zip(texts, holds, strict=False))
    ]


def write_fake_profiles(root: Path) -> Path:
    """A CPU set and an H200 set: naive everywhere, sdpa_cudnn unavailable on the CPU."""
    for slug, extra in SETS.items():
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
            "kernels_per_forward": 5 if on_gpu else None,
            "memcpy_per_forward": {"DtoD": 1.0} if on_gpu else None,
            "memset_per_forward": 0.0 if on_gpu else None,
            "peak_memory_bytes": 3 * 2**20,
            "kernels": ["ampere_bf16_s16816gemm"] if on_gpu else [],
            # On the GPU the first claim fails, so both verdicts show up somewhere.
            "claims": claims("naive", "cuda", [False, True])
            if on_gpu
            else claims("naive", "cpu", [True, True, True]),
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
            if variant == "naive" and not on_gpu:
                _write(folder / "viewer.png", PNG)
        layout.write_manifest(root / slug)
    return root


def add_benchmark(folder: Path, rows: list[dict]) -> None:
    _write(folder / "benchmark.json", rows)
    _write(folder / "benchmark.svg", TIMELINE)
    layout.write_manifest(folder)


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    hook._state["sets"] = None  # the hook caches the sets of one build
    return write_fake_profiles(tmp_path / "profiles")


def test_gpu_tabs_come_before_cpu_in_a_set_of_their_own(profiles):
    out = hook.render_variant("naive", profiles, "naive.md")
    assert out.index('"NVIDIA H200"') < out.index('"CPU"\n')
    # `===!` starts a new tab set, so prose tabs right before or after never merge into it
    assert out.startswith('===! "NVIDIA H200"') and '=== "CPU"' in out


def test_available_tab_shows_environment_table_pictures_and_trace(profiles):
    out = hook.render_variant("naive", profiles, "naive.md")
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert "torch 2.13.0" in cpu and "2026-01-02" in cpu and "abc123def456" in cpu
    assert "    | `aten::bmm` | 1 ms | 1 ms | 6 |" in cpu  # the table, indented into the tab
    assert "(profiles/cpu/naive/timeline.svg)" in cpu
    assert "(profiles/cpu/naive/viewer.png)" in cpu and "viewer.png" not in gpu  # only if there
    assert "45 ATen ops" in cpu and "1.23 ms CPU time" in cpu and "3.0 MiB peak memory" in cpu
    assert (
        "[Open in Perfetto](profiles/cpu/naive/trace.json.gz){ .md-button data-perfetto-trace"
        in cpu
    )
    assert (
        '[Open here](profiles/cpu/naive/trace.json.gz){ .md-button data-trace-viewer data-trace-range="attn_fwd" }'
        in cpu
    )
    assert "5 kernels" in gpu and "1 DtoD memcpy" in gpu and "0 memset" in gpu
    assert "`ampere_bf16_s16816gemm`" in gpu and "CUDA 12.8" in gpu


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
    with pytest.raises(PluginError, match="sdpa_magic"):
        hook.expand("<!-- profile-claim: sdpa_magic 0 -->\n", "sdpa.md", profiles, KNOWN)


def test_known_variant_without_artifacts_gets_a_note_not_an_error(profiles):
    out = hook.expand("<!-- profile: sdpa_flash -->\n", "sdpa.md", profiles, KNOWN)
    assert "Not profiled yet" in out and "`sdpa_flash`" in out
    hook._state["sets"] = None
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
    assert "peak memory" in cpu
    env = hook.expand("<!-- profile-env -->\n", "reproduce.md", profiles, KNOWN)
    assert env.index("`profiles/nvidia-h200/`") < env.index("`profiles/cpu/`")


# --- claims ---------------------------------------------------------------------------------------


def test_check_marker_lists_every_claim_per_set_with_what_was_observed(profiles):
    page = "## Check your guess\n\n<!-- profile-check: naive -->\n"
    out = hook.expand(page, "naive.md", profiles, KNOWN)
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert "✓ **holds:** Masking clones the scores: `aten::clone` under `aten::masked_fill`." in cpu
    assert "<small>Observed: observed 0</small>" in cpu
    assert "✗ **does not hold:** 5 kernels per forward" in gpu


def test_check_marker_says_which_claims_no_set_has_checked(profiles):
    (profiles / "nvidia-h200" / "naive").rename(profiles / "naive-gone")
    layout.write_manifest(profiles / "nvidia-h200")
    out = hook.expand("<!-- profile-check: naive -->\n", "naive.md", profiles, KNOWN)
    assert '!!! note "Not checked yet: naive"' in out
    assert "- On a GPU: 5 kernels per forward, plus one device-to-device Memcpy" in out


def test_claim_marker_counts_cpu_sentences_then_gpu_ones(profiles):
    cpu_texts = [c.text for c in claims_for("naive", "cpu")]
    first = hook.expand("<!-- profile-claim: naive 0 -->\n", "naive.md", profiles, KNOWN)
    assert (
        '!!! success "Masking clones the scores: `aten::clone` under `aten::masked_fill`."' in first
    )
    assert "✓ **holds** on CPU (observed: observed 0)" in first
    assert "NVIDIA H200" not in first  # a GPU set never checks a CPU sentence
    gpu = hook.expand(
        f"<!-- profile-claim: naive {len(cpu_texts)} -->\n", "naive.md", profiles, KNOWN
    )
    assert gpu.startswith('\n!!! warning "5 kernels per forward')
    assert "✗ **does not hold** on NVIDIA H200 (observed: observed 0)" in gpu
    with pytest.raises(PluginError, match="no claim 99"):
        hook.expand("<!-- profile-claim: naive 99 -->\n", "naive.md", profiles, KNOWN)


def test_claim_marker_keeps_the_indent_of_its_tab(profiles):
    page = '=== "On CPU (our runs)"\n\n    Text.\n\n    <!-- profile-claim: naive 0 -->\n'
    out = hook.expand(page, "naive.md", profiles, KNOWN)
    assert '\n    !!! success "Masking clones' in out
    assert "\n        ✓ **holds** on CPU" in out


def test_claim_sentences_not_in_the_manifest_yet_are_still_found(profiles):
    manifest = json.loads((profiles / "cpu" / "index.json").read_text())
    manifest["claims"] = {}  # a manifest written before the claims existed
    (profiles / "cpu" / "index.json").write_text(json.dumps(manifest))
    manifest = json.loads((profiles / "nvidia-h200" / "index.json").read_text())
    manifest["claims"] = {}
    (profiles / "nvidia-h200" / "index.json").write_text(json.dumps(manifest))
    texts = hook.claim_sentences("naive", hook.hardware_sets(profiles))
    assert texts[0] == claims_for("naive", "cpu")[0].text  # the sets' own evaluated claims


BENCH = [
    {"variant": v, "batch": 1, "heads": 8, "seq": 512, "head_dim": 64, "is_causal": True,
     "dtype": "float32", "time_us": t, "tflops": 0.1, **extra}
    for v, t, extra in (
        ("sdpa_flash", 200.0, {}),
        ("custom_cpu", 150.0, {"ratio_to_flash": 0.75}),
        ("inplace", 900.0, {}),
        ("sdpa_math", 1800.0, {}),
    )
]  # fmt: skip


def test_benchmark_claims_are_checked_against_each_sets_rows(profiles):
    index = next(i for i, c in enumerate(BENCHMARK_CLAIMS) if c.device_type == "cpu")
    marker = f"<!-- profile-claim: benchmark {index} -->\n"
    before = hook.expand(marker, "custom-kernels.md", profiles, KNOWN)
    assert before.startswith('\n!!! note "custom_cpu takes less time than sdpa_flash')
    assert "Not measured yet: no profile set here has a benchmark on a CPU." in before
    add_benchmark(profiles / "cpu", BENCH)
    hook._state["sets"] = None
    after = hook.expand(marker, "custom-kernels.md", profiles, KNOWN)
    assert after.startswith('\n!!! success "custom_cpu takes less time')
    assert "✓ **holds** on CPU (observed: 0.75× (seq 512, head_dim 64)" in after
    assert "batch 1 × 8 heads" in after
    with pytest.raises(PluginError, match="benchmark claims; no claim 99"):
        hook.expand("<!-- profile-claim: benchmark 99 -->\n", "x.md", profiles, KNOWN)


# --- broken sets ----------------------------------------------------------------------------------


def test_a_file_the_manifest_lists_but_is_missing_fails_in_one_line(profiles):
    (profiles / "cpu" / "naive" / "timeline.svg").unlink()
    with pytest.raises(hook.BrokenSet, match=r"lists .*cpu/naive/timeline\.svg, which is missing"):
        hook.hardware_sets(profiles)


def test_a_folder_the_manifest_does_not_know_fails(profiles):
    (profiles / "cpu" / "sdpa_magic").mkdir()
    with pytest.raises(hook.BrokenSet, match=r"sdpa_magic/ is not in .*index\.json"):
        hook.hardware_sets(profiles)


def test_a_broken_trace_fails(profiles):
    (profiles / "cpu" / "naive" / "trace.json.gz").write_bytes(b"not gzip")
    with pytest.raises(hook.BrokenSet, match=r"naive/trace\.json\.gz is broken"):
        hook.hardware_sets(profiles)


def test_a_folder_without_a_manifest_is_not_a_set(profiles):
    (profiles / "scratch").mkdir()
    (profiles / "scratch" / "notes.txt").write_text("not a set")
    assert [hw["slug"] for hw in hook.hardware_sets(profiles)] == ["nvidia-h200", "cpu"]


# --- files and the whole build --------------------------------------------------------------------


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
    assert "profiles/cpu/naive/viewer.png" in uris
    assert "profiles/cpu/sdpa_cudnn/summary.json" in uris
    assert "profiles/cpu/index.json" in uris
    assert not any(u.endswith(".md") for u in uris)  # table.md is inlined, never a page
    svg = files.get_file_from_path("profiles/cpu/naive/timeline.svg")
    assert Path(svg.abs_src_path) == profiles / "cpu/naive/timeline.svg"
    assert Path(svg.abs_dest_path) == tmp_path / "site/profiles/cpu/naive/timeline.svg"


@pytest.mark.slow
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
    layout.write_manifest(profiles / "nvidia-h200")
    out = hook.expand("<!-- profile-glance -->", "at-a-glance.md", profiles, KNOWN)
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert "| `naive` | 5 | 1.23 ms | 456.0 µs | 1.00× |" in gpu
    assert "(profiles/nvidia-h200/overview.svg)" in gpu
    assert "`sdpa_cudnn` | not available here" in cpu
    assert "ATen ops / forward" in cpu and "device time" not in cpu


def test_figure_marker_shows_the_picture_and_rejects_unknown_figures(profiles):
    (profiles / "cpu" / "scaling.svg").write_text(TIMELINE)
    (profiles / "cpu" / "scaling.json").write_text("[]")
    layout.write_manifest(profiles / "cpu")
    out = hook.expand("<!-- profile-figure: scaling -->", "sdpa.md", profiles, KNOWN)
    assert "(profiles/cpu/scaling.svg)" in out and "(profiles/cpu/scaling.json)" in out
    assert "NVIDIA H200" not in out  # that set has no scaling picture
    with pytest.raises(PluginError, match="unknown figure"):
        hook.expand("<!-- profile-figure: roofline -->", "sdpa.md", profiles, KNOWN)


def test_benchmark_figure_lists_ratios_to_flash_with_the_shape(profiles):
    add_benchmark(profiles / "cpu", BENCH)
    out = hook.expand("<!-- profile-figure: benchmark -->", "custom-kernels.md", profiles, KNOWN)
    assert "| `custom_cpu` | 0.75 | 1 × 8 | 512 | 64 | yes | 150.0 µs | 0.1 |" in out
    assert "`inplace` |" not in out  # only our kernels get a ratio row
