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

FAKE_GPU_SLUG, FAKE_GPU_NAME = "nvidia-test-gpu", "NVIDIA Test GPU"


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """`mkdocs build --strict` of the docs from a copy of profiles/ plus a second, fake GPU set.

    The fake set is profiles/cpu-amd-epyc/ relabelled as a GPU, so every profile marker renders two tabs.
    Returns the site folder (sitemaps, search index and all).
    """
    root = Path(__file__).resolve().parents[1]
    if not (root / "profiles/cpu-amd-epyc").is_dir():
        pytest.skip("no profiles/cpu-amd-epyc/ in this checkout: nothing to build the site from")
    work = tmp_path_factory.mktemp("built_site")
    profiles = work / "profiles"
    shutil.copytree(root / "profiles", profiles)
    fake = profiles / FAKE_GPU_SLUG
    if not fake.exists():
        shutil.copytree(root / "profiles/cpu-amd-epyc", fake)
        env_path = fake / "environment.json"
        env = json.loads(env_path.read_text()) if env_path.exists() else {}
        env.update(device_type="cuda", device_name=FAKE_GPU_NAME, hardware=FAKE_GPU_SLUG)
        env_path.write_text(json.dumps(env))
        index_path = fake / "index.json"  # the manifest names the set's device too
        index = json.loads(index_path.read_text())
        index.update(device_type="cuda", device_name=FAKE_GPU_NAME, hardware=FAKE_GPU_SLUG)
        index_path.write_text(json.dumps(index))
    site = work / "site"
    env = {
        **os.environ,
        "ATTN_PROFILES_DIR": str(profiles),
        "NO_MKDOCS_2_WARNING": "1",
        "JUPYTER_CONFIG_PATH": str(root / "docs/jupyter"),
    }
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
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
    from attn.traces.analyze import summarize
    from attn.traces.trace_checks import Evidence

    tiny = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)
    found = {}
    for spec in specs.SPECS:
        variant = attn.get_variant(spec.name)
        if variant.why_unavailable("cpu") is None and spec.inputs == "square":
            trace = capture(variant, tiny)[0]
            found[spec.name] = Evidence(*summarize(trace, base={"shape": tiny.shape()}))
    return found
