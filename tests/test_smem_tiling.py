"""Day 2 (smem_tiling): kernels compile and show their instructions, the bank-conflict model counts what it should,
the launchers refuse bad inputs, the known answers pass / fail the path check as expected.toml says, and — on an
H100 — every kernel is bit-exact and the race is caught."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

import pytest
import torch

from autograder import benchmarks
from autograder.known import known_dir, release_cell, solution_kernel
from kernels import record, topic
from kernels.compile import NotAttempted, compile_cuda
from kernels.device import is_hopper
from kernels.sass import disassemble, opcodes, path_evidence
from kernels import smem
from kernels.smem_tiling import bench, exercise, model, pictures, workload
from kernels.smem_tiling.launch import VARIANTS, cubin, grid_for, kernel_name, transpose, validate
from kernels.topic import MODEL_BAND

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = known_dir("smem_tiling")
SLUG = "smem_tiling"


@pytest.fixture(autouse=True)
def _known_answers():
    """The exercise's known answers, handed to the benchmark as the grader does (autograder.benchmarks)."""
    with topic.provided(SLUG, benchmarks.answers(SLUG)):
        yield
gpu = pytest.mark.skipif(not is_hopper(), reason="needs an sm_90 GPU")


def _expected() -> dict:
    with (SUBMISSIONS / "expected.toml").open("rb") as f:
        return tomllib.load(f)


def _spec():
    from autograder.spec import load

    return load(SLUG)


# ------------------------------------------------------------------------------------------------ SASS of the rungs
def test_every_rung_compiles_and_is_in_the_module():
    assert set(cubin().kernels) == {kernel_name(v) for v in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_rung_sass(variant):
    ops = opcodes(cubin(), kernel_name(variant))
    mem = [o for o in ops if re.match(r"(LDG|STG|LDS|STS|LDL|STL|BAR)", o)]
    assert not [o for o in mem if o.startswith(("LDL", "STL"))], f"local memory in {variant}: {mem}"
    assert [o for o in ops if o.startswith("LDG")] and [o for o in ops if o.startswith("STG")]
    if variant == "naive":
        assert not [o for o in ops if o.startswith(("LDS", "STS", "BAR"))], mem
        # 4 elements per thread: 4 loads, 4 stores, 4-byte each (no vectorisation possible down a column)
        assert sum(o.startswith("STG.E") for o in ops) == 4
    else:
        ev = path_evidence(cubin(), kernel_name(variant), require=["STS", "LDS", "BAR.SYNC"])
        assert ev.ok, ev.summary()
        assert ops.count("STS") == 4 and ops.count("LDS") == 4, mem  # one 4-byte STS / LDS per element
        assert ops.index("BAR.SYNC.DEFER_BLOCKING") > max(i for i, o in enumerate(ops) if o == "STS")
        assert ops.index("BAR.SYNC.DEFER_BLOCKING") < min(i for i, o in enumerate(ops) if o == "LDS")
    if variant == "swizzled":
        assert "LOP3.LUT" in ops  # the XOR of the swizzle


def _sts_offsets(kernel: str) -> list[int]:
    """Immediate offsets of the STS instructions, e.g. `STS [R13+0x400], R8` -> 0x400 (0 when absent)."""
    out = []
    for ins in disassemble(cubin())[kernel]:
        if ins.opcode == "STS":
            m = re.search(r"\[R\d+(?:\+(0x[0-9a-f]+))?\]", ins.text)
            assert m, ins.text
            out.append(int(m.group(1) or "0", 16))
    return sorted(out)


@pytest.mark.parametrize("variant", ["smem", "padded"])
def test_compiled_tile_layout_matches_the_model(variant):
    # The compiler folds loop step j into the STS immediate: row ty + j of the tile is j * row_bytes further on.
    # The model's addresses of the same stores must differ by the same amounts (32 words vs 33 words per row).
    base = model.tile_smem_addresses(variant, "store", 0, 0)[0]
    want = sorted(model.tile_smem_addresses(variant, "store", 0, j)[0] - base for j in (0, 8, 16, 24))
    assert _sts_offsets(kernel_name(variant)) == want
    assert want[1] == {"smem": 8 * 32 * 4, "padded": 8 * 33 * 4}[variant]


# ------------------------------------------------------------------------------------- the wavefront counter
def test_wavefronts_hand_cases():
    w = model.wavefronts
    assert w([4 * i for i in range(32)]) == 1                      # consecutive words: 32 banks
    assert w([0] * 32) == 1                                        # one word: broadcast
    assert w([4 * (i // 2) for i in range(32)]) == 1               # pairs share a word: 16 banks, no conflict
    assert w([8 * i for i in range(32)]) == 2                      # stride 2 words: 16 banks, 2 words each
    assert w([128 * i for i in range(32)]) == 32                   # stride 32 words: one bank, 32-way
    assert w([132 * i for i in range(32)]) == 1                    # stride 33 words: all banks
    assert w([128 * (i % 4) for i in range(32)]) == 4              # 4 distinct words in bank 0
    assert w([1 * i for i in range(32)], width=1) == 1             # 32 bytes = 8 words in 8 banks
    assert w([2 * i for i in range(32)], width=2) == 1
    assert w([None] * 31 + [0]) == 1 and w([None] * 32) == 0       # inactive lanes cost nothing
    assert w([4 * i if i % 2 else None for i in range(32)]) == 1


def test_wavefronts_wide_accesses_use_phases():
    w = model.wavefronts
    assert w([8 * i for i in range(32)], width=8) == 2             # LDS.64 conflict-free: 2 half-warps
    assert w([16 * i for i in range(32)], width=16) == 4           # LDS.128 conflict-free: 4 quarter-warps
    assert w([0] * 32, width=16) == 4                              # broadcast still needs every phase
    # 8-byte accesses 256 bytes apart: in each half-warp 16 lanes hit banks 0-1 with 16 distinct words each
    assert w([256 * i for i in range(32)], width=8) == 32
    # 16-byte accesses 128 bytes apart: per quarter-warp 8 distinct words in each of banks 0-3 -> 8 x 4 phases
    assert w([128 * i for i in range(32)], width=16) == 32
    # lanes of different quarter-warps in the same banks do not conflict: lane l reads chunk l % 8
    assert w([16 * (i % 8) + 512 * (i // 8) for i in range(32)], width=16) == 4
    assert smem.ideal_wavefronts(16) == 4 and smem.ideal_wavefronts(8) == 2 and smem.ideal_wavefronts(4) == 1
    assert smem.ideal_wavefronts(16, [0] * 8 + [None] * 24) == 1


def test_wavefronts_rejects_bad_input():
    with pytest.raises(ValueError, match="aligned"):
        model.wavefronts([2] + [0] * 31, width=4)
    with pytest.raises(ValueError, match="aligned"):
        model.wavefronts([8] * 32, width=16)
    with pytest.raises(ValueError, match="width"):
        model.wavefronts([0] * 32, width=3)
    with pytest.raises(ValueError, match="lanes"):
        model.wavefronts([0] * 33)
    with pytest.raises(ValueError, match="negative"):
        model.wavefronts([-4] + [0] * 31)


def test_conflict_table_shows_the_bank():
    t = smem.conflict_table(model.tile_smem_addresses("smem", "load", 0, 0))
    assert list(t) == [0] and len(t[0]) == 32
    t = smem.conflict_table(model.tile_smem_addresses("padded", "load", 0, 0))
    assert sorted(t) == list(range(32)) and all(len(v) == 1 for v in t.values())


# -------------------------------------------------------------------------------- the transpose's patterns
@pytest.mark.parametrize("variant", model.SMEM_VARIANTS)
def test_tile_addresses_implement_a_transpose(variant):
    # Play the kernel in Python on the model's own offsets: phase 1 stores logical (ty + j, tx), phase 2 reads
    # logical (tx, ty + j). The offsets must be a bijection onto the tile and phase 2 must read the transpose.
    mem: dict[int, tuple[int, int]] = {}
    for ty in range(8):
        for j in range(0, 32, 8):
            for tx, a in enumerate(model.tile_smem_addresses(variant, "store", ty, j)):
                assert a not in mem and a % 4 == 0
                mem[a] = (ty + j, tx)  # value = its logical position (row of x, column of x) in the tile
    assert len(mem) == 1024
    assert max(mem) < {"smem": 4096, "padded": 32 * 33 * 4, "swizzled": 4096}[variant]
    for ty in range(8):
        for j in range(0, 32, 8):
            got = [mem[a] for a in model.tile_smem_addresses(variant, "load", ty, j)]
            assert got == [(tx, ty + j) for tx in range(32)]  # lane tx gets x's tile element (tx, ty + j)


@pytest.mark.parametrize("variant", model.VARIANTS)
@pytest.mark.parametrize("shape", [(37, 70), (1, 33), (33, 1), (64, 32), (5, 5)])
def test_kernel_index_math_transposes_awkward_shapes(variant, shape):
    # Run the kernel's index math (the model's copy of transpose.cu's addresses and guards) over every block of an
    # awkward shape: every element of y written exactly once, with the right element of x, and no phase-2 read of
    # a tile word that phase 1 did not write.
    rows, cols = shape
    x = list(range(rows * cols))
    y: dict[int, int] = {}
    for by in range(math.ceil(rows / 32)):
        for bx in range(math.ceil(cols / 32)):
            smem: dict[int, int] = {}
            steps = [(ty, j) for ty in range(8) for j in range(0, 32, 8)]
            for ty, j in steps:
                ld = model.tile_global_addresses(variant, "load", ty, j, rows, cols, bx, by)
                if variant == "naive":
                    st = model.tile_global_addresses(variant, "store", ty, j, rows, cols, bx, by)
                    for a, b in zip(ld, st):
                        assert (a is None) == (b is None)
                        if b is not None:
                            assert b // 4 not in y
                            y[b // 4] = x[a // 4]
                    continue
                for a, s in zip(ld, model.tile_smem_addresses(variant, "store", ty, j)):
                    if a is not None:
                        smem[s] = x[a // 4]
            if variant == "naive":
                continue
            for ty, j in steps:  # after the barrier
                st = model.tile_global_addresses(variant, "store", ty, j, rows, cols, bx, by)
                for b, s in zip(st, model.tile_smem_addresses(variant, "load", ty, j)):
                    if b is not None:
                        assert s in smem, f"tile word {s} read but never written"
                        assert b // 4 not in y
                        y[b // 4] = smem[s]
    assert y == {c * rows + r: r * cols + c for r in range(rows) for c in range(cols)}


def test_bank_maps():
    for variant in model.SMEM_VARIANTS:
        banks = pictures.bank_map(variant)
        for a in range(32):
            assert sorted(banks[a]) == list(range(32)), f"{variant}: row {a} is not conflict-free"
        cols = [sorted(banks[a][b] for a in range(32)) for b in range(32)]
        if variant == "smem":
            assert all(c == [b] * 32 for b, c in enumerate(cols))  # a column is one bank
        else:
            assert all(c == list(range(32)) for c in cols)


def test_tile_costs():
    c = {v: model.tile_cost(v) for v in model.VARIANTS}
    assert (c["smem"].sts_wavefronts, c["smem"].lds_wavefronts) == (32, 1024)
    for v in ("padded", "swizzled"):
        assert (c[v].sts_wavefronts, c[v].lds_wavefronts) == (32, 32)
    assert c["naive"].smem_wavefronts == 0
    assert c["naive"].global_wavefronts == 32 + 32 * 32      # coalesced loads, 32 lines per column store
    assert all(c[v].global_wavefronts == 64 for v in model.SMEM_VARIANTS)
    assert c["naive"].l2_sectors == 32 * 4 + 32 * 32
    assert all(c[v].l2_sectors == 64 * 4 for v in model.SMEM_VARIANTS)
    # L2 requests: one per line per warp access, whatever it carries (a 4-byte store costs as much as 128 bytes)
    assert c["naive"].l2_requests == 1056 and all(c[v].l2_requests == 64 for v in model.SMEM_VARIANTS)
    # DRAM, day 1's 64-byte granules: a full interior tile is 8 KB useful; merged over the block every granule of
    # y is whole; unmerged, each of the naive kernel's 1024 stores is a partial granule costing 2 x 64 bytes
    for v in model.VARIANTS:
        assert c[v].useful_bytes == 2 * 4 * 32 * 32
        assert c[v].dram_bytes == 2 * 4 * 32 * 32 and c[v].dram_efficiency() == 1.0
    assert c["naive"].dram_bytes_unmerged == 32 * 128 + 1024 * 64 * 2
    assert all(c[v].dram_bytes_unmerged == 8192 for v in model.SMEM_VARIANTS)  # coalesced: merging changes nothing
    with pytest.raises(ValueError, match="merge"):
        c["naive"].dram_efficiency("warp")
    # a matrix of one row: the naive store is coalesced after all (y is a column vector in memory)
    assert model.tile_cost("naive", 1, 4097).global_wavefronts == 2


def test_predictions_hand_computed():
    copy = 3.0
    p = model.predict_all((8192, 8192), copy, clock_ghz=1.5)
    nbytes = 2 * 4 * 8192 * 8192
    assert p["padded"].bound == "DRAM" and p["swizzled"].bound == "DRAM"
    assert p["padded"].tbps == pytest.approx(copy * model.DRAM_FRACTION_OF_COPY)
    assert p["smem"].bound == "L1TEX"
    assert p["smem"].ms == pytest.approx(65536 * 1120 / (132 * 1.5e9) * 1e3)
    assert p["smem"].tbps == pytest.approx(nbytes / (p["smem"].ms * 1e-3) / 1e12)
    assert p["naive"].bound == "L2"
    assert p["naive"].l2_ms == pytest.approx(65536 * 1056 / (model.L2_REQUESTS_PER_NS * 1e9) * 1e3)
    assert p["naive"].tbps == pytest.approx(nbytes / (p["naive"].l2_ms * 1e-3) / 1e12)
    assert p["naive"].tbps < p["smem"].tbps < p["padded"].tbps
    # no merging of partial writes: DRAM-bound at copy x fraction x 8192 / (4096 + 1024 x 128) of useful bytes
    un = model.predict("naive", (8192, 8192), copy, merge="instruction")
    assert un.bound == "DRAM"
    assert un.tbps == pytest.approx(copy * model.DRAM_FRACTION_OF_COPY * 8192 / (4096 + 1024 * 128))
    # the staged rungs write whole lines: merging or not changes nothing for them
    assert model.predict_tbps("padded", (8192, 8192), copy, merge="instruction") == pytest.approx(p["padded"].tbps)


def test_model_reuses_day1_dram_constants():
    # day 1's fitted DRAM granule and partial-write cost, imported, not copied
    from kernels.naive_loads import model as day1

    assert model.DRAM_GRANULE_BYTES is day1.DRAM_GRANULE_BYTES
    assert model.PARTIAL_WRITE_COST is day1.PARTIAL_WRITE_COST
    assert "DRAM_GRANULE_BYTES =" not in Path(model.__file__).read_text()


def test_prediction_limits_and_monotonic():
    copy = 3.0
    clocks = [0.5, 1.0, 1.5, 2.0, 4.0, 16.0]
    smem = [model.predict_tbps("smem", (8192, 8192), copy, clock_ghz=c) for c in clocks]
    assert all(b >= a for a, b in zip(smem, smem[1:]))
    cap = copy * model.DRAM_FRACTION_OF_COPY
    assert smem[-1] == pytest.approx(cap)       # a fast enough smem pipe: back to DRAM-bound
    for v in model.VARIANTS:
        for c in clocks:
            assert model.predict_tbps(v, (8192, 8192), copy, clock_ghz=c) <= cap + 1e-12
    # padded is DRAM-bound: it scales with the copy ceiling, the unpadded rung does not
    # (while DRAM stays the slowest of its three limits at 2 and 2.5 TB/s of copy ceiling)
    assert model.predict_tbps("padded", (8192, 8192), 2.5) == pytest.approx(
        1.25 * model.predict_tbps("padded", (8192, 8192), 2.0))
    assert model.predict_tbps("smem", (8192, 8192), 2.5) == pytest.approx(
        model.predict_tbps("smem", (8192, 8192), 2.0))
    # and with a memory system far faster than L2, the L2 request rate caps even the padded rung
    assert model.predict("padded", (8192, 8192), 100.0).bound == "L2"
    with pytest.raises(ValueError):
        model.predict("padded", (64, 64), 0.0)
    with pytest.raises(ValueError, match="variant"):
        model.tile_cost("tiled")
    assert "32 wavefronts" in model.explain()


# ------------------------------------------------------------------------------------ workload and launchers
def test_reference_matches_a_python_loop():
    x = workload.make_inputs((5, 7), seed=3, device="cpu")
    y = workload.reference(x)
    assert y.shape == (7, 5) and y.is_contiguous()
    for r in range(5):
        for c in range(7):
            assert y[c, r].item() == x[r, c].item()
    assert workload.bytes_moved((5, 7)) == 2 * 4 * 35 and workload.flops((5, 7)) == 0
    a = workload.make_inputs((5, 7), seed=3, device="cpu")
    assert torch.equal(a, x) and not torch.equal(a, workload.make_inputs((5, 7), seed=4, device="cpu"))


def test_exercise_interface_and_launch_contract():
    inputs = exercise.make_inputs((127, 129), 0, device="cpu")
    out = exercise.make_output(inputs)
    assert out.shape == (129, 127) and out.dtype == torch.float32
    la = exercise.launch_args(inputs, out)
    assert la["grid"] == (5, 4) and la["block"] == (32, 8) and la["smem"] == 0
    assert [int(a) for a in la["args"][2:]] == [127, 129] and la["args"][0] is inputs["x"] and la["args"][1] is out
    assert exercise.launch_args(exercise.make_inputs((1, 4097), 0, "cpu"),
                                torch.empty(4097, 1))["grid"] == (129, 1)
    assert torch.equal(exercise.reference(inputs), inputs["x"].t())
    assert exercise.CHECK == {"exact": True} and exercise.KERNEL == "transpose"
    assert exercise.bytes_moved((8192, 8192)) == 2 * 4 * 8192 * 8192 and exercise.flops((3, 3)) == 0
    assert grid_for(127, 129) == (5, 4)


def test_launcher_validation():
    x = torch.zeros(64, 48)
    with pytest.raises(ValueError, match="variant"):
        validate(x, "tiled")
    with pytest.raises(TypeError, match="torch.Tensor"):
        validate([[1.0]])
    with pytest.raises(ValueError, match="float32"):
        validate(x.double())
    with pytest.raises(ValueError, match="2-D"):
        validate(torch.zeros(4, 4, 4))
    with pytest.raises(ValueError, match="non-empty"):
        validate(torch.zeros(0, 4))
    with pytest.raises(ValueError, match="contiguous"):
        validate(x.t())
    with pytest.raises(ValueError, match="rows"):
        validate(torch.zeros(65535 * 32 + 1, 1))
    with pytest.raises(ValueError, match=r"\(48, 64\)"):
        validate(x, out=torch.zeros(64, 48))
    with pytest.raises(ValueError, match="overlaps"):
        validate(x, out=x.view(48, 64))
    with pytest.raises(ValueError, match="GPU"):
        validate(x, out=torch.zeros(48, 64))
    with pytest.raises(ValueError, match="GPU"):
        transpose(x)


# ------------------------------------------------------------------------------------------- spec, known answers
def test_spec_matches_the_workload():
    ex = _spec().exercises["transpose"]
    assert ex.workload() is exercise and ex.kernel == exercise.KERNEL
    assert tuple(ex.bench_shape) == workload.BENCH_SHAPE
    assert tuple(map(tuple, ex.test_shapes)) == workload.TEST_SHAPES
    assert any(s[0] % 32 and s[1] % 32 for s in ex.test_shapes)          # partial tiles on both edges
    assert any(1 in s for s in ex.test_shapes)                           # a single row / column
    assert max(math.ceil(s[0] / 32) * math.ceil(s[1] / 32) for s in ex.test_shapes) >= 16384  # race shows
    assert set(ex.parts["path"].require) == {"STS", "LDS"}
    tp = ex.parts["throughput"]
    assert tp.calibration_for("h100").bar < ex.roofline_for("h100") and tp.points > 0


def _answer_source(name: str) -> str:
    """A known answer's CUDA source: its .cu file, or its base with its changes (expected.toml)."""
    from autograder.known import kernel_source

    return kernel_source(SLUG, name)


def test_every_pitfall_is_a_known_answer():
    exp = _expected()
    for name in ("correct", "swizzled", "unpadded", "naive", "off_by_one", "no_sync", "stub"):
        assert name in exp, name
    from autograder.known import answer_text, known_answers

    for ka in known_answers(SLUG):
        src = answer_text(SLUG, ka)  # None for "solution"; the release's cell (the stub) is handed out untouched
        if src is not None and ka.source != "release":
            assert src.lstrip().startswith(("//", "#")), f"{ka.name}: the first line must say what it is"
            assert "Expected" in src.split("\n\n")[0] or "Expected" in src[:600], ka.name


def _kernel_answers() -> list[str]:
    from autograder.known import known_answers

    return [ka.name for ka in known_answers(SLUG) if ka.base or ka.source.endswith(".cu")]


@pytest.mark.parametrize("name", _kernel_answers())
def test_known_answers_path_check(name):
    e = _expected()[name]
    ex = _spec().exercises["transpose"]
    cub = compile_cuda(_answer_source(name), name=f"{name}.cu")
    ev = path_evidence(cub, ex.kernel, ex.parts["path"].require, ex.parts["path"].forbid)
    assert ev.ok == (e.get("path_static", e["path"]) > 0), ev.summary()  # static: the SASS
    assert not [o for o in opcodes(cub, ex.kernel) if o.startswith(("LDL", "STL"))]
    if name == "no_sync":
        assert not [o for o in opcodes(cub, ex.kernel) if o.startswith("BAR")]


def test_stub_and_torch_call_answers():
    from autograder.answers import read_literal

    ex = _spec().exercises["transpose"]
    stub = read_literal(release_cell(SLUG), ex.answer_var)
    assert not stub.attempted
    with pytest.raises(NotAttempted):
        compile_cuda(stub.value, name=ex.answer_var)
    cheat = read_literal((SUBMISSIONS / "torch_call.py").read_text(), ex.answer_var)
    assert any("torch-instead-of-kernel" in f for f in cheat.flags)
    ev = path_evidence(compile_cuda(cheat.value, name=ex.answer_var), ex.kernel, ex.parts["path"].require)
    assert not ev.ok


def test_bench_times_the_known_answers_the_grader_tests():
    from autograder.known import kernel_source

    # the scaffold compiles the known answer the grader's tests use: the solutions notebook's cell, stored once
    assert kernel_source(SLUG, "correct") == solution_kernel(SLUG)
    assert exercise.KERNEL in bench.answer_cubin(SLUG, "correct").kernels
    assert set(bench.TIMED_ANSWERS) <= set(_expected()) and set(bench.BAD_ANSWERS) <= set(_expected())
    for name in bench.BAD_ANSWERS:
        assert _expected()[name]["correctness"] == 0
    for name in bench.TIMED_ANSWERS:
        assert _expected()[name]["correctness"] > 0


# ------------------------------------------------------------------------------------------- bench, CPU parts
def _fake_rows(copy=3.0):
    rows = []
    for v in VARIANTS:
        p = model.predict(v, workload.BENCH_SHAPE, copy)
        rows.append({"kernel": f"transpose_{v}", "shape": "8192x8192", "ms": p.ms, "tbps": p.tbps, "tflops": None,
                     "fraction_of_ceiling": p.tbps / copy, "model_prediction": p.tbps})
    for name, v in bench.TIMED_ANSWERS.items():
        p = model.predict(v, workload.BENCH_SHAPE, copy)
        rows.append({"kernel": f"exercise:{name}", "shape": "8192x8192", "ms": p.ms, "tbps": p.tbps,
                     "tflops": None, "fraction_of_ceiling": p.tbps / copy, "model_prediction": p.tbps})
    return rows


def test_bench_fits_reproduce_the_constants():
    rows = _fake_rows()
    f = bench.fits(rows, 3.0)
    assert f["DRAM_FRACTION_OF_COPY"] == pytest.approx(model.DRAM_FRACTION_OF_COPY)
    assert f["CLOCK_GHZ"] == pytest.approx(model.CLOCK_GHZ)
    assert model.predict("naive", workload.BENCH_SHAPE, 3.0).bound == "L2"
    assert f["L2_REQUESTS_PER_NS"] == pytest.approx(model.L2_REQUESTS_PER_NS)


def _with(rows, **tbps):
    return [dict(r, tbps=tbps[r["kernel"]]) if r["kernel"] in tbps else r for r in rows]


def test_bench_claims():
    rows, ceil = _fake_rows(), {"copy_tbps": 3.0}
    assert bench.claims(rows, ceil) == []
    by = {r["kernel"]: r["tbps"] for r in rows}
    slow_swizzle = _with(rows, transpose_swizzled=by["transpose_swizzled"] * 0.9)
    assert ["alike" in c for c in bench.claims(slow_swizzle, ceil)] == [True]
    no_conflict_cost = _with(rows, transpose_smem=2.7)
    assert any("bank conflict" in c for c in bench.claims(no_conflict_cost, ceil))
    naive_as_fast = _with(rows, transpose_naive=by["transpose_smem"])
    assert ["column store" in c for c in bench.claims(naive_as_fast, ceil)] == [True]


def test_bench_claims_hold_the_bar_separation():
    rows, ceil = _fake_rows(), {"copy_tbps": 3.0}
    unpadded = next(r["tbps"] for r in rows if r["kernel"] == "exercise:unpadded")
    # conflict-free answers just clear of MIN_SEPARATION over the unpadded one: a bar fits between them
    just = _with(rows, **{"exercise:correct": unpadded * 1.2, "exercise:swizzled": unpadded * 1.2})
    assert bench.claims(just, ceil) == []
    # one conflict-free answer (the slower decides) too close to the unpadded one: no bar separates them reliably
    close = _with(rows, **{"exercise:swizzled": unpadded * 1.1})
    failed = bench.claims(close, ceil)
    assert len(failed) == 1 and "separates" in failed[0] and "1.10x" in failed[0]
    # the rungs alone (the notebook measuring without answers): nothing to say about the bar
    assert bench.claims([r for r in close if r["kernel"].startswith("transpose_")], ceil) == []


def test_bench_bar_hint_sits_between():
    h = bench.bar_hint(_fake_rows())
    assert h["best_wrong_mechanism_tbps"] < h["suggested_bar_tbps"] < h["conflict_free_tbps"]
    assert h["separation"] > bench.MIN_SEPARATION
    # the spec's bar on the H100 (the fraction of the model's 3.0 TB/s ceiling) lies between what the model predicts
    # for the two kinds of answer
    fraction = _spec().exercises["transpose"].parts["throughput"].calibration_for("h100").fraction
    assert h["best_wrong_mechanism_tbps"] < fraction * 3.0 < h["conflict_free_tbps"]


def test_bench_plot_and_cpu_run(tmp_path):
    fig = bench.plot(_fake_rows(), 3.0, 2.3)
    fig.savefig(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000
    if not is_hopper():
        res = bench.run(tmp_path)
        assert res["ok"] is False and "sm_90" in res["failures"][0]


def test_recorded_numbers_within_the_model_band():
    doc = record.load(SLUG)
    if doc is None:
        pytest.skip("no recorded_h100.json yet (written by `make gpu-test` on an H100)")
    copy = doc["ceilings"]["copy_tbps"]
    assert bench.claims(doc["rows"], doc["ceilings"]) == []
    bad = []
    for r in doc["rows"]:
        kernel = r["kernel"]
        shape = tuple(int(s) for s in r["shape"].split("x"))
        if kernel.startswith("records_"):  # the demo: held out, predicted with the transposes' constants
            pred = model.predict_records(kernel.removeprefix("records_"), shape[0], copy).tbps
        else:
            v = kernel.removeprefix("transpose_") if kernel.startswith("transpose_") else \
                bench.TIMED_ANSWERS[kernel.removeprefix("exercise:")]
            pred = model.predict_tbps(v, shape, copy)
        if abs(pred / r["tbps"] - 1) > MODEL_BAND:
            bad.append(f"{kernel}: model {pred:.3f} vs measured {r['tbps']:.3f} TB/s")
    assert not bad, bad


RUN9 = ROOT / "build" / "h100-run9" / SLUG / "recorded_h100.json"


def _run9():
    import json

    if not RUN9.is_file():
        pytest.skip(f"{RUN9.relative_to(ROOT)} not here (build/ is not in git)")
    return json.loads(RUN9.read_text())


def _variant_of(kernel: str) -> str:
    if kernel.startswith("transpose_"):
        return kernel.removeprefix("transpose_")
    return bench.TIMED_ANSWERS[kernel.removeprefix("exercise:")]


def test_model_fits_the_h100_run_the_constants_were_fit_to():
    # The constants of model.py were fit once to this run (model.FIT_SOURCE): every row, with the current model
    # and that run's copy ceiling, within the course's +-20% (and its +-15% goal).
    doc = _run9()
    copy = doc["ceilings"]["copy_tbps"]
    errs = {}
    for r in doc["rows"]:
        shape = tuple(int(s) for s in r["shape"].split("x"))
        errs[r["kernel"]] = model.predict_tbps(_variant_of(r["kernel"]), shape, copy) / r["tbps"] - 1
    assert set(errs) == {f"transpose_{v}" for v in VARIANTS} | {f"exercise:{n}" for n in bench.TIMED_ANSWERS}
    assert max(abs(e) for e in errs.values()) <= 0.15, errs
    # and the fits bench.run() records reproduce the constants (rounded as model.py states them)
    f = bench.fits(doc["rows"], copy)
    assert f["CLOCK_GHZ"] == pytest.approx(model.CLOCK_GHZ, rel=0.01)
    assert f["DRAM_FRACTION_OF_COPY"] == pytest.approx(model.DRAM_FRACTION_OF_COPY, rel=0.01)
    assert f["L2_REQUESTS_PER_NS"] == pytest.approx(model.L2_REQUESTS_PER_NS, rel=0.01)
    assert bench.claims(doc["rows"], doc["ceilings"]) == []


def test_h100_run_refutes_unmerged_partial_writes():
    # The naive row against the hypothesis that each 4-byte store reaches DRAM as a partial granule (day 1's cost):
    # that predicts less than half of what the H100 did, so L2 merges them, as model.py's docstring says.
    doc = _run9()
    naive = next(r for r in doc["rows"] if r["kernel"] == "transpose_naive")
    un = model.predict_tbps("naive", (8192, 8192), doc["ceilings"]["copy_tbps"], merge="instruction")
    assert un / naive["tbps"] < 0.5
    # and the sector-rate alternative: the padded rung moved more sectors per second than the naive one, so no
    # single L2 sector rate limits the naive rung
    def sectors_per_s(kernel, variant):
        r = next(r for r in doc["rows"] if r["kernel"] == kernel)
        return 65536 * model.tile_cost(variant).l2_sectors / (r["ms"] * 1e-3)
    assert sectors_per_s("transpose_padded", "padded") > sectors_per_s("transpose_naive", "naive")


# --------------------------------------------------------------------------------------------------- on the GPU
@gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_rungs_bit_exact_on_gpu(variant):
    from kernels.check import compare, poison

    for i, shape in enumerate(workload.TEST_SHAPES):
        x = workload.make_inputs(shape, 10 + i)
        out = poison(torch.empty(shape[1], shape[0], device="cuda"))
        transpose(x, variant=variant, out=out)
        rep = compare(out, workload.reference(x), exact=True)
        assert rep.ok, f"{variant} {shape}: {rep.message}"
    y = transpose(workload.make_inputs((3, 5), 0))
    assert y.shape == (5, 3)


@gpu
def test_known_answers_on_gpu():
    assert not bench.check_all(seed=21, answers=tuple(bench.TIMED_ANSWERS))
    failures, evidence = bench.check_bad_answers(seed=22)
    assert not failures, (failures, evidence)
    assert "127x129" in evidence["full_tiles_only"]["failed_on"]
    assert "128x128" not in evidence["full_tiles_only"]["failed_on"]


# ------------------------------------------------------------------------------------------------ the notebook
def test_notebook_solution_is_the_correct_known_answer():
    from autograder.answers import cells_by_grade_id, read_literal, _source
    from autograder.grading import solution_notebook

    spec = _spec()
    ex = spec.exercises["transpose"]
    nb = solution_notebook(spec)
    cells = cells_by_grade_id(nb)
    assert set(spec.grade_cells()) <= set(cells)
    ans = read_literal(_source(cells[ex.answer_cell]), ex.answer_var)
    assert ans.attempted and not ans.flags and ans.problem is None
    mine = opcodes(compile_cuda(ans.value, name=ex.answer_var), ex.kernel)
    assert mine == opcodes(compile_cuda(solution_kernel(SLUG), name="solution.cu"), ex.kernel)
    # every quiz question of the spec has a hidden key in the notebook, and the key is a valid choice
    from autograder.quizzes import quiz_key

    for q in spec.quiz.questions.values():
        key = quiz_key(_source(cells[q.grade_id]), spec.quiz.answer_var, q.name)
        assert key in q.choices, q.name
    # committed without outputs
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_known_answers_score_as_expected_on_this_machine():
    # The whole grading path (answer cell -> harness process -> score) for every known answer; on CPU only path,
    # stub status and flags are compared, on an H100 everything.
    from autograder.known import check_known, table

    results = check_known(SLUG)
    assert all(r.ok for r in results), table(results)


def _fake_bench(monkeypatch, ceil, slower=None, wrong=None, bad_failures=()):
    """bench.run() on CPU: checks and timings replaced by fakes that run at the model's own figures (`slower`: kernel
    -> factor of its time, `wrong`: kernel -> wrong launches), everything after them real (kernels.topic's scaffold:
    rows, band, fits, claims, margin, record, plot)."""
    import kernels.bench
    import kernels.device
    from kernels.bench import BenchResult

    slower, wrong = slower or {}, wrong or {}

    def ms(kernel, variant, shape):
        return model.predict(variant, shape, ceil["copy_tbps"]).ms * slower.get(kernel, 1.0)

    def fake_rung(variant, shape, reps, seed):
        t = ms(f"transpose_{variant}", variant, shape)
        return BenchResult(t, t * 0.99, t * 1.01, reps, workload.bytes_moved(shape), 0, t, ceil, launches=reps,
                           problems=["timed repetition 1: WRONG"] * wrong.get(f"transpose_{variant}", 0))

    def fake_demo(variant, n, reps, seed):
        t = model.predict_records(variant, n, ceil["copy_tbps"]).ms * slower.get(f"records_{variant}", 1.0)
        return BenchResult(t, t * 0.99, t * 1.01, reps, workload.records_bytes(n), 0, t, ceil, launches=reps,
                           problems=["timed repetition 1: WRONG"] * wrong.get(f"records_{variant}", 0))

    def fake_answer(slug, name, *, shape, reps, seed):
        assert slug == SLUG
        t = ms(f"exercise:{name}", bench.TIMED_ANSWERS[name], shape)
        n = wrong.get(f"exercise:{name}", 0)
        return {"ms": t, "p20_ms": t * 0.99, "p80_ms": t * 1.01, "bytes": workload.bytes_moved(shape), "flops": 0,
                "output_ok": not n, "wrong_launches": n, "launches": reps}

    checked = []
    monkeypatch.setattr(kernels.device, "is_hopper", lambda: True)
    monkeypatch.setattr(kernels.device, "gpu", lambda: {"name": "NVIDIA H100 80GB HBM3", "driver": "580.0"})
    monkeypatch.setattr(kernels.bench, "ceilings", lambda refresh=False: ceil)
    monkeypatch.setattr(bench, "ceilings", lambda: ceil)
    monkeypatch.setattr(bench, "check_all", lambda **kw: checked.append(kw["shapes"]) or [])
    monkeypatch.setattr(bench, "check_bad_answers", lambda **kw: (list(bad_failures), {
        n: {"failed_on": ["127x129"]} for n in bench.BAD_ANSWERS}))
    monkeypatch.setattr(bench, "_time_rung", fake_rung)
    monkeypatch.setattr(bench, "_time_demo", fake_demo)
    monkeypatch.setattr(bench, "check_demo", lambda: [])
    monkeypatch.setattr(bench, "time_answer", fake_answer)
    monkeypatch.delenv("COURSE_RECORD", raising=False)
    return checked


def test_bench_run_plumbing_with_fake_gpu(tmp_path, monkeypatch):
    import json

    ceil = {"copy_tbps": 3.0, "cublas_bf16_tflops": None}
    checked = _fake_bench(monkeypatch, ceil)
    res = benchmarks.run_topic(SLUG, tmp_path, quick=True)
    assert res["ok"], res["failures"]
    assert checked == [bench.QUICK_SHAPES]
    assert res["model_band"] == pytest.approx(0, abs=1e-9)
    assert Path(res["recorded"]) == tmp_path / SLUG / "recorded_h100.json"
    doc = json.loads(Path(res["recorded"]).read_text())
    # the row names recorded_h100.json and the tests read, each with its prediction, bound and fraction
    assert [r["kernel"] for r in doc["rows"]] == [f"transpose_{v}" for v in VARIANTS] + \
        [f"exercise:{n}" for n in bench.TIMED_ANSWERS] + [f"records_{v}" for v in VARIANTS]
    assert all(r["shape"] == ("2097152x32" if r["kernel"].startswith("records_") else "8192x8192")
               and r["model_bound"] and r["output_ok"] for r in doc["rows"])
    assert all(r["fraction_of_ceiling"] == pytest.approx(r["tbps"] / 3.0) for r in doc["rows"])
    assert next(r for r in doc["rows"] if r["kernel"] == "exercise:correct")["answer"] == "correct"
    assert doc["model_fit"]["CLOCK_GHZ"] == pytest.approx(model.CLOCK_GHZ)
    assert doc["model_constants"]["fit"] == model.FIT_SOURCE
    assert doc["bar_hint"]["separation"] > bench.MIN_SEPARATION
    assert doc["known_bad"]["no_sync"]["failed_on"] == ["127x129"]
    assert doc["bench_shape"] == list(workload.BENCH_SHAPE) and set(doc["tile_costs"]) == set(VARIANTS)
    assert doc["naive_unmerged_prediction_tbps"] < doc["rows"][0]["model_prediction"]
    assert doc["exercise_margins"]["transpose"]["over_bar_here"] > 1
    assert (tmp_path / SLUG / f"{SLUG}_vs_model.png").stat().st_size > 1000


@pytest.mark.parametrize("case", ["separation", "band", "wrong_launch", "known_bad", "check"])
def test_bench_run_fails_with_the_reason(tmp_path, monkeypatch, case):
    ceil = {"copy_tbps": 3.0, "cublas_bf16_tflops": None}
    _fake_bench(monkeypatch, ceil, bad_failures=["known-bad answer no_sync passed"] if case == "known_bad" else (),
                wrong={"transpose_smem": 2} if case == "wrong_launch" else None,
                slower={"transpose_naive": 2.0} if case == "band" else None)
    if case == "separation":  # conflict-free answers no faster than the unpadded one: no bar separates them
        monkeypatch.setattr(bench, "TIMED_ANSWERS", dict(bench.TIMED_ANSWERS, correct="smem", swizzled="smem"))
    if case == "check":
        monkeypatch.setattr(bench, "check_all", lambda **kw: ["transpose_smem 127x129: WRONG"])
    res = benchmarks.run_topic(SLUG, tmp_path, quick=True)
    assert not res["ok"]
    text = "\n".join(res["failures"])
    assert {"separation": "no throughput bar separates them", "band": "model off by 100.0%",
            "wrong_launch": "transpose_smem: 2 timed launch(es) wrong", "known_bad": "no_sync passed",
            "check": "transpose_smem 127x129"}[case] in text, text
    if case == "band":
        assert "worst transpose_naive" in text
    if case == "check":  # a wrong kernel stops the run before anything is timed or recorded
        assert res["rows"] == [] and not list((tmp_path / SLUG).glob("recorded_*.json"))
    else:  # the rest is measured and recorded all the same
        assert (tmp_path / SLUG / "recorded_h100.json").exists()


# ---------------------------------------------------------------- the demo: sums over records (records.cu)
def _records_cubin():
    from kernels.smem_tiling.launch import records_cubin

    return records_cubin()


def test_records_rungs_compile_with_their_instructions():
    cub = _records_cubin()
    assert set(cub.kernels) == {f"records_{v}" for v in VARIANTS}
    for v in VARIANTS:
        ops = opcodes(cub, f"records_{v}")
        assert not [o for o in ops if o.startswith(("LDL", "STL", "BAR"))], (v, ops)  # warp-private tile
        assert [o for o in ops if o.startswith("LDG")] and [o for o in ops if o.startswith("STG")]
        if v == "naive":
            assert not [o for o in ops if o.startswith(("LDS", "STS"))], ops
        else:
            # one 4-byte LDS per step (the loop is not unrolled: no LDS.128 that would hide the 32-way conflict)
            assert "STS" in ops and "LDS" in ops and not [o for o in ops if o.startswith("LDS.")], ops
    assert "LOP3.LUT" in opcodes(cub, "records_swizzled")


def test_records_demo_is_not_the_exercise():
    # the demo shares the mechanism, not the task: it neither is nor contains a transpose
    src = (ROOT / "kernels" / "smem_tiling" / "records.cu").read_text()
    assert "transpose" not in src.lower()


@pytest.mark.parametrize("variant", model.SMEM_VARIANTS)
def test_records_tile_addresses_give_each_lane_its_record(variant):
    # phase 1 writes word l of record j at store-address(j)[l]; phase 2's lane l at step k must read word k of
    # record l (its own), every step, from a word phase 1 wrote; no two (record, word) share a tile word
    written = {}
    for j in range(32):
        for lane, a in enumerate(model.record_smem_addresses(variant, "store", j)):
            assert a not in written
            written[a] = (j, lane)
    for k in range(32):
        for lane, a in enumerate(model.record_smem_addresses(variant, "load", k)):
            assert written[a] == (lane, k)


def test_records_costs_and_predictions():
    c = {v: model.record_cost(v) for v in VARIANTS}
    assert (c["naive"].global_wavefronts, c["naive"].lds_wavefronts) == (32 * 32 + 1, 0)
    assert (c["smem"].sts_wavefronts, c["smem"].lds_wavefronts) == (32, 32 * 32)
    assert c["padded"] == c["swizzled"] and c["padded"].l1_wavefronts == 32 + 32 + 33
    assert all(x.l2_requests == 33 and x.useful_bytes == 4 * 33 * 32 for x in c.values())
    p = {v: model.predict_records(v, workload.DEMO_N, 3.0) for v in VARIANTS}
    assert p["padded"].bound == "DRAM" and p["smem"].bound == "L1TEX" and p["naive"].bound == "L1TEX"
    # hand-computed: 65536 warp tiles x 1089 wavefronts / (132 SMs x 1.78 GHz)
    assert p["smem"].ms == pytest.approx(65536 * 1089 / (132 * model.CLOCK_GHZ * 1e9) * 1e3, rel=1e-9)
    assert p["padded"].tbps == pytest.approx(3.0 * model.DRAM_FRACTION_OF_COPY, rel=1e-9)
    with pytest.raises(ValueError, match="variant"):
        model.record_cost("transposed")


def test_records_launcher_validation():
    from kernels.smem_tiling.launch import validate_records

    x = torch.zeros(100, 32)
    with pytest.raises(ValueError, match="variant"):
        validate_records(x, "fast")
    with pytest.raises(ValueError, match="float32"):
        validate_records(x.double())
    with pytest.raises(ValueError, match=r"\(n, 32\)"):
        validate_records(torch.zeros(100, 33))
    with pytest.raises(ValueError, match="contiguous"):
        validate_records(torch.zeros(32, 200)[:, :32])
    with pytest.raises(ValueError, match="out must be"):
        validate_records(x, out=torch.zeros(99))
    with pytest.raises(ValueError, match="1 <= n"):
        validate_records(torch.zeros(0, 32))
    with pytest.raises(ValueError, match="GPU"):
        validate_records(x)


def test_records_reference_matches_a_python_loop():
    x = torch.randn(37, 32, generator=torch.Generator().manual_seed(5))
    want = [sum(float(v) ** 2 for v in r) for r in x]
    assert workload.records_reference(x).tolist() == pytest.approx(want, rel=1e-6)
    assert workload.records_bytes(37) == 37 * 33 * 4


def test_records_claims():
    rows = [{"kernel": f"records_{v}", "tbps": model.predict_records(v, workload.DEMO_N, 3.0).tbps} for v in VARIANTS]
    assert bench.claims(rows, {"copy_tbps": 3.0}) == []
    by = {r["kernel"]: r for r in rows}
    by["records_smem"] = dict(by["records_smem"], tbps=by["records_padded"]["tbps"])
    assert any("records: the 32-way bank conflict" in c for c in bench.claims(list(by.values())))


def test_recorded_demo_reads_only_demo_rows():
    doc = bench.recorded_demo()
    if doc is None:
        pytest.skip("no record holds the demo's rows yet")
    assert doc["rows"] and all(r["kernel"].startswith("records_") for r in doc["rows"])


@gpu
def test_records_demo_on_gpu():
    assert bench.check_demo() == []
