"""Grader integrity: a student's kernel must not be able to write its own grade (no GPU needed).

Each family of attack, tried against the real harness: the verdict channel (what a kernel prints), the compiler
(what a source can make it read), the child's environment (no secret), path evidence (static vs executed, read from
real Nsight Compute exports of course kernels), and the order of trusted measurements. The GPU halves — a kernel
that prints, counts its launches, hides its path in a dead branch — are known answers graded by `make gpu-test`.
"""

import json
from pathlib import Path

import pytest

from autograder import harness, score, spec
from autograder.grading import grade_notebook
from autograder.known import known_answer, submission_notebook
from kernels import ncu
from kernels.compile import LOG_CAP, CompileError, ForbiddenInclude, check_includes, compile_cuda

ROOT = Path(harness.ROOT)
SCALAR = (Path(harness.ROOT) / "kernels/naive_loads/grading/known/scalar_loads.cu").read_text()
SECRET = "91827364555"


# ---- 1. the verdict channel ----------------------------------------------------------------------------------------
def test_a_forged_verdict_on_stdout_and_stderr_is_shown_never_believed(monkeypatch):
    # The hook writes, on fd 1 and 2 as a kernel's device printf would, a full-marks verdict padded past a pipe
    # buffer, before the real run. The real verdict of a scalar kernel on a CPU: path missing, nothing run.
    monkeypatch.setenv("COURSE_HARNESS_TEST_FORGE", "1")
    res = harness.run_exercise("naive_loads", "row_bias", SCALAR, seed=3, gpu=False, timeout_s=120)
    assert res["compile"]["ok"] and res["path"]["ok"] is False
    assert res["correctness"]["graded"] is False  # the forgery said graded and ok
    assert res["kernel_output"].startswith("xxxx") and "more characters" in res["kernel_output"]
    assert len(res["kernel_output"]) <= harness.PRINT_CAP + 40  # capped: the padding, not the forged line
    assert any(f.startswith("kernel-printed") for f in res["flags"])
    s = score.score(spec.load("naive_loads").exercises["row_bias"], res)
    assert s.parts["path"].points == 0 and s.parts["correctness"].points == 0


def test_what_a_kernel_prints_is_made_safe_and_capped():
    text = harness.printed("a\x1b[31mred\x07" + "x" * 5000)
    assert "\x1b" not in text and "\x07" not in text and text.startswith("a?[31mred?")
    assert len(text) < harness.PRINT_CAP + 60 and "more characters" in text


def test_a_kernel_that_prints_on_every_launch_fills_no_disk_and_every_byte_is_counted(monkeypatch, tmp_path):
    """Issue family 'printing fills the grading disk': 300 MiB printed by the child is drained from a pipe as it
    comes; the first and last bytes are kept, the rest counted, nothing is written under the grading folder."""
    import resource

    monkeypatch.setenv("COURSE_HARNESS_TEST_FLOOD", "300")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res = harness.run_exercise("naive_loads", "row_bias", SCALAR, seed=5, gpu=False, timeout_s=120)
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    line = b"launch says hello " * 3 + b"\n"
    total = 300 * (2**20 // len(line)) * len(line) + len(b"LAST LINE\n")
    flag = next(f for f in res["flags"] if f.startswith("kernel-printed"))
    assert f"printed {total} bytes" in flag, flag
    out = res["kernel_output"]
    assert out.startswith("launch says hello") and out.rstrip().endswith("LAST LINE") and "more characters" in out
    assert len(out) <= harness.PRINT_CAP + 60
    assert grew_kib < 64 * 1024, f"the parent kept {grew_kib} KiB"  # 300 MiB never held in memory
    assert sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()) < 2**20  # nor written to disk


# ---- 2. the child's environment ------------------------------------------------------------------------------------
def test_the_harness_child_sees_no_secret_and_no_instructor_variable(monkeypatch):
    monkeypatch.setenv("COURSE_SECRET_SEED", SECRET)
    monkeypatch.setenv("COURSE_SECRET_SEED_FILE", "/home/instructor/secret_seed")
    monkeypatch.setenv("INSTRUCTOR_TOKEN", "tok-" + SECRET)
    monkeypatch.setenv("COURSE_HARNESS_TEST_ENV", "1")  # the child dumps its environment on stdout
    res = harness.run_exercise("naive_loads", "row_bias", SCALAR, seed=3, gpu=False, timeout_s=120)
    dumped = res["kernel_output"]
    assert SECRET not in dumped and "COURSE_SECRET_SEED" not in dumped and "INSTRUCTOR_TOKEN" not in dumped
    env = harness.child_env()
    assert env["PYTHONPATH"].split(":")[0] == str(harness.ROOT)
    assert not {k for k in env if "SECRET" in k or k.startswith(("JUPYTER", "NBGRADER"))}


# ---- 3. the compiler -----------------------------------------------------------------------------------------------
ATTACKS = {
    "absolute": '#include "/proc/self/environ"\n',
    "angle_absolute": "#include </etc/passwd>\n",
    "dotdot": '#include "../../../../../proc/self/environ"\n',
    "dotdot_inside": '#include <cuda/../../../../../../etc/passwd>\n',
    "macro": '#define F "/proc/self/environ"\n#include F\n',
    "digraph": '%:include "/proc/self/environ"\n',
    "splice": '#inc\\\nlude "/proc/self/environ"\n',
    "comment_between": '#/* hidden */include "/proc/self/environ"\n',
    "include_next": '#include_next </etc/passwd>\n',
    "has_include": '#if __has_include("/proc/self/environ")\n#endif\n',
    "working_folder": '#include "kernels/tma/spec.toml"\n',
    "import": '#import "x.h"\n',
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_only_course_and_cuda_headers_can_be_included(name):
    src = "#include <cuda_bf16.h>\n" + ATTACKS[name] + 'extern "C" __global__ void k() {}\n'
    with pytest.raises(ForbiddenInclude) as err:
        compile_cuda(src, name="X_CU")
    assert err.value.line >= 2 and "X_CU" in str(err.value)


def test_allowed_headers_and_harmless_text_still_compile():
    src = ('#include <cuda_bf16.h>\n#include "course.cuh"\n#include <cuda/pipeline>\n'
           '#include <cuda_pipeline_primitives.h>\n'
           '// #include "/etc/passwd" in a comment is only a comment\n'
           '__device__ const char* s = "#include </etc/passwd>";\n'
           'extern "C" __global__ void k(float* y) { if (s[0] == 0) y[0] = 1.f; }\n')
    check_includes(src, "X_CU")
    assert "k" in compile_cuda(src, name="X_CU").kernels


def test_compile_logs_are_capped():
    src = 'extern "C" __global__ void k() {\n' + "".join(f"  undefined_{i}();\n" for i in range(400)) + "}\n"
    with pytest.raises(CompileError) as err:
        compile_cuda(src, name="X_CU")
    assert len(err.value.log) <= LOG_CAP + 80 and "cut" in err.value.log


@pytest.mark.parametrize("answer", ["include_environ", "include_macro"])
def test_the_feedback_of_an_include_attack_holds_no_secret_and_no_file(monkeypatch, answer):
    monkeypatch.setenv("COURSE_SECRET_SEED", SECRET)
    nb = submission_notebook("naive_loads", known_answer("naive_loads", answer))
    g = grade_notebook(nb, spec.load("naive_loads"), seed=SECRET, gpu=False, student="mallory")
    text = g.feedback() + json.dumps(g.as_dict())
    assert SECRET not in text and "PATH=" not in text and "HOME=" not in text
    assert any("forbidden-include" in f for f in g.flags)
    assert g.scores["row_bias_correctness"].points == 0 and g.scores["row_bias_path"].points == 0


# ---- 4. path evidence: static vs executed ----------------------------------------------------------------------------
def test_ncu_source_export_of_a_real_launch_is_read_per_executed_instruction():
    # ncu --page source --csv of the course's row_bias on 1024 x 1024 (recorded on the GPU; the answer's SASS, so
    # kept in the day's grading/ folder, out of a student release): the 16-byte load and
    # store ran 4096 warp instructions each; the scalar tail never ran.
    instrs = ncu.parse_source((ROOT / "kernels" / "naive_loads" / "grading" / "ncu_source_row_bias.csv").read_text())
    prof = ncu.Profile("row_bias", {}, instrs)
    assert prof.executed["LDG.E.128.CONSTANT"] == 4096 and prof.executed["STG.E.128"] == 4096
    assert "STG.E.U16" not in prof.executed  # in the SASS, executed 0 times
    assert prof.bytes["global_load_128"] == 1024 * 1024 * 2 == prof.bytes["global_store_128"]
    tma = ncu.Profile("tma_add", {}, ncu.parse_source((ROOT / "kernels" / "tma" / "grading" / "ncu_source_tma_add.csv").read_text()))
    assert tma.executed["UTMALDG.2D"] == 512 and tma.executed["UTMASTG.2D"] == 256
    assert tma.bytes["global_load_128"] == 0  # TMA is not a global load instruction
    assert any(s.startswith("UTMALDG.2D x") for s in tma.memory_summary())


def test_ncu_raw_export_is_read_in_base_units():
    names = [m for ms in ncu.METRICS.values() for m in ms]
    head = ",".join(f'"{h}"' for h in ["ID", "Kernel Name", *names])
    units = ",".join('""' if i < 2 else '"byte"' for i in range(len(names) + 2))
    vals = ",".join(f'"{v}"' for v in ["0", "tma_add", *[f"{(i + 1) * 1000:,}" for i in range(len(names))]])
    counters = ncu.parse_raw("\n".join([head, units, vals]))
    assert counters[names[0]] == 1000 and counters[names[-1]] == len(names) * 1000


def _facts(executed, read=100.0, written=100.0, gpu=True, static_ok=True, output_ok=True):
    path = {"ok": static_ok, "summary": "SASS of k:"}
    if executed is not None:
        path["executed"] = executed if "measured" in executed else {
            "measured": True, "shape": [8, 8], "launch": 2, "bytes": executed, "read_bytes": read,
            "written_bytes": written, "output_ok": output_ok, "output_message": "x", "executed": ["UTMALDG.2D x4"]}
    return {"gpu": gpu, "path": path, "correctness": {"graded": gpu, "ok": True}}


def test_path_points_come_from_what_ran_and_carried_the_work():
    ex = spec.load("tma").exercises["tma_add"]
    full = {"tma_load": 100.0, "tma_store": 100.0, "global_load": 0.0, "global_store": 0.0}
    assert score.path_points(ex, _facts(full))[0] == 2
    dead = {"tma_load": 0.0, "tma_store": 0.0, "global_load": 100.0, "global_store": 100.0}
    pts, text, _ = score.path_points(ex, _facts(dead))
    assert pts == 0 and "did not carry the work" in text and "NO " in text
    # redundant TMA traffic beside plain loads doing the work: the "any other way" rule fails it
    both = {"tma_load": 1000.0, "tma_store": 100.0, "global_load": 100.0, "global_store": 0.0}
    assert score.path_points(ex, _facts(both))[0] == 0
    # partial use: half of the inputs by TMA, half by plain loads -> partial_points
    half = {"tma_load": 50.0, "tma_store": 100.0, "global_load": 50.0, "global_store": 0.0}
    assert score.path_points(ex, _facts(half))[0] == ex.parts["path"].partial_points == 1
    # a profiled launch with a wrong output earns nothing
    assert score.path_points(ex, _facts(full, output_ok=False))[0] == 0
    # static evidence is necessary: a forbidden instruction in the SASS scores 0 whatever ran
    assert score.path_points(ex, _facts(full, static_ok=False))[0] == 0


def test_static_evidence_is_not_graded_on_a_cpu_and_an_unmeasured_gpu_run_is_flagged():
    ex = spec.load("naive_loads").exercises["row_bias"]
    facts = _facts(None, gpu=False)
    pts, text, flag = score.path_points(ex, facts)
    # no GPU: the part is not graded (as correctness is not); the static verdict is reported and kept
    assert pts == 0 and text.startswith("not graded here") and flag is None
    assert facts["path"]["static_points"] == 2 and "required instructions are in the SASS" in text
    graded = score.score(ex, {**facts, "compile": {"ok": True}})
    assert graded.parts["path"].graded is False and graded.parts["path"].points == 0
    bad = _facts(None, gpu=False, static_ok=False)
    assert score.path_points(ex, bad)[0] == 0 and bad["path"]["static_points"] == 0
    pts, text, flag = score.path_points(ex, _facts({"measured": False, "unavailable": True,
                                                     "reason": "ncu is not installed"}))
    assert pts == 2 and "could not be measured" in text and flag.startswith("path-not-measured")
    # a kernel that hangs or crashes only when measured does not fall back to its SASS
    pts, text, flag = score.path_points(ex, _facts({"measured": False, "unavailable": False,
                                                     "reason": "the profiled launch did not finish in 240 s"}))
    assert pts == 0 and "did not complete" in text and flag.startswith("path-not-measured")


def test_path_points_need_a_kernel_that_is_correct_on_the_gpu():
    """Family 2: a kernel that is wrong, hangs or crashes gets no path points, however complete its SASS."""
    ex = spec.load("tma").exercises["tma_add"]
    full = {"tma_load": 100.0, "tma_store": 100.0, "global_load": 0.0, "global_store": 0.0}
    wrong = _facts(None)
    wrong["correctness"] = {"graded": True, "ok": False}
    pts, text, _ = score.path_points(ex, wrong)
    assert pts == 0 and "correct on the GPU" in text and wrong["path"]["static_points"] == 2
    hung = {**_facts(full), "status": "timeout", "error": "tma_add did not finish within 5 s: the kernel hangs"}
    pts, text, _ = score.path_points(ex, hung)
    assert pts == 0 and "did not finish" in text
    assert score.path_points(ex, _facts(full))[0] == 2  # the same evidence with a correct kernel


def _timed(per_launch, read=100.0, written=100.0):
    return {"measured": True, "launches": len(next(iter(per_launch.values()))), "per_launch": per_launch,
            "den": {"read": read, "written": written}, "what": {q: q for q in per_launch}}


def test_the_timed_launches_must_run_the_path_the_profiled_launch_proved():
    """Family 1: the profiled launch used TMA; the timed launches are held to the same rule, every one of them."""
    ex = spec.load("tma").exercises["tma_add"]
    full = {"tma_load": 100.0, "tma_store": 100.0, "global_load": 0.0, "global_store": 0.0}
    facts = _facts(full)
    facts["path"]["timed"] = _timed({"tma_load": [100.0] * 12})
    pts, text, flag = score.path_points(ex, facts)
    assert pts == 2 and flag is None and "every counted launch" in text
    for lazy in ([100.0, 0.0] + [100.0] * 10, [0.0] * 12):  # one timed launch without TMA is enough to lose
        facts["path"]["timed"] = _timed({"tma_load": lazy})
        pts, text, flag = score.path_points(ex, facts)
        assert pts == 0 and flag.startswith("timed-path") and "NO " in text
    # partial proof (half by TMA): the timed launches are held to the partial bound
    half = {"tma_load": 50.0, "tma_store": 100.0, "global_load": 50.0, "global_store": 0.0}
    facts = _facts(half)
    facts["path"]["timed"] = _timed({"tma_load": [50.0] * 5})
    assert score.path_points(ex, facts)[0] == 1
    facts["path"]["timed"] = _timed({"tma_load": [20.0] * 5})
    assert score.path_points(ex, facts)[0] == 0
    # the counters could not be taken: the profiled launch stands, named
    facts = _facts(full)
    facts["path"]["timed"] = {"measured": False, "reason": "cupti-python is not importable"}
    pts, text, flag = score.path_points(ex, facts)
    assert pts == 2 and flag.startswith("timed-path-not-measured") and "not counted" in text
    # cp.async counted by instructions x 512 B: an upper bound that must still reach the rule
    ld = spec.load("ldgsts").exercises["blur2d_bf16"]
    lfacts = _facts({"ldgsts": 100.0, "global_load": 7.0})
    lfacts["path"]["timed"] = _timed({"ldgsts": [30.0] * 4})
    assert score.path_points(ld, lfacts)[0] == 0


def test_throughput_counts_only_through_the_mechanism():
    """Family 3: a fast kernel without the mechanism earns no throughput points; partial path, partial points."""
    ex = spec.load("tma").exercises["tma_add"]
    assert ex.parts["throughput"].requires_path
    tp = {"graded": True, "gpu": "h100", "device": "NVIDIA H100 80GB HBM3",
          "student": {"value": 2.9, "ms": 0.1, "p20_ms": 0.1, "p80_ms": 0.1, "output_ok": True},
          "baseline": {"value": 3.0, "what": "D2D copy"}}

    def graded(executed):
        f = _facts(executed)
        f.update(compile={"ok": True}, status="ok", throughput=dict(tp))
        f["correctness"] = {"graded": True, "ok": True, "shapes": []}
        return score.score(ex, f).parts

    full = {"tma_load": 100.0, "tma_store": 100.0, "global_load": 0.0, "global_store": 0.0}
    none = {"tma_load": 0.0, "tma_store": 0.0, "global_load": 100.0, "global_store": 100.0}
    half = {"tma_load": 50.0, "tma_store": 100.0, "global_load": 50.0, "global_store": 0.0}
    assert graded(full)["throughput"].points == 2
    p = graded(none)
    assert p["path"].points == 0 and p["throughput"].points == 0 and "only through the mechanism" in p["throughput"].feedback
    assert graded(half)["throughput"].points == 1


def test_gemm_rules_measure_what_the_exercise_teaches():
    """Family 4: TMA's share of every byte loaded (not of the compulsory bytes), the register hand-over executed, and
    the exercise's own: C's bytes stored by TMA, none by plain stores (generic ST counts: the static rule sees only
    STG)."""
    ex = spec.load("gemm").exercises["gemm_epilogue"]
    rules = {r.opcode or r.per: r for r in ex.parts["path"].executed}
    assert "loaded" in rules and rules["USETMAXREG"].at_least == 12
    stores = [r for r in ex.parts["path"].executed if r.per == "written"]
    assert {tuple(r.bytes) for r in stores} == {("tma_store",), ("global_store", "global_atomic")}
    assert "STG" in ex.parts["path"].forbid and "UTMASTG" in ex.parts["path"].require
    big = 50 * 100.0  # TMA re-reads: 50x the compulsory bytes
    ok = {"tma_load": big, "global_load": 0.0, "ldgsts": 0.0, "global_atomic": 0.0, "tma_store": 100.0,
          "global_store": 0.0}
    counts = {"HGMMA": 4096 * 10, "USETMAXREG": 12 * 10}
    facts = _facts(ok)
    facts["path"]["executed"].update(executed_counts=counts, ctas=10)
    assert score.path_points(ex, facts)[0] == 2
    # a kernel that loads 10 % of all it loads some other way fails, and the feedback speaks of every byte loaded
    leaky = {**ok, "global_load": 0.1 * big / 0.9}
    facts = _facts(leaky)
    facts["path"]["executed"].update(executed_counts=counts, ctas=10)
    pts, text, _ = score.path_points(ex, facts)
    assert pts == 0 and "90% of all the bytes it loaded" in text
    facts = _facts(ok)
    facts["path"]["executed"].update(executed_counts={"HGMMA": 4096 * 10}, ctas=10)  # no setmaxnreg executed
    pts, text, _ = score.path_points(ex, facts)
    assert pts == 0 and "USETMAXREG" in text
    # C by plain (or generic) stores, the TMA store in a branch no launch takes: the byte rules see it
    plain = {**ok, "tma_store": 0.0, "global_store": 100.0}
    facts = _facts(plain)
    facts["path"]["executed"].update(executed_counts=counts, ctas=10)
    pts, text, _ = score.path_points(ex, facts)
    assert pts == 0 and "C bytes stored by TMA" in text


def test_path_rules_are_data_and_checked():
    base = {"slug": "s", "assignment": "w", "notebook": "n.ipynb", "exercises": {"e": {
        "module": "m", "answer_cell": "a", "answer_var": "A", "kernel": "k", "test_shapes": [[1]],
        "bench_shape": [1], "metric": "tbps", "roofline": {"h100": 1.0},
        "correctness": {"grade_id": "c", "points": 1}, "throughput": {"grade_id": "t", "points": 1, "copy_fraction": 0.8},
        "path": {"grade_id": "p", "points": 2, "executed": [
            {"what": "w", "bytes": ["tma_load"], "per": "read", "at_least": 0.9}]}}}}
    assert spec.parse(base).exercises["e"].parts["path"].executed[0].holds(0.95)
    for bad, msg in [({"bytes": ["teleport"]}, "measured quantities"), ({"per": "both"}, "per must be"),
                     ({"at_most": 0.1}, "exactly one")]:
        d = json.loads(json.dumps(base))
        d["exercises"]["e"]["path"]["executed"][0].update(bad)
        with pytest.raises(spec.SpecError, match=msg):
            spec.parse(d)


# ---- 5. trusted measurements come first, from a process that loads no student code ---------------------------------
def test_the_baseline_is_measured_before_and_apart_from_student_code(monkeypatch, tmp_path):
    calls = []

    def fake_spawn(mode, job, timeout, workdir):
        calls.append((mode, job))
        if mode == "baseline":
            return {"records": [("BASELINE", {"key": harness._baseline_key(it["slug"], it["exercise"],
                                                                           it["reference_source"]),
                                              "ceilings": {"copy_tbps": 3.0}, "reference": {"value": 2.9}})
                                for it in job["items"]],
                    "timed_out": False, "returncode": 0, "stdout": "", "stderr": ""}
        return {"records": [("VERDICT", {"status": "ok", "flags": [], "compile": {"ok": True}})],
                "timed_out": False, "returncode": 0, "stdout": "", "stderr": ""}

    monkeypatch.setattr(harness, "_spawn", fake_spawn)
    monkeypatch.setattr(harness, "_wants_gpu", lambda gpu: True)
    monkeypatch.setattr(harness, "_baselines", {})
    monkeypatch.setenv("COURSE_BATCH_DIR", str(tmp_path))
    for student_src in ("kernel A", "kernel B"):
        harness.run_exercise("naive_loads", "row_bias", student_src, seed=1, reference_source="REF")
    modes = [m for m, _ in calls]
    assert modes == ["baseline", "grade", "grade"]  # once per batch, before the first student
    base_job = calls[0][1]
    assert [it["reference_source"] for it in base_job["items"]] == ["REF"]
    assert "kernel A" not in json.dumps(base_job) and all(set(it) == {"slug", "exercise", "reference_source"}
                                                          for it in base_job["items"])  # no student code there
    assert all(job["baseline"]["reference"]["value"] == 2.9 for m, job in calls if m == "grade")
    assert len(list(tmp_path.glob("baseline_naive_loads_row_bias_*.json"))) == 1  # the batch's copy, for others


def test_a_batch_measures_every_baseline_in_one_process_and_names_the_one_that_failed(monkeypatch, tmp_path):
    """A lane's fixed cost: the baselines of a week's exercises are one child process (one CUDA context, the ceilings
    once), not one each. A child that dies after the first item keeps that item and names the second."""
    calls = []
    fail_after = [None]

    def fake_spawn(mode, job, timeout, workdir):
        calls.append((mode, job))
        items = job["items"][:fail_after[0]] if fail_after[0] is not None else job["items"]
        return {"records": [("BASELINE", {"key": harness._baseline_key(it["slug"], it["exercise"],
                                                                       it["reference_source"]), "ceilings": {}})
                            for it in items], "timed_out": False, "returncode": 0 if fail_after[0] is None else 1,
                "stdout": "", "stderr": "boom"}

    monkeypatch.setattr(harness, "_spawn", fake_spawn)
    monkeypatch.setattr(harness, "_baselines", {})
    monkeypatch.setenv("COURSE_BATCH_DIR", str(tmp_path))
    items = [("naive_loads", "row_bias", "A"), ("ldgsts", next(iter(spec.load("ldgsts").exercises)), "B"),
             ("pipeline", next(iter(spec.load("pipeline").exercises)), "C")]
    got = harness.prepare_batch(items)
    assert [m for m, _ in calls] == ["baseline"] and len(calls[0][1]["items"]) == 3
    assert set(got) == {harness._baseline_key(*it) for it in items} and len(list(tmp_path.glob("*.json"))) == 3
    harness.prepare_batch(items)  # kept: nothing measured again
    assert len(calls) == 1
    monkeypatch.setattr(harness, "_baselines", {})
    monkeypatch.setenv("COURSE_BATCH_DIR", str(tmp_path / "other"))
    fail_after[0] = 1
    with pytest.raises(RuntimeError, match=r"baseline of ldgsts\."):
        harness.prepare_batch(items)
    assert len(list((tmp_path / "other").glob("*.json"))) == 1


def test_a_kernel_that_rewrites_its_inputs_is_checked_against_the_inputs_as_drawn(monkeypatch):
    """kernels.runner.checked_launch compares with a reference computed before the launch: a 'kernel' that zeroes
    its weights and writes y = 0 (right for the weights it left behind) fails. The GPU half is the known answer
    ldgsts/zeroes_weights (flag stale-output when it does this during timing)."""
    import torch

    from kernels import runner
    from kernels.ldgsts import exercise as wl

    def cheat(ex, cubin, la):
        x, w, y, h, wd, ld = la["args"]
        w.zero_()
        y.zero_()

    monkeypatch.setattr(runner, "launch_contract", cheat)
    monkeypatch.setattr(runner, "wait", lambda *a, **k: None)
    ex = spec.load("ldgsts").exercises["blur2d_bf16"]
    inputs = wl.make_inputs((33, 250, 272), 5, device="cpu")
    out, rep = runner.checked_launch(ex, wl, None, inputs, wl.reference(inputs), "cheat")
    assert not rep.ok and torch.count_nonzero(out) == 0
    # the same output against a reference taken after the 'launch' passes: the hole that was closed
    from kernels.check import compare

    assert compare(out, wl.reference(inputs), **dict(wl.CHECK)).ok


def test_an_instruction_rule_counts_what_ran_per_cta():
    """multicast: no byte counter tells a multicast load from per-CTA loads of the same tile (every SM receives the
    same bytes), so its spec counts UTMALDG.2D.MULTICAST executed per CTA. Multicast in a dead branch with unicast
    TMA doing the work (known answer dead_branch_unicast) passes every byte rule and fails this one."""
    import random

    ex = spec.load("multicast").exercises["bcast_add"]
    rule = next(r for r in ex.parts["path"].executed if r.opcode)
    assert rule.opcode == "UTMALDG.2D.MULTICAST" and rule.per == "cta"
    ctas = random.randint(100, 9000)
    tma = {"tma_load": 100.0, "tma_store": 100.0, "global_load": 0.0, "global_store": 0.0, "ldgsts": 0.0}

    def facts(counts):
        f = _facts(tma)
        f["path"]["executed"].update(executed_counts=counts, ctas=ctas)
        return f

    pts, text, _ = score.path_points(ex, facts({"UTMALDG.2D.MULTICAST": ctas, "UTMASTG.2D": ctas}))
    assert pts == ex.parts["path"].points and "1.00 times per CTA" in text
    pts, text, _ = score.path_points(ex, facts({"UTMALDG.2D": 3 * ctas, "UTMASTG.2D": ctas}))
    assert pts == 0 and "0.00 times per CTA" in text and f"0 in {ctas} CTAs" in text
    assert rule.count({"UTMALDG.2D.MULTICAST.X": 2, "UTMALDG.2D.MULTICASTX": 5, "UTMALDG.2D": 7}) == 2
    # the rule is data, and checked
    rule = {"what": "w", "opcode": "UTMALDG.2D.MULTICAST", "per": "cta", "at_least": 0.9}
    base = {"slug": "s", "assignment": "w", "notebook": "n.ipynb", "exercises": {"e": {
        "module": "m", "answer_cell": "a", "answer_var": "A", "kernel": "k", "test_shapes": [[1]],
        "bench_shape": [1], "metric": "tbps", "roofline": {"h100": 1.0},
        "correctness": {"grade_id": "c", "points": 1}, "throughput": {"grade_id": "t", "points": 1, "copy_fraction": 0.8},
        "path": {"grade_id": "p", "points": 2, "executed": [rule]}}}}
    assert spec.parse(base).exercises["e"].parts["path"].executed[0].holds(0.95)
    for bad, msg in [({"per": "read"}, "per = 'cta'"), ({"bytes": ["tma_load"]}, "no bytes"),
                     ({"at_most": 0.1}, "exactly one")]:
        d = json.loads(json.dumps(base))
        d["exercises"]["e"]["path"]["executed"][0].update(bad)
        with pytest.raises(spec.SpecError, match=msg):
            spec.parse(d)
