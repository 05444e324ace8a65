"""Entry points: `python -m attn.profiling` and the example scripts, run as a reader would."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attn.profiling.cli import add_run_arguments, config_from, main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--batch", "1", "--heads", "2", "--seq", "32", "--head-dim", "16"]


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return config_from(parser.parse_args(["--device", "cpu", *argv]))


def test_flags_override_the_device_defaults():
    config = parse("--seq", "100", "--seq-k", "50", "--no-causal", "--dtype", "bfloat16")
    assert (config.seq_q, config.seq_k, config.is_causal, config.dtype) == (
        100,
        50,
        False,
        "bfloat16",
    )
    assert parse().seq_q == parse().seq_k


def test_nonpositive_sizes_are_refused():
    with pytest.raises(SystemExit, match="--heads"):
        parse("--heads", "0")


def test_module_cli_profiles_the_named_variants(tmp_path):
    assert (
        main(
            [
                "--out",
                str(tmp_path),
                "--device",
                "cpu",
                "--variants",
                "sdpa_flash",
                "sdpa_efficient",
                *TINY,
            ]
        )
        == 0
    )
    assert (tmp_path / "cpu" / "environment.json").exists()
    assert json.loads((tmp_path / "cpu" / "sdpa_flash" / "summary.json").read_text())["available"]
    assert not json.loads((tmp_path / "cpu" / "sdpa_efficient" / "summary.json").read_text())[
        "available"
    ]


@pytest.mark.parametrize(
    "script,extra,variant",
    [
        ("naive_attention.py", [], "naive"),
        ("inplace_attention.py", [], "inplace"),
        ("sdpa_attention.py", ["--backend", "math"], "sdpa_math"),
        ("custom_kernel_attention.py", ["--impl", "cpu"], "custom_cpu"),
    ],
)
def test_example_scripts_print_the_table_and_the_folder(tmp_path, script, extra, variant):
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / script),
            "--out",
            str(tmp_path),
            "--device",
            "cpu",
            *TINY,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert "Self CPU" in run.stdout and "attn_fwd" in run.stdout
    assert f"{variant}: artifacts written to" in run.stdout
    assert (tmp_path / "cpu" / variant / "timeline.svg").exists()


def test_sdpa_example_requires_a_backend(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sdpa_attention.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 2 and "--backend" in run.stderr
