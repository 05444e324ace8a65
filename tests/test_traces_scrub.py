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
