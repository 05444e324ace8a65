import os

from attn.profiling.quiet import without_profiler_chatter


def test_drops_the_profiler_chatter_and_keeps_everything_else(capfd):
    with without_profiler_chatter():
        os.write(2, b"USDT:2026-01-01 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a real warning\n")
    err = capfd.readouterr().err
    assert "a real warning" in err
    assert "profiler_start" not in err


def test_restores_stderr_after_an_exception(capfd):
    try:
        with without_profiler_chatter():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    os.write(2, b"after\n")
    assert "after" in capfd.readouterr().err
