import pytest
import torch

import attn

GOOD = (2, 3, 5, 16)


def qkv(q_shape=GOOD, k_shape=GOOD, v_shape=GOOD, dtype=torch.float32):
    return (
        torch.randn(*q_shape, dtype=dtype),
        torch.randn(*k_shape, dtype=dtype),
        torch.randn(*v_shape, dtype=dtype),
    )


BAD = {
    "rank": (qkv(q_shape=(3, 5, 16)), "4 dims"),
    "batch": (qkv(k_shape=(1, 3, 5, 16), v_shape=(1, 3, 5, 16)), "batch"),
    "heads": (qkv(k_shape=(2, 4, 5, 16), v_shape=(2, 4, 5, 16)), "head counts"),
    "head_dim": (qkv(k_shape=(2, 3, 5, 8)), "head_dim"),
    "kv_seq": (qkv(v_shape=(2, 3, 6, 16)), "k and v sequence"),
    "empty": (qkv(q_shape=(2, 3, 0, 16)), "empty"),
}


@pytest.mark.parametrize("variant", [v.name for v in attn.variants()])
@pytest.mark.parametrize("case", list(BAD))
def test_bad_shapes_raise_value_error_naming_the_shapes(variant, case):
    (q, k, v), words = BAD[case]
    with pytest.raises(ValueError, match=words) as err:
        attn.get_variant(variant).forward(q, k, v)
    assert str(tuple(q.shape)) in str(err.value) or case == "rank"


@pytest.mark.parametrize("variant", [v.name for v in attn.variants()])
def test_dtype_mismatch_is_named(variant):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="float64"):
        attn.get_variant(variant).forward(q, k.double(), v)


@pytest.mark.parametrize("variant", [v.name for v in attn.variants()])
def test_integer_inputs_are_rejected(variant):
    q, k, v = (torch.ones(*GOOD, dtype=torch.int32) for _ in range(3))
    with pytest.raises(ValueError, match="int32"):
        attn.get_variant(variant).forward(q, k, v)


def test_device_mismatch_is_named():
    q, k, v = qkv()
    meta = torch.empty(*GOOD, device="meta")
    with pytest.raises(ValueError, match="meta"):
        attn.get_variant("naive").forward(q, meta, v)


def test_non_tensor_is_named():
    _, k, v = qkv()
    with pytest.raises(ValueError, match="list"):
        attn.get_variant("naive").forward([1.0], k, v)


@pytest.mark.parametrize("variant", [v.name for v in attn.variants()])
def test_unavailable_variant_raises_runtime_error_with_its_reason(variant):
    v = attn.get_variant(variant)
    dtype = v.dtypes[0]
    reason = v.why_unavailable("cpu", dtype)
    if reason is None:
        pytest.skip(f"{variant} runs on CPU")
    head_dim = v.head_dims[0] if v.head_dims else 16
    shape = (2, 3, 5, head_dim)
    with pytest.raises(RuntimeError, match=variant) as err:
        v.forward(*qkv(shape, shape, shape, dtype=dtype))
    assert reason in str(err.value)
