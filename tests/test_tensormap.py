"""kernels.tensormap: the cuTensorMapEncodeTiled rules, checked on CPU with plain numbers and torch tensors."""

from __future__ import annotations

import pytest

from kernels.tensormap import (
    TensorMapError,
    TensorMapUnavailable,
    make_tensor_map,
    validate_tensor,
    validate_tiled,
)

BASE = 0x7F00_0000_0000  # a 16-byte aligned (in fact 2 MiB aligned) device-like address


def contiguous_strides(shape, elt):
    st = [elt] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        st[i] = st[i + 1] * shape[i + 1]
    return tuple(st)


def errors(**kw) -> list[str]:
    args = dict(shape=(128, 128), strides_bytes=None, dtype_bytes=2, box_dim=(64, 64), base_ptr=BASE)
    args.update(kw)
    with pytest.raises(TensorMapError) as ei:
        validate_tiled(args.pop("shape"), args.pop("strides_bytes"), args.pop("dtype_bytes"), args.pop("box_dim"),
                       **args)
    assert isinstance(ei.value, ValueError)
    return ei.value.violations


def test_valid_config_passes_and_is_reversed_for_the_driver():
    p = validate_tiled((256, 128), (256, 2), 2, (64, 32), base_ptr=BASE)
    assert p.rank == 2
    assert p.global_dim == (128, 256)        # innermost first
    assert p.global_strides == (256,)        # bytes, outer dims only
    assert p.box_dim == (32, 64)
    assert p.element_strides == (1, 1)
    assert p.box_bytes == 64 * 32 * 2
    assert "globalDim      = {128, 256}" in p.describe()


def test_valid_3d_with_128b_swizzle_passes():
    shape = (4, 512, 64)  # bf16 rows of 64 elements = 128 B: exactly the 128B swizzle span
    p = validate_tiled(shape, contiguous_strides(shape, 2), 2, (1, 128, 64), base_ptr=BASE, swizzle="128B")
    assert p.global_strides == (128, 512 * 128)
    assert p.swizzle == "128B"


def test_box_dim_300_names_box_dim_and_rule():
    (msg,) = errors(shape=(1024, 1024), box_dim=(300, 64))
    assert msg.startswith("box_dim[0] = 300")
    assert "1..256" in msg and "cuTensorMapEncodeTiled" in msg
    assert "driver dim 1" in msg  # PyTorch dim 0 is the driver's outer dimension


def test_misaligned_base_names_alignment():
    (msg,) = errors(base_ptr=BASE + 8)
    assert "global address 0x7f0000000008 is not 16-byte aligned" in msg
    assert "offset 8 mod 16" in msg


def test_row_stride_of_66_bytes_names_the_stride():
    # bf16 (64, 33): a row is 66 bytes — not a multiple of 16
    (msg,) = errors(shape=(64, 33), strides_bytes=(66, 2), box_dim=(8, 8))
    assert msg.startswith("strides_bytes[0] = 66")
    assert "multiple of 16" in msg and "66 mod 16 = 2" in msg


def test_rank_6_is_a_rank_error():
    shape = (2, 2, 2, 2, 2, 64)
    violations = errors(shape=shape, strides_bytes=contiguous_strides(shape, 4), dtype_bytes=4,
                        box_dim=(1, 1, 1, 1, 1, 8))
    assert any(v.startswith("rank = 6") and "1..5" in v for v in violations)


def test_interleave_needs_rank_3():
    violations = errors(interleave="16B")
    assert any(v.startswith("rank = 2") and "3..5" in v for v in violations)


def test_swizzle_128b_with_256_byte_inner_box():
    (msg,) = errors(shape=(256, 256), box_dim=(64, 128), swizzle="128B")  # 128 bf16 = 256 bytes
    assert "box_dim[1] = 128" in msg and "swizzle 128B" in msg and "256 bytes" in msg and "<= 128 bytes" in msg


def test_swizzle_accepts_cuda_core_enum_and_ints():
    # the same rule through the other spellings of "128B"
    assert any("swizzle 128B" in v for v in errors(shape=(256, 256), box_dim=(64, 128), swizzle=128))
    enums = pytest.importorskip("kernels.tensormap").cuda_core_enums()
    sw = enums["TensorMapSwizzle"].SWIZZLE_128B
    assert any("swizzle 128B" in v for v in errors(shape=(256, 256), box_dim=(64, 128), swizzle=sw))


def test_inner_box_must_be_16_bytes():
    (msg,) = errors(box_dim=(64, 4))  # 4 bf16 = 8 bytes
    assert msg.startswith("box_dim[1] = 4") and "multiple of 16 bytes" in msg


def test_non_contiguous_inner_dimension():
    violations = errors(shape=(64, 64), strides_bytes=(2, 128), box_dim=(16, 16))  # a transposed view
    assert any(v.startswith("strides_bytes[1] = 128") and "contiguous" in v for v in violations)


def test_element_strides_and_global_dims():
    v1 = errors(element_strides=(9, 1))
    assert any(v.startswith("element_strides[0] = 9") and "1..8" in v for v in v1)
    v2 = errors(shape=(0, 128), box_dim=(1, 64))
    assert any(v.startswith("shape[0] = 0") and "1..2^32" in v for v in v2)
    v3 = errors(shape=(1 << 33, 128), strides_bytes=(256, 2), box_dim=(1, 64))
    assert any(v.startswith(f"shape[0] = {1 << 33}") for v in v3)


def test_stride_limit_2_to_40():
    (msg,) = errors(shape=(2, 64), strides_bytes=(1 << 40, 2), box_dim=(1, 64))
    assert msg.startswith(f"strides_bytes[0] = {1 << 40}") and "2^40" in msg


def test_interleave_32b_needs_32b_alignment_and_swizzle():
    shape = (4, 8, 16)
    violations = errors(shape=shape, strides_bytes=contiguous_strides(shape, 2), box_dim=(1, 8, 16),
                        interleave="32B", base_ptr=BASE + 16)
    assert any("not 32-byte aligned" in v for v in violations)
    assert any("INTERLEAVE_32B requires SWIZZLE_32B" in v for v in violations)


def test_nan_fill_needs_float():
    (msg,) = errors(oob_fill="nan", is_float=False)
    assert "oob_fill = 'nan'" in msg and "floating-point" in msg
    validate_tiled((128, 128), None, 2, (64, 64), base_ptr=BASE, oob_fill="nan", is_float=True)


def test_all_violations_are_listed():
    with pytest.raises(TensorMapError) as ei:
        validate_tiled((64, 33), (66, 2), 2, (300, 8), base_ptr=BASE + 8, swizzle="32B")
    v = ei.value.violations
    assert len(v) >= 3
    text = str(ei.value)
    assert text.startswith(f"{len(v)} tensor map rules broken:")
    for needle in ("box_dim[0] = 300", "not 16-byte aligned", "strides_bytes[0] = 66"):
        assert needle in text, needle


def test_cuda_core_rules_only_when_asked():
    # a 64-wide box over a 32-wide tensor: the driver accepts it (zero fill), cuda.core's CCCL path does not
    validate_tiled((32, 32), None, 4, (64, 32), base_ptr=BASE)
    with pytest.raises(TensorMapError) as ei:
        validate_tiled((32, 32), None, 4, (64, 32), base_ptr=BASE, cuda_core_rules=True)
    assert "box_dim[0] = 64 > shape[0] = 32" in str(ei.value) and "CCCL" in str(ei.value)


def test_box_too_big_for_shared_memory_under_cuda_core_rules():
    shape = (256, 256, 256)
    with pytest.raises(TensorMapError) as ei:
        validate_tiled(shape, None, 4, (256, 256, 4), base_ptr=BASE, cuda_core_rules=True)
    assert "shared memory" in str(ei.value)


# ---- from torch tensors (CPU: shape, strides and data_ptr are real; no descriptor is built) ----------------------

torch = pytest.importorskip("torch")


def test_torch_tensor_valid():
    x = torch.empty(256, 128, dtype=torch.bfloat16)
    p = validate_tensor(x, (64, 64))
    assert p.global_dim == (128, 256) and p.global_strides == (256,) and p.element_bytes == 2
    assert p.global_address == x.data_ptr()


def test_torch_odd_row_length():
    x = torch.empty(64, 33, dtype=torch.bfloat16)
    with pytest.raises(TensorMapError) as ei:
        validate_tensor(x, (8, 8))
    assert "strides_bytes[0] = 66" in str(ei.value)


def test_torch_slice_moves_base():
    x = torch.empty(1024, dtype=torch.bfloat16)
    assert x.data_ptr() % 16 == 0
    with pytest.raises(TensorMapError) as ei:
        validate_tensor(x[1:], (64,))
    assert "not 16-byte aligned" in str(ei.value) and "offset 2 mod 16" in str(ei.value)
    validate_tensor(x[8:], (64,))  # 8 bf16 = 16 bytes: still aligned


def test_torch_transposed_view():
    x = torch.empty(64, 128, dtype=torch.float32).t()
    with pytest.raises(TensorMapError) as ei:
        validate_tensor(x, (16, 16))
    assert "contiguous" in str(ei.value)


def test_torch_unsupported_dtype():
    with pytest.raises(TensorMapError, match="no TMA data type"):
        validate_tensor(torch.empty(16, 16, dtype=torch.complex64), (4, 4))


def test_make_tensor_map_on_cpu_is_clear():
    x = torch.empty(128, 128, dtype=torch.float32)
    with pytest.raises(TensorMapUnavailable, match="needs a CUDA tensor"):
        make_tensor_map(x, (32, 32))
    with pytest.raises(TensorMapError, match="box_dim\\[0\\] = 300"):  # rules are checked before the device
        make_tensor_map(x, (300, 32))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_make_tensor_map_on_gpu():
    from kernels.device import is_hopper

    if not is_hopper():
        pytest.skip("needs an sm_90 GPU")
    x = torch.empty(256, 128, dtype=torch.bfloat16, device="cuda")
    desc = make_tensor_map(x, (256, 64), swizzle="128B")  # inner 64 bf16 = 128 B: legal only in PyTorch order
    assert desc is not None
    with pytest.raises(TensorMapError):
        make_tensor_map(x, (64, 256), swizzle="128B")
    # cuda.core itself reverses box_dim: PyTorch order is accepted, the driver's order is not
    from kernels.tensormap import _strided_memory_view, cuda_core_enums

    e = cuda_core_enums()
    view = _strided_memory_view().from_dlpack(x, stream_ptr=-1)
    kw = dict(data_type=e["TensorMapDataType"].BFLOAT16, swizzle=e["TensorMapSwizzle"].SWIZZLE_128B)
    view.as_tensor_map(box_dim=(256, 64), **kw)
    with pytest.raises(Exception):
        view.as_tensor_map(box_dim=(64, 256), **kw)
    # a box larger than the tensor: the driver zero-fills; a CCCL-built cuda.core refuses it, and says why
    y = torch.empty(32, 32, dtype=torch.float32, device="cuda")
    try:
        make_tensor_map(y, (64, 32))
    except TensorMapError as exc:
        assert "CCCL" in str(exc)
    int8 = make_tensor_map(torch.empty(64, 64, dtype=torch.int8, device="cuda"), (16, 16))  # moved as UINT8
    assert "UINT8" in repr(int8)
