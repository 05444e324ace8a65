"""attn.traces.common.jsonfile: the one reader of a set's JSON, refusing in one line what
json.loads alone reads into a traceback or into a number no field can hold."""

from __future__ import annotations

import pytest

from attn.traces.common import jsonfile


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than"),  # json.loads: RecursionError
        ('{"a": ' * 80 + "1" + "}" * 80, "is nested over 64 levels deep"),
        ('{"rows": [{"median_us": 1' + "0" * 400 + "}]}", "rows[0].median_us is an integer of 401"),
        ('{"rows": [{"median_us": Infinity}]}', "rows[0].median_us is inf, not a finite"),
        ('{"peak": NaN}', "peak is nan, not a finite"),
        ('{"peak": 1e400}', "peak is inf, not a finite"),
        ('{"peak": ', "is broken: not JSON"),
    ],
    ids=["100k deep", "80 deep", "401 digits", "Infinity", "NaN", "1e400", "truncated"],
)
def test_a_file_no_field_can_hold_is_refused_in_one_line_naming_it(tmp_path, text, says):
    path = tmp_path / "timing.json"
    path.write_text(text)
    with pytest.raises(jsonfile.BadJson) as refusal:
        jsonfile.load(path)
    message = str(refusal.value)
    assert "\n" not in message and str(path) in message and says in message, message


def test_what_a_set_holds_is_read_as_it_is(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text('{"a": [1, 2.5, -3, true, null, "x"], "b": {"c": 9223372036854775807}}')
    assert jsonfile.load(path, dict) == {"a": [1, 2.5, -3, True, None, "x"], "b": {"c": 2**63 - 1}}
    with pytest.raises(jsonfile.BadJson, match="holds a dict, not a list"):
        jsonfile.load(path, list)
