"""docs/hooks/profile_sets.py: the docs hook refuses a broken profile set in one line naming the
file, and publishes no rows without profiles. Each case breaks a copy of the committed CPU set."""

import gzip
import html.parser
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import hostile_sets
import markdown
import pytest
from committed import CPU_SET  # the committed set, as HEAD holds it
from test_docs_hook import EXTENSIONS, expand, sets  # the hook's modules, loaded as MkDocs does

ROOT = Path(__file__).resolve().parents[1]
TABBED = {"pymdownx.tabbed": {"alternate_style": True}}


@pytest.fixture
def profiles(tmp_path):
    if not (CPU_SET / "index.json").is_file():
        pytest.skip("no committed profiles/cpu-amd-epyc/ set here")
    root = tmp_path / "profiles"
    shutil.copytree(CPU_SET, root / "cpu")
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


class Page(html.parser.HTMLParser):
    """What a rendered page shows: its text, its tab labels, and every attribute of every tag."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.tags, self.text, self.labels, self.attrs, self._label = [], [], [], [], False
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        self._label = tag == "label"

    def handle_data(self, data):
        self.text.append(data)
        self.labels += [data] if self._label else []
        self._label = False


def shown(profiles: Path, marker: str) -> Page:
    out = expand(marker, "naive.md", profiles)
    return Page(markdown.markdown(out, extensions=EXTENSIONS, extension_configs=TABBED))


@pytest.mark.parametrize(
    "name",
    ['NVIDIA "H200" <b>x</b>', "GPU *fast* _x_ [x](y) `z`", "x}[y](javascript:alert(1)){z & ;"],
)
def test_a_device_name_is_text_wherever_the_site_shows_it(profiles, name):
    """A quote broke the Perfetto button's attribute and a tag landed in the tab label; a `}`
    ended the button's attribute list, and what followed was a link."""
    for file in ("environment.json", "index.json"):
        path = profiles / "cpu" / file
        data = {**json.loads(path.read_text()), "device_name": name, "device_type": "cuda"}
        path.write_text(json.dumps(data))
    (hw,) = sets.hardware_sets(profiles)
    assert hw["title"] == name  # as the set says it: each page escapes it where it writes it
    page = shown(profiles, "<!-- profile: naive -->")
    assert "b" not in page.tags
    assert page.labels == [name]  # the tab says it as it is
    assert ("data-perfetto-title", f"naive on {name}") in page.attrs
    assert not [v for k, v in page.attrs if k == "href" and v in ("y", "javascript:alert(1)")]
    if "*" not in name:  # the environment line (where * and _ may slant words: no element)
        assert f"{name} · torch" in "".join(page.text)


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
        ({"claims": [{"holds": True}]}, "claims[0].text is missing"),
        ({"claims": [{"text": "t", "holds": "yes", "observed": None}]}, "claims[0].holds is"),
        ({"viewer": {"mark": {"left": "a", "right": 1}}}, "viewer.mark.left is 'a'"),
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


# --- any number of sets: a second CPU beside the committed one ------------------------------------


def test_a_second_cpu_set_gets_its_own_tab_and_claims_everywhere(profiles):
    """What `nox -s profile_examples` leaves on a CPU with no committed set: a set beside it.
    Every marker shows a tab per set, named by its CPU, holding that set's own files and claims."""
    from conftest import copy_set

    other = "Intel(R) Xeon(R) Processor (family 6, model 167)"  # as a run records it now
    copy_set(profiles, "cpu-intel-xeon", device_name=other, cpu_model=other)
    edit = profiles / "cpu-intel-xeon/naive/summary.json"
    summary = json.loads(edit.read_text())
    summary["claims"][0].update(holds=False, observed="not on this CPU")
    edit.write_text(json.dumps(summary))
    hw = sets.hardware_sets(profiles)
    amd, intel = "CPU: AMD EPYC with AVX-512 BF16", "CPU: Intel Xeon (family 6, model 167)"
    assert [h["title"] for h in hw] == [amd, intel]
    for marker in ("profile: naive", "profile-check: naive", "profile-glance",
                   "profile-compare: naive inplace", "profile-diff: naive inplace",
                   "profile-speedup: naive inplace", "profile-figure: benchmark",
                   "profile-guess: score-matrices naive"):  # fmt: skip
        out = expand(f"<!-- {marker} -->", "naive.md", profiles)
        tabs = re.findall(r'^===!? "([^"]+)"$', out, re.M)
        assert tabs == [h["title"] for h in hw], (marker, tabs)
    page = expand("<!-- profile: naive -->", "naive.md", profiles)
    assert "profiles/cpu/naive/timeline.svg" in page
    assert "profiles/cpu-intel-xeon/naive/timeline.svg" in page
    assert f"CPU: {other}, 2 threads" in page  # its environment line
    key = summary["claims"][0]["key"]
    claim = expand(f"<!-- profile-claim: naive {key} -->", "naive.md", profiles)
    assert claim.startswith('\n!!! warning "')  # one set does not hold it
    assert f"✓ **holds** on {amd}" in claim
    assert f"✗ **does not hold** on {intel} (observed: not on this CPU)" in claim
    env = expand("<!-- profile-env -->", "reproduce.md", profiles)
    assert "`profiles/cpu/`" in env and "`profiles/cpu-intel-xeon/`" in env


def test_each_committed_cpu_tab_tells_its_cpu_by_what_the_set_recorded():
    """The AMD set records a name every generation of a cloud VM shares ('AMD EPYC') and no family
    or model: its tab says the bfloat16 path its benchmark measured. The Xeon set, made since,
    records its family and model: its tab says them. Neither names a model its set does not hold."""
    from committed import PROFILES

    titles = {h["slug"]: h["title"] for h in sets.hardware_sets(PROFILES)}
    if not {"cpu-intel-xeon-family-6-model-167", "cpu-amd-epyc"} <= set(titles):
        pytest.skip("the two committed CPU sets are not both here")
    assert titles["cpu-intel-xeon-family-6-model-167"] == "CPU: Intel Xeon (family 6, model 167)"
    assert titles["cpu-amd-epyc"] == "CPU: AMD EPYC with AVX-512 BF16"


@pytest.mark.parametrize(
    ("model", "bf16_paths", "label"),
    [
        (
            "Intel(R) Xeon(R) Processor (family 6, model 167)",
            ["amx"],
            "Intel Xeon (family 6, model 167)",
        ),
        ("AMD EPYC 9654 96-Core Processor", [], "AMD EPYC 9654 96-Core"),
        ("Intel(R) Xeon(R) CPU @ 2.20GHz", [], "Intel Xeon, model not recorded"),
        ("AMD EPYC", ["avx512_bf16", "amx"], "AMD EPYC, model not recorded"),  # rows disagree
    ],
)
def test_a_cpu_label_is_what_the_set_recorded_never_more(model, bf16_paths, label):
    rows = [{"peaks": {"bf16_path": path}} for path in bf16_paths] + [{"variant": "x"}]
    assert sets.cpu_label(model, rows) == label


# --- a hostile set: refused, naming the file and the field ----------------------------------------


@pytest.fixture(scope="module")
def build_config(tmp_path_factory):
    """The config the hook's build events run with: what `mkdocs build` calls on_files with."""
    from mkdocs.config.defaults import MkDocsConfig

    work = tmp_path_factory.mktemp("build")
    (work / "docs").mkdir()
    config = MkDocsConfig(config_file_path=str(ROOT / "mkdocs.yml"))
    config.load_dict({"site_name": "t", "docs_dir": str(work / "docs"),
                      "site_dir": str(work / "site"),
                      "hooks": [str(ROOT / "docs/hooks/profiles.py")]})  # fmt: skip
    assert config.validate() == ([], [])
    return config.plugins.on_config(config)


def on_files(root: Path, config, monkeypatch):
    """The hook's first build event on the sets under root: each set and public trace read and
    checked before any page is rendered."""
    from mkdocs.structure.files import Files

    monkeypatch.setenv("ATTN_PROFILES_DIR", str(root))
    return config.plugins.on_files(Files([]), config=config)


def test_the_small_set_of_the_hostile_cases_is_published_whole(tmp_path, build_config, monkeypatch):
    hostile_sets.small_set(tmp_path / "profiles")
    uris = {f.src_uri for f in on_files(tmp_path / "profiles", build_config, monkeypatch)}
    assert {"profiles/cpu/overview.svg", "profiles/cpu/diff/naive__inplace.json"} <= uris
    assert f"profiles/public/{hostile_sets.PUBLIC}/diagnosis.json" in uris


def test_a_set_picture_is_published_written_again_from_what_the_allowlist_kept(
    tmp_path, build_config, monkeypatch
):
    """The published SVG was the set's own bytes: whatever the parser passed over (a DOCTYPE, a
    comment, a declaration) reached the page; now it is the parsed elements written again."""
    hostile_sets.small_set(tmp_path / "profiles")
    picture = tmp_path / "profiles/cpu/naive/timeline.svg"
    picture.write_bytes(picture.read_bytes().replace(b"<svg ", b"<!-- a comment --><svg ", 1))
    files = on_files(tmp_path / "profiles", build_config, monkeypatch)
    published = next(f for f in files if f.src_uri == "profiles/cpu/naive/timeline.svg")
    data = published.content_bytes
    assert b"<!--" not in data and b"<!DOCTYPE" not in data and b"<?xml-" not in data
    kept = sys.modules["set_svg"].check_svg(data)
    assert [e.tag for e in kept.iter()] == [e.tag for e in ElementTree.parse(picture).iter()]


@pytest.mark.parametrize("case", hostile_sets.REFUSED)
def test_a_hostile_set_is_refused_naming_the_file_and_the_field(
    case, tmp_path, build_config, monkeypatch
):
    """Each case published a file from outside the set, or put a script in a page."""
    poison, names = hostile_sets.REFUSED[case]
    hostile_sets.small_set(tmp_path / "profiles")
    poison(tmp_path / "profiles")
    with pytest.raises(sets.BrokenSet) as refusal:
        on_files(tmp_path / "profiles", build_config, monkeypatch)
    message = str(refusal.value)
    assert "\n" not in message and names in message, message


def test_what_matplotlib_draws_passes_the_svg_allowlist(tmp_path):
    """A set's pictures are matplotlib's: lines, bars with hatches, text, a legend, a log axis."""
    from attn.traces.figures import plot

    fig, ax = plot.figure(2)
    ax.plot([1, 2], [3, 40], label="<b>a</b>")
    ax.bar([1], [2], hatch="//", label="b")
    ax.text(1, 2, "x & y")
    ax.set_yscale("log")
    ax.legend()
    plot.save(fig, tmp_path / "x.svg")
    sys.modules["set_svg"].check_svg((tmp_path / "x.svg").read_bytes())


def test_a_refused_set_fails_the_build_with_its_file_and_field(tmp_path):
    """The snippet include in a summary's dtype put .git/config on three pages."""
    from conftest import build_site

    root = tmp_path / "profiles"
    hostile_sets.small_set(root)
    hostile_sets.REFUSED["summary dtype, an include"][0](root)
    run = build_site(root, tmp_path / "site")
    assert run.returncode != 0 and "naive/summary.json: dtype is '--8<--" in run.stderr
    assert not (tmp_path / "site/naive/index.html").exists()


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
        ({"communication_us": "long"}, "ranks[0].communication_us is"),
        ({"compute_us_per_range": []}, "ranks[0].compute_us_per_range is"),
        ({"rank": "0"}, "ranks[0].rank is"),
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
