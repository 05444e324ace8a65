"""attn.traces.common.busy: one wording of a busy machine, for the terminal and the page."""

from attn.traces.common.busy import how_busy

IDLE = {"busy": False, "others_share": 0.01, "cpu_count": 2}


def test_an_idle_stamp_or_none_says_nothing():
    assert how_busy([IDLE, None, "not a load"]) is None


def test_the_largest_share_of_other_work_is_said():
    loads = [
        {**IDLE, "busy": True, "others_share": 0.3},
        {**IDLE, "busy": True, "others_share": 0.6},
    ]
    assert how_busy(loads) == "other work used 60% of its 2 cores"


def test_a_stamp_older_than_the_share_says_its_highest_load_average():
    old = {
        "busy": True,
        "cpu_count": 2,
        "load_avg_before": [3.0, 1, 1],
        "load_avg_after": [9.0, 1, 1],
    }
    assert how_busy([old]) == "a load average of 9.00 on 2 cores"
