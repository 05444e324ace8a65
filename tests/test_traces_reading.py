"""Reading a trace's text in bounded memory: a bomb that fits the cap (one string, whitespace,
zero bytes, a flood of objects) is refused while it streams in, in a fraction of its size, and a
trace that fits is held once. Sizes are kept small with a cap of about 1 MiB (a token: 16 KiB)."""

import gzip
import json
import re
import tracemalloc

import pytest

from attn.traces.read import reading
from attn.traces.read import trace as trace_module
from attn.traces.read.trace import TraceFormatError, load_trace

CAP_GIB = str(1 / 1024)  # 1 MiB: a token (a string, or the text between two) of 16 KiB at most
INFLATED = 800_000  # each bomb's text: under the cap, so only the checks while streaming stop it
EVENT = b'{"ph": "X", "ts": 0, "dur": 1, "name": "a"}'


@pytest.fixture(autouse=True)
def small_cap(monkeypatch):
    monkeypatch.setenv("ATTN_MAX_TRACE_GIB", CAP_GIB)


def _gzip(tmp_path, text: bytes):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text))
    return path


def _peak_reading(path) -> tuple[int, str]:
    """(the most memory Python held while load_trace read `path`, its error or 'loaded')."""
    tracemalloc.start()
    try:
        load_trace(path)
        said = "loaded"
    except TraceFormatError as e:
        said = str(e)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, said


BOMBS = {
    "one string": b'{"traceEvents": [{"ph": "X", "name": "' + b"a" * INFLATED + b'"}]}',
    "whitespace": b'{"traceEvents": [' + EVENT + b" " * INFLATED + b"]}",
    "zero bytes": b"\0" * INFLATED,
    "escaped quotes": b'{"traceEvents": [{"name": "' + b'\\"' * (INFLATED // 2) + b'"}]}',
}
SAYS = {
    "one string": "a string longer than 16 KiB at byte 38",
    "whitespace": "text between two strings longer than 16 KiB",
    "zero bytes": "byte 0 is the control character 00: not JSON text",
    "escaped quotes": "a string longer than 16 KiB",
}


@pytest.mark.parametrize("kind", BOMBS)
def test_a_bomb_that_fits_the_cap_is_refused_while_it_streams(tmp_path, kind):
    """2 GiB of one string crashed orjson (exit 139); 2 GiB of whitespace took 6.2 GB; zero
    bytes were refused after 4.6 GB: each is refused here within a token of where it begins."""
    peak, said = _peak_reading(_gzip(tmp_path, BOMBS[kind]))
    assert SAYS[kind] in said and "\n" not in said
    assert peak < INFLATED / 4  # a few chunks, never the text


def test_a_flood_of_objects_is_refused_up_front_with_the_memory_it_needs(tmp_path, monkeypatch):
    """Eight bytes of text, `{"":1},`, parse to a 64-byte object and more: the text fits, its
    objects do not."""
    monkeypatch.setattr(reading, "available_memory", lambda: 8 * 2**20)
    path = _gzip(tmp_path, b'{"traceEvents": [' + b'{"":1},' * (INFLATED // 7) + b"{}]}")
    peak, said = _peak_reading(path)
    assert re.search(r"reading it takes at least 1\d\.\d MiB of memory \(781 KiB of text, ", said)
    assert "114,287 objects) and 8 MiB is free" in said
    assert peak < INFLATED / 4  # refused before the text is kept: it may inflate past the cap


@pytest.mark.parametrize("suffix", [".json.gz", ".json"])
def test_a_trace_that_fits_is_read_holding_its_text_once(tmp_path, monkeypatch, suffix):
    """Whitespace between events (under a token at a time): the text is most of what there is,
    and reading it must not hold it twice (inflated in blocks, then joined). What the parser
    makes of it is its own (orjson copies the text it parses), so it is left out here."""
    monkeypatch.setattr(trace_module, "parse_json", lambda text: {"traceEvents": [{"ph": "X"}]})
    gap = b" " * 8000
    text = b'{"traceEvents": [' + b",".join([EVENT + gap] * 100) + b"]}"
    path = tmp_path / f"t{suffix}"
    path.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
    peak, said = _peak_reading(path)
    assert said == "loaded"
    assert peak < 1.5 * len(text)


def test_backslashes_and_quotes_read_as_json_reads_them(tmp_path, monkeypatch):
    """Escaped quotes and backslash runs, with a chunk boundary at every byte."""
    monkeypatch.setattr(reading, "CHUNK_BYTES", 1)
    names = ['a\\"b', "c\\\\", '\\\\"', '"', "\\", 'x\\\\\\"y']
    trace = {"traceEvents": [{"ph": "X", "name": n, "ts": 0, "dur": 1} for n in names]}
    path = _gzip(tmp_path, json.dumps(trace).encode())
    assert load_trace(path) == trace


def test_text_the_standard_library_reads_still_reads(tmp_path):
    """NaN and a byte-order mark go to the standard library; nothing else is decoded twice."""
    path = tmp_path / "t.json"
    path.write_bytes(b'\xef\xbb\xbf{"traceEvents": [{"ph": "X", "ts": 0, "dur": NaN}]}')
    assert str(load_trace(path)["traceEvents"][0]["dur"]) == "nan"
    path.write_bytes(b'{"traceEvents": [,,]}')
    with pytest.raises(TraceFormatError, match="not JSON .*unexpected character"):
        load_trace(path)


def test_utf16_text_is_named(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes('{"traceEvents": []}'.encode("utf-16"))
    with pytest.raises(TraceFormatError, match="UTF-16 text; a trace is JSON in UTF-8"):
        load_trace(path)
