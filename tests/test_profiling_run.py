"""A profile run's artifact folder: files, contents, scrubbing, atomic replacement, the manifest."""

import getpass
import gzip
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_traces_scrub import scrub_trace

import attn
from attn import specs
from attn.profiling import run as run_module
from attn.profiling.config import ProfileConfig
from attn.profiling.environment import hardware_slug
from attn.profiling.run import ProfilingError, finish_set, profile_variant
from attn.traces.figures import timeline

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
    "memcpy_per_forward",
    "memset_per_forward",
    "kernels",
    "peak_memory_bytes",
    "ranges",
    "stamp",
}


@pytest.fixture(scope="module")
def naive_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("profiles")
    return profile_variant(attn.get_variant("naive"), TINY, out)


def test_folder_has_every_artifact(naive_folder):
    assert naive_folder.name == "naive" and naive_folder.parent.name == hardware_slug("cpu")
    assert {p.name for p in naive_folder.iterdir()} == FILES


def test_summary_has_the_contract_fields(naive_folder):
    s = json.loads((naive_folder / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(s)
    assert s["available"] is True
    assert s["shape"] == {"batch": 1, "heads": 2, "seq_q": 64, "seq_k": 64, "head_dim": 32}
    assert s["device_time_us"] is None and s["kernels_per_forward"] is None
    assert s["cpu_time_us"] > 0 and s["ops_per_forward"] >= 10
    # Peak from the trace's memory events: at least the scores and their masked copy.
    assert s["peak_memory_bytes"] >= 2 * 1 * 2 * 64 * 64 * 4
    assert len(s["ranges"]) == 3 and s["ranges"][0]["name"] == "attn_fwd"


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
        "distributedInfo": {"hostname": "box7", "rank": 0},
        "traceEvents": [
            {"name": "device on box7", "args": {"file": "/home/ann/p/a.py", "who": "ann"}},
            {
                "name": "triton_poi_fused_0",
                "args": {"kernel_file": "/tmp/torchinductor_ann/ab/cx.py"},
            },
        ],
    }
    clean = scrub_trace(trace, paths=["/home/ann"], names=["box7", "ann"])
    text = json.dumps(clean)
    assert "/home/ann" not in text and "torchinductor_ann" not in text
    assert "/tmp/torchinductor_<redacted>/ab/cx.py" in text  # the cache path keeps its shape
    assert "host_name" not in clean and "hostname" not in clean["distributedInfo"]
    assert clean["traceName"] == "trace.json"
    # A host the trace names is redacted wherever it appears; a user name only inside paths.
    assert clean["traceEvents"][0]["name"] == "device on <redacted>"
    assert clean["traceEvents"][0]["args"]["who"] == "ann"


def test_a_user_named_like_a_token_renames_no_op_or_kernel():
    trace = {
        "traceEvents": [
            {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "args": {}},
            {"name": "void cuda::gemm<cuda>(cuda)", "cat": "kernel", "args": {"stream": 7}},
            {"name": "x", "args": {"file": "/home/cuda/x.py"}},
        ]
    }
    clean = scrub_trace(trace, paths=[], names=["cuda"])
    assert [e["name"] for e in clean["traceEvents"][:2]] == [
        "cudaLaunchKernel",
        "void cuda::gemm<cuda>(cuda)",
    ]
    assert clean["traceEvents"][2]["args"]["file"] == "/home/<redacted>/x.py"


def test_timeline_is_small_and_shows_the_copy(naive_folder):
    svg = (naive_folder / "timeline.svg").read_text()
    assert len(svg.encode()) < 300_000
    assert "naive on" in svg and "attn_fwd" in svg
    assert "#d62728" in svg  # a red bar: the hidden copy of the scores
    assert "copy of the scores" in svg  # in the legend, since there is one


def test_unavailable_variant_is_recorded_with_its_reason(tmp_path):
    folder = profile_variant(attn.get_variant("sdpa_cudnn"), TINY, tmp_path)
    s = json.loads((folder / "summary.json").read_text())
    assert s["available"] is False
    assert "cudnn" in s["reason"]
    assert [p.name for p in folder.iterdir()] == ["summary.json"]


def test_a_run_without_chromium_says_which_pictures_it_removed_and_why(tmp_path, monkeypatch):
    """A run without chromium deleted the committed viewer.png files it could not remake, unsaid."""
    folder = profile_variant(attn.get_variant("naive"), TINY, tmp_path)
    (folder / "viewer.png").write_bytes(b"\x89PNG a picture of the trace this run replaces")
    monkeypatch.setenv("PATH", str(tmp_path / "no-chromium-here"))
    profile_variant(attn.get_variant("naive"), TINY, tmp_path, screenshot=True)
    assert not (folder / "viewer.png").exists()  # it showed the old trace
    why = json.loads((folder / "summary.json").read_text())["viewer"]["missing"]
    assert "took none" in why and ("chromium" in why or "viewer" in why), why
    line = run_module.removed_viewers_line(tmp_path, "cpu")
    assert line.startswith("viewer.png removed for naive: each showed the trace this run replaced")
    assert run_module.removed_viewers_line(tmp_path, "cpu") is None  # said once


def test_a_run_into_a_committed_set_says_it_replaces_it(tmp_path):
    """A run replaced the committed set of its CPU (149 files) and said nothing."""
    folder = tmp_path / hardware_slug("cpu")
    folder.mkdir()
    (folder / "environment.json").write_text("{}")
    assert run_module.replaced_set_line(tmp_path, "cpu") is None  # a set of one's own, untracked
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    line = run_module.replaced_set_line(tmp_path, "cpu")
    assert f"{folder}/ is a committed set: this run replaces" in line and "git checkout" in line


def test_failure_leaves_previous_artifacts_intact(tmp_path, monkeypatch):
    folder = profile_variant(attn.get_variant("inplace"), TINY, tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(timeline, "draw_timeline", broken)
    with pytest.raises(ProfilingError, match="inplace.*disk full"):
        profile_variant(attn.get_variant("inplace"), TINY, tmp_path)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in (tmp_path / hardware_slug("cpu")).iterdir()] == [
        "inplace"
    ]  # no scratch left behind


def test_first_failure_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(
        run_module, "capture", lambda *a: (_ for _ in ()).throw(RuntimeError("boom"))
    )
    with pytest.raises(ProfilingError, match="naive"):
        profile_variant(attn.get_variant("naive"), TINY, tmp_path)
    assert (
        not (tmp_path / hardware_slug("cpu")).exists()
        or list((tmp_path / hardware_slug("cpu")).iterdir()) == []
    )


def test_environment_names_the_machine(tmp_path):
    env = json.loads((finish_set(tmp_path, "cpu") / "environment.json").read_text())
    assert env["hardware"] == hardware_slug("cpu") and env["device_type"] == "cpu"
    assert env["threads"] >= 1 and env["torch_version"]
    assert env["cuda_version"] is None
    load = {"load_avg_before": [0.5, 0.5, 0.5], "busy": False}
    env = json.loads((finish_set(tmp_path, "cpu", load) / "environment.json").read_text())
    assert env["load"] == load  # the run's load, as cli.run measured it before and after
    assert len(env["date"]) == 10 and env["cpu_model"]


def test_unsupported_head_dim_is_recorded_as_unavailable(tmp_path):
    class OnlyHeadDim64(attn.Variant):
        name, title, head_dims = "only64", "Only head_dim 64", (64,)

        def _attention(self, q, k, v, *, is_causal):
            return attn.reference_attention(q, k, v, is_causal=is_causal).to(q.dtype)

    folder = profile_variant(OnlyHeadDim64(), TINY, tmp_path)  # TINY has head_dim 32
    s = json.loads((folder / "summary.json").read_text())
    assert s["available"] is False and "head_dim 64" in s["reason"] and "32" in s["reason"]


def test_manifest_lists_each_variant_with_its_files_and_shape(tmp_path):
    profile_variant(attn.get_variant("naive"), TINY, tmp_path)
    profile_variant(attn.get_variant("sdpa_cudnn"), TINY, tmp_path)
    manifest = json.loads((finish_set(tmp_path, "cpu") / "index.json").read_text())
    assert manifest["hardware"] == hardware_slug("cpu") and manifest["one_shape"] is True
    naive = manifest["variants"]["naive"]
    assert naive["available"] and set(naive["files"]) == FILES
    assert naive["shape"]["seq_q"] == 64 and naive["stamp"]["torch_version"]
    assert manifest["variants"]["sdpa_cudnn"] == {
        **manifest["variants"]["sdpa_cudnn"],
        "available": False,
        "files": ["summary.json"],
    }


def test_a_set_of_two_shapes_says_so_and_labels_each_row(tmp_path):
    profile_variant(attn.get_variant("naive"), TINY, tmp_path)
    other = ProfileConfig(batch=1, heads=2, seq_q=32, seq_k=32, head_dim=32)
    profile_variant(attn.get_variant("inplace"), other, tmp_path)
    folder = finish_set(tmp_path, "cpu")
    assert json.loads((folder / "index.json").read_text())["one_shape"] is False
    svg = (folder / "overview.svg").read_text()
    assert "seq 64" in svg and "seq 32" in svg  # each bar says its own shape


def test_an_example_run_publishes_the_numbers_of_its_own_trace(tmp_path):
    root = Path(__file__).resolve().parents[1]
    folder = run_module.profile_example(
        attn.get_variant("inplace"), [str(root / "examples/inplace_attention.py")], TINY, tmp_path
    )
    s = json.loads((folder / "summary.json").read_text())
    assert s["shape"]["seq_q"] == 64 and s["forwards"] == 3
    at_scale = {c.text for c in specs.spec("inplace").claims if c.at_scale}  # not at a tiny shape
    assert all(c["holds"] is True for c in s["claims"] if c["text"] not in at_scale)
    assert "Self CPU" in (folder / "table.txt").read_text()  # the example's own profiler table
    raw = json.loads(gzip.decompress((folder / "trace.json.gz").read_bytes()))
    range_ts = sorted(e["ts"] for e in raw["traceEvents"] if e.get("name") == "attn_fwd")
    assert len(range_ts) == 3
    assert "cold_first_calls_seconds" not in s  # it compiles nothing: run once


# A compiled example as profile_example sees one, without compiling: it says whether the compile
# cache it was given was empty (9 s, cold) or held what a run before it left (1 s, warm), and
# profiles the in-place module for a trace.
FAKE_COMPILED = """import json, os, runpy, sys
from pathlib import Path
cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
cold = not any(cache.iterdir())
(cache / "built.so").write_bytes(b"")
Path({seen!r}).write_text(str(cache))
out = Path(sys.argv[sys.argv.index("--out") + 1])
sys.argv[0] = {example!r}
runpy.run_path(sys.argv[0], run_name="__main__")
(out / "inplace").rename(out / {name!r})
seconds = {{"first": 9.0 if cold else 1.0, "second": 0.1}}
(out / {name!r} / "compile.json").write_text(json.dumps(seconds))
"""


def fake_compiled(tmp_path: Path, name: str, seen: Path) -> Path:
    """FAKE_COMPILED as the example of variant `name`, noting its cache's folder in `seen`."""
    root = Path(__file__).resolve().parents[1]
    fake = tmp_path / f"{name}.py"
    example = str(root / "examples/inplace_attention.py")
    fake.write_text(FAKE_COMPILED.format(seen=str(seen), example=example, name=name))
    return fake


@pytest.mark.slow
def test_a_compiled_example_runs_cold_then_warm_on_caches_removed_after(tmp_path, monkeypatch):
    kept = tmp_path / "kept-cache"  # the caller's own cache: neither run may touch it
    kept.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(kept))
    seen = tmp_path / "seen.txt"
    fake = fake_compiled(tmp_path, "compiled_additive", seen)
    variant = attn.get_variant("compiled_additive")
    folder = run_module.profile_example(variant, [str(fake)], TINY, tmp_path / "out")
    s = json.loads((folder / "summary.json").read_text())
    assert s["cold_first_calls_seconds"]["first"] == 9.0  # the first run found nothing cached
    assert s["first_calls_seconds"]["first"] == 1.0  # the profiled run found what it left
    cold = {c["key"]: c for c in s["claims"]}["cold-first-call-costs-more"]
    assert cold["holds"] is True and "9.00 s" in cold["observed"]
    cache = Path(seen.read_text())
    assert not cache.parent.exists() and not any(kept.iterdir())
    for path in folder.rglob("*"):  # no artifact names the cache, nor its temp folder
        data = path.read_bytes()
        text = gzip.decompress(data) if path.suffix == ".gz" else data
        assert str(cache.parent).encode() not in text, path
    assert not list((tmp_path / "out" / hardware_slug("cpu")).glob(".*"))  # no scratch left


@pytest.mark.slow
def test_compiled_examples_of_one_run_share_its_caches_and_one_cold_start(tmp_path):
    """The first compiles cold, then warm; the next runs once, on what the first left (warm here:
    the fake finds the cache not empty), its first call set against the first's cold start."""
    seen = tmp_path / "seen.txt"
    out = tmp_path / "out"
    with run_module.compile_caches():
        for name in ("compiled_naive", "compiled_additive"):
            fake = fake_compiled(tmp_path, name, seen)
            run_module.profile_example(attn.get_variant(name), [str(fake)], TINY, out)
            caches = seen.read_text()
            assert Path(caches).is_dir()  # kept for the next one
            seen.unlink()
    assert not Path(caches).parent.exists()  # removed with the run
    folder = out / hardware_slug("cpu")
    first = json.loads((folder / "compiled_naive/summary.json").read_text())
    later = json.loads((folder / "compiled_additive/summary.json").read_text())
    assert first["cold_first_calls_seconds"]["first"] == 9.0
    assert first["first_calls_seconds"]["first"] == 1.0 and "first_calls_after" not in first
    assert "cold_first_calls_seconds" not in later and later["first_calls_seconds"]["first"] == 1.0
    assert later["first_calls_after"] == {
        "variants": ["compiled_naive"], "cold_start_variant": "compiled_naive",
        "cold_start_seconds": 9.0,
    }  # fmt: skip
    cold = {c["key"]: c for c in later["claims"]}["cold-first-call-costs-more"]
    assert cold["holds"] is True and "cold start (compiled_naive) 9.00 s" in cold["observed"]


def test_a_variant_that_refuses_the_shape_is_recorded_unavailable_and_the_run_goes_on(tmp_path):
    """--head-dim 300: the C++ op takes up to 256; the run records why and profiles the rest."""
    config = ProfileConfig(batch=1, heads=1, seq_q=16, seq_k=16, head_dim=300)
    for name in ("custom_cpu", "naive"):
        profile_variant(attn.get_variant(name), config, tmp_path)
    custom = json.loads((tmp_path / hardware_slug("cpu") / "custom_cpu/summary.json").read_text())
    assert custom["available"] is False and "300" in custom["reason"]
    assert custom["shape"]["head_dim"] == 300  # labelled with the run that refused it
    assert (
        json.loads((tmp_path / hardware_slug("cpu") / "naive/summary.json").read_text())[
            "available"
        ]
        is True
    )


def _alive(pid: int) -> bool:
    """Running (not ended, nor a zombie waiting to be reaped)."""
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:4]
    except FileNotFoundError:
        return False


PARENT = """import sys; from pathlib import Path; import attn
from attn.profiling.config import ProfileConfig; from attn.profiling.run import profile_example
config = ProfileConfig(batch=1, heads=1, seq_q=8, seq_k=8, head_dim=8)
profile_example(attn.get_variant("naive"), [sys.argv[1]], config, Path(sys.argv[2]))"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_killed_example_run_leaves_no_process_and_no_scratch_a_rerun_keeps(tmp_path):
    hanging = tmp_path / "hangs.py"  # an example that says who it is, then takes forever
    hanging.write_text(
        "import os, pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "(out / 'pid').write_text(str(os.getpid()))\ntime.sleep(600)\n"
    )
    out = tmp_path / "out"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(hanging), str(out)])
    deadline = time.monotonic() + 120
    while not list(out.glob(f"{hardware_slug('cpu')}/.*/pid")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid_file,) = out.glob(
        f"{hardware_slug('cpu')}/.*/pid"
    )  # the scratch is beside the set, not in /tmp
    parent.kill()
    parent.wait()
    child = int(pid_file.read_text())
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    failing = tmp_path / "fails.py"
    failing.write_text("raise SystemExit(3)\n")
    with pytest.raises(ProfilingError):
        run_module.profile_example(attn.get_variant("naive"), [str(failing)], TINY, out)
    assert not list((out / hardware_slug("cpu")).glob(".*"))


@pytest.mark.parametrize(
    ("value", "someone"),
    [
        ("file:///home/bob.jones/p/model.py", "bob.jones"),
        ("/home/bob.jones/p/model.py(12): forward", "bob.jones"),
        ("/Users/bob/p/model.py", "bob"),
        ("C:\\Users\\bob\\p\\model.py", "bob"),
        ("\\\\fileserver7\\share\\model.py", "fileserver7"),
    ],
    ids=["file URL", "another user's home", "macOS home", "Windows home", "UNC path"],
)
def test_scrubbing_covers_every_form_of_path(tmp_path, value, someone):
    """Paths of another machine, not only this one's: a trace is often taken elsewhere."""
    from attn.traces.read.scrub import Scrubber, write_trace

    trace = {"traceEvents": [{"name": "x", "ph": "X", "args": {"file": value, value: 1}}]}
    write_trace(trace, tmp_path / "t.json.gz", Scrubber(paths=[], names=[]))
    text = gzip.decompress((tmp_path / "t.json.gz").read_bytes()).decode()
    assert someone not in text and "<redacted>" in text  # the value, and the key it names


def test_host_addresses_are_dropped_wherever_they_are(tmp_path):
    trace = {
        "distributedInfo": {"backend": "nccl", "master_addr": "gpu-box-17.example.org"},
        "traceEvents": [{"name": "x", "ph": "X", "args": {"master_addr": "10.1.2.3"}}],
    }
    clean = scrub_trace(trace, paths=[], names=[])
    text = json.dumps(clean)
    assert "gpu-box-17" not in text and "10.1.2.3" not in text and "nccl" in text


def test_op_names_holding_paths_are_scrubbed_in_the_summary_too(tmp_path):
    from attn.traces.sets.analyze import write_artifacts

    trace = json.loads((Path(__file__).parent / "fixtures" / "cuda_naive_trace.json").read_text())
    for e in trace["traceEvents"]:
        if e.get("name") == "aten::softmax":
            e["name"] = "/home/bob.jones/p/model.py(12): softmax"
    write_artifacts(trace, tmp_path / "x")
    for name in ("summary.json", "table.md"):
        assert "bob.jones" not in (tmp_path / "x" / name).read_text(), name


@pytest.mark.parametrize(
    ("value", "someone"),
    [
        ("/Users/Alice Smith/p/model.py(12): forward", "Smith"),
        ("C:\\Users\\Alice Smith\\p\\model.py", "Smith"),
        ("/data/alice.smith:1234", "alice.smith"),
    ],
    ids=["a home with a space", "a Windows home with a space", "a user name before a port"],
)
def test_a_user_name_is_scrubbed_whole(value, someone):
    """The surname of /Users/Alice Smith/ was kept, and a user name followed by ':'."""
    clean = scrub_trace({"traceEvents": [{"name": "x", "args": {"file": value}}]}, paths=[],
                        names=["alice.smith"])  # fmt: skip
    assert someone not in json.dumps(clean) and "<redacted>" in json.dumps(clean)


def test_a_distributed_master_is_dropped():
    trace = {"distributedInfo": {"master": "gpu-box-17:29500", "backend": "nccl"},
             "traceEvents": [{"name": "x", "args": {"distributed": {"master": "10.1.2.3"}}}]}  # fmt: skip
    text = json.dumps(scrub_trace(trace, paths=[], names=[]))
    assert "gpu-box-17" not in text and "10.1.2.3" not in text and "nccl" in text


def test_a_host_the_trace_names_is_scrubbed_in_its_free_text(tmp_path):
    """A trace from another machine: its distributedInfo names the master, its text repeats it."""
    from attn.traces.read.scrub import Scrubber, write_trace

    trace = {
        "distributedInfo": {"backend": "nccl", "master_addr": "trainer-04.lab:29500"},
        "traceEvents": [{"name": "x", "ph": "X", "args": {"note": "rendezvous at trainer-04.lab"}}],
    }
    write_trace(trace, tmp_path / "t.json.gz", Scrubber(paths=[], names=[], hosts=[]))
    out = gzip.decompress((tmp_path / "t.json.gz").read_bytes()).decode()
    assert "trainer-04" not in out and "rendezvous at <redacted>" in out


def test_a_host_name_is_scrubbed_in_free_text_too(tmp_path):
    """'connected to gpu-node-17' kept the host: only host fields and paths were scrubbed."""
    from attn.traces.read.scrub import Scrubber, write_trace

    text = "rank 0 connected to gpu-node-17.cluster:29500 (GPU-NODE-17)"
    trace = {"traceEvents": [{"name": "nccl:all_reduce", "ph": "X", "args": {"note": text}}]}
    write_trace(trace, tmp_path / "t.json.gz", Scrubber(paths=[], names=[], hosts=["gpu-node-17"]))
    out = gzip.decompress((tmp_path / "t.json.gz").read_bytes()).decode()
    assert "gpu-node-17" not in out.lower() and "connected to <redacted>:29500" in out
    assert "nccl:all_reduce" in out


@pytest.mark.slow
def test_an_interrupted_example_run_leaves_every_file_of_the_set_as_it_was(tmp_path):
    """SIGINT at 120 s into the examples left 40 committed files changed (the variants profiled
    so far beside the others' numbers); the run writes a copy of the set, swapped in only whole."""
    import hashlib
    import shutil
    import signal

    from committed import CPU_SET

    out = tmp_path / "profiles"
    shutil.copytree(CPU_SET, out / hardware_slug("cpu"))

    def files() -> dict[str, str]:
        return {
            p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*"))
            if p.is_file()
        }

    before = files()
    argv = [sys.executable, "-m", "attn.profiling", "example", "inplace", "naive", "sdpa_math",
            "custom_cpu", "--out", str(out), "--device", "cpu", "--batch", "1", "--heads", "2", "--seq", "64", "--head-dim", "32",
            "--no-screenshot"]  # fmt: skip
    # A background job inherits SIGINT ignored; a terminal's Ctrl-C finds the default handler.
    default = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=default)  # fmt: skip
    start, deadline = time.time(), time.monotonic() + 300
    while time.monotonic() < deadline and job.poll() is None:  # a summary written, others to go
        if any(p.stat().st_mtime >= start for p in out.rglob("summary.json")):
            break
        time.sleep(0.05)
    job.send_signal(signal.SIGINT)
    said, err = job.communicate(timeout=120)
    assert job.returncode == 130, err
    assert "interrupted: the previous artifacts are left as they were" in said + err
    assert "Traceback" not in said + err
    assert files() == before
