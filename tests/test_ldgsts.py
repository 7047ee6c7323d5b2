"""Day 3 (ldgsts): the kernels compile and show LDGSTS / LDGDEPBAR / DEPBAR where they should (and not where they
should not), the launchers refuse bad inputs, the workload's references match a Python loop, the sync vs async
timeline model behaves, the known answers pass / fail the path check as expected.toml says, and — on an H100 — every
kernel is right, and the races, the off-by-one and the misaligned copy are caught."""

from __future__ import annotations

import math
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import torch

from autograder import benchmarks
from kernels import record, topic
from kernels.compile import CompileError, NotAttempted, compile_cuda
from kernels.device import is_hopper
from autograder.known import answer_text, kernel_source, known_answers, known_dir, release_cell, solution_kernel
from kernels.ldgsts import bench, exercise, model, workload
from kernels.ldgsts.launch import (COPY_KERNELS, STATIC_SMEM, VARIANTS, copy_kernel_name, cubin, kernel_name,
                                   launch_config, occupancy_smem, stage_copy, stencil, validate, validate_copy)
from kernels.sass import disassemble, opcodes, path_evidence
from autograder.spec import SOLUTION_MARGIN, spec_path
from kernels.topic import MODEL_BAND

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = known_dir("ldgsts")
SLUG = "ldgsts"
gpu = pytest.mark.skipif(not is_hopper(), reason="needs an sm_90 GPU")


def _expected() -> dict:
    with (SUBMISSIONS / "expected.toml").open("rb") as f:
        return tomllib.load(f)


def _cubin(name: str):
    """A known answer compiled: its .cu file, or its base with its changes (expected.toml)."""
    return compile_cuda(kernel_source(SLUG, name), name=f"{name}.cu")


def _spec():
    from autograder.spec import load

    return load(SLUG)


def _texts(kernel: str, cub=None) -> list[str]:
    return [i.text for i in disassemble(cub or cubin())[kernel]]


def _has(ops: list[str], prefix: str) -> bool:
    return any(o == prefix or o.startswith(prefix + ".") for o in ops)


# ------------------------------------------------------------------------------------------------ SASS of the demos
def test_module_holds_every_kernel():
    want = {kernel_name(v) for v in VARIANTS} | set(COPY_KERNELS.values())
    assert set(cubin().kernels) == want


@pytest.mark.parametrize("kernel", sorted({kernel_name(v) for v in VARIANTS} | set(COPY_KERNELS.values())))
def test_no_local_memory(kernel):
    ops = opcodes(cubin(), kernel)
    assert not [o for o in ops if o.startswith(("LDL", "STL"))], f"local memory in {kernel}"


def test_direct_rung_has_plain_loads_only():
    ops = opcodes(cubin(), "stencil_direct")
    assert not _has(ops, "LDGSTS") and not _has(ops, "LDGDEPBAR") and not _has(ops, "DEPBAR")
    assert not [o for o in ops if o.startswith(("LDS", "STS", "BAR"))]
    # 4 outputs x 7 taps of x (4-byte) + 7 weights, all plain global loads
    assert sum(o.startswith("LDG.E") and ".128" not in o for o in ops) == 4 * 7 + 7


def test_smem_sync_rung_stages_through_registers():
    k = "stencil_smem_sync"
    ev = path_evidence(cubin(), k, require=["LDG.E.128", "STS.128", "BAR.SYNC", "LDS.128"], forbid=["LDGSTS"])
    assert ev.ok, ev.summary()
    ops = opcodes(cubin(), k)
    assert ops.index("BAR.SYNC.DEFER_BLOCKING") > max(i for i, o in enumerate(ops) if o == "STS.128")


def _depbar_counts(kernel: str) -> list[int]:
    return [int(m.group(1), 16) for t in _texts(kernel) if (m := re.search(r"DEPBAR\.LE SB0, (0x[0-9a-f]+)", t))]


@pytest.mark.parametrize("variant,wait", [("ldgsts", 0), ("ldgsts_db", 1)])
def test_cp_async_rungs(variant, wait):
    k = kernel_name(variant)
    ev = path_evidence(cubin(), k, require=["LDGSTS.E.BYPASS.128.ZFILL", "LDGDEPBAR", "DEPBAR.LE", "BAR.SYNC"],
                       forbid=["LDG.E.128", "STS", "LDGSTS.E.128", "LDGSTS.E.64"])
    assert ev.ok, ev.summary()  # no register staging of x: no 16-byte LDG, no STS at all
    assert _depbar_counts(k) == [wait]  # wait_group 0 vs wait_group 1
    ops = opcodes(cubin(), k)
    depbar = ops.index("DEPBAR.LE")
    assert max(i for i, o in enumerate(ops) if o == "LDGDEPBAR") < depbar or variant == "ldgsts_db"
    assert min(i for i, o in enumerate(ops) if o.startswith("BAR.SYNC")) > depbar  # the barrier after the wait
    assert min(i for i, o in enumerate(ops) if o.startswith("LDS")
               and not o == "LDS") > depbar  # shared reads after the wait (bare `LDS` = ptxas's @!PT padding)


def test_double_buffered_rung_commits_twice_and_waits_once():
    # prologue: commit tile 0's group; loop: commit the next tile's group, wait_group 1, compute
    ops = opcodes(cubin(), "stencil_ldgsts_db")
    assert ops.count("LDGDEPBAR") == 2 and ops.count("DEPBAR.LE") == 1
    first, second = [i for i, o in enumerate(ops) if o == "LDGDEPBAR"]
    assert first < second < ops.index("DEPBAR.LE")
    assert [o for o in ops[first:second] if o.startswith("LDGSTS")]  # the loop's prefetch sits between


def test_zero_fill_has_a_register_src_size():
    # cp.async.cg ... 16, src_bytes: the SASS carries a predicate (src_bytes != 0) on the ZFILL form
    lines = [t for t in _texts("stencil_ldgsts") if "LDGSTS" in t]
    assert lines and all("ZFILL" in t and re.search(r", P\d\s*$", t) for t in lines), lines
    # ... and (16 - src_bytes) & 15 folded into the source address before the first copy (what the notebook shows)
    texts = _texts("stencil_ldgsts")
    first = next(k for k, t in enumerate(texts) if "LDGSTS" in t)
    before = texts[:first]
    assert any(re.match(r"IADD3 R\d+, -R\d+, 0x10, RZ", t) for t in before), before
    assert any(re.match(r"LOP3\.LUT R\d+, R\d+, 0xf, RZ, 0xc0", t) for t in before), before


@pytest.mark.parametrize("kernel,opcode", [("stage_copy_4", "LDGSTS.E"), ("stage_copy_8", "LDGSTS.E.64"),
                                           ("stage_copy_16_ca", "LDGSTS.E.128"),
                                           ("stage_copy_16", "LDGSTS.E.BYPASS.128"),
                                           ("stage_copy_16_primitives", "LDGSTS.E.BYPASS.128")])
def test_cp_async_sizes(kernel, opcode):
    ops = opcodes(cubin(), kernel)
    ld = [o for o in ops if o.startswith("LDGSTS")]
    assert ld and set(ld) == {opcode}, ld  # exactly the size / cache form asked for
    per_thread = {"LDGSTS.E": 4, "LDGSTS.E.64": 2}.get(opcode, 1)  # 16 bytes per thread in 4 / 2 / 1 copies
    assert len(ld) == per_thread
    assert "LDGDEPBAR" in ops and "DEPBAR.LE" in ops and not _has(ops, "LDG")


def test_pipeline_primitives_are_the_same_instructions():
    mem = re.compile(r"(LDG|STG|LDS|STS|BAR|DEPBAR|LDGDEPBAR)")
    a = [o for o in opcodes(cubin(), "stage_copy_16") if mem.match(o)]
    b = [o for o in opcodes(cubin(), "stage_copy_16_primitives") if mem.match(o)]
    assert a == b


def test_cg_with_8_bytes_does_not_compile():
    src = ('extern "C" __global__ void k(const float* x) { __shared__ __align__(16) float s[4];\n'
           'asm volatile("cp.async.cg.shared.global [%0], [%1], 8;\\n" :: '
           '"r"((unsigned)__cvta_generic_to_shared(s)), "l"(x)); }\n')
    with pytest.raises(CompileError, match="expected to be 16"):
        compile_cuda(src, name="cg8.cu")


def _cuobjdump_shared() -> dict[str, int] | None:
    try:
        import cuda.pathfinder as pf

        tool = pf.find_nvidia_binary_utility("cuobjdump")
    except Exception:  # noqa: BLE001
        tool = None
    if not tool:
        return None
    out = subprocess.run([str(tool), "--dump-resource-usage", str(cubin().path)], capture_output=True, text=True,
                         timeout=60)
    res, fn = {}, None
    for line in out.stdout.splitlines():
        m = re.search(r"Function (\w+):", line)
        if m:
            fn = m.group(1)
        m = re.search(r"SHARED:(\d+)", line)
        if m and fn:
            res[fn] = int(m.group(1))
    return res


def test_static_smem_table_matches_the_cubin():
    shared = _cuobjdump_shared()
    if shared is None:
        pytest.skip("cuobjdump not found")
    for variant, static in STATIC_SMEM.items():
        # cuobjdump reports the static size, plus the 1 KB sm_90 reserves per block when the kernel has any
        assert shared[kernel_name(variant)] in (static, static + 1024), (variant, shared[kernel_name(variant)])


# ------------------------------------------------------------------------------------------ launchers, occupancy
def test_occupancy_padding():
    for variant, static in STATIC_SMEM.items():
        for bps in range(1, 9):
            dyn = occupancy_smem(static, bps)
            total = static + dyn + 1024
            assert dyn % 1024 == 0 and dyn >= 0
            assert bps * total <= 228 * 1024 < (bps + 1) * total
            assert static + dyn <= 227 * 1024
    with pytest.raises(ValueError, match="1..8"):
        occupancy_smem(0, 0)
    with pytest.raises(ValueError, match="1..8"):
        occupancy_smem(0, 9)


def test_launch_config():
    n = (1 << 20) + 3
    assert launch_config("ldgsts", n) == {"grid": 1025, "block": 256, "smem": 0}
    assert launch_config("direct", 1)["grid"] == 1
    assert launch_config("ldgsts_db", n, sms=132)["grid"] == min(1025, 8 * 132)
    assert launch_config("ldgsts_db", n, sms=132, blocks_per_sm=1)["grid"] == 132
    assert launch_config("ldgsts_db", 5000, sms=132)["grid"] == 5  # never more blocks than tiles
    assert launch_config("ldgsts", n, blocks_per_sm=1)["smem"] == occupancy_smem(STATIC_SMEM["ldgsts"], 1)
    with pytest.raises(ValueError, match="variant"):
        launch_config("tma", n)


def test_launcher_validation():
    x, w = torch.zeros(1000), torch.full((7,), 1 / 7)
    with pytest.raises(ValueError, match="variant"):
        validate(x, w, "tma")
    with pytest.raises(TypeError, match="torch.Tensor"):
        validate([1.0], w)
    with pytest.raises(ValueError, match="float32"):
        validate(x.double(), w)
    with pytest.raises(ValueError, match="1-D"):
        validate(x.view(10, 100), w)
    with pytest.raises(ValueError, match="empty"):
        validate(torch.zeros(0), w)
    with pytest.raises(ValueError, match="contiguous"):
        validate(torch.zeros(2000)[::2], w)
    with pytest.raises(ValueError, match="16-byte aligned"):
        validate(x[1:], w)
    with pytest.raises(ValueError, match="7 elements"):
        validate(x, torch.zeros(9))
    with pytest.raises(ValueError, match="1..8"):
        validate(x, w, blocks_per_sm=0)
    with pytest.raises(TypeError, match="blocks_per_sm"):
        validate(x, w, blocks_per_sm=1.0)
    with pytest.raises(ValueError, match="1000 elements"):
        validate(x, w, out=torch.zeros(999))
    with pytest.raises(ValueError, match="overlaps"):
        validate(x, w, out=x)
    with pytest.raises(ValueError, match="GPU"):
        validate(x, w, out=torch.zeros(1000))
    with pytest.raises(ValueError, match="GPU"):
        stencil(x, w)


def test_copy_launcher_validation():
    assert copy_kernel_name(16, "cg") == "stage_copy_16" and copy_kernel_name(4, "ca") == "stage_copy_4"
    with pytest.raises(ValueError, match="only 16 bytes"):
        copy_kernel_name(8, "cg")
    with pytest.raises(ValueError, match="4, 8 or 16"):
        copy_kernel_name(2, "ca")
    with pytest.raises(ValueError, match="multiple of 4"):
        validate_copy(torch.zeros(1001))
    with pytest.raises(ValueError, match="16-byte aligned"):
        validate_copy(torch.zeros(1008)[2:1006])
    with pytest.raises(ValueError, match="GPU"):
        stage_copy(torch.zeros(1024))


# ------------------------------------------------------------------------------------------------------ workloads
def _loop_stencil(x: list[float], w: list[float], r: int) -> list[float]:
    n = len(x)
    return [sum(w[k] * (x[i + k - r] if 0 <= i + k - r < n else 0.0) for k in range(2 * r + 1)) for i in range(n)]


@pytest.mark.parametrize("n", [1, 3, 5, 17])
def test_stencil_reference_matches_a_python_loop(n):
    inputs = workload.make_inputs(n, seed=3, device="cpu")
    x, w = inputs["x"], inputs["w"]
    want = _loop_stencil(x.double().tolist(), w.double().tolist(), workload.R)
    got = workload.reference(inputs)
    assert got.dtype == torch.float32 and got.shape == (n,)
    assert got.tolist() == pytest.approx(want, rel=1e-6, abs=1e-7)
    assert w.shape == (7,) and float(w.sum()) == pytest.approx(1.0) and bool((w > 0).all())


def test_inputs_sit_between_nan_guard_bands():
    for make, dtype in ((lambda n: workload.make_inputs(n, 0, "cpu")["x"], torch.float32),):
        x = make(37)
        assert x.dtype == dtype and x.is_contiguous() and x.data_ptr() % 16 == 0
        base = x.untyped_storage()
        full = torch.empty(0, dtype=dtype).set_(base, 0, (base.nbytes() // x.element_size(),))
        off = x.storage_offset()
        assert off == workload.GUARD and full.numel() == 37 + 2 * workload.GUARD
        assert torch.isnan(full[:off]).all() and torch.isnan(full[off + 37:]).all()
        assert not torch.isnan(x).any()
    a = workload.make_inputs(64, 5, "cpu")["x"]
    assert torch.equal(a, workload.make_inputs(64, 5, "cpu")["x"])
    assert not torch.equal(a, workload.make_inputs(64, 6, "cpu")["x"])


def _full_buffer(x: torch.Tensor) -> torch.Tensor:
    """The whole buffer an input view lives in (guards and padding included), as a 1-D tensor."""
    base = x.untyped_storage()
    return torch.empty(0, dtype=x.dtype).set_(base, 0, (base.nbytes() // x.element_size(),))


@pytest.mark.parametrize("shape", [(1, 1, 8), (3, 7, 8), (16, 128, 128), (5, 20, 40)])
def test_exercise_image_sits_in_nan_padding_and_guard_rows(shape):
    h, w, ld = shape
    x = exercise.make_inputs(shape, 0, "cpu")["x"]
    assert x.dtype == torch.bfloat16 and x.shape == (h, w) and x.stride() == (ld, 1) and x.data_ptr() % 16 == 0
    full = _full_buffer(x)
    g = exercise.GUARD_ROWS
    assert x.storage_offset() == g * ld and full.numel() == (h + 2 * g) * ld
    img = full.view(h + 2 * g, ld)
    assert torch.isnan(img[:g]).all() and torch.isnan(img[g + h:]).all()  # guard rows above and below
    assert torch.isnan(img[g:g + h, w:]).all()  # the padding columns W .. ld-1 of every row
    assert not torch.isnan(x).any() and torch.equal(img[g:g + h, :w], x)
    assert torch.equal(x, exercise.make_inputs(shape, 0, "cpu")["x"])
    assert not torch.equal(x, exercise.make_inputs(shape, 1, "cpu")["x"])
    k = exercise.make_inputs(shape, 0, "cpu")["w"]
    assert k.shape == (9,) and k.dtype == torch.float32 and float(k.sum()) == pytest.approx(1.0) and (k > 0).all()


def _loop_stencil2d(x: list[list[float]], k: list[float]) -> list[list[float]]:
    h, w = len(x), len(x[0])
    return [[sum(k[3 * (dr + 1) + dc + 1] * x[r + dr][c + dc] for dr in (-1, 0, 1) for dc in (-1, 0, 1)
                 if 0 <= r + dr < h and 0 <= c + dc < w) for c in range(w)] for r in range(h)]


@pytest.mark.parametrize("shape", [(1, 1, 8), (1, 9, 16), (7, 1, 8), (3, 7, 8), (17, 129, 160), (6, 24, 24)])
def test_exercise_reference_matches_a_python_loop(shape):
    inputs = exercise.make_inputs(shape, 4, device="cpu")
    want = _loop_stencil2d(inputs["x"].double().tolist(), inputs["w"].double().tolist())
    got = exercise.reference(inputs)
    assert got.dtype == torch.float32 and got.shape == shape[:2] and got.is_contiguous()
    assert not torch.isnan(got).any()  # the NaN padding and guard rows are never read
    assert got.flatten().tolist() == pytest.approx([v for row in want for v in row], rel=1e-6, abs=1e-7)
    # not a 1-D stencil along the rows: a single bright pixel spreads to its 8 neighbours with the weights
    if shape[0] >= 3 and shape[1] >= 3:
        x = torch.zeros(shape[:2], dtype=torch.bfloat16)
        x[1, 1] = 1.0
        y = workload.stencil2d_reference(x, inputs["w"])
        assert torch.equal(y[:3, :3].flatten().flip(0), inputs["w"].float())  # y[1+a][1+b] = w[4 - 3a - b]


def test_exercise_interface_and_launch_contract():
    shape = (17, 129, 160)
    inputs = exercise.make_inputs(shape, 0, device="cpu")
    out = exercise.make_output(inputs)
    assert out.shape == (17, 129) and out.dtype == torch.float32 and out.stride() == (160, 1)
    la = exercise.launch_args(inputs, out)
    assert la["grid"] == (2, 2) and la["block"] == 256 and la["smem"] == 0
    assert la["args"][0] is inputs["x"] and la["args"][1] is inputs["w"] and la["args"][2] is out
    assert [int(a) for a in la["args"][3:]] == [17, 129, 160]
    one = exercise.make_inputs((16, 128, 128), 0, "cpu")
    assert exercise.launch_args(one, exercise.make_output(one))["grid"] == (1, 1)
    big = exercise.make_inputs((2049, 4099, 4104), 0, "cpu")
    assert exercise.launch_args(big, exercise.make_output(big))["grid"] == (33, 129)
    assert exercise.KERNEL == exercise.NAME == "blur2d_bf16" and exercise.CHECK == {"rtol": 1e-5}
    assert exercise.TILE == exercise.TILE_ROWS * exercise.TILE_COLS == 8 * exercise.BLOCK
    # bytes: x's visible part once (bf16), y once (fp32), the 9 weights — not the padding, not the halos
    assert exercise.bytes_moved((10, 100, 128)) == 6 * 1000 + 36 and exercise.flops((10, 100, 128)) == 18 * 1000


def test_exercise_refuses_bad_images():
    with pytest.raises(ValueError, match="multiple of 8"):
        exercise.make_inputs((4, 10, 12), 0, "cpu")
    with pytest.raises(ValueError, match="exceeds the row pitch"):
        exercise.make_inputs((4, 17, 16), 0, "cpu")
    with pytest.raises(ValueError, match=">= 1"):
        exercise.bytes_moved((0, 8, 8))
    good = exercise.make_inputs((4, 10, 16), 0, "cpu")
    out = exercise.make_output(good)
    exercise.launch_args(good, out)
    # a pitch that is not a multiple of 8 (rows not 16-byte aligned)
    x12 = torch.zeros(4, 12, dtype=torch.bfloat16)[:, :10]
    with pytest.raises(ValueError, match="multiple of 8"):
        exercise.launch_args({"x": x12, "w": good["w"]}, torch.zeros(4, 12)[:, :10])
    # an image starting 2 bytes off a 16-byte boundary
    shifted = _full_buffer(good["x"])[1:1 + 4 * 16].view(4, 16)[:, :10]
    with pytest.raises(ValueError, match="16-byte boundary"):
        exercise.launch_args({"x": shifted, "w": good["w"]}, out)
    with pytest.raises(ValueError, match="bf16"):
        exercise.launch_args({"x": good["x"].float(), "w": good["w"]}, out)
    with pytest.raises(ValueError, match="9 contiguous float32"):
        exercise.launch_args({"x": good["x"], "w": good["w"][:8]}, out)
    with pytest.raises(ValueError, match="x's pitch"):
        exercise.launch_args(good, torch.zeros(4, 10))  # y contiguous: pitch 10, not x's 16
    with pytest.raises(ValueError, match="x's pitch"):
        exercise.launch_args(good, torch.zeros(4, 16)[:, :9])


def test_one_wrong_element_fails_the_exercise_check():
    # The tolerance is a norm: make sure a single wrong edge element of the largest test shape still fails it.
    from kernels.check import compare

    h, w, _ = max(_spec().exercises[exercise.NAME].test_shapes, key=lambda s: s[0] * s[1])
    ref = torch.randn(h, w) * 0.5
    bad = ref.clone()
    bad[-1, -1] += 0.1  # one output off by a fraction of one weighted sample
    assert compare(ref.clone(), ref, **exercise.CHECK).ok
    assert not compare(bad, ref, **exercise.CHECK).ok


# ---------------------------------------------------------------------------------------------------------- model
def test_model_mirrors_the_workloads():
    assert model.BENCH_N == workload.BENCH_N
    assert model.EXERCISE_BENCH_N == exercise.BENCH_SHAPE[0] * exercise.BENCH_SHAPE[1]
    assert model.KERNELS["stencil_ldgsts"].tile_outputs == workload.TILE
    assert model.KERNELS["stencil_ldgsts"].tile_bytes * workload.BENCH_N // workload.TILE == \
        workload.bytes_moved(workload.BENCH_N)
    k = model.KERNELS[exercise.KERNEL]
    assert k.tile_outputs == exercise.TILE
    counted = k.tile_bytes * model.EXERCISE_BENCH_N // k.tile_outputs
    assert abs(counted - exercise.bytes_moved(exercise.BENCH_SHAPE)) < 64
    # the bench shape is whole tiles: the model's tile count is the grid's
    h, w, _ = exercise.BENCH_SHAPE
    assert h % exercise.TILE_ROWS == 0 and w % exercise.TILE_COLS == 0


CONST = dict(idle_latency_ns=700.0, latency_slope=0.0, turnaround_ns=300.0, fraction=1.0)  # a fixed latency


def test_model_hand_computed_sync_and_async():
    c, sms, n = 3.0, 132, 1 << 28
    kw = dict(CONST, n=n, sms=sms)
    # one block per SM, single buffer: period = L + T = 1000 ns per 8 KB tile per SM
    p = model.predict("stencil_ldgsts", c, 1, **kw)
    assert p.bound == "latency" and p.period_ns == pytest.approx(1000.0)
    assert p.tbps == pytest.approx(sms * 8192 / 1000.0 / 1e3, rel=2e-3)
    # the double buffer: (L + T) / 2 = 500 ns, and the bandwidth limit 8192 / (3e3 / 132) = 360 ns is not reached
    d = model.predict("stencil_ldgsts_db", c, 1, **kw)
    assert d.bound == "latency" and d.period_ns == pytest.approx(500.0)
    assert d.tbps == pytest.approx(sms * 8192 / 500.0 / 1e3, rel=5e-3)
    # eight blocks per SM: bandwidth-bound at the ceiling (less the tail of the last tiles)
    f = model.predict("stencil_ldgsts", c, 8, **kw)
    assert f.bound == "bandwidth" and f.tbps == pytest.approx(c, rel=0.01) and f.tbps <= c * (1 + 1e-9)
    # stencil_direct: 4 dependent rounds per tile, 4 L + T = 3100 ns > the bandwidth period 8 x 360 = 2883 ns
    r = model.predict("stencil_direct", c, 8, **kw)
    assert r.bound == "latency" and r.period_ns == pytest.approx(3100.0)
    assert r.tbps == pytest.approx(sms * 8 * 8192 / 3100.0 / 1e3, rel=0.01)
    # smem_sync and ldgsts share the timeline: cp.async alone changes nothing in this model
    assert model.predict_tbps("stencil_smem_sync", c, 1, **kw) == pytest.approx(p.tbps)


def test_model_loaded_latency_is_a_fixed_point():
    # latency rises with the bandwidth drawn; the prediction is where both agree: tbps = SMs x 8 KB / (L(tbps) + T)
    c, sms = 3.0, 132
    kw = dict(idle_latency_ns=560.0, latency_slope=140.0, turnaround_ns=350.0, fraction=0.937)
    t = model.steady_tbps("stencil_ldgsts", c, 1, sms=sms, **kw)
    lat = model.loaded_latency_ns(t, idle_latency_ns=560.0, latency_slope=140.0)
    assert lat == pytest.approx(560.0 + 140.0 * t)
    assert t == pytest.approx(sms * 8192 / (lat + 350.0) / 1e3, rel=1e-6)
    # hand-solved: 140 t^2 + 910 t - 1081.3 = 0  ->  t = 1.026 TB/s
    assert t == pytest.approx((-910 + math.sqrt(910**2 + 4 * 140 * sms * 8192 / 1e3)) / 280, rel=1e-6)
    p = model.predict("stencil_ldgsts", c, 1, sms=sms, **kw)
    assert p.latency_ns == pytest.approx(lat, rel=1e-6) and p.tbps == pytest.approx(t, rel=0.01)
    # a steeper latency curve can only lower a latency-bound prediction
    assert model.steady_tbps("stencil_ldgsts", c, 1, **dict(kw, latency_slope=400.0)) < t


def test_model_monotonic_and_limits():
    c = 3.0
    for kernel in ("stencil_direct", "stencil_smem_sync", "stencil_ldgsts", "stencil_ldgsts_db", "stage_copy_16",
                   "blur2d_bf16"):
        t = [model.predict_tbps(kernel, c, b) for b in range(1, 9)]
        # more resident blocks never hurt (beyond the last wave's quantization: ceil(tiles / slots), within 2%)
        assert all(b >= a * 0.98 for a, b in zip(t, t[1:])), (kernel, t)
        assert max(t) <= c * model.DRAM_FRACTION_OF_COPY * (1 + 1e-9)
    for b in range(1, 9):
        assert model.predict_tbps("stencil_ldgsts_db", c, b) >= model.predict_tbps("stencil_ldgsts", c, b) - 1e-9
        assert model.predict_tbps("stencil_direct", c, b) <= model.predict_tbps("stencil_ldgsts", c, b) + 1e-9
    # the latency-bound rung does not scale with the ceiling; the bandwidth-bound one does
    assert model.predict_tbps("stencil_ldgsts", 2.0, 1) == pytest.approx(model.predict_tbps("stencil_ldgsts", 4.0, 1))
    assert model.predict_tbps("stencil_ldgsts", 4.0, 8) == pytest.approx(
        2 * model.predict_tbps("stencil_ldgsts", 2.0, 8))
    # a long latency: double buffering approaches 2x the single buffer (period (L+T)/2 vs L+T)
    slow = dict(idle_latency_ns=20000.0, latency_slope=0.0)
    ratio = model.predict_tbps("stencil_ldgsts_db", c, 1, **slow) / model.predict_tbps("stencil_ldgsts", c, 1, **slow)
    assert ratio == pytest.approx(2.0, rel=0.03)
    with pytest.raises(ValueError, match="kernel"):
        model.predict("stencil_tma", c, 1)
    with pytest.raises(ValueError):
        model.predict("stencil_ldgsts", c, 0)
    assert "double" in model.explain(3.0)


def test_model_timeline_shapes():
    share = 3.0 * 1e3 / 132
    sync = model.timeline("stencil_ldgsts", 1, share, 4, latency_ns=600, turnaround_ns=400)
    assert [round(t.load_start) for t in sync.timeline] == [0, 1000, 2000, 3000]  # load only after the turnaround
    db = model.timeline("stencil_ldgsts_db", 1, share, 4, latency_ns=600, turnaround_ns=400)
    assert db.timeline[1].load_start < db.timeline[0].compute_start  # the next tile flies before this one computes
    assert db.total_time < sync.total_time
    direct = model.timeline("stencil_direct", 1, share, 1, latency_ns=600, turnaround_ns=400)
    assert len(direct.timeline) == 4 and direct.total_time == pytest.approx(4 * 600 + 400)  # 4 dependent rounds


def test_direct_rung_rounds_match_its_sass():
    # The model's 4 dependent rounds per tile for stencil_direct are what its SASS does: the loads of output m+1 are
    # issued after output m's store (STG), so a thread has one output's loads in flight at a time.
    ins = disassemble(cubin())["stencil_direct"]
    x_loads = [k for k, i in enumerate(ins) if i.opcode.startswith("LDG") and "R14.64" not in i.text]  # R14: w
    stores = [k for k, i in enumerate(ins) if i.opcode.startswith("STG")]
    rounds = 1 + sum(1 for s in stores if s < max(x_loads))
    assert rounds == model.KERNELS["stencil_direct"].rounds == workload.VEC
    assert all(model.KERNELS[k].rounds == 1 for k in model.KERNELS if k != "stencil_direct")


def test_fit_recovers_the_constants():
    c, sms = 3.0, 132
    truth = dict(turnaround_ns=420.0, fraction=0.9)
    rows = []
    for kernel, b in [("stencil_direct", 8), ("stencil_smem_sync", 8), ("stencil_ldgsts", 8), ("stencil_ldgsts", 1),
                      ("stencil_ldgsts", 2), ("stencil_ldgsts_db", 1), ("stage_copy_16", 8), ("blur2d_bf16", 8)]:
        rows.append({"kernel": kernel, "shape": f"{b}", "resident_blocks": b,
                     "tbps": model.steady_tbps(kernel, c, b, sms=sms, **truth)})
    rows.append({"kernel": "copy_triton", "resident_blocks": 8, "tbps": 1.0})  # a kernel the model does not know
    rows.append({"kernel": "stencil_ldgsts (odd)", "shape": "x", "resident_blocks": 1, "tbps": 0.1})
    f = model.fit(rows, c, sms=sms, exclude=("stencil_ldgsts (odd)",))
    assert f["DRAM_FRACTION_OF_COPY"] == pytest.approx(0.9, rel=1e-3)
    assert f["TURNAROUND_NS"] == pytest.approx(420.0, abs=1.0)
    assert f["max_abs_error"] < 1e-3


RUN9 = ROOT / "build" / "h100-run9" / "ldgsts" / "recorded_h100.json"


@pytest.mark.skipif(not RUN9.exists(), reason="build/h100-run9 (the first H100 run, not in git) is not here")
def test_model_within_band_of_the_first_h100_run():
    # The constants were fit once to this recording (model.FIT_SOURCE); the current model must hold every row that
    # carries a prediction within +-20% (the course's band), and fit() on it must give the constants back.
    import json

    doc = json.loads(RUN9.read_text())
    copy = doc["ceilings"]["copy_tbps"]
    rows = [r for r in doc["rows"] if r.get("model_prediction") is not None]
    assert len(rows) == len(doc["rows"]) == 14
    errs = {f"{r['kernel']} {r['shape']}": bench.repredict(r, copy) / r["tbps"] - 1 for r in rows}
    bad = {k: f"{e:+.1%}" for k, e in errs.items() if abs(e) > MODEL_BAND}
    assert not bad, bad
    # the goal band (15%) holds for every row the fit used; the excluded one is the bench's disputed timing
    assert max(abs(e) for k, e in errs.items() if not k.startswith("smooth_bf16 (correct)")) <= 0.15
    f = model.fit(doc["rows"], copy, exclude=("smooth_bf16 (correct)",))
    assert f["TURNAROUND_NS"] == pytest.approx(model.TURNAROUND_NS, abs=1.0)
    assert f["DRAM_FRACTION_OF_COPY"] == pytest.approx(model.DRAM_FRACTION_OF_COPY, abs=1e-3)
    assert model.FITTED


# ------------------------------------------------------------------------------------------- spec, known answers
def test_spec_matches_the_exercise():
    ex = _spec().exercises[exercise.NAME]
    assert ex.workload() is exercise and ex.kernel == exercise.KERNEL
    assert tuple(ex.bench_shape) == exercise.BENCH_SHAPE
    assert ex.parts["path"].require == ("LDGSTS",)
    shapes = [tuple(s) for s in ex.test_shapes]
    for s in shapes + [tuple(ex.bench_shape)]:
        exercise.bytes_moved(s)  # a valid image: ld % 8 == 0, 1 <= W <= ld
    assert any(h == 1 for h, w, ld in shapes) and any(w == 1 for h, w, ld in shapes)  # one row, one column
    assert any(w % 8 for h, w, ld in shapes)  # a partial chunk at column W
    assert any(ld == w for h, w, ld in shapes) and any(ld > w + 8 for h, w, ld in shapes)  # no padding; whole chunks
    assert (16, 128, 128) in shapes or any(h % 16 == 0 and w % 128 == 0 for h, w, ld in shapes)  # whole tiles
    assert any(h % 16 and w % 128 and h > 16 and w > 128 for h, w, ld in shapes)  # partial tiles both ways
    # one shape spans several waves of resident blocks (132 SMs x 8): blocks start on other blocks' shared memory
    assert max(math.ceil(h / 16) * math.ceil(w / 128) for h, w, ld in shapes) >= 3 * 132 * 8
    # the bench shape is DRAM-bound: x and y far beyond the 50 MB L2
    assert exercise.bytes_moved(ex.bench_shape) > 10 * 50e6
    assert ex.parts["correctness"].runs >= 2
    tp = ex.parts["throughput"]
    assert tp.requires_path and tp.fraction == 0.75 and tp.points > 0
    # a calibration comes from a record that timed this exercise (`autograder calibrate`); none is typed
    for tag, doc in record.load_all(SLUG).items():
        cal = tp.calibration_for(tag)
        timed = (doc.get("exercise_margins") or {}).get(exercise.NAME)
        assert (cal is None) == (not timed), tag
        if cal is not None:
            assert cal.bar < ex.roofline_for(tag)
    assert len(_spec().quiz.questions) >= 4


def test_every_pitfall_is_a_known_answer():
    exp = _expected()
    for name in ("correct", "solution", "plain_loads", "race_no_wait", "no_commit", "edge_off_by_one", "misaligned",
                 "cg_8_bytes", "ca_16", "stub"):
        assert name in exp, name
    for ka in known_answers(SLUG):
        src = answer_text(SLUG, ka)  # None for "solution"
        if src is not None and ka.source != "release":  # the stub: the release's cell, untouched
            assert src.startswith(("//", "#")) and f'"{ka.name}"' in src.splitlines()[0], ka.name
            assert "Expected" in src[:900], ka.name


@pytest.mark.parametrize("name", [ka.name for ka in known_answers(SLUG) if ka.base or ka.source.endswith(".cu")])
def test_known_answers_path_check(name):
    e = _expected()[name]
    ex = _spec().exercises[exercise.NAME]
    if name == "cg_8_bytes":
        with pytest.raises(CompileError, match="expected to be 16"):
            _cubin(name)
        assert e["path"] == 0 and e["correctness"] == 0
        return
    cub = _cubin(name)
    ev = path_evidence(cub, ex.kernel, ex.parts["path"].require, ex.parts["path"].forbid)
    assert ev.ok == (e.get("path_static", e["path"]) > 0), ev.summary()  # static: the SASS, not what ran
    ops = opcodes(cub, ex.kernel)
    assert not [o for o in ops if o.startswith(("LDL", "STL"))]
    if name == "race_no_wait":
        assert "LDGDEPBAR" in ops and not _has(ops, "DEPBAR")
    if name == "no_commit":
        assert "LDGDEPBAR" not in ops and _has(ops, "DEPBAR")
    if name == "ca_16":
        assert [o for o in ops if o.startswith("LDGSTS")] and not [o for o in ops if "BYPASS" in o]
    if name == "misaligned":
        assert "LDGSTS.E.BYPASS.128" in ops  # the plain 16-byte form, from an address 8 bytes off
    if name in ("correct", "correct_primitives", "ca_16", "race_no_wait", "edge_off_by_one"):
        assert [o for o in ops if o.startswith("LDGSTS") and o.endswith("ZFILL")]


def test_course_solution_overlaps_the_weights_and_stores_whole_sectors():
    # the course solution (= the notebook's answer): every weight load goes out before the wait for the copies, and a thread's
    # outputs leave as two 16-byte stores, one per output row (a warp's store covers 512 consecutive bytes of a row).
    ops = opcodes(compile_cuda(solution_kernel(SLUG), name="solution.cu"), exercise.KERNEL)
    depbar = ops.index("DEPBAR.LE")
    loads = [i for i, o in enumerate(ops) if o.startswith("LDG.E")]
    assert len(loads) == exercise.TAPS and max(loads) < min(i for i, o in enumerate(ops) if o.startswith("LDGSTS"))
    assert max(loads) < depbar
    # four staged rows read per thread: the middle 8 bytes of each (LDS.64), the two neighbours (LDS.U16)
    assert ops.count("STG.E.128") == 2 and ops.count("LDS.64") == 4 and ops.count("LDS.U16") == 8
    assert not [o for o in ops if o.startswith(("LDL", "STL"))]


@pytest.mark.parametrize("which", ["correct", "solution"])
def test_course_solution_copies_x_only_by_cp_async_with_zero_fill(which):
    # x reaches shared memory only through LDGSTS with zero fill (the edges read nothing): no 16-byte LDG (register
    # staging), no STS; the only global loads are the 9 4-byte weights.
    ex = _spec().exercises[exercise.NAME]
    src = kernel_source(SLUG, which)
    ops = opcodes(compile_cuda(src, name=ex.answer_var), exercise.KERNEL)
    ld = [o for o in ops if o.startswith("LDGSTS")]
    assert ld and all(re.fullmatch(r"LDGSTS\.E(\.BYPASS)?\.128\.ZFILL", o) for o in ld), ld
    assert not [o for o in ops if o.startswith("LDG.E.128") or o.startswith("STS")]
    assert [o for o in ops if o.startswith("LDG.")] == ["LDG.E.CONSTANT"] * exercise.TAPS
    assert ops.count("LDGDEPBAR") == 1 and ops.count("DEPBAR.LE") == 1


def test_stub_and_torch_call_answers():
    from autograder.answers import read_literal

    ex = _spec().exercises[exercise.NAME]
    stub = read_literal(release_cell(SLUG), ex.answer_var)
    assert not stub.attempted
    with pytest.raises(NotAttempted):
        compile_cuda(stub.value, name=ex.answer_var)
    cheat = read_literal((SUBMISSIONS / "torch_call.py").read_text(), ex.answer_var)
    assert any("torch-instead-of-kernel" in f for f in cheat.flags)
    assert not path_evidence(compile_cuda(cheat.value, name=ex.answer_var), ex.kernel, ex.parts["path"].require).ok


@pytest.mark.slow
def test_known_answers_score_as_expected_on_cpu():
    nb = ROOT / "solutions" / "week1" / "day3_ldgsts.ipynb"
    if not nb.exists():
        pytest.skip("the solutions notebook is not there yet")
    from autograder.known import check_known, table

    results = check_known(SLUG, gpu=False)
    print(table(results))
    assert all(r.ok for r in results), table(results)
    by = {r.answer.name: r for r in results}
    assert _static_path(by["solution"]) == 2
    assert _static_path(by["plain_loads"]) == 0
    assert by["stub"].grade.exercises[exercise.NAME].status == "not_attempted"
    quiz = [g for g in by["solution"].grade.scores if g.startswith("quiz_")]
    assert len(quiz) >= 4 and all(by["solution"].grade.scores[g].points == 1 for g in quiz)


def _bar_copy_fraction() -> float:
    return tomllib.loads(spec_path("ldgsts").read_text())[
        "exercises"][exercise.NAME]["throughput"]["copy_fraction"]


def test_bench_times_known_answers_that_reach_the_bar():
    exp = _expected()
    assert "correct" in bench.TIMED_ANSWERS
    for name in bench.TIMED_ANSWERS:
        # a kernel of its own (a file, or a base with changes); each reaches the bar by speed; without the mechanism
        # (path 0) that speed earns nothing
        assert 'extern "C" __global__' in kernel_source(SLUG, name)
        assert exp[name]["throughput"] > 0 or exp[name]["path"] == 0
    # the record keeps the bar's ceiling fraction (the spec's) and the bar it gives the run's ceilings (the grader's
    # half of the run, autograder.benchmarks)
    facts, _ = benchmarks.bar_checks(SLUG, [], {"copy_tbps": 3.0})
    assert facts == {"bar_copy_fraction": _bar_copy_fraction(), "suggested_bar_tbps": pytest.approx(_bar_copy_fraction() * 3.0)}


# ------------------------------------------------------------------------------------------- bench, CPU parts
def _fake_rows(copy=3.0, **kw):
    rows = []
    for variant, bps in bench.STENCIL_ROWS:
        name = f"stencil_{variant}"
        p = model.predict(name, copy, bps or 8, **kw)
        rows.append({"kernel": name, "shape": "n=2^28", "ms": 1.0, "tbps": p.tbps, "tflops": None,
                     "fraction_of_ceiling": p.tbps / copy, "model_prediction": p.tbps, "n": p.n,
                     "blocks_per_sm_cap": bps, "resident_blocks": bps or 8})
    for answer in bench.TIMED_ANSWERS:
        p = model.predict(exercise.KERNEL, copy, 8, **kw)
        rows.append({"kernel": f"{exercise.NAME} ({answer})", "exercise": exercise.NAME, "answer": answer,
                     "shape": bench.exercise_shape_label(exercise.BENCH_SHAPE), "ms": 1.0, "tbps": p.tbps,
                     "tflops": None, "fraction_of_ceiling": p.tbps / copy, "model_prediction": p.tbps, "n": p.n,
                     "blocks_per_sm_cap": None, "resident_blocks": 8})
    return rows


def _verdicts(rows, ceil):
    """The bench's claims and the grader's checks of the timed answers against this run's bar."""
    return bench.claims(rows, ceil) + benchmarks.bar_checks(SLUG, rows, ceil)[1]


def test_bench_claims_and_plot(tmp_path):
    ceil = {"copy_tbps": 3.0}
    rows = _fake_rows()  # the fitted model's own numbers satisfy every claim the bench checks
    assert bench.claims(rows, ceil) == []
    for r in rows:
        assert bench.repredict(r, 3.0) == pytest.approx(r["model_prediction"])
    broken = [dict(r) for r in rows]
    for r in broken:
        if r["kernel"] == "stencil_ldgsts_db" and r["blocks_per_sm_cap"] == 1:
            r["tbps"] = 1.0
    assert any("double buffering" in c for c in bench.claims(broken, ceil))
    by = {(r["kernel"], r["blocks_per_sm_cap"]): r for r in rows}
    bar = _bar_copy_fraction() * 3.0  # the spec's ceiling fraction x this run's copy ceiling
    for key, value, words in [((f"{exercise.NAME} (correct)", None), (1 + SOLUTION_MARGIN) / 2 * bar, "by less than"),
                              ((f"{exercise.NAME} (plain_loads)", None), 0.95 * bar, "below the bar"),
                              (("stencil_direct", None), by[("stencil_smem_sync", None)]["tbps"], "latency-bound"),
                              (("stencil_ldgsts_db", None), 1.1 * by[("stencil_ldgsts", None)]["tbps"],
                               "buy nothing")]:
        broken = [dict(r) for r in rows]
        next(r for r in broken if (r["kernel"], r["blocks_per_sm_cap"]) == key)["tbps"] = value
        assert any(words in c for c in _verdicts(broken, ceil)), (key, _verdicts(broken, ceil))
    # at the margin exactly, the course solution passes; a higher ceiling raises the bar above every answer
    ok = [dict(r) for r in rows]
    next(r for r in ok if r["kernel"] == f"{exercise.NAME} (correct)")["tbps"] = SOLUTION_MARGIN * bar
    assert _verdicts(ok, ceil) == []
    assert sum("below the bar" in c for c in _verdicts(rows, {"copy_tbps": 10.0})) == len(bench.TIMED_ANSWERS)
    fig = bench.plot(rows, 3.0)
    fig.savefig(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000
    if not is_hopper():
        res = bench.run(tmp_path)
        assert res["ok"] is False and "sm_90" in res["failures"][0]


def test_bench_times_the_exercise_with_the_harness(monkeypatch):
    # The exercise's rows are timed by the grader's own function (kernels.topic.time_answer ->
    # kernels.runner.time_exercise), with the spec's repetitions unless told otherwise, under the recorded names
    import kernels.bench
    import kernels.runner

    seen = []

    def fake_time(ex, wl, cub, seed, tag):
        seen.append(dict(ex=ex, wl=wl, cub=cub, seed=seed, tag=tag))
        return {"value": 2.5, "ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.2, "problems": ["one wrong"] if tag == "plain_loads"
                else [], "output_ok": tag != "plain_loads", "wrong_launches": int(tag == "plain_loads"),
                "launches": 30, "bytes": 2.5e9, "flops": 1e9}

    monkeypatch.setattr(kernels.runner, "time_exercise", fake_time)
    monkeypatch.setattr(kernels.bench, "ceilings", lambda: {"copy_tbps": 3.0})  # answer_row's fraction
    monkeypatch.setattr(bench, "answer_cubin", lambda slug, name: f"cubin:{slug}/{name}")
    monkeypatch.setattr(bench, "_resident", lambda cub, kernel: 8)
    with topic.provided(SLUG, benchmarks.answers(SLUG)):
        rows, problems = bench.exercise_rows((64, 256, 264), 3.0, 132, seed=3)
    spec_ex = _spec().exercises[exercise.NAME]
    assert [s["tag"] for s in seen] == list(bench.TIMED_ANSWERS)
    for s in seen:
        assert s["wl"] is exercise and s["cub"] == f"cubin:ldgsts/{s['tag']}" and s["seed"] == 3
        assert s["ex"].bench_shape == (64, 256, 264) and s["ex"].bench_reps == spec_ex.bench_reps
        assert s["ex"].kernel == spec_ex.kernel and s["ex"].metric == "tbps"
    pred = model.predict(exercise.KERNEL, 3.0, 8, n=64 * 256, sms=132)
    for r, answer in zip(rows, bench.TIMED_ANSWERS):
        assert r["kernel"] == f"{exercise.NAME} ({answer})" and r["shape"] == "64x256 (ld 264) bf16"
        assert r["tbps"] == pytest.approx(2.5) and r["tflops"] is None and r["ms"] == 1.0
        assert r["fraction_of_ceiling"] == pytest.approx(2.5 / 3.0)
        assert r["model_prediction"] == pytest.approx(pred.tbps) and r["model_bound"] == pred.bound
        assert r["model_period_ns"] == pytest.approx(pred.period_ns)
        assert r["n"] == 64 * 256 and r["blocks_per_sm_cap"] is None and r["resident_blocks"] == 8
        assert r["timed_by"] == "kernels.runner.time_exercise" and r["answer"] == answer
    assert rows[1]["wrong_launches"] == 1 and problems == [f"{exercise.KERNEL} (plain_loads): one wrong"]
    with topic.provided(SLUG, benchmarks.answers(SLUG)):
        bench.exercise_rows((64, 256, 264), 3.0, 132, reps=5)
    assert seen[-1]["ex"].bench_reps == 5


def test_topic_declares_what_run_did(monkeypatch):
    # kernels.topic runs the day: the bench declares its check, its sizes (quick: 1/8 and 10 repetitions), its
    # constants, its fit, its claims and its extras
    assert bench.run == bench.TOPIC.run and bench.TOPIC.slug == SLUG
    assert bench.TOPIC.claims is bench.claims and bench.TOPIC.fit is model.fit
    assert bench.TOPIC.model_band == (MODEL_BAND if model.FITTED else float("inf"))
    calls = []
    monkeypatch.setattr(bench, "measure", lambda **kw: calls.append(kw) or ([], []))
    assert bench.TOPIC.check is bench.check_all  # handed over as it is: the scaffold calls it without `quick`
    assert bench.TOPIC.measure(True) == ([], [])
    bench.TOPIC.measure(False)
    h, w, ld = exercise.BENCH_SHAPE
    assert bench.quick_exercise_shape() == (h // 8, w, ld)
    assert calls == [dict(n=workload.BENCH_N // 8, exercise_shape=(h // 8, w, ld), reps=10, exercise_reps=10),
                     dict(n=workload.BENCH_N, exercise_shape=exercise.BENCH_SHAPE, reps=20, exercise_reps=None)]
    c = bench.TOPIC.constants()
    assert c["TURNAROUND_NS"] == model.TURNAROUND_NS and c["DRAM_FRACTION_OF_COPY"] == model.DRAM_FRACTION_OF_COPY
    assert c["fitted"] is model.FITTED and c["source"] == model.FIT_SOURCE


def test_recorded_numbers_within_the_model_band():
    doc = record.load(SLUG)
    if doc is None:
        pytest.skip("no recorded_h100.json yet (written by `make gpu-test` on an H100)")
    if not model.FITTED:
        pytest.skip("model constants not fit to the recording yet (model.FITTED is False)")
    copy = doc["ceilings"]["copy_tbps"]
    bad = [f"{r['kernel']} {r['shape']}: model {bench.repredict(r, copy):.3f} vs measured {r['tbps']:.3f} TB/s"
           for r in doc["rows"] if abs(bench.repredict(r, copy) / r["tbps"] - 1) > MODEL_BAND]
    assert not bad, bad


# --------------------------------------------------------------------------------------------------- on the GPU
@gpu
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bps", [None, 1])
def test_rungs_correct_on_gpu(variant, bps):
    from kernels.check import compare, poison

    for i, n in enumerate(workload.TEST_NS):
        inputs = workload.make_inputs(n, 11 + i)
        out = poison(torch.empty(n, device="cuda"))
        stencil(inputs["x"], inputs["w"], variant=variant, blocks_per_sm=bps, out=out)
        rep = compare(out, workload.reference(inputs), rtol=bench.RTOL)
        assert rep.ok, f"{variant} n={n}: {rep.message}"


@gpu
@pytest.mark.parametrize("size,cache", list(COPY_KERNELS))
def test_stage_copies_bit_exact_on_gpu(size, cache):
    from kernels.check import compare, poison

    for i, n in enumerate(workload.COPY_TEST_NS):
        x = workload.make_copy_input(n, 3 + i)
        out = poison(torch.empty(n, device="cuda"))
        stage_copy(x, size=size, cache=cache, out=out)
        assert compare(out, x.clone(), exact=True).ok


@gpu
def test_occupancy_cap_is_what_the_driver_reports():
    from kernels.ldgsts.launch import resident_blocks

    for variant in VARIANTS:
        for bps in (1, 2):
            assert resident_blocks(variant, bps) == bps


def _run_answer(name: str, shape, seed: int):
    from kernels.check import compare, poison
    from kernels.topic import run_answer

    cub = _cubin(name)
    inputs = exercise.make_inputs(shape, seed)
    out = poison(exercise.make_output(inputs))
    with topic.provided(SLUG, benchmarks.answers(SLUG)):
        run_answer(SLUG, cub, inputs, out)
    torch.cuda.synchronize()
    return compare(out, exercise.reference(inputs), **exercise.CHECK)


@gpu
@pytest.mark.parametrize("name", ["correct", "correct_primitives", "ca_16", "plain_loads"])
def test_correct_answers_on_gpu(name):
    for i, shape in enumerate(_spec().exercises[exercise.NAME].test_shapes):
        rep = _run_answer(name, shape, 100 + i)
        assert rep.ok, f"{name} {shape}: {rep.message}"


@gpu
@pytest.mark.parametrize("name", ["race_no_wait", "no_commit"])
def test_races_fail_every_time(name):
    # The claim of expected.toml: not a flaky failure — every run on the large shape is wrong.
    big = max(_spec().exercises[exercise.NAME].test_shapes, key=lambda s: s[0] * s[1])
    for seed in range(5):
        assert not _run_answer(name, big, 200 + seed).ok, f"{name}: a race passed (seed {seed})"


@gpu
def test_edge_off_by_one_fails_on_every_shape():
    for i, shape in enumerate(_spec().exercises[exercise.NAME].test_shapes):
        rep = _run_answer("edge_off_by_one", shape, 300 + i)
        assert not rep.ok and rep.nan_count > 0, shape


@gpu
def test_misaligned_copy_faults_in_the_harness():
    # A fault corrupts the CUDA context: run it where the grader does, in the harness's own process.
    from autograder.harness import run_exercise

    e = _expected()["misaligned"]
    facts = run_exercise(SLUG, exercise.NAME, kernel_source(SLUG, "misaligned"), seed=7, gpu=True)
    assert facts["status"] == e["gpu_status"], facts
    for flag in e["gpu_flags"]:
        assert any(flag in f for f in facts["flags"]), facts["flags"]


def test_timed_output_check_covers_both_ends():
    n = (1 << 22) + 5
    ref = torch.randn(n)
    assert bench._check_timed(ref.clone(), ref, rtol=1e-5).ok
    for where in (0, n - 1, (1 << 20) + 4099 * 7):
        bad = ref.clone()
        bad[where] = float("nan")
        assert not bench._check_timed(bad, ref, rtol=1e-5).ok, where


def _static_path(result) -> float:
    """A known answer graded with no GPU: its path part is not graded, the points its SASS alone allows are kept."""
    ex = next(iter(result.grade.exercises.values()))
    assert not ex.parts["path"].graded
    return ex.facts["path"]["static_points"]
