"""An example started from the fork server behaves as `python script.py` does."""

import sys
from pathlib import Path

import pytest

from attn.profiling.launch import run_script

MODES = [
    pytest.param(False, id="fresh interpreter"),
    pytest.param(
        True,
        id="fork server",
        marks=pytest.mark.skipif(
            sys.platform != "linux", reason="no fork server off Linux: examples start fresh there"
        ),
    ),
]


@pytest.mark.parametrize("preloaded", MODES)
def test_a_script_runs_as_main_with_its_flags_and_its_folder_on_the_path(tmp_path, preloaded):
    (tmp_path / "sibling.py").write_text("WHO = 'sibling'\n")
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys\nimport sibling\n"
        "print(__name__, sys.argv[1:], sibling.WHO)\n"
        "os.write(2, b'written by C\\n')\n"  # below Python's streams, as torch's C++ writes
    )
    log = tmp_path / "log.txt"
    assert run_script([str(script), "--seq", "64"], log, preloaded=preloaded) == 0
    lines = log.read_text().splitlines()  # stdout and stderr, in whichever order they flushed
    assert sorted(lines) == ["__main__ ['--seq', '64'] sibling", "written by C"]


@pytest.mark.parametrize("preloaded", MODES)
@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ("raise SystemExit(3)", 3, None),
        ("raise ValueError('bad head_dim')", 1, "ValueError: bad head_dim"),
        ("import sys; sys.exit('no GPU here')", 1, "no GPU here"),
    ],
    ids=["exit status", "exception", "exit message"],
)
def test_a_failing_script_gives_its_status_and_says_why(tmp_path, preloaded, body, status, said):
    script = tmp_path / "fails.py"
    script.write_text(body + "\n")
    log = tmp_path / "log.txt"
    assert run_script([str(script)], log, preloaded=preloaded) == status
    if said:
        assert said in log.read_text().strip().splitlines()[-1]


@pytest.mark.skipif(sys.platform != "linux", reason="no fork server off Linux")
def test_the_fork_server_has_torch_imported_before_the_script_starts(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint('torch' in sys.modules)\n")
    log = tmp_path / "log.txt"
    assert run_script([str(script)], log, preloaded=True) == 0
    assert log.read_text().strip() == "True"


@pytest.mark.parametrize("preloaded", MODES)
def test_a_script_runs_in_the_callers_folder_even_after_it_changed(
    tmp_path, monkeypatch, preloaded
):
    """The fork server started in one folder ran a later script there: its relative paths
    named files in a folder the caller had left."""
    script = tmp_path / "script.py"
    script.write_text("import os\nprint(os.getcwd())\n")
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        assert run_script([str(script)], Path("log.txt"), preloaded=preloaded) == 0
        assert (tmp_path / folder / "log.txt").read_text().strip() == str(tmp_path / folder)
