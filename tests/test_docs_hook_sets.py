"""docs/hooks/profile_sets.py: the docs hook refuses a broken profile set in one line naming the
file, and publishes no rows without profiles. Each case breaks a copy of the committed CPU set."""

import gzip
import json
import shutil
from pathlib import Path

import markdown
import pytest
from test_docs_hook import expand, sets  # the hook's module, loaded once as MkDocs loads it

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def profiles(tmp_path):
    if not (ROOT / "profiles/cpu-amd-epyc/index.json").is_file():
        pytest.skip("no committed profiles/cpu-amd-epyc/ set here")
    root = tmp_path / "profiles"
    shutil.copytree(ROOT / "profiles/cpu-amd-epyc", root / "cpu")
    return root


def refused(root: Path) -> str:
    with pytest.raises(sets.BrokenSet) as e:
        sets.hardware_sets(root)
    message = str(e.value)
    assert "\n" not in message
    return message


def test_the_committed_set_loads(profiles):
    (cpu,) = sets.hardware_sets(profiles)
    assert cpu["summaries"]["naive"]["available"] is True


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[]", "holds a list, not a dict"),
        ('{"variant": "naive"}', "no 'available'"),
        ('{"available": true}', "not 'naive'"),
        ("not json", "is broken"),
    ],
)
def test_a_summary_that_is_not_one_is_refused(profiles, content, says):
    (profiles / "cpu/naive/summary.json").write_text(content)
    message = refused(profiles)
    assert "naive/summary.json" in message and says in message


def test_a_time_that_is_not_a_number_is_refused(profiles):
    path = profiles / "cpu/naive/summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "cpu_time_us": "fast"}))
    assert "cpu_time_us is 'fast'" in refused(profiles)


@pytest.mark.parametrize("gone", ["inplace", "naive/timeline.svg"])
def test_a_file_the_manifest_lists_but_is_missing_is_refused_not_drawn(profiles, gone):
    path = profiles / "cpu" / gone
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    missing = "inplace/summary.json" if gone == "inplace" else gone
    assert f"index.json lists {profiles / 'cpu' / missing}, which is missing" in refused(profiles)


def test_a_folder_copied_over_another_is_refused(profiles):
    shutil.rmtree(profiles / "cpu/inplace")
    shutil.copytree(profiles / "cpu/naive", profiles / "cpu/inplace")
    assert "summary of 'naive', not 'inplace'" in refused(profiles)


def test_a_folder_the_manifest_does_not_know_is_refused(profiles):
    shutil.copytree(profiles / "cpu/naive", profiles / "cpu/mystery")
    assert f"cpu/mystery/ is not in {profiles / 'cpu/index.json'}" in refused(profiles)


@pytest.mark.parametrize(
    ("name", "content"),
    [("trace.json.gz", b"\x1f\x8b broken"), ("timeline.svg", b""), ("viewer.png", b"GIF89a")],
)
def test_a_broken_artifact_is_refused(profiles, name, content):
    path = profiles / "cpu/naive" / name
    if not path.exists():
        pytest.skip(f"the committed set has no {name}")
    path.write_bytes(content)
    assert f"naive/{name} is broken" in refused(profiles)


def test_a_truncated_figure_is_refused(profiles):
    manifest = json.loads((profiles / "cpu/index.json").read_text())
    (profiles / "cpu/scaling.json").write_text('[{"variant": "naive", "seq":')
    (profiles / "cpu/scaling.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (profiles / "cpu/index.json").write_text(json.dumps({**manifest, "figures": ["scaling"]}))
    assert "scaling.json is broken" in refused(profiles)


def test_folders_without_a_manifest_are_not_sets(profiles):
    (profiles / "empty").mkdir()
    (profiles / "env-only").mkdir()
    (profiles / "env-only/environment.json").write_text('{"device_type": "cuda"}')
    (profiles / "scratch").mkdir()
    (profiles / "scratch/notes.txt").write_text("not a set")
    assert [h["slug"] for h in sets.hardware_sets(profiles)] == ["cpu"]


@pytest.mark.parametrize("folder", ["my cpu", "cpu#2", "it's", 'cpu"2"', "CPU"])
def test_a_set_folder_that_cannot_be_linked_is_refused_by_name(profiles, folder):
    """A '#' broke 8 links and the strict build passed; spaces or quotes made a tab that could
    not be selected."""
    shutil.copytree(profiles / "cpu", profiles / folder)
    message = refused(profiles)
    assert str(profiles / folder) in message and "cannot be a set's folder" in message


def test_two_sets_of_one_device_get_tabs_told_apart(profiles):
    shutil.copytree(profiles / "cpu", profiles / "cpu-laptop")
    titles = [h["title"] for h in sets.hardware_sets(profiles)]
    assert len(set(titles)) == 2 and any("cpu-laptop" in t for t in titles)


def test_a_device_name_is_text_wherever_the_site_shows_it(profiles):
    name = 'NVIDIA "H200" <b>x</b>'
    for file in ("environment.json", "index.json"):
        path = profiles / "cpu" / file
        data = {**json.loads(path.read_text()), "device_name": name, "device_type": "cuda"}
        path.write_text(json.dumps(data))
    (hw,) = sets.hardware_sets(profiles)
    for shown in (hw["title"], hw["env"]["device_name"]):
        assert "<b>" not in shown and '"' not in shown and "H200" in shown


def test_a_device_name_with_markdown_marks_shows_them_as_text(profiles):
    path = profiles / "cpu" / "index.json"
    data = {
        **json.loads(path.read_text()),
        "device_name": "GPU *fast* [x](y) `z`",
        "device_type": "cuda",
    }
    path.write_text(json.dumps(data))
    (hw,) = sets.hardware_sets(profiles)
    assert hw["title"] == r"GPU \*fast\* \[x\](y) \`z\`"
    html_out = markdown.markdown(f"# {hw['title']}")
    assert "<em>" not in html_out and "<a " not in html_out and "<code>" not in html_out
    assert "*fast*" in html_out and "[x](y)" in html_out
    out = expand("<!-- profile: naive -->", "naive.md", profiles)
    assert 'data-perfetto-title="naive on GPU *fast* [x](y) `z`"' in out


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("viewer.png", b"\x89PNG\r\n\x1a\n"),  # a signature, no picture
        ("trace.json.gz", gzip.compress(b'{"hello": 1}')),  # JSON, not a trace
    ],
    ids=["8-byte PNG", "not a trace"],
)
def test_an_artifact_that_only_looks_whole_is_refused(profiles, name, content):
    (profiles / "cpu/naive" / name).write_bytes(content)
    assert f"naive/{name} is broken" in refused(profiles)


def _edit_summary(profiles: Path, **fields) -> None:
    path = profiles / "cpu/naive/summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"cpu_time_us": float("nan")}, "cpu_time_us is nan"),  # the page said "nan us"
        ({"cpu_time_us": float("inf")}, "cpu_time_us is inf"),
        ({"ops_per_forward": -5}, "ops_per_forward is -5"),
        ({"peak_memory_bytes": "big"}, "peak_memory_bytes is 'big'"),
        ({"memcpy_per_forward": [1, 2]}, "memcpy_per_forward is [1, 2]"),
        ({"kernels": "k"}, "kernels is 'k'"),
        ({"claims": [{"holds": True}]}, "claims[0] is"),
        ({"claims": [{"text": "t", "holds": "yes", "observed": None}]}, "claims[0] is"),
        ({"viewer": {"mark": {"left": "a", "right": 1}}}, "viewer.mark is"),
    ],
    ids=["nan", "inf", "negative", "peak", "memcpy list", "kernels", "no text", "holds", "mark"],
)
def test_a_summary_field_the_page_cannot_show_is_refused_by_name(profiles, fields, says):
    _edit_summary(profiles, **fields)
    message = refused(profiles)
    assert "naive/summary.json" in message and says in message


def test_an_unavailable_reason_that_is_not_a_sentence_is_refused(profiles):
    path = profiles / "cpu/naive/summary.json"
    path.write_text(json.dumps({"variant": "naive", "available": False, "reason": ["x"]}))
    assert "reason is ['x']" in refused(profiles)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"files": ["/etc/hostname"]}, "names '/etc/hostname', not an artifact"),
        ({"files": ["../index.json"]}, "names '../index.json', not an artifact"),
        ({"files": "summary.json"}, "is not a variant's"),
    ],
)
def test_a_manifest_naming_a_file_outside_the_set_is_refused(profiles, entry, says):
    path = profiles / "cpu/index.json"
    index = json.loads(path.read_text())
    index["variants"]["naive"].update(entry)
    path.write_text(json.dumps(index))
    message = refused(profiles)
    assert "cpu/index.json" in message and says in message


def test_an_artifact_that_links_out_of_the_set_is_refused(profiles, tmp_path):
    """A table.txt that is a symlink published the file it pointed to."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the site\n")
    table = profiles / "cpu/naive/table.txt"
    table.unlink()
    table.symlink_to(secret)
    assert "naive/table.txt is a link" in refused(profiles)


@pytest.mark.parametrize(
    "line",
    [
        "<script>alert(1)</script>",
        "| `a` <img src=x onerror=alert(1)>` | 1 | 2 ms | 1 ms |",
        "| `a|b<img src=x onerror=alert(1)>` | 1 | 2 ms | 1 ms |",
        "| `aten::bmm` | <b>1</b> | 2 ms | 1 ms |",
        "| `aten::bmm` | [x](javascript:alert(1)) | 2 ms | 1 ms |",
    ],
)
def test_a_table_md_that_analyze_would_not_write_is_refused(profiles, line):
    """table.md is shown as it is: a line that is not one of its rows could be anything."""
    path = profiles / "cpu/naive/table.md"
    path.write_text(path.read_text() + line + "\n")
    message = refused(profiles)
    assert "naive/table.md is broken" in message and "is not a row of the table" in message


@pytest.fixture
def ranked(tmp_path):
    """A set holding a variant run on two ranks."""
    from test_docs_hook import add_ring, write_fake_profiles

    root = write_fake_profiles(tmp_path / "profiles")
    add_ring(root / "cpu")
    return root


def test_a_variant_run_on_ranks_loads_with_each_ranks_files(ranked):
    cpu = next(h for h in sets.hardware_sets(ranked) if h["slug"] == "cpu")
    files = cpu["manifest"]["variants"]["ring_contiguous"]["files"]
    assert "ranks.svg" in files and "rank1/timeline.svg" in files
    assert [r["rank"] for r in cpu["summaries"]["ring_contiguous"]["ranks"]] == [0, 1]


@pytest.mark.parametrize(
    "name", ["rank0/../../../etc/hostname", "rankx/trace.json.gz", "rank0/notes.txt"]
)
def test_a_rank_file_that_is_no_artifact_is_refused(ranked, name):
    index = ranked / "cpu/index.json"
    manifest = json.loads(index.read_text())
    manifest["variants"]["ring_contiguous"]["files"].append(name)
    index.write_text(json.dumps(manifest))
    assert f"files names {name!r}, not an artifact" in refused(ranked)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"communication_us": "long"}, "ranks holds"),
        ({"compute_us_per_range": []}, "ranks holds"),
        ({"rank": "0"}, "ranks holds"),
    ],
)
def test_a_ranks_row_the_page_cannot_show_is_refused(ranked, change, says):
    path = ranked / "cpu/ring_contiguous/summary.json"
    summary = json.loads(path.read_text())
    summary["ranks"][0] |= change
    path.write_text(json.dumps(summary))
    assert says in refused(ranked)


def test_a_ranks_summary_of_another_variant_is_refused(ranked):
    path = ranked / "cpu/ring_contiguous/rank1/summary.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"variant": "naive"}))
    assert "rank1/summary.json is the summary of 'naive'" in refused(ranked)
