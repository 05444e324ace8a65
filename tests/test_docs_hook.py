"""The docs hook on a fake profiles tree: tab order, reasons, claims by key, markers, files to copy.

Each fake hardware set is what a profile run leaves: variant folders and an index.json manifest
written by attn.traces.common.artifacts, the same code a real run uses. The hook is loaded here, once, as
MkDocs loads it (by path, its folder on sys.path); the other docs tests import `hook` and `sets`.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import PIL.Image
import pytest
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from test_traces_dispatch_tables import cpu_rows  # dispatch.json's rows
from test_traces_figure_tables import BENCH  # benchmark.json's rows

from attn import specs
from attn.traces.common import artifacts
from attn.traces.figures import peaks_figure
from attn.traces.sets.set_claims import write_claims

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "docs/hooks"


def load_hook():
    """docs/hooks/profiles.py, loaded by path with its folder on sys.path, as MkDocs does."""
    sys.path.insert(0, str(HOOKS))  # the hook imports its modules beside it
    spec = importlib.util.spec_from_file_location("profiles_hook", HOOKS / "profiles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = load_hook()
sets = sys.modules["profile_sets"]
clean_svg = sys.modules["set_svg"].clean_svg  # how a set's pictures are published

TIMELINE = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'
TABLE = "| Name | Self CPU | CPU total | Calls |\n|---|---:|---:|---:|\n| `aten::bmm` | 1 ms | 1 ms | 6 |\n"


def _png() -> bytes:
    """A whole 2x2 picture: the hook opens each PNG, a signature alone is refused."""
    buffer = io.BytesIO()
    PIL.Image.new("RGB", (2, 2)).save(buffer, "PNG")
    return buffer.getvalue()


PNG = _png()
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
    """The first of the variant's real claims about a device type, with made-up verdicts."""
    mine = [c for c in specs.spec(variant).trace_claims if c.device_type == device_type]
    return [
        {"key": c.key, "text": c.text, "holds": h, "observed": f"observed {i}"}
        for i, (c, h) in enumerate(zip(mine, holds, strict=False))
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
        artifacts.write_manifest(root / slug)
    return root


def add_benchmark(folder: Path, rows: list[dict]) -> None:
    _write(folder / "benchmark.json", rows)
    _write(folder / "benchmark.svg", TIMELINE)
    write_claims(folder, specs)  # as the sweep does after its rows; and the manifest
    sets.hardware_sets.cache_clear()  # the hook reads a set once per build


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    return write_fake_profiles(tmp_path / "profiles")


def expand(text: str, page: str, profiles: Path, config: dict | None = None) -> str:
    return hook.expand(text, page, profiles, config)


def test_gpu_tabs_come_before_cpu_in_a_set_of_their_own(profiles):
    out = expand("<!-- profile: naive -->", "naive.md", profiles)
    assert out.index('"NVIDIA H200"') < out.index('"CPU"\n')
    # `===!` starts a new tab set, so prose tabs right before or after never merge into it
    assert out.startswith('\n===! "NVIDIA H200"') and '=== "CPU"' in out


def test_available_tab_shows_environment_table_pictures_and_trace(profiles):
    out = expand("<!-- profile: naive -->", "naive.md", profiles)
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
    assert "Download: [trace.json.gz](profiles/cpu/naive/trace.json.gz) · [table.txt]" in cpu
    assert "5 kernels" in gpu and "1 DtoD memcpy" in gpu and "0 memset" in gpu
    assert "`ampere_bf16_s16816gemm`" in gpu and "CUDA 12.8" in gpu


def test_a_set_made_without_a_browser_says_why_its_picture_is_missing(profiles):
    summary = profiles / "nvidia-h200/naive/summary.json"
    why = "the run that made this set took none: no chromium on PATH"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "viewer": {"missing": why}}))
    out = expand("<!-- profile: naive -->", "naive.md", profiles)
    gpu = out[: out.index('"CPU"\n')]
    assert f"No trace-viewer picture of this run: {why}." in gpu and "viewer.png" not in gpu


def test_links_are_relative_to_the_page(profiles):
    out = expand("<!-- profile: naive -->", "chapters/naive.md", profiles)
    assert "(../profiles/cpu/naive/timeline.svg)" in out


def test_unavailable_variant_shows_its_reason(profiles):
    out = expand("<!-- profile: sdpa_cudnn -->", "sdpa.md", profiles)
    cpu = out[out.index('"CPU"\n') :]
    assert '!!! note "Not available on CPU"' in cpu
    assert "The cudnn backend has no CPU kernel for float32 in torch 2.13.0." in cpu
    assert "timeline.svg" not in cpu


@pytest.mark.parametrize(
    ("marker", "says"),
    [
        ("<!-- profile: sdpa_magic -->", r"sdpa\.md.*unknown variant 'sdpa_magic'.*naive"),
        ("<!-- profile-compare: naive sdpa_magic -->", r"sdpa\.md.*'sdpa_magic'"),
        ("<!-- profile-claim: sdpa_magic no-clone -->", r"sdpa\.md.*'sdpa_magic'"),
        ("<!-- profile-diff: sdpa_magic naive -->", r"sdpa\.md.*'sdpa_magic'"),
        ("<!-- profile: naive inplace -->", r"sdpa\.md.*takes 1 argument"),
        ("<!-- profile-compare -->", r"sdpa\.md.*takes one or more"),
        ("<!-- profile-env: cpu -->", r"sdpa\.md.*takes 0 argument"),
        ("<!-- profile-glances -->", r"sdpa\.md: unknown marker.*profile-glance"),
        ("<!-- profile-figure: roofline -->", r"sdpa\.md: unknown figure 'roofline'.*scaling"),
        ("<!-- profile-guess: speed naive -->", r"sdpa\.md: unknown guess 'speed'.*top-ops"),
        ("<!-- profile-guess: fewer-ops naive -->", r"sdpa\.md: the guess 'fewer-ops' names 2"),
        ("<!-- profile-guess: top-ops sdpa_magic -->", r"sdpa\.md.*'sdpa_magic'"),
        ('<!-- profile-excerpt: "attn/sdpa.py:forward -->', r"sdpa\.md: .*No closing quotation"),
    ],
)
def test_a_marker_that_cannot_render_fails_the_build_naming_the_page(profiles, marker, says):
    with pytest.raises(PluginError, match=says):
        expand(f"text\n{marker}\n", "sdpa.md", profiles)


# --- excerpts of the source files ----------------------------------------------------------------


def test_an_excerpt_is_a_titled_include_and_a_note_linking_the_whole_file(profiles):
    out = expand(
        '<!-- profile-excerpt: attn/naive.py:forward "the forward" -->', "naive.md", profiles
    )
    assert out == (
        '\n```python title="attn/naive.py (the forward, excerpt)"\n'
        '--8<-- "attn/naive.py:forward"\n```\n\n'
        '<small class="attn-excerpt">An excerpt. The whole file: '
        "[`attn/naive.py`](attn/naive.py).</small>\n"
    )
    marker = '<!-- profile-excerpt: attn/inplace.py:forward "the forward" hl_lines="7" -->'
    out = expand(marker, "chapters/inplace.md", profiles)
    assert '```python title="attn/inplace.py (the forward, excerpt)" hl_lines="7"\n' in out
    assert "[`attn/inplace.py`](../attn/inplace.py)" in out  # relative to the page
    cpp = expand(
        "<!-- profile-excerpt: csrc/cpu/flash_attention_cpu.cpp:kv-loop -->", "x.md", profiles
    )
    assert cpp.startswith('\n```cpp title="csrc/cpu/flash_attention_cpu.cpp (excerpt)"\n')
    tab = expand('    <!-- profile-excerpt: attn/decode.py:repeat "x" -->', "x.md", profiles)
    assert '\n    --8<-- "attn/decode.py:repeat"\n    ```\n\n    <small' in tab  # indented


def test_a_long_excerpt_shows_closed_with_its_length_in_its_title(profiles):
    """Over LONG lines (a kernel's core: screens of code on a phone), the section is a click away."""
    from excerpts import LONG, section_length

    path = "csrc/cpu/flash_attention_cpu.cpp"
    lines = section_length((ROOT / path).read_text(encoding="utf-8"), "core")
    assert lines > LONG >= section_length((ROOT / path).read_text(encoding="utf-8"), "kv-loop")
    out = expand(f'<!-- profile-excerpt: {path}:core "the core" -->', "x.md", profiles)
    assert out.startswith(
        f'\n??? example "{path} (the core, excerpt, {lines} lines)"\n\n    ```cpp'
    )
    assert f'\n    --8<-- "{path}:core"\n    ```\n\n    <small class="attn-excerpt">' in out


def test_a_section_counts_the_lines_snippets_includes():
    from excerpts import section_length

    text = (
        "a\n# --8<-- [start:x]\nb\n# --8<-- [start:y]\nc\n# --8<-- [end:y]\nd\n# --8<-- [end:x]\ne"
    )
    assert section_length(text, "x") == 3  # b, c, d: the inner markers are left out
    assert section_length(text, "y") == 1


def test_an_excerpt_holds_the_files_own_lines_once_snippets_has_run(profiles):
    """The hook runs before the Markdown extensions, so pymdownx.snippets includes the section."""
    import markdown

    page = expand('<!-- profile-excerpt: attn/naive.py:forward "the forward" -->', "x.md", profiles)
    config = {"base_path": [str(ROOT)], "check_paths": True, "dedent_subsections": True}
    html = markdown.markdown(
        page,
        extensions=["pymdownx.snippets", "pymdownx.superfences"],
        extension_configs={"pymdownx.snippets": config},
    )
    assert "masked_fill" in html and "--8&lt;--" not in html and "8<--" not in html
    assert 'href="attn/naive.py"' in html


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("attn/nowhere.py:forward", "no file attn/nowhere.py in the repository"),
        (
            "attn/naive.py:backward",
            "attn/naive.py has no section 'backward'; its sections: forward",
        ),
        ("attn/naive.py", "'attn/naive.py' names no section: write PATH:SECTION"),
        (
            "attn/traces/common/units.py:x",
            "attn/traces/common/units.py is not published, so the note cannot",
        ),
        ("README.md:x", "README.md: no fence language for its suffix"),
        ('attn/naive.py:forward "a" "b"', "one title in quotes and fence options"),
    ],
)
def test_an_excerpt_that_cannot_render_fails_naming_the_page_and_the_marker(profiles, target, says):
    with pytest.raises(PluginError) as e:
        expand(f"text\n<!-- profile-excerpt: {target} -->\n", "naive.md", profiles)
    path = target.split()[0]
    assert str(e.value).startswith(f"naive.md: <!-- profile-excerpt: {path} -->: "), str(e.value)
    assert says in str(e.value)


def _guesses(out: str) -> dict[str, dict[str, str]]:
    """Each tab's guess box: its data attributes and its measured answer, by tab title."""
    tabs = re.split(r'^===!? "([^"]+)"\n', out, flags=re.M)[1:]
    found = {}
    for title, body in zip(tabs[::2], tabs[1::2], strict=True):
        attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', body.split(">", 1)[0]))
        attrs["measured"] = re.search(r"<summary>The measured answer</summary><p>(.*?)</p>", body)[
            1
        ]
        found[title] = attrs
    return found


def test_a_guess_is_answered_from_each_sets_summaries(profiles):
    # One score matrix of the fake shape: 1 x 2 x 64 x 64 elements; the peak is 3 MiB.
    out = _guesses(expand("<!-- profile-guess: score-matrices naive -->", "naive.md", profiles))
    assert out["CPU"]["answer"] == "96.0" and out["CPU"]["kind"] == "number"  # float32
    assert out["NVIDIA H200"]["answer"] == "192.0"  # bfloat16: half the bytes a matrix
    assert out["CPU"]["measured"].startswith("96.00 score matrices: a peak of 3.0 MiB")

    out = _guesses(expand("<!-- profile-guess: runs-here sdpa_cudnn -->", "sdpa.md", profiles))
    assert out["CPU"]["answer"] == "no" and out["NVIDIA H200"]["answer"] == "yes"
    assert out["CPU"]["kind"] == "choice" and "no CPU kernel for float32" in out["CPU"]["measured"]

    # Both must have run on a set for it to ask which runs fewer ops: the GPU set only.
    out = _guesses(
        expand("<!-- profile-guess: fewer-ops naive sdpa_cudnn -->", "sdpa.md", profiles)
    )
    assert list(out) == ["NVIDIA H200"] and out["NVIDIA H200"]["answer"] == "same"


def test_a_guess_box_has_a_form_for_script_and_its_answer_closed_without(profiles):
    out = expand("<!-- profile-guess: score-matrices naive -->", "naive.md", profiles)
    assert out.count("<form hidden>") == 2  # guess.js shows the form; without it, no dead form
    assert out.count('<details class="attn-guess-answer">') == 2  # closed: opened by a click
    assert '<input type="radio" name="guess-cpu-runs-here-naive" value="yes" required>' in expand(
        "<!-- profile-guess: runs-here naive -->", "naive.md", profiles
    )
    none = expand("<!-- profile-guess: top-ops naive -->", "naive.md", profiles.parent / "none")
    assert "Not profiled yet" in none


def test_known_variant_without_artifacts_gets_a_note_not_an_error(profiles):
    out = expand("<!-- profile: sdpa_flash -->\n", "sdpa.md", profiles)
    assert "Not profiled yet" in out and "`sdpa_flash`" in out
    assert "[Reproduce](reproduce.md)" in out
    empty = expand("<!-- profile: naive -->\n", "naive.md", profiles.parent / "missing")
    assert "Not profiled yet" in empty


def test_only_markers_on_their_own_line_are_replaced(profiles):
    text = "Write `<!-- profile: naive -->` in a chapter.\n"
    assert expand(text, "reproduce.md", profiles) == text


def test_compare_and_env_markers(profiles):
    out = expand("<!-- profile-compare: naive sdpa_cudnn -->\n", "sdpa.md", profiles)
    assert out.index('"NVIDIA H200"') < out.index('"CPU"\n')
    assert "| `sdpa_cudnn` | not available here |" in out
    cpu = out[out.index('"CPU"\n') :]
    assert "device time" not in cpu and "kernels" not in cpu  # columns a CPU set never fills
    assert "peak memory" in cpu
    env = expand("<!-- profile-env -->\n", "reproduce.md", profiles)
    assert env.index("`profiles/nvidia-h200/`") < env.index("`profiles/cpu/`")


def test_first_calls_marker_shows_cold_beside_warm_or_says_a_set_did_not_measure_cold(profiles):
    """The CPU set ran the cold run; the H200 set predates it (as a committed set may)."""
    timed = {"first_calls_seconds": {"first": 2.469, "second": 0.01}}  # 2,000 forwards of 1234.5 µs
    _edit(profiles / "nvidia-h200/naive/summary.json", lambda s: s.update(timed))
    cold = {**timed, "cold_first_calls_seconds": {"first": 24.69, "second": 0.01}}
    _edit(profiles / "cpu/naive/summary.json", lambda s: s.update(cold))
    out = expand(
        "<!-- profile-first-calls: naive sdpa_cudnn -->\n", "compiled-and-flex.md", profiles
    )
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert "| `naive` | 24.69 s = 20,000 forwards | – | 2.47 s = 2,000 forwards | 10.0× |" in cpu
    assert "not measured in this set" in gpu and "| `naive` | 2.47 s = 2,000 forwards |" in gpu
    assert "sdpa_cudnn" not in out  # no first call timed: no row
    _edit(profiles / "cpu/naive/summary.json", lambda s: s.pop("first_calls_seconds"))
    _edit(profiles / "nvidia-h200/naive/summary.json", lambda s: s.pop("first_calls_seconds"))
    sets.hardware_sets.cache_clear()
    none = expand("<!-- profile-first-calls: naive -->\n", "compiled-and-flex.md", profiles)
    assert "Not profiled yet" in none


def test_first_calls_marker_puts_a_later_compile_in_the_column_of_the_caches_it_met(profiles):
    """Profiled after another in the same run: its first call, after that one's, against the run's
    cold start."""
    after = {"variants": ["inplace"], "cold_start_variant": "inplace", "cold_start_seconds": 24.69}
    later = {"first_calls_seconds": {"first": 4.938, "second": 0.01}, "first_calls_after": after}
    _edit(profiles / "cpu/naive/summary.json", lambda s: s.update(later))
    out = expand("<!-- profile-first-calls: naive -->\n", "compiled-and-flex.md", profiles)
    forwards = (
        4.938e6 / json.loads((profiles / "cpu/naive/summary.json").read_text())["cpu_time_us"]
    )
    assert (
        f"| `naive` | – | 4.94 s = {forwards:,.0f} forwards (after `inplace`) | – | 5.0× |" in out
    )


def test_diff_marker_shows_the_diff_each_set_has(profiles):
    diff = {"a": {"label": "x"}, "b": {"label": "y"}, "notes": [], "rows": [], "headline": "less"}
    _write(profiles / "cpu/diff/naive__sdpa_cudnn.json", diff)
    artifacts.write_manifest(profiles / "cpu")
    out = expand("<!-- profile-diff: naive sdpa_cudnn -->", "sdpa.md", profiles)
    assert out.startswith('\n===! "CPU"\n\n    **x → y:** less.') and "H200" not in out
    none = expand("<!-- profile-diff: sdpa_cudnn naive -->", "sdpa.md", profiles)
    assert "Not profiled yet" in none and "a diff of `sdpa_cudnn` and `naive`" in none


# --- claims ---------------------------------------------------------------------------------------


def test_check_marker_lists_every_claim_per_set_with_what_was_observed(profiles):
    page = "## Check your guess\n\n<!-- profile-check: naive -->\n"
    out = expand(page, "naive.md", profiles)
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    assert "✓ **holds:** Masking clones the scores: `aten::clone` under `aten::masked_fill`." in cpu
    assert "<small>Observed: observed 0</small>" in cpu
    assert "✗ **does not hold:** 5 kernels per forward" in gpu
    assert "Not checked yet" not in out  # both kinds of hardware ran it


def test_check_marker_says_which_claims_no_set_has_checked(profiles):
    (profiles / "nvidia-h200" / "naive").rename(profiles / "naive-gone")
    artifacts.write_manifest(profiles / "nvidia-h200")
    out = expand("<!-- profile-check: naive -->\n", "naive.md", profiles)
    assert '!!! note "Not checked yet: naive"' in out
    assert "- On a GPU: 5 kernels per forward, plus one device-to-device Memcpy" in out
    assert "Masking clones the scores" not in out.split("Not checked yet")[1]  # the CPU ran those


def test_a_claim_that_names_its_hardware_is_not_prefixed_twice(profiles):
    out = expand("<!-- profile-check: flex_causal -->\n", "compiled-and-flex.md", profiles)
    assert "- On a GPU, one generated Triton template kernel (triton_tem_) per forward." in out
    assert "- On CPU: The first call, which compiles" in out
    assert "On a GPU: On a GPU" not in out


def test_claim_marker_names_the_claim_by_its_key(profiles):
    first = expand("<!-- profile-claim: naive clone-under-masked-fill -->\n", "naive.md", profiles)
    assert (
        '!!! success "Masking clones the scores: `aten::clone` under `aten::masked_fill`."' in first
    )
    assert "✓ **holds** on CPU (observed: observed 0)" in first
    assert "NVIDIA H200" not in first  # a GPU set never checks a CPU sentence
    marker = "<!-- profile-claim: naive gpu-five-kernels-and-a-memcpy -->\n"
    gpu = expand(marker, "naive.md", profiles)
    assert gpu.startswith('\n!!! warning "5 kernels per forward')
    assert "✗ **does not hold** on NVIDIA H200 (observed: observed 0)" in gpu


def test_an_unknown_claim_key_fails_listing_the_keys(profiles):
    with pytest.raises(PluginError) as e:
        expand("<!-- profile-claim: naive 0 -->\n", "naive.md", profiles)
    message = str(e.value)
    assert message.startswith("naive.md: ") and "'naive' has no claim '0'" in message
    assert all(c.key in message for c in specs.spec("naive").claims)


def test_a_claim_no_set_has_checked_says_so(profiles):
    out = expand("<!-- profile-claim: naive ops-follow-the-code -->\n", "naive.md", profiles)
    assert out.startswith("\n!!! note \"The forward's own ops follow the code")
    assert "Not checked yet: no profile set here has run it on such hardware." in out


def test_claim_marker_keeps_the_indent_of_its_tab(profiles):
    page = '=== "On CPU (our runs)"\n\n    Text.\n\n    <!-- profile-claim: naive clone-under-masked-fill -->\n'
    out = expand(page, "naive.md", profiles)
    assert '\n    !!! success "Masking clones' in out
    assert "\n        ✓ **holds** on CPU" in out


def test_benchmark_claims_are_checked_against_each_sets_rows(profiles):
    marker = "<!-- profile-claim: custom_cpu under-flash-causal-head-dim-64 -->\n"
    before = expand(marker, "custom-kernels.md", profiles)
    assert before.startswith(
        '\n!!! note "At head_dim 64, custom_cpu takes less time than sdpa_flash'
    )
    assert "Not measured yet: no profile set here has benchmark.json on a CPU." in before
    add_benchmark(profiles / "cpu", BENCH)
    after = expand(marker, "custom-kernels.md", profiles)
    assert after.startswith('\n!!! success "At head_dim 64, custom_cpu takes less time')
    assert (
        "✓ **holds** on CPU (observed: under 1× at 1 of 1 shapes; 0.75× (float32, seq 512" in after
    )
    assert "batch 1 × 8 heads" in after
    slower = expand("<!-- profile-claim: sdpa_math slower-than-inplace -->", "sdpa.md", profiles)
    assert slower.startswith('\n!!! success "sdpa_math takes more time than the in-place module')
    assert "(observed: slower at 1 of 1 shapes; sdpa_math ÷ inplace: 2.00× to 2.00×" in slower
    gpu = expand("<!-- profile-claim: custom_cuda gpu-within-2x-of-flash -->", "x.md", profiles)
    assert (
        "Not measured yet: no profile set here has benchmark.json on a GPU." in gpu
    )  # not the CPU's


def add_dispatch(folder: Path, rows: list[dict]) -> None:
    _write(folder / "dispatch.json", rows)
    _write(folder / "dispatch.svg", TIMELINE)
    write_claims(folder, specs)  # as the sweep does after its rows; and the manifest
    sets.hardware_sets.cache_clear()


def test_dispatch_figure_shows_its_table_open_where_a_set_has_it_and_a_note_where_none(profiles):
    out = expand("<!-- profile-figure: dispatch -->", "sdpa.md", profiles)
    assert "Not profiled yet" in out and "the dispatch figure" in out  # no set has it: no error
    add_dispatch(profiles / "cpu", cpu_rows())
    out = expand("<!-- profile-figure: dispatch -->", "sdpa.md", profiles)
    assert "(profiles/cpu/dispatch.svg)" in out and "??? abstract" not in out  # open
    assert "\n    | dropout | math | math |" in out  # in the set's tab
    assert "| flash | inputs dropout (4) | Flash attention kernel not used because:" in out
    assert "Data: [dispatch.json](profiles/cpu/dispatch.json)" in out
    assert "NVIDIA H200" not in out  # that set has no dispatch rows: no tab


def test_dispatch_claims_are_checked_on_each_set_with_rows_and_wait_for_a_gpu_set(profiles):
    marker = "<!-- profile-claim: sdpa_math unpinned-with-dropout -->\n"
    assert "Not measured yet: no profile set here has dispatch.json on a CPU." in expand(
        marker, "sdpa.md", profiles
    )
    add_dispatch(profiles / "cpu", cpu_rows())
    out = expand(marker, "sdpa.md", profiles)
    assert out.startswith('\n!!! success "With dropout_p > 0 and nothing pinned')
    assert "✓ **holds** on CPU (observed: unpinned, ran math in every case (4)" in out
    gpu = expand("<!-- profile-claim: sdpa_flash gpu-refuses-a-mask -->", "sdpa.md", profiles)
    assert "Not measured yet: no profile set here has dispatch.json on a GPU." in gpu


def test_a_figure_question_is_answered_from_each_sets_rows_of_that_figure(profiles):
    marker = "<!-- profile-guess: unpinned-dropout sdpa_math -->"
    waiting = expand(marker, "sdpa.md", profiles)  # no set has the rows: no error, a note
    assert "No hardware set in `profiles/` has artifacts for the dispatch figure yet" in waiting
    add_dispatch(profiles / "cpu", cpu_rows())
    out = expand(marker, "sdpa.md", profiles)
    assert 'data-answer="math"' in out and "<code>math</code> in every case (4)" in out
    assert "NVIDIA H200" not in out  # that set has no dispatch rows: no question
    rows = [{**r, "backend": "sdpa_flash"} if r["head_dim"] == 64 else r for r in cpu_rows()]
    add_dispatch(profiles / "cpu", rows)
    out = expand(marker, "sdpa.md", profiles)
    assert 'data-answer="it depends on dtype or head_dim"' in out
    assert "<code>flash</code> in head_dim 64 (2); <code>math</code> in head_dim 320 (2)" in out


def test_a_dispatch_row_without_its_refusals_fails_the_build_naming_the_file(profiles):
    add_dispatch(profiles / "cpu", [{k: v for k, v in cpu_rows()[0].items() if k != "refused"}])
    with pytest.raises(sets.BrokenSet, match=r"dispatch\.json"):
        expand("<!-- profile-figure: dispatch -->", "sdpa.md", profiles)


# --- files and the whole build --------------------------------------------------------------------


def test_artifacts_are_registered_as_site_files(profiles, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_PROFILES_DIR", str(profiles))
    (tmp_path / "docs").mkdir()
    config = MkDocsConfig(config_file_path=str(ROOT / "mkdocs.yml"))
    config.load_dict({
        "site_name": "t",
        "docs_dir": str(tmp_path / "docs"),
        "site_dir": str(tmp_path / "site"),
        "hooks": [str(HOOKS / "profiles.py")],
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
    public = profiles / artifacts.PUBLIC_DIR / "someone" / artifacts.VIEWER
    _write(public, PNG)
    uris = {f.src_uri for f in config.plugins.on_files(Files([]), config=config)}
    assert "profiles/public/someone/viewer.png" in uris
    assert not any(u.endswith(".md") for u in uris)  # table.md is inlined, never a page
    svg = files.get_file_from_path("profiles/cpu/naive/timeline.svg")
    # A set's picture is published as written again from what the allowlist keeps, not copied.
    assert svg.content_bytes == clean_svg(TIMELINE.encode())
    assert Path(svg.abs_dest_path) == tmp_path / "site/profiles/cpu/naive/timeline.svg"


@pytest.mark.slow
def test_strict_build_with_fake_profiles_copies_artifacts(profiles, tmp_path):
    site = tmp_path / "site"
    env = {
        **os.environ,
        "ATTN_PROFILES_DIR": str(profiles),
        "NO_MKDOCS_2_WARNING": "1",
        "JUPYTER_CONFIG_PATH": str(ROOT / "docs/jupyter"),
    }
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (site / "profiles/nvidia-h200/naive/trace.json.gz").exists()
    assert (site / "profiles/cpu/naive/timeline.svg").read_bytes() == clean_svg(TIMELINE.encode())
    page = (site / "naive/index.html").read_text(encoding="utf-8")
    assert page.index("NVIDIA H200") < page.index("Fake CPU Model")
    assert 'src="../profiles/cpu/naive/timeline.svg"' in page


def test_glance_marker_tabulates_every_variant_with_speedup_and_its_specs_lesson(profiles):
    (profiles / "nvidia-h200" / "overview.svg").write_text(TIMELINE)
    artifacts.write_manifest(profiles / "nvidia-h200")
    out = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    gpu, cpu = out[: out.index('"CPU"\n')], out[out.index('"CPU"\n') :]
    lesson = specs.spec("naive").lesson  # the summaries carry no lesson: the spec does
    # No timing pass in these sets: the profiler's means, labelled so, and no speedup.
    assert f"| `naive`<br><small>{lesson}</small> | 5 | 1.23 ms | 456.0 µs | 3.0 MiB |" in gpu
    assert "| kernels | CPU time (profiled) | device time (profiled) | peak memory |" in gpu
    assert "no timing pass in this set, so no spread and no speedup" in gpu
    assert "(profiles/nvidia-h200/overview.svg)" in gpu
    assert (
        f"`sdpa_cudnn`<br><small>{specs.spec('sdpa_cudnn').lesson}</small> | not available here | – | – |"
        in cpu
    )
    assert "| ATen ops | CPU time (profiled) | peak memory |" in cpu and "device time" not in cpu


def add_timing(folder: Path, rows: dict, decide: bool = True, **extra) -> None:
    """A timing.json beside the set: {variant: (median, low, high)}; with decide, its claims
    decided into claims.json as the timing pass does (rows wrong on purpose cannot be)."""
    timed = [
        {"variant": v, "median_us": m, "low_us": lo, "high_us": hi, "repeats": 20}
        for v, (m, lo, hi) in rows.items()
    ]
    _write(folder / artifacts.TIMING, {"interval": "interquartile range", "rows": timed, **extra})
    write_claims(folder, specs) if decide else artifacts.write_manifest(folder)
    sets.hardware_sets.cache_clear()


def test_glance_with_a_timing_pass_shows_intervals_and_cannot_tell_on_overlap(profiles):
    (profiles / "cpu/inplace").mkdir()
    naive = json.loads((profiles / "cpu/naive/summary.json").read_text())
    _write(profiles / "cpu/inplace/summary.json", {**naive, "variant": "inplace"})
    add_timing(profiles / "cpu", {"naive": (100e3, 95e3, 110e3), "inplace": (90e3, 85e3, 96e3)})
    out = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    cpu = out[out.index('"CPU"\n') :]
    assert "| ATen ops | time (median, IQR) | speedup | peak memory |" in cpu
    assert "| 100.00 ms<br><small>95.00 ms–110.00 ms</small> | 1× |" in cpu  # the reference itself
    # inplace's range (85-96 ms) overlaps naive's (95-110 ms): the speedup cannot tell
    cell = "| 90.00 ms<br><small>85.00 ms–96.00 ms</small> | 1.11×<br><small>0.99–1.29×, cannot tell</small> |"
    assert cell in cpu
    add_timing(profiles / "cpu", {"naive": (100e3, 98e3, 102e3), "inplace": (90e3, 89e3, 91e3)})
    apart = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    assert "| 1.11×<br><small>1.08–1.15×</small> |" in apart and "interquartile range" in apart


def test_speedup_marker_says_cannot_tell_or_which_is_faster(profiles):
    add_timing(
        profiles / "cpu",
        {"naive": (100e3, 95e3, 110e3), "sdpa_cudnn": (90e3, 85e3, 96e3)},
        score_clone={
            "bytes": 2**20,
            "median_us": 10e3,
            "low_us": 9e3,
            "high_us": 11e3,
            "repeats": 9,
        },
    )
    out = expand("<!-- profile-speedup: naive sdpa_cudnn -->", "inplace.md", profiles)
    assert "`naive` ÷ `sdpa_cudnn`: **1.11× (0.99–1.29×)**" in out
    assert "Cannot tell which is faster: the interval holds 1×." in out
    assert "The clone of one score matrix (1.0 MiB)" in out and "10% of `naive`'s median" in out
    add_timing(profiles / "cpu", {"naive": (100e3, 98e3, 102e3), "sdpa_cudnn": (90e3, 89e3, 91e3)})
    out = expand("<!-- profile-speedup: naive sdpa_cudnn -->", "inplace.md", profiles)
    assert "`sdpa_cudnn` is faster: the whole interval is above 1×." in out
    none = expand("<!-- profile-speedup: naive sdpa_flash -->", "inplace.md", profiles)
    assert "Not profiled yet" in none


def test_a_timing_row_out_of_order_fails_the_build_in_one_line(profiles):
    add_timing(profiles / "cpu", {"naive": (100e3, 120e3, 130e3)}, decide=False)
    with pytest.raises(PluginError, match=r"timing\.json: naive: expected 0 < low_us"):
        expand("<!-- profile-glance -->", "at-a-glance.md", profiles)


def test_a_busy_set_is_stamped_on_its_tab(profiles):
    env = json.loads((profiles / "cpu/environment.json").read_text())
    load = {"load_avg_before": [3.5, 1, 1], "load_avg_after": [4.0, 2, 1], "cpu_count": 2,
            "busy": True}  # fmt: skip
    _write(profiles / "cpu/environment.json", {**env, "load": load})
    sets.hardware_sets.cache_clear()
    out = expand("<!-- profile: naive -->", "naive.md", profiles)
    cpu = out[out.index('"CPU"\n') :]
    assert "**Busy machine:** a load average of 4.00 on 2 cores" in cpu
    assert "Busy machine" not in out[: out.index('"CPU"\n')]
    _write(profiles / "cpu/environment.json", {**env, "load": {**load, "others_share": 0.46}})
    sets.hardware_sets.cache_clear()
    out = expand("<!-- profile: naive -->", "naive.md", profiles)
    assert "**Busy machine:** other work used 46% of its 2 cores" in out


def test_figure_marker_shows_the_picture_of_each_set_that_has_it(profiles):
    (profiles / "cpu" / "scaling.svg").write_text(TIMELINE)
    (profiles / "cpu" / "scaling.json").write_text("[]")
    artifacts.write_manifest(profiles / "cpu")
    out = expand("<!-- profile-figure: scaling -->", "sdpa.md", profiles)
    assert "(profiles/cpu/scaling.svg)" in out and "(profiles/cpu/scaling.json)" in out
    assert "NVIDIA H200" not in out  # that set has no scaling picture


def test_peaks_marker_shows_the_shares_and_what_limits_the_kernel(profiles):
    marker = "<!-- profile-peaks: custom_cpu -->"
    assert "Not profiled yet" in expand(marker, "custom-kernels.md", profiles)  # no benchmark
    add_benchmark(profiles / "cpu", BENCH)  # a set from before the peaks
    old = expand(marker, "custom-kernels.md", profiles)
    assert "Shares of the measured peaks: not measured in this set." in old
    assert "What limits custom_cpu, compute or memory: not measured in this set" in old
    peaks = {"fp32_fma_tflops": 0.5, "triad_gbs": 10.0}
    measured = [{**r, "dtype": "float32", "peaks": peaks, "peak": "fp32_fma",
                 "peak_tflops": 0.5, "peak_share": 0.2} for r in BENCH]  # fmt: skip
    add_benchmark(profiles / "cpu", measured)
    waiting = expand(marker, "custom-kernels.md", profiles)
    assert "No picture of the shares in this set yet: `attn-profile recheck`" in waiting
    assert "By the roofline, compute bounds" in waiting
    peaks_figure.write(profiles / "cpu", measured)
    out = expand(marker, "custom-kernels.md", profiles)
    assert "](profiles/cpu/peaks.svg){ loading=lazy }" in out
    assert out.index("peaks.svg") < out.index("By the roofline")
    assert "NVIDIA H200" not in out  # that set has no benchmark


def test_benchmark_figure_shows_its_table_closed_under_the_picture(profiles):
    add_benchmark(profiles / "cpu", BENCH)
    out = expand("<!-- profile-figure: benchmark -->", "custom-kernels.md", profiles)
    assert out.index("(profiles/cpu/benchmark.svg)") < out.index('??? abstract "The benchmark in')
    row = "| `custom_cpu` | float32<br><small>512 × 64, causal</small> | 150.0 µs | 0.75 |"
    assert f"\n        {row}" in out  # in the closed block, in the tab
    assert "Data: [benchmark.json](profiles/cpu/benchmark.json)" in out


def test_chapters_marker_lists_the_nav_with_each_pages_description(profiles, tmp_path):
    docs = tmp_path / "docs"
    _write(docs / "index.md", "# Home\n\n<!-- profile-chapters -->\n")
    _write(docs / "a.md", "---\ndescription: The first page.\n---\n\n# A\n")
    _write(docs / "nb/b.ipynb", {"cells": [], "metadata": {"description": "A notebook."}})
    nav = [{"Home": "index.md"}, {"Page A": "a.md"}, {"Notebook B": "nb/b.ipynb"}]
    config = {"docs_dir": str(docs), "nav": nav}
    out = expand("<!-- profile-chapters -->", "index.md", profiles, config)
    assert out == "\n- [Page A](a.md): The first page.\n- [Notebook B](nb/b.ipynb): A notebook.\n"
    _write(docs / "c.md", "# C, with no front matter\n")
    nav.append({"Page C": "c.md"})
    with pytest.raises(PluginError, match=r"^index\.md: c\.md, in the nav, has no description"):
        expand("<!-- profile-chapters -->", "index.md", profiles, config)


def add_training_step(folder: Path, spread: bool = False) -> None:
    """A train_naive folder beside the set's naive: its summary gets a backward block (with
    `spread`, each profiled step's times, as a summary keeps them since they are shown)."""
    naive = json.loads((folder / "naive" / "summary.json").read_text())
    backward = {
        "cpu_time_us": 2469.0, "device_time_us": None, "ops_per_backward": 78.0,
        "kernels_per_backward": None, "peak_memory_bytes": 2**20,
        "saved_for_backward_bytes": 5 * 2**20, "peak_memory_step_bytes": 7 * 2**20,
    }  # fmt: skip
    if spread:  # the steps' times around their means, 1234.5 µs and 2469 µs
        naive["ranges"] = [{"cpu_time_us": t} for t in (1200.0, 1234.5, 1269.0)]
        backward["ranges"] = [{"cpu_time_us": t} for t in (2400.0, 2469.0, 2538.0)]
    for name in ("summary.json", "trace.json.gz", "viewer.png", "timeline.svg"):
        source = folder / "naive" / name
        if name == "summary.json":
            _write(
                folder / "train_naive" / name,
                {**naive, "variant": "train_naive", "backward": backward},
            )
        elif source.is_file():
            _write(folder / "train_naive" / name, source.read_bytes())
    write_claims(folder, specs)  # as the sweep does after its rows; and the manifest
    sets.hardware_sets.cache_clear()


def test_a_training_step_shows_its_backward_apart(profiles):
    add_training_step(profiles / "cpu")
    out = expand("<!-- profile: train_naive -->", "training.md", profiles)
    assert (  # this summary kept no times per step: a reader is told there is no spread
        "**Per backward:** 2.47 ms (no spread in this set) CPU time (profiled) · 78 ATen ops · "
        "1.0 MiB peak memory · " in out
    )
    assert "5.0 MiB saved for it · 7.0 MiB peak of the step" in out
    assert "trace viewer, one attn_bwd" in out and 'data-trace-range="attn_bwd"' in out
    glance = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    lesson = specs.spec("train_naive").lesson
    name = f"`train_naive`<br><small>{lesson}</small>"
    nothing = "<br><small>no spread in this set</small>"
    cells = f"| {name} | – | 1.23 ms{nothing} | 2.47 ms{nothing} | 5.0 MiB | 7.0 MiB |"
    assert cells in glance  # no timing pass either
    head = (
        "| step (median, IQR) | forward (profiled, range) | backward (profiled, range) | "
        "saved for backward |"
    )
    assert head in glance
    assert "Training steps: a whole step timed" in glance
    assert f"| {name} | 45 |" not in glance  # not among the forwards


def test_a_training_steps_times_carry_their_spread_and_why_two_measures_differ(profiles):
    add_training_step(profiles / "cpu", spread=True)
    out = expand("<!-- profile: train_naive -->", "training.md", profiles)
    assert "**Per forward:** 1.23 ms (1.20 ms–1.27 ms) CPU time (profiled)" in out
    assert "**Per backward:** 2.47 ms (2.40 ms–2.54 ms) CPU time (profiled)" in out
    marker = "<!-- profile-claim: train_naive profiled-over-timed -->"
    assert "Not measured yet" in expand(marker, "training.md", profiles)  # no timing pass yet
    # Profiled, forward plus backward: 3.60 to 3.81 ms a step; timed whole: 3.0 to 3.2 ms.
    add_timing(profiles / "cpu", {"train_naive": (3.1e3, 3.0e3, 3.2e3)})
    glance = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    assert (
        "| 1.23 ms<br><small>1.20 ms–1.27 ms</small> | 2.47 ms<br><small>2.40 ms–2.54 ms" in glance
    )
    assert (
        "The profiled forward plus backward against the step timed whole: longer at 1 of 1 "
        "steps; the profiler records every op" in glance
    )
    box = expand(marker, "training.md", profiles)
    assert box.startswith('\n!!! success "At every training step, the profiled forward plus')
    assert (
        "✓ **holds** on CPU (observed: longer at 1 of 1 steps: train_naive: profiled 3.70 ms "
        "(3.60 ms–3.81 ms), timed 3.10 ms (3.00 ms–3.20 ms). Why: the profiler records" in box
    )
    # Timed slower than profiled: the claim fails, and both texts give the other reason.
    add_timing(profiles / "cpu", {"train_naive": (4.1e3, 4.0e3, 4.2e3)})
    box = expand(marker, "training.md", profiles)
    assert box.startswith("\n!!! warning") and "✗ **does not hold** on CPU" in box
    assert "shorter at 1 (train_naive)" in box and "the timed step also holds the loss" in box
    glance = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    assert "longer at 0 of 1 steps, shorter at 1 (train_naive); the timed step also" in glance


def test_a_step_timed_longer_on_a_busy_set_cannot_tell(profiles):
    add_training_step(profiles / "cpu", spread=True)
    add_timing(profiles / "cpu", {"train_naive": (4.1e3, 4.0e3, 4.2e3)})  # timed longer
    env = json.loads((profiles / "cpu/environment.json").read_text())
    load = {"load_avg_before": [3.5, 1, 1], "load_avg_after": [4.0, 2, 1], "cpu_count": 2,
            "busy": True}  # fmt: skip
    _write(profiles / "cpu/environment.json", {**env, "load": load})
    write_claims(profiles / "cpu", specs)  # as the run that stamped the set busy decides them
    sets.hardware_sets.cache_clear()
    box = expand("<!-- profile-claim: train_naive profiled-over-timed -->", "training.md", profiles)
    assert "does not hold" not in box and "cannot tell at 1 (train_naive)" in box
    assert "a busy machine" in box
    glance = expand("<!-- profile-glance -->", "at-a-glance.md", profiles)
    assert "longer at 0 of 1 steps, cannot tell at 1 (train_naive)" in glance


def test_a_figure_claim_reads_its_figures_rows(profiles):
    marker = "<!-- profile-claim: train_naive keeps-4x-flash -->"
    before = expand(marker, "training.md", profiles)
    assert "Not measured yet: no profile set here has training.json on a CPU." in before
    rows = [
        {"variant": v, "seq": seq, "saved_for_backward_bytes": n}
        for seq, naive, flash in ((512, 20, 8), (1024, 80, 16), (2048, 300, 32))
        for v, n in (("train_naive", naive), ("train_sdpa_flash", flash))
    ]
    _write(profiles / "cpu" / "training.json", rows)
    _write(profiles / "cpu" / "training.svg", TIMELINE)
    write_claims(profiles / "cpu", specs)  # as the training sweep does after its rows
    sets.hardware_sets.cache_clear()
    after = expand(marker, "training.md", profiles)
    assert after.startswith('\n!!! success "From 1024 tokens on')
    assert (
        "(observed: at least 4× at 2 of 2 lengths; train_naive ÷ train_sdpa_flash: 5.0× at seq "
        "1024, 9.4× at seq 2048)"
    ) in after


def test_public_marker_shows_source_findings_picture_and_claims(profiles):
    """A trace recorded by others, from the committed profiles/public/ artifacts."""
    out = expand(
        "<!-- profile-public: tracelens-h100-bert-small-sdpa-flash -->\n",
        "sdpa.md",
        ROOT / "profiles",
    )
    assert "NVIDIA H100 80GB HBM3" in out and "MIT license" in out
    assert "https://github.com/AMD-AGI/TraceLens/blob/" in out
    assert (
        "| `sdpa_flash`<br><small>forward</small> | nn.Module: BertSdpaSelfAttention<br><small>"
        r"\[1,8,141,64\] \[1,8,141,64\] \[1,8,141,64\]</small> | 4 | 1 kernel · 9.4 µs (9.1 µs–10.1 µs) · "
        "12% of device time |"
    ) in out  # times with their spread over the four calls
    assert "Attention takes 12% of the trace's device time" in out
    assert "- The trace itself: 1 complete event(s) overlap" in out
    assert "(profiles/public/tracelens-h100-bert-small-sdpa-flash/viewer.png)" in out
    raw = "https://github.com/AMD-AGI/TraceLens/raw/"  # the trace, downloaded from its source
    assert re.search(rf"Download: \[gaunernst_bert-small-uncased__1016001\.json\.gz\]\({raw}", out)
    # a phone opens the screenshot at the event it boxes
    assert re.search(r'\{ loading=lazy data-mark="0\.\d{3} 0\.\d{3}" \}', out)
    for claim in specs.public("tracelens-h100-bert-small-sdpa-flash").claims:
        assert hook.md.prose(claim.text) in out
    assert "✓ **holds:**" in out


def test_public_marker_shows_each_call_s_attention_kernels_and_what_no_row_explains(profiles):
    """The multi-query trace: a call's time beside its attention kernels' own, and the largest
    kernels outside the attention, with who launched them."""
    out = expand(
        "<!-- profile-public: switchtransformers-a100-eager-mqa-fp32 -->\n",
        "naive.md",
        ROOT / "profiles",
    )
    assert "12 kernels · 4.11 ms (3.46 ms–8.61 ms) · attention kernels 2.85 ms · 7% of" in out
    assert (
        "which no row above explains): 54% `ampere_sgemm_128x64_tn` (41 calls, under "
        "`aten::addmm`); 33% `ampere_sgemm_128x32_tn` (50 calls"
    ) in out
    assert "and 2 more." in out


def test_public_marker_groups_what_it_could_not_check(profiles):
    out = expand(
        "<!-- profile-public: tracelens-mi300x-sglang-decode-graph -->\n",
        "decoding.md",
        ROOT / "profiles",
    )
    (line,) = [x for x in out.splitlines() if x.startswith("- Not checked")]
    assert "`repeat_kv`" in line and "graph replay" in line


def test_public_marker_without_artifacts_is_a_note_and_an_unknown_one_fails(profiles):
    out = expand("<!-- profile-public: tracelens-mi300x-compiled-sdpa -->\n", "x.md", profiles)
    assert "Not written yet" in out and "python -m attn.profiling.public" in out
    with pytest.raises(PluginError, match="unknown public trace 'mine'"):
        expand("<!-- profile-public: mine -->\n", "x.md", profiles)


def test_every_public_trace_is_shown_by_its_chapter():
    for public in specs.PUBLIC:
        page = (ROOT / "docs" / public.chapter).read_text(encoding="utf-8")
        assert f"<!-- profile-public: {public.folder} -->" in page, public.chapter


def test_a_device_name_with_quotes_and_tags_is_shown_as_text(tmp_path):
    """Anything read from a contributed set is text: it broke the Perfetto button's attribute
    and landed as raw HTML in the tab label."""
    import html.parser

    import markdown

    name = 'NVIDIA "H200" <b>x</b>'
    root = write_fake_profiles(tmp_path / "profiles")
    gpu = root / "nvidia-h200"
    for path in (gpu / "environment.json", gpu / "naive/summary.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "device_name": name}))
    artifacts.write_manifest(gpu)
    page = markdown.markdown(
        expand("<!-- profile: naive -->", "naive.md", root),
        extensions=["admonition", "attr_list", "tables", "pymdownx.superfences",
                    "pymdownx.tabbed"],
        extension_configs={"pymdownx.tabbed": {"alternate_style": True}},
    )  # fmt: skip

    class Reader(html.parser.HTMLParser):
        tags, titles, labels, label = set(), [], [], False

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)
            self.titles += [v for k, v in attrs if k == "data-perfetto-title"]
            self.label = tag == "label"

        def handle_data(self, data):
            self.labels += [data] if self.label else []
            self.label = False

    reader = Reader()
    reader.feed(page)
    assert "b" not in reader.tags  # no element made of the name
    assert name in reader.labels  # the tab says it as it is
    assert any(name in t for t in reader.titles)


# --- whatever a set or a trace holds shows as text ------------------------------------------------

XSS = "X`<img src=x onerror=xss=1>` <img src=y onerror=xss=2>"  # a backtick closed a code span
PUBLIC = "tracelens-h100-bert-small-sdpa-flash"


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _analysed_table(name: str) -> str:
    """table.md as analyze writes it for a trace whose one op is called `name`."""
    from attn.traces.figures.table import markdown_table
    from attn.traces.read.trace import parse

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": 0, "dur": 10,
         "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": name, "ts": 1, "dur": 5, "pid": 1, "tid": 1},
    ]  # fmt: skip
    return markdown_table(parse({"traceEvents": events}).forwards(None), on_device=False)


def _kernel(root: Path) -> None:
    _edit(root / "nvidia-h200/naive/summary.json", lambda s: s.update(kernels=[XSS]))


def _table(root: Path) -> None:
    (root / "cpu/naive/table.md").write_text(_analysed_table(XSS))


def _claim(root: Path) -> None:
    def change(s):
        s["claims"][0].update(text=f"Runs {XSS}.", observed=f"{XSS} [x](javascript:alert(1))")

    _edit(root / "cpu/naive/summary.json", change)


def _reason(root: Path) -> None:
    _edit(root / "cpu/sdpa_cudnn/summary.json", lambda s: s.update(reason=XSS))


def _diff(root: Path) -> None:
    row = {"name": XSS, "kind": "op", "calls_a": 1, "calls_b": 0, "time_us_a": 1.0,
           "time_us_b": 0.0, "change": "gone"}  # fmt: skip
    data = {"a": {"label": "naive"}, "b": {"label": "sdpa_cudnn"}, "notes": [XSS],
            "rows": [row], "headline": f"{XSS} gone", "markdown": f"<script>{XSS}</script>"}  # fmt: skip
    _write(root / "cpu/diff/naive__sdpa_cudnn.json", data)
    artifacts.write_manifest(root / "cpu")


def _public(root: Path) -> None:
    folder = root / "public" / PUBLIC
    shutil.copytree(ROOT / "profiles/public" / PUBLIC, folder)

    def change(d):
        d["attention"][0]["where"] = XSS
        d["screenshot"]["where"] = XSS

    _edit(folder / "diagnosis.json", change)


def _benchmark(root: Path) -> None:
    row = {"batch": 1, "heads": 8, "seq": 64, "head_dim": 32, "is_causal": True,
           "dtype": "float32", "time_us": 5.0, "cpu_capability": XSS}  # fmt: skip
    add_benchmark(root / "cpu", [{**row, "variant": "sdpa_flash"},
                                 {**row, "variant": XSS, "ratio_to_flash": 0.5}])  # fmt: skip


def _environment(root: Path) -> None:
    _edit(root / "cpu/environment.json", lambda e: e.update(cpu_model=f"[{XSS}](javascript:xss=3)"))


XSS_CASES = {  # how the set carries it -> the marker that shows it
    "kernel name": (_kernel, "<!-- profile: naive -->"),
    "op name in table.md": (_table, "<!-- profile: naive -->"),
    "claim text and observed": (_claim, "<!-- profile-check: naive -->"),
    "unavailable reason": (_reason, "<!-- profile: sdpa_cudnn -->"),
    "diff": (_diff, "<!-- profile-diff: naive sdpa_cudnn -->"),
    "public where": (_public, f"<!-- profile-public: {PUBLIC} -->"),
    "benchmark row": (_benchmark, "<!-- profile-figure: benchmark -->"),
    "environment": (_environment, "<!-- profile: naive -->"),
}
EXTENSIONS = [
    "admonition",
    "attr_list",
    "md_in_html",
    "tables",
    "pymdownx.details",
    "pymdownx.superfences",
    "pymdownx.tabbed",
]  # fmt: skip  (mkdocs.yml's)


def rendered(case: str, root: Path) -> str:
    """The HTML the site would hold for the case's marker, its set carrying the name."""
    import markdown

    tamper, marker = XSS_CASES[case]
    tamper(root)
    sets.hardware_sets.cache_clear()
    page = expand(marker, "naive.md", root, {"nav": [{"SDPA": "sdpa.md"}]})
    return markdown.markdown(
        page,
        extensions=EXTENSIONS,
        extension_configs={"pymdownx.tabbed": {"alternate_style": True}},
    )


@pytest.mark.parametrize("case", XSS_CASES)
def test_a_name_from_a_set_or_a_trace_is_text_on_the_page(profiles, case):
    """Each case put a script in the built page; the browser test runs them in chromium."""
    import html.parser

    class Reader(html.parser.HTMLParser):
        tags, text = set(), []

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)
            assert not any(k.startswith("on") for k, _ in attrs), (tag, attrs)
            assert not any("javascript:" in (v or "") for _, v in attrs), (tag, attrs)

        def handle_data(self, data):
            self.text.append(data)

    reader = Reader()
    reader.feed(rendered(case, profiles))
    assert "script" not in reader.tags  # and no on* attribute anywhere (handle_starttag)
    assert XSS in "".join(reader.text)  # shown, as it is


def test_a_marker_that_writes_a_snippet_include_fails_the_build(profiles, monkeypatch):
    """Only an excerpt includes a file: a set's text that slipped past attn.traces.common.markdown onto a
    line of its own would have pymdownx.snippets publish a file of the checkout."""
    monkeypatch.setitem(hook.RENDERERS, "profile-env", (0, lambda page: '\n--8<-- "LICENSE"\n'))
    with pytest.raises(PluginError, match="wrote a snippet include"):
        expand("<!-- profile-env -->", "x.md", profiles)


# --- a variant run on several ranks ------------------------------------------------------------


def add_ring(folder: Path, name: str = "ring_contiguous") -> None:
    """The ring example's ranks, analysed into the set as a profile run does."""
    from rank_traces import write_ring

    from attn.traces.ranks.folder import rank_traces
    from attn.traces.sets.rank_artifacts import write_ranked

    base = {"variant": name, "hardware": folder.name, "device_name": "Fake CPU Model",
            "device_type": "cpu", "dtype": "float32", "is_causal": True,
            "shape": {"batch": 2, "heads": 8, "seq_q": 1024, "seq_k": 1024, "head_dim": 64}}  # fmt: skip
    traces = rank_traces(write_ring(folder.parent / f"runs-{name}", zigzag=name == "ring_zigzag"))
    write_ranked(traces, folder / name, base=base, spec=specs.spec(name), workers=1)
    write_claims(folder, specs)  # as the sweep does after its rows; and the manifest
    sets.hardware_sets.cache_clear()


def test_a_variant_run_on_ranks_shows_them_side_by_side(profiles):
    add_ring(profiles / "cpu")
    out = expand("<!-- profile: ring_contiguous -->", "context-parallel.md", profiles)
    row = "| rank 0 | 1 | 100.0 µs | 128.0 µs<br><small>78% hidden</small> | 15.0 µs | 1<br>"
    assert row + "<small>4.0 MiB each</small> |" in out
    assert "| rank 1 | 2 | 200.0 µs |" in out
    assert "**Imbalance:** the slowest rank, rank 1, computes 1.33× (1.33–1.33×)" in out
    assert "(profiles/cpu/ring_contiguous/ranks.svg)" in out  # links relative to the page
    assert out.count("its table, its timeline and its trace") == 2
    assert "(profiles/cpu/ring_contiguous/rank1/trace.json.gz)" in out
    assert "| `aten::matmul` |" in out  # rank 0's own table, from its table.md


def test_the_chapters_guesses_are_answered_from_the_ranks(profiles):
    add_ring(profiles / "cpu")
    add_ring(profiles / "cpu", "ring_zigzag")
    text = "\n\n".join(
        f"<!-- profile-guess: {kind} {name} -->"
        for kind, name in [("busiest-rank", "ring_contiguous"), ("rank0-blocks", "ring_contiguous"),
                           ("sends-per-rank", "ring_contiguous"), ("send-mib", "ring_contiguous"),
                           ("busiest-rank", "ring_zigzag")]
    )  # fmt: skip
    answers = [m[1] for m in re.finditer(r'data-answer="([^"]*)"', expand(text, "x.md", profiles))]
    assert answers == ["the last rank", "1", "1.0", "4.0", "every rank the same"]


def test_the_context_parallel_chapter_renders_where_no_set_ran_the_ring(profiles):
    page = (ROOT / "docs/context-parallel.md").read_text(encoding="utf-8")
    out = expand(page, "context-parallel.md", profiles)
    assert out.count('"Not profiled yet"') == 2 + 5  # its variants and guesses (claims: below)
    assert "Not checked yet" in out  # every claim waits for a run


def test_every_picture_gets_its_width_and_height_from_its_file(profiles):
    """PNG headers, SVG sizes in pt (matplotlib's), data: URLs; a picture it cannot read is left."""
    import base64

    from image_sizes import with_sizes

    png = next(profiles.glob("*/naive/viewer.png")).read_bytes()
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" width="518.4pt" height="223.2pt"></svg>'
    files = {"profiles/a/viewer.png": png, "profiles/a/t.svg": svg}
    inline = "data:image/svg+xml;base64," + base64.b64encode(svg).decode()
    page = (
        '<img src="../profiles/a/viewer.png" alt="x"><img src="../profiles/a/t.svg" />'
        f'<img src="{inline}"><img src="../profiles/a/gone.png"><img src="x.png" width="3" height="4">'
    )
    out = with_sizes(page, "naive/", files.get)
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert f'<img src="../profiles/a/viewer.png" alt="x" width="{width}" height="{height}">' in out
    assert '<img src="../profiles/a/t.svg" width="691" height="298"/>' in out  # pt -> px
    assert f'<img src="{inline}" width="691" height="298">' in out
    assert '<img src="../profiles/a/gone.png">' in out  # nothing to read: left as it was
    assert '<img src="x.png" width="3" height="4">' in out


def test_the_install_line_offers_the_sites_wheel_and_a_checkout_only_where_linked(profiles):
    from sources import wheel_name

    wheel = wheel_name(ROOT)
    assert re.fullmatch(r"attention_profiled-[\w.]+-py3-none-any\.whl", wheel)
    bare = expand("<!-- profile-install -->", "custom-kernels.md", profiles)
    assert f'<a href="../dist/{wheel}" download>`{wheel}`</a>' in bare  # from custom-kernels/
    assert "this build of the site links none" in bare
    linked = expand(
        "<!-- profile-install -->", "index.md", profiles, {"repo_url": "https://example.org/r"}
    )
    assert f'<a href="dist/{wheel}" download>' in linked
    assert "[the repository](https://example.org/r)" in linked


def test_a_timeline_marks_the_event_it_labels_for_its_chapter():
    from profile_text import timeline_mark

    svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 500 100">'
        b'<text x="100">aten::bmm</text><text x="300">masked\xe2\x80\xa6</text></svg>'
    )
    left, right = map(float, re.findall(r"[\d.]+", timeline_mark(svg, "aten::masked_fill")))
    assert left < 0.6 < right  # the cut label, around its middle at 300 of 500
    assert timeline_mark(svg, "aten::clone") == ""  # not on this timeline: no mark
    assert timeline_mark(b'<svg xmlns="http://www.w3.org/2000/svg"/>', "aten::bmm") == ""
