import pytest

import attn

CHAPTER_ORDER = ["naive", "inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash", "sdpa_cudnn"]


def test_variants_come_in_chapter_order():
    names = [v.name for v in attn.variants()]
    assert names[: len(CHAPTER_ORDER)] == CHAPTER_ORDER


def test_get_variant_returns_the_named_variant():
    for v in attn.variants():
        assert attn.get_variant(v.name) is v


def test_unknown_variant_lists_valid_names():
    with pytest.raises(KeyError) as err:
        attn.get_variant("flash2")
    message = str(err.value)
    assert "flash2" in message
    for name in CHAPTER_ORDER:
        assert name in message


def test_every_variant_has_a_title_and_answers_for_cpu():
    for v in attn.variants():
        assert v.title
        reason = v.why_unavailable("cpu")
        assert reason is None or (isinstance(reason, str) and len(reason) > 10)
