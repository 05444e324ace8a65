import pytest
import torch

import attn
from attn.profiling.memory import peak_forward_memory, peak_of


def test_peak_of_follows_the_running_total():
    assert peak_of([100, 50, -100, 200, -250]) == 250
    assert peak_of([]) == 0


def test_naive_peak_holds_two_score_matrices_and_flash_none():
    q = torch.randn(1, 4, 256, 32)
    scores = 4 * 256 * 256 * 4  # one fp32 [heads, seq, seq] matrix
    naive = peak_forward_memory(attn.get_variant("naive"), q, q, q, is_causal=True)
    flash = peak_forward_memory(attn.get_variant("sdpa_flash"), q, q, q, is_causal=True)
    assert 2 * scores <= naive < 3 * scores  # scores and their clone (or softmax output) at once
    assert flash < scores / 2  # output, logsumexp and per-thread buffers only


@pytest.mark.parametrize("name", ["naive", "sdpa_flash"])
def test_peak_grows_with_sequence_length(name):
    variant = attn.get_variant(name)
    small, large = (torch.randn(1, 4, s, 32) for s in (128, 512))
    assert peak_forward_memory(variant, large, large, large, is_causal=True) > peak_forward_memory(
        variant, small, small, small, is_causal=True
    )
