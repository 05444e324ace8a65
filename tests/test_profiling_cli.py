"""`python -m attn.profiling`: its subcommands, and one line naming the flag for every bad flag."""

import json
from pathlib import Path

import pytest
import torch

from attn.profiling.cli import config_from, main, parser

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--batch", "1", "--heads", "2", "--seq", "32", "--head-dim", "16", "--no-screenshot"]


def parse(*argv):
    return config_from(parser().parse_args(["run", "--device", "cpu", *argv]))


def test_flags_override_the_device_defaults():
    config = parse("--seq", "100", "--seq-k", "50", "--no-causal", "--dtype", "bfloat16")
    assert (config.seq_q, config.seq_k, config.is_causal, config.dtype) == (
        100,
        50,
        False,
        "bfloat16",
    )
    assert parse().seq_q == parse().seq_k == 1024


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--seq", "0"], ["--seq", ">= 1"]),
        (["--seq-k", "0"], ["--seq-k", ">= 1"]),
        (["--seq", "-1"], ["--seq", ">= 1"]),
        (["--heads", "two"], ["--heads", "whole number"]),
        (["--device", "bogus"], ["--device", "cpu or cuda"]),
        (["--device", "meta"], ["--device", "cpu or cuda"]),
        (["--dtype", "int8"], ["--dtype", "float32"]),
        (["--out", ""], ["--out", "empty"]),
        (["--out", "/proc/attn"], ["--out", "cannot be written"]),
        (["--variants", "fast"], ["--variants", "naive"]),
    ],
)
def test_a_bad_flag_gets_one_line_naming_it(argv, names, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", *argv])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    for name in names:
        assert name in last, last


def test_out_at_a_file_is_refused(tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(SystemExit):
        main(["run", "--out", str(file), "--device", "cpu"])
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_without_a_gpu_is_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--device", "cuda"])
    assert "cannot use CUDA" in capsys.readouterr().err


def test_run_profiles_the_named_variants(tmp_path):
    argv = [
        "run",
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        "--variants",
        "sdpa_flash",
        "sdpa_efficient",
        *TINY,
    ]
    assert main(argv) == 0
    cpu = tmp_path / "cpu"
    assert (cpu / "environment.json").exists() and (cpu / "index.json").exists()
    assert json.loads((cpu / "sdpa_flash" / "summary.json").read_text())["available"]
    assert not json.loads((cpu / "sdpa_efficient" / "summary.json").read_text())["available"]


def test_example_runs_the_script_and_analyses_its_trace(tmp_path):
    argv = [
        "example",
        "sdpa_math",
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        *TINY,
    ]
    assert main(argv) == 0
    summary = json.loads((tmp_path / "cpu" / "sdpa_math" / "summary.json").read_text())
    assert summary["shape"]["seq_q"] == 32 and all(c["holds"] is True for c in summary["claims"])


def test_recheck_reports_and_fixes_a_stale_claim(tmp_path):
    assert (
        main(
            [
                "run",
                "--out",
                str(tmp_path),
                "--device",
                "cpu",
                "--variants",
                "naive",
                *TINY,
            ]
        )
        == 0
    )
    path = tmp_path / "cpu" / "naive" / "summary.json"
    summary = json.loads(path.read_text())
    fresh = summary["claims"]
    path.write_text(json.dumps({**summary, "claims": [{**fresh[0], "holds": False}]}))
    assert main(["recheck", str(tmp_path), "--check"]) == 1  # differs: CI would fail
    assert main(["recheck", str(tmp_path)]) == 0  # rewrites it from the committed trace
    assert json.loads(path.read_text())["claims"] == fresh
    assert main(["recheck", str(tmp_path), "--check"]) == 0
