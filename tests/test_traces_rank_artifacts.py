"""A variant run on several ranks as one folder (attn.traces.sets.rank_artifacts): each rank's own
artifacts, the summary across them with the ring specs' claims, the ranks' figure; recheck finds
nothing to mend in what it wrote, and names what was changed by hand."""

import json
import shutil
import xml.etree.ElementTree as ElementTree

import pytest
from rank_traces import write_ring

from attn import specs
from attn.traces.common import artifacts
from attn.traces.common.artifacts import RefusedFolder
from attn.traces.figures.overview import write_overview
from attn.traces.ranks.folder import rank_traces
from attn.traces.sets.rank_artifacts import recheck_ranked, typical_range, write_ranked
from attn.traces.sets.recheck import recheck
from attn.traces.sets.set_claims import write_claims

SHAPE = {"batch": 2, "heads": 8, "seq_q": 1024, "seq_k": 1024, "head_dim": 64}


def base(name: str) -> dict:
    return {"variant": name, "title": "t", "lesson": "l", "hardware": "cpu-test", "device_name": "a test CPU",
            "device_type": "cpu", "dtype": "float32", "shape": SHAPE, "is_causal": True}  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Both shardings written into one set, as a profile run does."""
    root = tmp_path_factory.mktemp("ranked")
    for name, zigzag in (("ring_contiguous", False), ("ring_zigzag", True)):
        traces = rank_traces(write_ring(root / "runs" / name, zigzag=zigzag))
        tables = {0: "the table of rank 0\n"}
        write_ranked(
            traces,
            root / "set" / name,
            base=base(name),
            spec=specs.spec(name),
            tables=tables,
            workers=2,
        )
    (root / "set" / artifacts.ENVIRONMENT).write_text("{}")
    write_overview(root / "set", specs.names(), specs.REFERENCE)
    write_claims(root / "set", specs)  # as the run's finish_set does
    artifacts.write_manifest(root / "set")
    return root / "set"


def test_each_rank_gets_its_own_folder_and_the_variant_its_figure(written):
    folder = written / "ring_contiguous"
    assert sorted(p.name for p in folder.iterdir()) == [
        "rank0",
        "rank1",
        "ranks.svg",
        "summary.json",
    ]
    assert sorted(p.name for p in (folder / "rank0").iterdir()) == sorted(
        ["summary.json", "trace.json.gz", "table.md", "table.txt", "timeline.svg"]
    )
    assert (folder / "rank0" / "table.txt").read_text() == "the table of rank 0\n"
    assert not (folder / "rank1" / "table.txt").exists()
    svg = ElementTree.fromstring((folder / "ranks.svg").read_bytes())
    text = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    assert "rank 0" in text and "rank 1" in text and "attn_fwd 2 of 3" in text


def test_the_summary_across_ranks(written):
    s = json.loads((written / "ring_contiguous" / "summary.json").read_text())
    assert s["schema"] == artifacts.SUMMARY_SCHEMA and s["available"] and s["world_size"] == 2
    assert [r["rank"] for r in s["ranks"]] == [0, 1] and [r["blocks"] for r in s["ranks"]] == [1, 2]
    assert s["straggler"] == 1 and s["imbalance"]["value"] == pytest.approx(4 / 3)
    rank1 = json.loads((written / "ring_contiguous" / "rank1" / "summary.json").read_text())
    assert rank1["rank"] == 1 and rank1["variant"] == "ring_contiguous" and "claims" not in rank1
    assert s["cpu_time_us"] == rank1["cpu_time_us"] and s["ops"] == rank1["ops"]  # the straggler's
    assert not any("lanes" in r or "numbers" in r for r in s["ranks"])


@pytest.mark.parametrize("name", ["ring_contiguous", "ring_zigzag"])
def test_every_claim_of_the_ring_specs_holds_on_its_ranks(written, name):
    s = json.loads((written / name / "summary.json").read_text())
    assert [c["key"] for c in s["claims"]] == [c.key for c in specs.spec(name).rank_claims]
    assert all(c["holds"] is True for c in s["claims"]), s["claims"]


def test_the_manifest_lists_every_ranks_files(written):
    files = json.loads((written / artifacts.MANIFEST).read_text())["variants"]["ring_zigzag"][
        "files"
    ]
    assert files[:2] == ["summary.json", "ranks.svg"] and "rank1/trace.json.gz" in files


def test_recheck_finds_nothing_to_mend_then_what_was_changed(written, tmp_path):
    assert recheck(written.parent, specs, write=False) == []
    copy = tmp_path / "set"
    shutil.copytree(written, copy)
    rank = copy / "ring_zigzag" / "rank0" / "summary.json"
    rank.write_text(json.dumps(json.loads(rank.read_text()) | {"ops_per_forward": 1}))
    top = copy / "ring_zigzag" / "summary.json"
    top.write_text(json.dumps(json.loads(top.read_text()) | {"straggler": 7}))
    changed = recheck_ranked(copy / "ring_zigzag", specs.spec("ring_zigzag"), write=True)
    assert [row["path"] for row in changed] == [rank, top]
    assert recheck_ranked(copy / "ring_zigzag", specs.spec("ring_zigzag"), write=False) == []


def test_a_ranks_folder_is_replaced_whole_but_never_a_file_a_run_did_not_write(written, tmp_path):
    folder = tmp_path / "ring_contiguous"
    shutil.copytree(written / "ring_contiguous", folder)
    artifacts.check_replaceable(folder)  # what write_ranked wrote, it may write again
    (folder / "rank1" / "mine.txt").write_text("notes\n")
    with pytest.raises(RefusedFolder, match="mine.txt"):
        artifacts.check_replaceable(folder)


def test_the_figure_shows_the_forward_of_median_imbalance():
    def rows(*per_rank):
        return [
            {"rank": r, "ranges": 3, "compute_us_per_range": c, "lanes": dict.fromkeys(range(3))}
            for r, c in enumerate(per_rank)
        ]

    # Imbalances 1.0, 1.5, 1.2 by forward: the median, 1.2, is the third forward's.
    assert typical_range(rows([10, 10, 10], [10, 30, 15])) == 2
    # Without every forward's lanes, the middle one.
    odd = rows([10, 10, 10], [10, 30, 15])
    odd[1]["lanes"] = {1: None}
    assert typical_range(odd) == 1
