"""attn.traces.read.scrub: what a published trace must not carry."""

import pytest

from attn.traces.read.scrub import Scrubber


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
