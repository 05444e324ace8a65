"""attn.traces.read.scrub: what a published trace must not carry."""

import pytest

from attn.traces.read.scrub import Scrubber


def scrub_trace(
    trace: dict, paths: list[str] | None = None, names: list[str] | None = None
) -> dict:
    """A copy of the Chrome trace with local paths and host and user names redacted, scrubbed as
    write_trace scrubs it, whole in memory: what the tests compare a written trace with."""
    scrubber = Scrubber(paths, names)
    scrubber.learn_from({k: v for k, v in trace.items() if k != "traceEvents"})
    cleaned = scrubber.value(trace)
    cleaned["traceName"] = "trace.json"  # the exporter writes the file's absolute path here
    return cleaned


@pytest.mark.parametrize(
    "text, scrubbed",
    [
        ("logged in on alice-laptop.corp.example today", "logged in on <redacted> today"),
        ("ALICE-LAPTOP.Corp.Example:29500", "<redacted>:29500"),
        ("see alice-laptop.", "see <redacted>."),
        ("alice-laptop-2.corp.example", "alice-laptop-2.corp.example"),  # another host
    ],
)
def test_a_host_name_is_redacted_whole_with_its_domain(text, scrubbed):
    """`alice-laptop.corp.example` became `<redacted>.corp.example`: the domain stayed."""
    scrubber = Scrubber(paths=[], names=[], hosts=["alice-laptop"])
    assert scrubber.value({"note": text}) == {"note": scrubbed}


def test_args_nested_past_what_orjson_writes_are_refused_naming_the_event(tmp_path):
    """An op's args nested 990 deep (under orjson's 1,024 to read) ended analyze in the scrub's
    json.dumps fallback with RecursionError; past orjson's 255 to write, it is one line."""
    from attn.traces.read.reading import TraceFormatError
    from attn.traces.read.scrub import write_trace

    args: dict = {}
    inner = args
    for _ in range(990):
        inner["a"] = inner = {}
    event = {"ph": "X", "name": "aten::mm", "ts": 0, "dur": 1, "pid": 1, "tid": 1, "args": args}
    with pytest.raises(TraceFormatError) as refusal:
        write_trace({"traceEvents": [event]}, tmp_path / "trace.json.gz")
    assert str(refusal.value) == "the event 'aten::mm' is nested over 255 levels deep"
    shallow = {**event, "args": {"a": {"b": 2**70}}}  # past 64 bits: the standard library writes it
    assert write_trace({"traceEvents": [shallow]}, tmp_path / "ok.json.gz").is_file()
