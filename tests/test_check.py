import pytest
import torch

from kernels.check import assert_match, compare, poison


def test_bit_exact_catches_one_ulp_and_nan():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(33, 65, generator=g).to(torch.bfloat16)
    out = ref.clone()
    assert compare(out, ref, exact=True).ok
    out.view(torch.int16)[5, 7] += 1  # one ulp
    rep = compare(out, ref, exact=True)
    assert not rep.ok and rep.mismatches == 1 and "(5, 7)" in rep.samples[0]
    out = poison(torch.empty_like(ref))
    out[:-1, :] = ref[:-1, :]
    rep = compare(out, ref, exact=True)
    assert not rep.ok and rep.nan_count == 65


def test_tolerance_uses_relative_norm_and_never_passes_nan():
    ref = torch.randn(1000, dtype=torch.float64)
    out = (ref * (1 + 1e-4)).float()
    assert compare(out, ref.float(), rtol=1e-3).ok
    assert not compare(out, ref.float(), rtol=1e-5).ok
    out[3] = float("nan")
    assert not compare(out, ref.float(), rtol=1.0).ok
    with pytest.raises(AssertionError, match="WRONG"):
        assert_match(out, ref.float(), rtol=1.0)


def test_shape_mismatch_fails():
    assert not compare(torch.zeros(3), torch.zeros(4), exact=True).ok


def test_poison_integers():
    t = poison(torch.zeros(8, dtype=torch.int32))
    assert (t == 0x5A5A5A5A).all()
