"""Week 3 day 1 (fp8_gemm), the graded exercise fp8_promote, on CPU: the spec loads, names its grade cells and states
the rules the exercise needs (test shapes, path rules, executed rules, the vendor bar with no calibration yet); the
launch contract agrees with the given code (shared memory, constants); the given code is stored once (the solutions
notebook's answer cell: the course solution and the release's stub are read from it, no copy beside the known answers
or in kernels/); the student's piece is bounded; the known answers are the mutations they claim, their SASS is what
they claim, and they score on CPU as expected.toml says (autograder.known.check_known, gpu=False); the reference is
the float64 sum of each k-block's product times its two scales, computed here by hand."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from autograder.known import (check_known, kernel_source, known_answers, known_dir, release_cell, solution_kernel,
                              solution_literal, table)
from autograder.spec import all_specs, load
from kernels.compile import compile_cuda, kernel_file
from kernels.fp8_gemm import exercise, workload
from kernels.sass import opcodes
from kernels.sass import family_count as _n  # an opcode's family, counted

ROOT = Path(__file__).resolve().parents[1]
SLUG, EX = "fp8_gemm", "fp8_promote"
# HOSTILE: the grader-integrity answers (a printed verdict, a forbidden header, state across launches, lazy launches)
HOSTILE = {"forged_verdict", "include_environ", "cached_result", "launch_counter"}
KNOWN = {"correct", "solution", "no_promotion_scale", "wrong_row", "wrong_kblock", "missing_sb", "bf16_path", "one_stage",
         "fmul_fadd", "stub"} | HOSTILE
WRONG = KNOWN - {"correct", "solution", "bf16_path", "one_stage", "fmul_fadd", "stub", "launch_counter"}


def _spec():
    return load(SLUG)


def _ops(name: str) -> Counter:
    return Counter(opcodes(compile_cuda(kernel_source(SLUG, name), name="FP8_PROMOTE_CU"), exercise.KERNEL))


# ------------------------------------------------------------------------------------------------ the spec
def test_the_spec_loads_and_names_its_grade_cells():
    spec = _spec()
    assert SLUG in {s.slug for s in all_specs()}
    assert spec.assignment == "week3" and spec.notebook == "day1_fp8_gemm.ipynb"
    assert set(spec.grade_cells()) == {"fp8_promote_correctness", "fp8_promote_path", "fp8_promote_throughput",
                                       "fp8_gemm_quiz_q1", "fp8_gemm_quiz_q2", "fp8_gemm_quiz_q3", "fp8_gemm_quiz_q4"}
    ex = spec.exercises[EX]
    assert ex.workload() is exercise and ex.kernel == exercise.KERNEL == exercise.NAME
    assert (ex.answer_cell, ex.answer_var) == ("fp8_promote_answer", "FP8_PROMOTE_CU")
    assert {p: ex.parts[p].points for p in ("correctness", "path", "throughput")} == \
        {"correctness": 3, "path": 2, "throughput": 2}


def test_the_spec_states_the_exercises_rules():
    ex = _spec().exercises[EX]
    path, tp = ex.parts["path"], ex.parts["throughput"]
    assert set(path.require) == {"QGMMA", "UTMALDG"} and {"HGMMA", "LDGSTS"} <= set(path.forbid)
    rules = {r.opcode: r for r in path.executed if r.opcode}
    assert rules["QGMMA"].at_least >= 1024 and rules["FFMA|FADD"].at_least >= 16384 and rules["USETMAXREG"].at_least == 12
    # the promotion's rule counts its fp32 adds in either spelling, and nothing that only starts like them
    assert rules["FFMA|FADD"].count({"FFMA": 3, "FADD.FTZ": 4, "FADD": 1, "FMUL": 9, "FFMA2": 5, "DADD": 7}) == 8
    tma = {r.per: r for r in path.executed if r.bytes == ("tma_load",)}
    assert tma["loaded"].at_least >= 0.9 and tma["read"].at_least >= 0.9
    # the bar: the vendor's FP8 on the exercise's inputs at the spec's fraction, calibrated (`autograder calibrate`,
    # from the H200's record) where the course solution clears it by the margin: the spec's own fraction kept there
    assert tp.baseline_kind == "vendor" and tp.fraction == 0.5 and tp.requires_path
    cal = {c.gpu: c for c in tp.calibration}
    assert set(cal) == {"h200"} and cal["h200"].fraction == tp.fraction and cal["h200"].margin >= 1.08
    assert callable(exercise.vendor) and "cuBLASLt" in exercise.VENDOR and exercise.VENDOR_ROW[0] == "cublaslt_blockwise"
    assert exercise.CHECK == {"rtol": 2e-3} and ex.metric == "tflops" and ex.launch_timeout_s <= 10
    assert tuple(ex.bench_shape) == (8192, 8192, 8192) == workload.BENCH_SHAPE


def test_the_test_shapes_are_the_awkward_ones():
    shapes = [tuple(s) for s in _spec().exercises[EX].test_shapes]
    for s in shapes:
        assert workload.check_shape(s) == s  # whole tiles and whole scale blocks: the contract
    kblocks = [k // 128 for _, _, k in shapes]
    assert 1 in kblocks                                        # one k-block: no promotion across blocks at all
    assert any(kb % 4 for kb in kblocks if kb > 1)             # K not a multiple of 4 k-blocks
    assert any(kb > exercise.STAGES and kb % exercise.STAGES for kb in kblocks)  # the ring wraps part-way
    assert max(k for *_, k in shapes) == 8192                  # 64 k-blocks: each stage reused ~ 11 times
    assert any(m != n for m, n, _ in shapes) and any(m > n for m, n, _ in shapes) and any(m < n for m, n, _ in shapes)


def test_the_launch_contract_is_the_given_codes():
    """exercise.py's constants are the given code's, the launch's shared memory is what the given layout uses and
    fits with the kernel's static shared memory under the 227 KiB a block may have."""
    from kernels.gemm import occupancy  # the course's reader of a cubin's static shared memory (a day's idea, reused)

    src = solution_kernel(SLUG)
    assert "constexpr int BM = 128, BN = 128, BK = 128, STAGES = 6;" in src and exercise.STAGES == 6
    assert f"constexpr int SMEM_BYTES = {exercise.SMEM_BYTES // 1024} * 1024;" in src
    assert exercise.SMEM_BYTES == 1024 + 6 * 32 * 1024 + 3 * 1024 == 200704
    cub = compile_cuda(kernel_source(SLUG, "solution"), name="FP8_PROMOTE_CU")
    assert exercise.SMEM_BYTES + occupancy.static_smem(cub, exercise.KERNEL) <= 227 * 1024
    assert exercise.grid_for((384, 640, 1152)) == (5, 3)
    with pytest.raises(ValueError, match="multiple of 128"):
        exercise.grid_for((384, 640, 1000))
    assert exercise.flops is workload.flops and exercise.make_inputs is workload.make_inputs
    assert exercise.reference is workload.reference and exercise.bytes_moved is workload.bytes_moved


# ------------------------------------------------------------------------------------------------ the given code
def test_the_given_code_is_stored_once():
    """The given kernel lives in the solutions notebook's answer cell only: the course solution is that cell, the
    stub is that cell through nbgrader, every other known answer is the solution with named changes; no file of the
    known answers and no course source holds another copy of the kernel."""
    by = {ka.name: ka for ka in known_answers(SLUG)}
    assert by["solution"].source == "solution" and by["stub"].source == "release"
    assert by["correct"].source == "solution"  # the same cell, under the name the benchmark times
    assert all(ka.base == "solution" for n, ka in by.items() if n not in ("solution", "correct", "stub",
                                                                            "forged_verdict")), by
    assert by["forged_verdict"].base == "missing_sb"  # another known answer, itself the solution with a change
    assert not [p for p in known_dir(SLUG).rglob("*") if p.is_file() and p.name != "expected.toml"]
    spec = _spec()
    cell = solution_literal(spec, "fp8_promote_answer", "FP8_PROMOTE_CU")
    assert kernel_source(SLUG, "solution") == cell and "### BEGIN SOLUTION" in cell
    entry = re.compile(r"__global__[^{;]*\bfp8_promote\s*\(")
    assert entry.search(cell)
    holders = [p.relative_to(ROOT).as_posix() for p in (ROOT / "kernels").rglob("*") if p.is_file()
               and p.suffix in (".cu", ".cuh") and entry.search(p.read_text(errors="replace"))
               and p != ROOT / "kernels" / SLUG / "grading" / "assistant.cu"]  # a hand-in, kept as handed in
    assert holders == [], holders
    stub = release_cell(SLUG)
    assert cell.split("### BEGIN SOLUTION")[0] in stub and "raise NotImplementedError()" in stub


def test_the_stub_is_not_attempted():
    from kernels.compile import NotAttempted

    src = release_cell(SLUG).split('r"""', 1)[1].rsplit('"""', 1)[0]
    assert src.count("raise NotImplementedError()") == 1
    with pytest.raises(NotAttempted):
        compile_cuda(src, name="FP8_PROMOTE_CU")


def test_the_students_piece_is_bounded():
    body = solution_literal(_spec(), "fp8_promote_answer", "FP8_PROMOTE_CU")
    regions = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", body, re.S)
    assert len(regions) == 1
    lines = [ln for ln in regions[0].splitlines() if ln.strip() and not ln.strip().startswith("#pragma")]
    assert 3 <= len(lines) <= 12, lines
    before = body.split("### BEGIN SOLUTION")[0]
    assert before.rstrip().endswith("int kb, int kblocks, int c) {")  # the region is promote's body, nothing else


# ------------------------------------------------------------------------------------------------ the known answers
def test_the_known_answers_are_what_they_claim():
    by = {ka.name: ka for ka in known_answers(SLUG)}
    assert set(by) == KNOWN
    for name in WRONG | {"stub"}:
        assert by[name].expected == {"correctness": 0, "path": 0, "throughput": 0}, name
    assert by["solution"].expected == by["correct"].expected == by["fmul_fadd"].expected == {
        "correctness": 3, "path": 2, "throughput": 2}
    assert by["correct"].source == "solution"  # the benchmark times it (the margin calibrate reads)
    assert by["one_stage"].expected == {"correctness": 3, "path": 2, "throughput": 0}
    assert by["bf16_path"].expected == {"correctness": 3, "path": 0, "throughput": 0}
    assert by["stub"].status == "not_attempted"
    src = {n: kernel_source(SLUG, n) for n in KNOWN - {"stub"}}
    assert "sb[n_tile * kblocks];" in src["no_promotion_scale"] and "sa = sa_ring;" in src["no_promotion_scale"]
    assert "lower = sa[row] * b_scale" in src["wrong_row"]
    assert "sa_ring + ((s + 1) % STAGES) * BM" in src["wrong_kblock"]
    assert "upper = sa[row], lower = sa[row + 8];" in src["missing_sb"]
    assert "wgmma_m64n128k16_rs(" in src["bf16_path"] and "wgmma_m64n128k32_e4m3_ss(tmp" not in src["bf16_path"]
    assert "STAGES = 1;" in src["one_stage"] and "__fadd_rn(acc[i], __fmul_rn(tmp[i]" in src["fmul_fadd"]
    # the hostile answers: what each tries, and the GPU's verdict the grader must reach
    assert by["launch_counter"].expected == {"correctness": 3, "path": 0, "throughput": 0}
    assert by["launch_counter"].gpu_flags == ["stale-output", "timed-path", "above-roofline"] and by["cached_result"].gpu_flags == ["inconsistent-results"]
    assert by["forged_verdict"].gpu_flags == ["kernel-printed"]  # and printf, a call, serializes the wgmma (C7510)
    assert by["forged_verdict"].flags == ["ptxas-advisory: C7510"] and by["include_environ"].flags == ["forbidden-include"]
    assert "VERDICT {" in src["forged_verdict"] and "upper = sa[row], lower = sa[row + 8];" in src["forged_verdict"]
    assert '#include "/proc/self/environ"' in src["include_environ"]
    assert "if (*(volatile int*)&computed_once) return;" in src["cached_result"]
    assert "launch >= 30 && launch % 20 != 0" in src["launch_counter"]


def test_the_known_answers_sass():
    """The given mainloop in every kernel answer (3 TMA loads, the promotion's 64 FFMA, no spill); 4 QGMMA per k-block
    and no HGMMA in all but bf16_path, which has 8 HGMMA (m64n128k16, A from registers) and no QGMMA."""
    ops = {n: _ops(n) for n in KNOWN - {"stub", "include_environ"}}  # include_environ: refused (ForbiddenInclude)
    for n, o in ops.items():
        adds = "FADD" if n == "fmul_fadd" else "FFMA"  # fmul_fadd: FMUL + FADD, and no FFMA at all
        assert _n(o, "UTMALDG") == 3 and _n(o, adds) == 64 and _n(o, "FFMA") == 64 * (adds == "FFMA"), n
        assert _n(o, "LDL") == 0 and _n(o, "STL") == (64 if n == "forged_verdict" else 0), n  # printf's arguments
        assert _n(o, "LDGSTS") == 0, n
    for n in KNOWN - {"stub", "bf16_path", "include_environ"}:
        assert _n(ops[n], "QGMMA.64x128x32.F32.E4M3.E4M3") == 4 and _n(ops[n], "HGMMA") == 0, n
    assert _n(ops["bf16_path"], "HGMMA.64x128x16.F32.BF16") == 8 and _n(ops["bf16_path"], "QGMMA") == 0
    # the solution reads its two row scales from shared memory and sb with one global load; missing_sb reads no sb
    assert _n(ops["solution"], "LDS") == 2 and _n(ops["solution"], "LDG") == 1 and _n(ops["missing_sb"], "LDG") == 0
    assert _n(ops["solution"], "STG") == 32  # the given epilogue: one bf16 pair per store


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_known_answers_score_as_expected_without_a_gpu():
    results = check_known(SLUG, gpu=False)
    assert results and all(r.ok for r in results), table(results)
    by = {r.answer.name: r for r in results}
    assert by["stub"].grade.exercises[EX].status == "not_attempted"
    static = {n: by[n].grade.exercises[EX].facts["path"]["static_points"] for n in KNOWN - {"stub", "include_environ"}}
    assert static == {**{n: 2 for n in KNOWN - {"stub", "bf16_path", "include_environ"}}, "bf16_path": 0}, static
    # the solution's quiz is right, all four questions
    assert sum(by["solution"].grade.scores[f"fp8_gemm_quiz_q{i}"].points for i in range(1, 5)) == 4


# ------------------------------------------------------------------------------------------------ the reference
def test_the_reference_is_the_float64_block_sum():
    """workload.reference on CPU against the definition written out: per k-block, the e4m3 values' products summed in
    float64, times sa[m, kb] and sb[n // 128, kb]; and the scales of the test inputs vary from block to block (what
    known answer no_promotion_scale fails on)."""
    shape = (256, 384, 640)
    inp = exercise.make_inputs(shape, seed=11, device="cpu")
    got = exercise.reference(inp)
    assert got.dtype == torch.float64 and got.shape == (256, 384)
    a, b, sa, sb = inp["a"].double(), inp["b"].double(), inp["sa"].double(), inp["sb"].double()
    want = torch.zeros(256, 384, dtype=torch.float64)
    for kb in range(640 // 128):
        ks = slice(128 * kb, 128 * kb + 128)
        part = a[:, ks] @ b[:, ks].T
        want += part * sa[:, kb:kb + 1] * sb[:, kb].repeat_interleave(128)[None, :]
    assert float((got - want).abs().max() / want.abs().max()) < 1e-12
    assert torch.equal(inp["sa_t"], inp["sa"].t().contiguous())
    spread = sa.std(dim=1) / sa.mean(dim=1)  # per row, across its k-blocks
    assert float(spread.min()) > 0.02 and float((sb.std(dim=1) / sb.mean(dim=1)).min()) > 0.01
    # one k-block's scales for all k-blocks is far outside the tolerance
    once = sum((a[:, 128 * kb:128 * kb + 128] @ b[:, 128 * kb:128 * kb + 128].T) for kb in range(5)) * sa[:, :1] \
        * sb[:, 0].repeat_interleave(128)[None, :]
    assert float((once - want).norm() / want.norm()) > 10 * exercise.CHECK["rtol"]


def test_rung_1_is_left_out_of_the_release_and_says_why(tmp_path, monkeypatch):
    """r1_block_scaled.cu answers the exercise: the release check names it instructor-only, and a copy of the course
    without it says why when rung 1 is asked for (not a bare FileNotFoundError)."""
    from autograder.release_check import INSTRUCTOR_ONLY
    from kernels import compile as kc
    from kernels.fp8_gemm import launch

    assert "promote" in INSTRUCTOR_ONLY["kernels/fp8_gemm/r1_block_scaled.cu"] and launch.HAS_RUNG1
    monkeypatch.setattr(kc, "__file__", str(tmp_path / "compile.py"))  # a tree with no kernels/fp8_gemm/ sources
    launch.block_scaled_cubin.cache_clear()
    try:
        with pytest.raises(kc.SourceLeftOut, match="r1_block_scaled.cu is not in this copy.*promote"):
            launch.block_scaled_cubin()
    finally:
        launch.block_scaled_cubin.cache_clear()
