import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Inductor's cache outside the checkout and kept between runs (a cold compile takes tens of
# seconds on two cores; a warm one a few). Set before torch is imported anywhere in the tests.
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR",
    str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "attention-profiled"
        / "inductor"
    ),
)

import torch  # noqa: E402
from committed import PROFILES  # noqa: E402  (profiles/ as committed, not as a run left it)

from attn import specs  # noqa: E402
from attn.traces.sets.set_claims import write_claims  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: none is visible to torch here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# --- one built site for tests/test_site.py and tests/test_browser.py ------------------------------

COMMITTED_CPU = "cpu-amd-epyc"  # the committed set; the fake sets below are copies of it
FAKE_GPU_SLUG, FAKE_GPU_NAME = "nvidia-test-gpu", "NVIDIA Test GPU"
# A second CPU, as `nox -s profile_examples` adds on a machine whose model has no committed set.
SECOND_CPU_SLUG, SECOND_CPU_MODEL = "cpu-intel-xeon-test", "Intel(R) Xeon(R) Test Processor"


def _update(path: Path, **fields) -> None:
    if path.exists():
        path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def copy_set(profiles: Path, slug: str, **fields) -> Path:
    """A copy of the committed CPU set at profiles/<slug>, its environment, manifest and summaries
    saying `fields` (device_name, device_type, cpu_model, ...) and its slug; kept if already there."""
    folder = profiles / slug
    if folder.exists():
        return folder
    shutil.copytree(PROFILES / COMMITTED_CPU, folder)
    _update(folder / "environment.json", **fields, hardware=slug)
    _update(folder / "index.json", **fields, hardware=slug)
    for summary in folder.glob("*/summary.json"):
        _update(summary, **{k: v for k, v in fields.items() if k != "cpu_model"}, hardware=slug)
    write_claims(folder, specs)  # its claims decided on its rows as its device type, as a run does
    return folder


def add_fake_sets(profiles: Path) -> None:
    """A fake GPU set and a second CPU set beside the sets of profiles/: every profile marker
    renders a tab per set, and no test may count on one CPU tab."""
    copy_set(profiles, FAKE_GPU_SLUG, device_type="cuda", device_name=FAKE_GPU_NAME)
    copy_set(profiles, SECOND_CPU_SLUG, device_name=SECOND_CPU_MODEL, cpu_model=SECOND_CPU_MODEL)


def build_site(profiles: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of the docs from the sets under `profiles`, into `site`."""
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "ATTN_PROFILES_DIR": str(profiles),
        "NO_MKDOCS_2_WARNING": "1",
        "JUPYTER_CONFIG_PATH": str(root / "docs/jupyter"),
    }
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """`mkdocs build --strict` of the docs from a copy of the committed profiles/ plus the fake
    sets (a GPU and a second CPU, add_fake_sets). Returns the site folder (sitemaps, search index
    and all); the sets it was built from are in built_site.parent / "profiles". (The sets a run
    made here are built into site/ by `nox -s profile_examples` itself, strictly.)"""
    if not (PROFILES / COMMITTED_CPU).is_dir():
        pytest.skip(
            f"no profiles/{COMMITTED_CPU}/ in this checkout: nothing to build the site from"
        )
    work = tmp_path_factory.mktemp("built_site")
    profiles = work / "profiles"
    shutil.copytree(PROFILES, profiles)
    add_fake_sets(profiles)
    site = work / "site"
    run = build_site(profiles, site)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stderr}"
    # --strict fails on MkDocs' warnings; the notebook's kernel logs its own (over TCP, it warned).
    kernel = [line for line in run.stderr.splitlines() if "] WARNING" in line]
    assert not kernel, f"the build printed warnings: {kernel}"
    return site


# --- tiny CPU runs of every variant, read by the claims' tests -----------------------------------


@pytest.fixture(scope="session")
def cpu_evidence():
    """Evidence of a tiny CPU run of every variant that runs here on square inputs, by name, as a
    run writes it (first calls timed, the shape it ran at). Tests read it: copy before changing."""
    import attn
    from attn import specs
    from attn.profiling.capture import capture
    from attn.profiling.config import ProfileConfig
    from attn.traces.claims.trace_checks import Evidence
    from attn.traces.sets.analyze import summarize

    tiny = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)
    found = {}
    for spec in specs.SPECS:
        variant = attn.get_variant(spec.name)
        if variant.why_unavailable("cpu") is None and spec.inputs == "square":
            trace = capture(variant, tiny)[0]
            found[spec.name] = Evidence(*summarize(trace, base={"shape": tiny.shape()}))
    return found
