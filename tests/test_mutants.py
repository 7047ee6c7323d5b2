"""autograder.mutants on CPU: the day's operators find their sites by parsing (never in a comment or a string), keep
every line number, compile with NVRTC, and a mutant's outcome is classified from its runs as the issue says (a class
that differs between runs is never asked). The GPU outcomes themselves are `make gpu-test`'s ("understanding
checks")."""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder import mutants, mutants_child
from autograder.known import course_solution, kernel_source
from autograder.mutants import Operator, classify
from autograder.mutation import mask, mutate
from autograder.poisons import poison_prelude
from autograder.release import ROOT
from autograder.spec import SpecError, all_specs, parse

SPECS_WITH_MUTANTS = [s for s in all_specs() if any(ex.mutants for ex in s.exercises.values())]


def _ops(slug):
    return list(next(iter(next(s for s in all_specs() if s.slug == slug).exercises.values())).mutants)


# ------------------------------------------------------------------------------------------------ the operators
def _spec_with(mutant: dict) -> dict:
    import tomllib

    from autograder.spec import spec_path

    data = tomllib.loads(spec_path("tma").read_text())
    data["exercises"]["tma_add"]["mutants"] = [mutant]
    return data


@pytest.mark.parametrize("bad, says", [
    ({"id": "x", "change": "c", "teaches": "t", "call": "f", "define": "g", "to": "1"}, "exactly one of"),
    ({"id": "x", "change": "c", "teaches": "t", "call": "f", "arg": 1}, "needs 'to'"),
    ({"id": "x", "change": "c", "teaches": "t", "call": "f"}, "rewrites one of"),
    ({"id": "x", "change": "c", "teaches": "t", "pattern": "(", "to": "1"}, "not a regular expression"),
    ({"id": "x", "change": "c", "call": "f", "drop": True}, "missing 'teaches'"),
    ({"id": "x", "change": "c", "teaches": "t", "call": "f", "drop": True, "colour": "red"}, "unknown field"),
    ({"id": "x", "change": "c", "teaches": "t", "swap": ["a"]}, "swap names two calls"),
])
def test_a_bad_operator_is_refused_with_the_reason(bad, says):
    with pytest.raises(SpecError, match=says):
        parse(_spec_with(bad))


def test_every_day_with_operators_has_a_site_for_each_in_its_course_solution():
    assert SPECS_WITH_MUTANTS, "no spec declares mutation operators"
    for spec in SPECS_WITH_MUTANTS:
        src = course_solution(spec.slug)
        found = {m.op.id for m in mutate(spec.slug, src)}
        missing = [o.id for o in _ops(spec.slug) if o.id not in found]
        assert not missing, f"{spec.slug}: operators with no site in the course solution: {missing}"


@pytest.mark.parametrize("slug", [s.slug for s in SPECS_WITH_MUTANTS])
def test_every_mutant_keeps_the_line_numbers_and_changes_only_its_site(slug):
    src = course_solution(slug)
    lines = src.splitlines()
    for m in mutate(slug, src):
        new = m.source.splitlines()
        assert len(new) == len(lines), f"{m.key}: the line count changed"
        changed = [i + 1 for i, (a, b) in enumerate(zip(lines, new)) if a != b]
        assert changed and m.line in changed, (m.key, m.line, changed)
        assert m.before and m.after and m.before != m.after, m.key
        assert "//" not in m.before and "//" not in m.after, f"{m.key}: a comment in what a question shows"


@pytest.mark.slow
@pytest.mark.parametrize("slug", [s.slug for s in SPECS_WITH_MUTANTS])
def test_every_mutant_of_the_course_solution_compiles(slug):
    """A mutant that does not compile would be a question about nothing: NVRTC (no GPU) compiles every one."""
    from kernels.compile import compile_cuda

    ex = next(iter(next(s for s in all_specs() if s.slug == slug).exercises.values()))
    for m in mutate(slug, course_solution(slug)):
        compile_cuda(m.source, name=ex.answer_var)


# ------------------------------------------------------------------------------------------------ parsing
def test_a_call_in_a_comment_or_a_string_is_no_site():
    op = Operator("drop_fence", "the fence removed", "t", call="fence_proxy_async", drop=True)
    src = ('// fence_proxy_async(); in a comment\n/* fence_proxy_async();\n */ const char* s = "fence_proxy_async()";\n'
           "__device__ void fence_proxy_async() { }\nvoid f() {\n  fence_proxy_async();\n}\n")
    ms = mutate("tma", src, ops=[op])
    assert [(m.line, m.before, m.after) for m in ms] == [(6, "fence_proxy_async();", "(void)0;")]


def test_the_release_moves_after_the_wait_with_its_guard():
    op = Operator("early_release", "c", "t", call="mbar_arrive", move_after="mbar_wait", where="empty")
    src = ("for (int k = 0; k < n; ++k) {\n"
           "  mbar_wait(full[s], ph);\n"
           "  acc += x[k];\n"
           "  if (lane == 0) { mbar_arrive(empty[s]); }\n"
           "  mbar_arrive(other[s]);\n"
           "}\n")
    (m,) = mutate("x", src, ops=[op])
    lines = m.source.splitlines()
    assert len(lines) == len(src.splitlines()) and m.line == 4
    assert lines[1].strip() == "mbar_wait(full[s], ph); if (lane == 0) { mbar_arrive(empty[s]); }"
    assert lines[3].strip() == "" and "mbar_arrive(other[s]);" in lines[4]
    assert m.after.startswith("moved up to line 2, right after mbar_wait(full[s], ph)")


def test_a_swap_exchanges_the_template_arguments():
    op = Operator("regs_swapped", "c", "t", swap=("setmaxnreg_inc", "setmaxnreg_dec"))
    src = "if (w) { setmaxnreg_dec<40>(); } else { setmaxnreg_inc<232>(); }\n"
    (m,) = mutate("x", src, ops=[op])
    assert m.source == "if (w) { setmaxnreg_dec<232>(); } else { setmaxnreg_inc<40>(); }\n"


_NOISE = st.sampled_from(["", " ", "  ", "\t", "/* c */", "// mbar_wait(x, 0);\n", "\n"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_comments_and_spacing_do_not_change_what_is_mutated(data):
    """The same kernel with comments and blank space added between its statements (what students do) gives the
    same mutants: the same operators, the same code before and after each (lines shift with the added newlines)."""
    src = kernel_source("tma", "solution")
    noisy = re.sub(r";\n", lambda m: ";" + data.draw(_NOISE) + "\n", src)
    plain = [(m.key, m.before, m.after) for m in mutate("tma", src)]
    assert [(m.key, m.before, m.after) for m in mutate("tma", noisy)] == plain


@given(text=st.text(alphabet=st.sampled_from('ab/*"\\\n \'x;'), max_size=60))
def test_mask_keeps_the_length_and_every_newline(text):
    m = mask(text)
    assert len(m) == len(text)
    assert [i for i, c in enumerate(m) if c == "\n"] == [i for i, c in enumerate(text) if c == "\n"]


# ------------------------------------------------------------------------------------------------ outcomes
def _run(c, detail=""):
    return {"class": c, "detail": detail}


def _speed(lo, med, hi):
    return {"ratio": {"lo": lo, "median": med, "hi": hi, "says": f"{med:.3f}x"}, "outputs_ok": {"kernel": True,
                                                                                               "mutant": True}}


def test_outcomes_are_classified_from_every_run():
    assert classify([_run("hangs", "full[0] parity 0")] * 3, None)["outcome"] == "hangs"
    flaky = classify([_run("correct"), _run("wrong", "shape (64, 64)"), _run("correct")], None)
    assert flaky["outcome"] == "not reproducible" and "wrong" in flaky["detail"]
    slow = classify([_run("correct")] * 3, _speed(1.30, 1.41, 1.52))
    assert slow["outcome"] == "slower" and slow["slower_pct"] == pytest.approx(41) and "41 % slower" in slow["detail"]
    same = classify([_run("correct")] * 3, _speed(0.99, 1.0, 1.02))
    assert same["outcome"] == "no observable change" and "race the GPU did not show" in same["detail"]
    assert classify([_run("correct")] * 3, _speed(0.80, 0.85, 0.9))["outcome"] == "faster"
    bad = _speed(1.5, 1.6, 1.7)
    bad["outputs_ok"]["mutant"] = False
    assert classify([_run("correct")] * 3, bad)["outcome"] == "wrong"


def test_a_child_that_hung_for_good_is_killed_at_once_not_at_the_timeout():
    """A run that hangs for good emits its record, then cannot exit (the kernel still runs): the parent kills its
    process group within seconds of the record, not at the timeout; a child that never answers is killed at it."""
    body = ("import json, time; print('MUTANT ' + json.dumps({'event': 'run', 'class': 'hangs', 'fatal': True}), "
            "flush=True); time.sleep(60)")
    t0 = time.perf_counter()
    from autograder.spawn import _spawn

    r = _spawn([sys.executable, "-c", body], timeout_s=50, stop_on='"fatal": true')
    assert time.perf_counter() - t0 < 10 and not r["timed_out"]
    assert json.loads(r["text"].splitlines()[0][7:])["fatal"] is True
    r = _spawn([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=1)
    assert r["timed_out"]


def test_a_mutant_that_did_not_stay_correct_is_never_timed():
    """The timing build has no bounded waits: a mutant that hung in the debug build hangs there for good (before the
    fix every such mutant cost the parent's 60 s timeout). A stretch with any run not correct yields no speed record
    and never calls the timer; a correct stretch is timed once, after its runs."""
    def never():
        raise AssertionError("a mutant that hung was timed")

    hang = {"class": "hangs", "detail": "full[0] parity 0; ran out after 1.00 s"}  # bounded wait: not fatal
    recs = list(mutants_child._stretch(lambda r: hang, 0, 3, never))
    assert [r["event"] for r in recs] == ["run"] * 3 and [r["run"] for r in recs] == [0, 1, 2]
    flaky = iter([{"class": "correct"}, {"class": "wrong", "detail": "x"}, {"class": "correct"}])
    assert [r["event"] for r in mutants_child._stretch(lambda r: next(flaky), 0, 3, never)] == ["run"] * 3
    fatal = list(mutants_child._stretch(lambda r: {**hang, "fatal": True}, 1, 3, never))
    assert [r["run"] for r in fatal] == [1]  # the process ends after a fatal record
    timed = list(mutants_child._stretch(lambda r: {"class": "correct"}, 0, 3, lambda: {"ratio": 1.0}))
    assert [r["event"] for r in timed] == ["run", "run", "run", "speed"] and timed[-1]["ratio"] == 1.0


def test_after_a_stretch_that_went_wrong_the_next_child_is_not_asked_to_time(tmp_path, monkeypatch):
    """The parent's side: a mutant whose run hung for good is resumed in a new process at its next run, never asked
    to be timed; the mutants after it in the plan are measured in that next process."""
    from autograder import spawn

    fake = _plan_child(lambda src, r: "hangs" if "hangs" in src else "correct",
                       fatal_of=lambda src, r: "hangs" in src)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(spawn, "_spawn", fake)
    tag = time.time()
    res = mutants.outcomes("tma", None, [f"// ok {tag}", f"// hangs {tag}", f"// ok too {tag}"], "// base", runs=3,
                           rounds=8, device="TESTGPU")
    assert [r["outcome"] for r in res] == ["slower", "hangs", "slower"]
    assert [r["run"] for r in res[1]["runs"]] == [0, 1, 2] and res[1]["speed"] is None
    plans = [[(j["m"], j["first_run"], j["time"]) for j in p["mutants"]] for p in fake.calls]
    assert plans == [[(0, 0, True), (1, 0, True), (2, 0, True)], [(2, 0, True), (1, 1, False)], [(1, 2, False)]]
    assert all(r["gpu_s"] > 0 for r in res)  # each mutant's seconds, the process start on the first


def test_mutants_after_one_that_hung_for_good_are_measured_once_each(tmp_path, monkeypatch):
    """One process for the whole plan: five correct mutants and one that hangs for good in every run take three
    processes (the hanging one's three runs), and the correct ones are each measured once."""
    from autograder import spawn

    fake = _plan_child(lambda src, r: "hangs" if "hangs" in src else "correct",
                       fatal_of=lambda src, r: "hangs" in src)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(spawn, "_spawn", fake)
    tag = time.time()
    srcs = [f"// ok {i} {tag}" for i in range(5)]
    srcs.insert(2, f"// hangs {tag}")
    res = mutants.outcomes("tma", None, srcs, "// base", runs=3, rounds=8, device="TESTGPU")
    assert [r["outcome"] for r in res] == ["slower", "slower", "hangs", "slower", "slower", "slower"]
    assert len(fake.calls) == 3 and all(len(r["runs"]) == 3 for r in res)
    again = mutants.outcomes("tma", None, srcs, "// base", runs=3, rounds=8, device="TESTGPU")
    assert len(fake.calls) == 3 and all(r["cached"] for r in again)  # every outcome cached by its mutant


def test_a_child_silent_for_idle_s_is_killed_though_its_timeout_is_far():
    """_spawn(idle_s=...): a child whose records stop growing is killed idle_s after its last one (a kernel that hangs
    where the debug build does not bound it), well before the plan's whole timeout."""
    from autograder import spawn

    code = ("import time; from autograder.spawn import emit_record\n"
            "for i in range(4):\n    emit_record('MUTANT {}'); time.sleep(0.3)\ntime.sleep(60)")
    t0 = time.perf_counter()
    run = spawn._spawn([sys.executable, "-c", code], 50, private_records=True, idle_s=1.5)
    assert run["timed_out"] and run["private"].count("MUTANT") == 4 and time.perf_counter() - t0 < 15


# ------------------------------------------------------------------------------------------------ practice
def test_what_if_without_a_gpu_shows_the_recorded_outcomes_or_the_sites(tmp_path, monkeypatch, capsys):
    """No GPU: with no record, the sites the operators find in the student's own kernel (no outcome invented); with a
    record of the course solution's mutants, those outcomes, the device and date named, and the student's lines."""
    import autograder
    from autograder import practice

    src = kernel_source("tma", "solution")
    monkeypatch.setattr(practice, "ROOT", tmp_path)
    assert autograder.what_if("tma", "tma_add", src) == []
    out = capsys.readouterr().out
    assert "no GPU has recorded the outcomes for tma yet" in out
    assert out.count("\n  line ") == len(mutate("tma", src)) and "line 67: mbar_wait" in out
    rows = [{**m.to_dict(), "outcome": "hangs", "detail": f"waits on full[0] ({m.key})"} for m in mutate("tma", src)]
    (tmp_path / "kernels" / "tma").mkdir(parents=True)
    (tmp_path / "kernels" / "tma" / "mutants_h200.json").write_text(json.dumps(
        {"device": "NVIDIA H200", "date": "2026-11-28", "answers": {"solution": {"mutants": rows}}}))
    mine = src.replace("(k / STAGES) & 1", "(k / STAGES) % 2")
    assert autograder.what_if("tma", "tma_add", mine) == rows
    out = capsys.readouterr().out
    assert "measured on the NVIDIA H200 (2026-11-28)" in out and "what happens? hangs: waits on full[0]" in out
    assert autograder.what_if("tma", "tma_add", "   ") == [] and "write your kernel first" in capsys.readouterr().out


def test_argument_zero_and_each_declarator_of_a_declaration_are_sites():
    """`arg = 0` / `targ = 0` are operators like any other (0 is not "unset"), and `define` reaches each declarator of
    `constexpr int K_STAGES = 3, V_STAGES = 2;` (found by the helper writing attention's operators)."""
    from autograder.mutants import parse_operator

    op = parse_operator({"id": "w", "change": "c", "teaches": "t", "call": "wgmma_wait", "targ": 0, "to": "{} + 1"}, "x")
    (m,) = mutate("x", "wgmma_wait<0>();\n", ops=[op])
    assert m.source == "wgmma_wait<0 + 1>();\n"
    v = Operator("v1", "c", "t", define="^V_STAGES$", to="1")
    (m,) = mutate("x", "constexpr int K_STAGES = 3, V_STAGES = 2;  // rings\n", ops=[v])
    assert m.source == "constexpr int K_STAGES = 3, V_STAGES = 1;  // rings\n" and m.before.endswith("= 2;")


@pytest.mark.slow
def test_a_ptxas_advisory_reaches_the_check_as_a_flag():
    """A GEMM whose accumulator is read before the wgmma_wait that covers it compiles — ptxas injects the wait
    itself (C7517) and the GEMMs meant to overlap are serialized. The compile keeps ptxas's log (also on a cache
    hit), and the harness's verdict carries a ptxas-advisory flag; the course solution has none."""
    from autograder.harness import run_exercise
    from kernels.compile import advisories, compile_cuda

    src = kernel_source("gemm", "solution")
    (m,) = [m for m in mutate("gemm", src) if m.op.id == "wgmma_wait_count_raised"]
    for _ in range(2):  # compiled, then from the cache
        cubin = compile_cuda(m.source, name="GEMM_EPILOGUE_CU")
        assert [a[:5] for a in advisories(cubin)] == ["C7517"], cubin.log
    assert advisories(compile_cuda(src, name="GEMM_EPILOGUE_CU")) == []
    facts = run_exercise("gemm", "gemm_epilogue", m.source, seed=1, gpu=False)
    assert any(f.startswith("ptxas-advisory: C7517") for f in facts["flags"]), facts["flags"]
    assert not any("ptxas-advisory" in f for f in run_exercise("gemm", "gemm_epilogue", src, seed=1,
                                                                 gpu=False)["flags"])


def test_a_class_is_measured_on_every_lane_from_each_students_own_notebook(tmp_path, monkeypatch):
    """measure_class: each student's kernel of each day is read from their notebook as the grader reads it (a blank
    release and a malformed notebook have none), every job is measured once, the lanes share the jobs (each job's
    processes see only its lane's GPU), and one file per (student, day) is written whole."""
    import threading

    from autograder.cohort import build
    from autograder.plan import Lane

    grading = tmp_path / "grading"
    build(grading / "submitted", "week1", ["good", "blank", "malformed", "tma-wrong_expect_tx"])
    seen, lock = [], threading.Lock()

    def fake_measure(slug, src, exercise=None, **kw):
        time.sleep(0.05)
        with lock:
            seen.append((slug, kw["env"]["CUDA_VISIBLE_DEVICES"], mutants.hashlib.sha256(src.encode()).hexdigest()))
        return {"slug": slug, "mutants": [m.to_dict() for m in mutate(slug, src)], "gpu_s": 1.0}

    monkeypatch.setattr(mutants, "measure_answer", fake_measure)
    lanes = [Lane(str(i), {"CUDA_VISIBLE_DEVICES": str(4 + i)}, f"GPU {i}") for i in range(2)]
    res = mutants.measure_class(grading, "week1", ["good", "blank", "malformed", "tma-wrong-expect-tx"], lanes,
                                progress=None)
    days = [s.slug for s in SPECS_WITH_MUTANTS if s.assignment == "week1"]
    wants = {s: mutants.student_answers(grading / "submitted", s, "week1") for s in ("good", "tma-wrong-expect-tx")}
    assert sorted(wants["good"]) == sorted(days) and "tma" in wants["tma-wrong-expect-tx"]
    assert res["jobs"] == sum(map(len, wants.values())) == len(seen), (res, seen)
    assert {lane for _, lane, _ in seen} == {"4", "5"}
    out = grading / "understanding" / "week1" / "measured"
    assert sorted(str(p.relative_to(out)) for p in out.glob("*/*.json")) == \
        sorted(f"{s}/{d}.json" for s, ds in wants.items() for d in ds)
    good = json.loads((out / "good" / "tma.json").read_text())
    wrong = json.loads((out / "tma-wrong-expect-tx" / "tma.json").read_text())
    assert good["student"] == "good" and good["mutants"] and good["mutants"] != wrong["mutants"]


def test_the_class_commands_measure_on_the_lanes_then_write_sheets(tmp_path, monkeypatch, capsys):
    """`autograder understanding measure week1 --gpus 0,1` (the lanes; here the measurement of each kernel is a
    stand-in with the real mutants of the student's kernel) writes where `sheets` reads by default; `sheets` then
    writes a sheet per student, the Moodle XML and the key. `--gpus none` is refused: the keys are what a GPU does."""
    from autograder import cli
    from autograder.cohort import build

    grading = tmp_path / "grading"
    build(grading / "submitted", "week1", ["good", "tma-wrong_expect_tx"])
    monkeypatch.setenv("COURSE_GRADING_DIR", str(grading))
    monkeypatch.setenv("COURSE_FORCE_CPU", "1")
    outcomes = ["hangs", "wrong", "slower", "no observable change"]

    def fake_measure(slug, src, exercise=None, **kw):
        ms = [{**m.to_dict(), "outcome": outcomes[i % 4], "detail": "d", "slower_pct": 20.0,
               "interval_pct": [15.0, 25.0]} for i, m in enumerate(mutate(slug, src))]
        return {"slug": slug, "mutants": ms, "gpu_s": 2.0}

    monkeypatch.setattr(mutants, "measure_answer", fake_measure)
    assert cli.main(["understanding", "measure", "week1", "--gpus", "none"]) == 1
    assert "measured on a Hopper GPU" in capsys.readouterr().out
    assert cli.main(["understanding", "measure", "week1", "--gpus", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "GPU seconds per student and day: median 2, max 2" in out, out
    assert cli.main(["understanding", "sheets", "week1", "--seed", "7"]) == 0, capsys.readouterr().out
    u = grading / "understanding"
    sheets = sorted(p.name for p in (u / "sheets_week1").glob("*.html"))
    assert sheets == ["good.html", "tma-wrong-expect-tx.html"], sheets
    assert (u / "moodle_week1.xml").exists() and (u / "key_week1.csv").exists()


def test_the_gpu_steps_answers_each_have_mutants():
    """make gpu-test's understanding-checks step measures, per day, the course solution, a known slow answer and the
    answer a coding assistant wrote from the release (kept verbatim): each has sites for the day's operators (a slow
    answer that never uses the mechanism would measure nothing)."""
    sys.path.insert(0, str(mutants.ROOT / "tools"))
    import gpu_mutants

    for spec in SPECS_WITH_MUTANTS:
        for ans in ("solution", "slow", "assistant"):
            name, src = gpu_mutants._mutant_answer(spec.slug, ans)
            assert mutate(spec.slug, src), f"{spec.slug} {name}: no mutant"


def test_a_kernel_with_no_barrier_wait_is_launched_without_a_trace(monkeypatch):
    """Week 1's days 1-4 have no mbarrier wait: their debug build holds no trace. Measured on an H200 (2026-11-28)
    before the fix, every mutant of those days 'crashed' on the course's own KeyError (no __device__ variable
    'course_barrier_trace'): launch_shape must neither reset nor read a trace there."""
    from autograder import hangs
    from kernels import runner

    class Rep:
        ok = True
        message = ""

    class WL:
        make_inputs = staticmethod(lambda shape, seed, device: {"x": shape})
        reference = staticmethod(lambda inputs: None)

    def no_trace(*a, **k):
        raise KeyError("no __device__ variable 'course_barrier_trace'")

    monkeypatch.setattr(hangs, "reset_trace", no_trace)
    monkeypatch.setattr(hangs, "read_trace", no_trace)
    monkeypatch.setattr(runner, "checked_launch", lambda *a, **k: (None, Rep()))
    ex = type("Ex", (), {"kernel": "k"})()
    assert hangs.launch_shape(ex, WL(), object(), (8, 8), 1, 5.0, {}, 1.0)["status"] == "ok"
    with pytest.raises(KeyError):  # a build that was instrumented still needs its trace
        hangs.launch_shape(ex, WL(), object(), (8, 8), 1, 5.0, {0: "full"}, 1.0)
    monkeypatch.setattr(hangs, "reset_trace", lambda *a, **k: None)

    def fault(*a, **k):
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(runner, "checked_launch", fault)  # a fault: the trace is not read from the dead context
    rec = hangs.launch_shape(ex, WL(), object(), (8, 8), 1, 5.0, {0: "full"}, 1.0)
    assert rec["status"] == "error" and "launch failure" in rec["check"] and rec["trace"] is None


@given(st.sampled_from(["autograder/hangs.py", "kernels/launch.py", "kernels/runner.py"]),
       st.sampled_from(["KeyError: \"no __device__ variable 'x' (CUDA_ERROR_NOT_FOUND: 500)\"",
                        "ValueError: trace is 8 bytes", "AttributeError: 'NoneType'"]),
       st.sampled_from(["RuntimeError: CUDA_ERROR_ILLEGAL_ADDRESS", "RuntimeError: unspecified launch failure",
                        "RuntimeError: CUDA_ERROR_MISALIGNED_ADDRESS", "Segmentation fault (core dumped)",
                        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"]))
def test_the_courses_own_failure_is_not_measured_while_a_kernel_fault_crashes(where, ours, fault):
    from autograder.mutants import _course_failed

    head = f'Traceback (most recent call last):\n  File "/x/course/{where}", line 9, in f\n    y()\n'
    assert _course_failed(head + ours)
    assert not _course_failed(head + fault)
    assert not _course_failed(fault)


def test_the_recorded_outcome_tables_cover_every_exercise_and_stay_with_the_instructors():
    """kernels/<slug>/mutants_<gpu>.json (make gpu-test's understanding checks): for every exercise, the course
    solution, the known slow answer and the assistant's answer (and the topic's attacks on the checks, none of whose
    mutants is asked), every mutant the operators find today measured over 3 runs or more, none of them a failure of the course's own measuring; the files hold answer lines, so the student
    release leaves them out."""
    from autograder.release import INSTRUCTOR_ONLY
    from autograder.spec import all_specs

    sys.path.insert(0, str(ROOT / "tools"))
    from gpu_mutants import ATTACK_ANSWERS, SLOW_ANSWER, _mutant_answer

    from autograder.understanding import askable

    for s in all_specs():
        files = sorted((ROOT / "kernels" / s.slug).glob("mutants_*.json"))
        assert files, s.slug
        for f in files:
            assert f"kernels/{s.slug}/{f.name}" in INSTRUCTOR_ONLY
            doc = json.loads(f.read_text())
            assert doc["runs"] >= 3 and not doc.get("not_measured")
            attacks = ATTACK_ANSWERS.get(s.slug, {})
            assert set(doc["answers"]) == {"solution", SLOW_ANSWER[s.slug], "assistant", *attacks}
            for name, path in attacks.items():  # an attack on the checks: measured, and no key its author chose
                got = doc["answers"][name]["mutants"]
                assert [m["key"] for m in got] == [m.key for m in mutate(s.slug, (ROOT / path).read_text())]
                asked = [m["outcome"] for m in got if askable(m["outcome"])]
                # only what the GPU showed going wrong (the decoy that runs: its misaligned vector load faults);
                # the decoy that never runs, nothing
                assert got and set(asked) <= ({"crashes", "wrong", "hangs"} if name != "decoy" else set()), (name, asked)
            for ans in ("solution", "slow", "assistant"):
                name, src = _mutant_answer(s.slug, ans)
                got = doc["answers"][name]["mutants"]
                assert [m["key"] for m in got] == [m.key for m in mutate(s.slug, src)], (s.slug, name)
                for m in got:
                    assert m["outcome"] in mutants.OUTCOMES and m["outcome"] != "not measured", (s.slug, name, m)
                    assert len(m["runs"]) >= 3 or m["outcome"] == "does not compile", (s.slug, name, m["key"])
                    for r in m["runs"]:  # no run is a failure of the course's own code (a GPU fault is the kernel's)
                        assert not mutants._course_failed(r.get("detail") or ""), (s.slug, name, m["key"], r)


def _plan_child(cls_of, fatal_of=lambda m, r: False, extra_stdout: str = ""):
    """A fake measuring child that speaks the plan protocol (mutants_child._child_plan): for each planned mutant a begin
    record, its runs from first_run (class cls_of(source, run)), a speed record where asked, a probe record (the trap
    fired) where the mutant has probes and stayed correct, a done record, then a poison record (its effect reaches the
    output) where it has poisons and stayed correct; a fatal run ends the process. `extra_stdout`: what the kernels printf (stdout, never the private channel)."""
    calls = []

    def spawn(cmd, timeout_s, *, env=None, stop_on=None, private_records=False, idle_s=None):
        plan = json.loads(Path(cmd[cmd.index("--plan") + 1]).read_text())
        calls.append(plan)
        t, out = time.time(), ['MUTANT {"event": "device", "device": "TESTGPU"}']
        for job in plan["mutants"]:
            src = Path(job["file"]).read_text()
            out.append("MUTANT " + json.dumps({"event": "begin", "m": job["m"], "t": t}))
            ok = True
            for r in range(job["first_run"], plan["runs"]):
                t += 1.0
                c = cls_of(src, r)
                ok = ok and c == "correct"
                rec = {"event": "run", "m": job["m"], "run": r, "class": c, "detail": f"shape (1,): {c}", "t": t}
                if fatal_of(src, r):
                    rec["fatal"] = True
                out.append("MUTANT " + json.dumps(rec))
                if rec.get("fatal"):
                    text = "\n".join(out) + "\n"
                    return {"rc": 3, "timed_out": False, "wall_s": 0.5, "text": text + extra_stdout, "records": [],
                            "private": text}
            if ok and job["time"] and plan["rounds"]:
                t += 1.0
                out.append("MUTANT " + json.dumps({"event": "speed", "m": job["m"], "t": t,
                                                   "outputs_ok": {"kernel": True, "mutant": True},
                                                   "ratio": {"lo": 1.2, "median": 1.3, "hi": 1.4, "says": "1.3x"}}))
            if ok and job.get("probes"):  # every changed line of these fakes runs: the trap fires
                out.append("MUTANT " + json.dumps({"event": "probe", "m": job["m"], "t": t, "ran": True,
                                                   "detail": "the trap fired"}))
            out.append("MUTANT " + json.dumps({"event": "done", "m": job["m"], "t": t}))
            if ok and job.get("poisons"):
                out.append("MUTANT " + json.dumps({"event": "poison", "m": job["m"], "t": t, "reaches": True,
                                                   "detail": "poisoned, the output went wrong"}))
        text = "\n".join(out) + "\n"
        return {"rc": 0, "timed_out": False, "wall_s": 0.5, "text": text + extra_stdout, "records": [], "private": text}

    spawn.calls = calls
    return spawn


def _forging_spawn(real_class: str):
    """A measuring child whose mutant kernel printf's forged records on stdout (the kernel's only output) while the
    child reports the truth on its private channel (what _spawn(private_records=True) reads)."""
    forged = "".join(f'MUTANT {{"event": "run", "m": 0, "run": {r}, "class": "hangs", "detail": "forged by printf"}}\n'
                     for r in range(3))
    return _plan_child(lambda src, r: real_class, extra_stdout=forged)


def test_a_kernel_that_printfs_mutant_records_does_not_choose_its_own_keys(tmp_path, monkeypatch):
    """A student's kernel is the mutant's kernel: a printf of lines like the child's records (on every launch) must
    not decide the outcome — the key of that student's own understanding question."""
    from autograder import spawn

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(spawn, "_spawn", _forging_spawn("wrong"))
    res = mutants.outcome("tma", None, f"// forged {time.time()}", "// base", runs=3, rounds=0, device="TESTGPU")
    assert res["outcome"] == "wrong" and "forged" not in json.dumps(res)


def test_the_private_channel_carries_only_what_the_child_writes_there():
    """spawn._spawn(private_records=True), a real child: what it prints on stdout (where a kernel's printf lands)
    never reaches "private"; its records written with emit_record do; `stop_on` is looked for on the private channel
    (a forged '"fatal": true' on stdout does not get the child killed)."""
    from autograder import spawn

    code = ("import sys, time; from autograder.spawn import emit_record; "
            "print('MUTANT {\\\"event\\\": \\\"run\\\", \\\"fatal\\\": true}', flush=True); time.sleep(3); "
            "emit_record('MUTANT {\\\"event\\\": \\\"device\\\"}')")
    run = spawn._spawn([sys.executable, "-c", code], 30, stop_on='"fatal": true', private_records=True)
    assert run["rc"] == 0 and not run["timed_out"], run
    assert run["private"] == 'MUTANT {"event": "device"}\n' and '"fatal": true' in run["text"]


def _build_sensing_spawn():
    """A measuring child faked on CPU: a source that tests the debug build's macro (COURSE_DEBUG_BARRIERS, named in
    the course's public headers) traps in every run of that build; any other source runs correct."""
    return _plan_child(lambda src, r: "crashes" if "COURSE_DEBUG_BARRIERS" in src else "correct")


def test_a_kernel_that_senses_the_measuring_build_gets_no_question(tmp_path, monkeypatch):
    """The measuring build is the instrument, not the student's kernel: a kernel that behaves otherwise there (here
    `#ifdef COURSE_DEBUG_BARRIERS asm("trap;")`) gets no outcome for any mutant (never asked), and says why."""
    from autograder import spawn

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(spawn, "_spawn", _build_sensing_spawn())
    src = course_solution("tma") + '\n#ifdef COURSE_DEBUG_BARRIERS\n// asm("trap;") in every kernel\n#endif\n'
    got = mutants.measure_answer("tma", src, runs=3, rounds=0, progress=None, device="TESTGPU")
    assert got["mutants"] and all(m["outcome"] == "not measured" for m in got["mutants"])
    assert all("measuring build" in m["detail"] for m in got["mutants"])
    plain = mutants.measure_answer("tma", course_solution("tma"), runs=3, rounds=0, progress=None, device="TESTGPU")
    assert all(m["outcome"] == "no observable change" for m in plain["mutants"])  # the fake's plain kernel is right


class _Exit(Exception):
    pass


def test_the_real_child_and_parent_agree_on_the_plan_protocol(tmp_path, monkeypatch):
    """mutants_child._child (the real child, run in this process with the GPU faked: builds, runs and timing stubbed) fed to
    the real parent: every planned mutant gets its runs and, when correct, its speed; a fatal run ends its fork and the
    next fork goes on from the run after it, in the same process (one process for the whole plan); a fork silent for
    the timeout is a hang; a fault raised as an exception is that mutant's crash; the course's own failure is "not
    measured" for that mutant alone; a poison after the one that decides is never compiled."""
    import torch

    from autograder import hangs_trace
    from kernels import device

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(device, "gpu", lambda: {"name": "TESTGPU"})

    def run_once(ex, wl, cubin, names, seed, bound, **kw):
        if "fault" in cubin:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if "ours" in cubin:
            mutants.classify([{"no class": 1}], None)  # a KeyError raised in the course's own code
        if "hangs" in cubin:
            return {"class": "hangs", "detail": "full[0] parity 0", "fatal": True}
        if "silent" in cubin:
            time.sleep(30)  # a wait the debug build does not bound: no record, ever
        return {"class": "wrong" if "wrong" in cubin else "correct", "detail": ""}

    monkeypatch.setattr(mutants_child, "_run_once", run_once)
    monkeypatch.setattr(mutants_child, "_speed", lambda ex, wl, base, src, rounds, seed: {
        "ratio": {"lo": 0.99, "median": 1.0, "hi": 1.01, "says": "1.000x"},
        "outputs_ok": {"kernel": True, "mutant": True}})
    monkeypatch.setattr(mutants_child, "_end", lambda rc: (_ for _ in ()).throw(_Exit(rc)))
    monkeypatch.setattr(mutants_child, "_same_code", lambda ex, base, src: False)  # the fake sources are comments alone
    calls = _in_process_child(monkeypatch, "tma")
    tag = time.time()
    names = ["ok", "hangs", "wrong", "fault", "ours", "ok2", "ok3", "silent", "ok4"]
    # ok's poisons: one faults (says nothing), the next goes wrong (its effect reaches the output), the third is never
    # compiled; ok2's leaves the output right (it does not); ok3's does not compile (nothing decided); ok4's hangs
    # without a word (reaches it)
    poisons = [(("value", f"// fault poison {tag}"), ("self", f"// wrong poison {tag}"), ("use", "// nocompile 2")),
               (), (), (), (), (("self", f"// right poison {tag}"), ("use", f"// wrong poison {tag}")),
               (("value", "// nocompile"),), (), (("self", f"// silent poison {tag}"),)]
    compiled = tmp_path / "compiled.txt"

    def debug_cubin(src, var):
        with compiled.open("a") as f:
            f.write(src + "\n")
        if "nocompile" in src:
            raise mutants_child.CompileError("no")
        return src, {1: "full[0]"}
    monkeypatch.setattr(hangs_trace, "debug_cubin", debug_cubin)
    res = mutants.outcomes("tma", None, [f"// {n} {tag}" for n in names], "// base", runs=3, rounds=8,
                           device="TESTGPU", poisons=poisons, timeout_s=1)
    got = dict(zip(names, (r["outcome"] for r in res)))
    assert got == {"ok": "no observable change", "hangs": "hangs", "wrong": "wrong", "fault": "crashes",
                   "ours": "not measured", "ok2": "does not reach the output", "ok3": "not probed",
                   "silent": "hangs", "ok4": "no observable change"}, got
    assert [t["class"] for t in res[5]["tries"]] == ["correct"] and "reaches the output" in res[0]["detail"]
    assert "nocompile 2" not in compiled.read_text() and "hung" in res[8]["detail"]
    assert res[0]["speed"] and res[1]["speed"] is None and len(res[1]["runs"]) == 3
    assert [r["class"] for r in res[3]["runs"]] == ["crashes"] * 3 and "illegal memory access" in res[3]["detail"]
    assert [r["class"] for r in res[7]["runs"]] == ["hangs"] * 3 and "no answer in 1 s" in res[7]["detail"]
    assert len(calls) == 1, calls  # the forks ended; the measuring process went on


def test_a_kernel_that_remembers_across_mutants_does_not_choose_its_keys(tmp_path, monkeypatch):
    """A hostile kernel writes a marker past the end of a buffer (slack of the caching allocator's block: no fault,
    never overwritten by fresh inputs) on its first launch, and on every later launch that finds it takes a correct
    fallback path the mutation operators never touch. Modelled here by state that lives as long as the measuring
    process (what GPU memory does) and is gone in a new one (a new CUDA context is handed zeroed memory). The
    unmutated kernel passes the instrument check (correct either way); if every mutant after the first in a process
    then runs correct, their keys ("no observable change") are the author's choice, not what the lines do. Such a
    mutant must never be asked: its first launch in a fresh process did what the mutation does."""
    import torch

    from autograder import hangs_trace
    from kernels import device

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(device, "gpu", lambda: {"name": "TESTGPU"})
    monkeypatch.setattr(hangs_trace, "debug_cubin", lambda src, var: (src, {}))
    gpu_memory: dict = {}  # lives as long as one measuring process

    def run_once(ex, wl, cubin, names, seed, bound):
        if gpu_memory.get("marker"):
            return {"class": "correct", "detail": ""}  # the fallback: plain loads, right whatever was mutated
        gpu_memory["marker"] = True
        return {"class": "wrong" if "MUTATED" in cubin else "correct", "detail": "shape (64, 64): WRONG"}

    monkeypatch.setattr(mutants_child, "_run_once", run_once)
    monkeypatch.setattr(mutants_child, "_speed", lambda ex, wl, base, src, rounds, seed: {
        "ratio": {"lo": 0.99, "median": 1.0, "hi": 1.01, "says": "1.000x"},
        "outputs_ok": {"kernel": True, "mutant": True}})

    monkeypatch.setattr(mutants_child, "_same_code", lambda ex, base, src: False)  # the fake sources are comments alone

    _in_process_child(monkeypatch, "tma", on_spawn=gpu_memory.clear)  # a new process: a new CUDA context
    tag = time.time()
    res = mutants.outcomes("tma", None, [f"// MUTATED {i} {tag}" for i in range(5)], "// base", runs=3, rounds=8,
                           device="TESTGPU")
    from autograder.understanding import askable

    assert not [r["outcome"] for r in res if askable(r["outcome"])], [r["outcome"] for r in res]


DECOY = (ROOT / "kernels" / "naive_loads" / "grading" / "decoy.cu").read_text()
DECOY_RUNS = (ROOT / "kernels" / "naive_loads" / "grading" / "decoy_runs.cu").read_text()
DECOY_SENSES = (ROOT / "kernels" / "naive_loads" / "grading" / "decoy_senses.cu").read_text()
DECOY_NAMES = (ROOT / "kernels" / "naive_loads" / "grading" / "decoy_names.cu").read_text()


def _decoy_gpu(base: str, opens: str = "if (n < 0) {", runs: bool = False, senses: bool = False):
    """A fake GPU for DECOY: the code between `opens` and `// end decoy` has no effect on the output. A mutant whose
    edit lies there behaves as the kernel does (correct); one whose edit is elsewhere goes wrong; a trap the course
    placed (a call of course_probe_trap after the helper's definition) kills the launch where it lies in code that
    runs — outside the decoy, or inside it where the decoy `runs` (its stores overwritten after). A kernel that
    `senses` the checks' launches (decoy_senses.cu) goes wrong where its module's first launch is at the bench shape
    (after a trap has had its chance to fire)."""

    def dead(src: str, pos: int) -> bool:
        return src.index(opens) < pos < src.index("// end decoy")

    def run_once(ex, wl, cubin, names, seed, bound, **kw):
        src = cubin
        if "course_probe_trap" in src:
            pos = src.find("course_probe_trap()", src.index("row_bias"))
            if pos >= 0 and (runs or not dead(src, pos)):
                return {"class": "crashes", "detail": "shape (64, 64): unspecified launch failure", "fatal": True}
        if senses and kw.get("shapes") and list(kw["shapes"][0]) == list(ex.bench_shape):
            return {"class": "wrong", "detail": f"shape {tuple(ex.bench_shape)}: 1 element wrong"}
        if "course_probe_trap" in src:
            return {"class": "correct", "detail": ""}
        src = src.replace(poison_prelude(base)[0], "")  # a poison: one value poisoned or a statement left out
        if src == base:
            return {"class": "correct", "detail": ""}
        pos = next(i for i, (a, b) in enumerate(zip(src, base)) if a != b)
        return {"class": "correct", "detail": ""} if dead(src, pos) else {"class": "wrong", "detail": "WRONG"}

    return run_once


def _in_process_child(monkeypatch, slug: str, on_spawn=None) -> list:
    """spawn._spawn replaced by the real measuring child (mutants_child._child) run in this process, the GPU faked
    (each mutant still in a forked process of its own); on_spawn() at each spawn. The spawned commands, in order."""
    import types

    from autograder import spawn

    calls = []

    def in_process(cmd, timeout_s, *, env=None, stop_on=None, private_records=False, idle_s=None):
        calls.append(cmd)
        if on_spawn is not None:
            on_spawn()
        got = []
        monkeypatch.setattr(mutants_child, "_emit", lambda rec: got.append("MUTANT " + json.dumps(rec, default=str)))
        rc = 0
        try:
            mutants_child._child(types.SimpleNamespace(plan=cmd[cmd.index("--plan") + 1], slug=slug, exercise=None))
        except _Exit as e:
            rc = e.args[0]
        text = "\n".join(got) + "\n"
        return {"rc": rc, "timed_out": False, "wall_s": 0.01, "text": text, "records": [], "private": text}

    monkeypatch.setattr(spawn, "_spawn", in_process)
    return calls


def test_a_decoy_copy_that_never_runs_does_not_choose_its_keys(tmp_path, monkeypatch):
    """A hostile answer keeps a decoy copy of the day's code, written the way the operators look for it, in a branch
    that never runs, and its real code in a form no operator matches. Every mutant then lands in the decoy and changes
    nothing; asked, each would have the key "no observable change", which the author chose. A mutant whose changed
    line did not run in the measured launches must never be asked."""
    import torch

    from autograder import hangs_trace
    from autograder.understanding import askable
    from kernels import device

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(device, "gpu", lambda: {"name": "TESTGPU"})
    monkeypatch.setattr(hangs_trace, "debug_cubin", lambda src, var: (src, {}))
    src = DECOY.replace("decoy copy", f"decoy copy {time.time()}")
    monkeypatch.setattr(mutants_child, "_run_once", _decoy_gpu(src))
    monkeypatch.setattr(mutants_child, "_speed", lambda ex, wl, base, s, rounds, seed: {
        "ratio": {"lo": 0.99, "median": 1.0, "hi": 1.01, "says": "1.000x"},
        "outputs_ok": {"kernel": True, "mutant": True}})
    _in_process_child(monkeypatch, "naive_loads")
    res = mutants.measure_answer("naive_loads", src, runs=3, rounds=8, device="TESTGPU", progress=None)
    assert len(res["mutants"]) >= 4  # the decoy holds the sites of the day's operators
    in_decoy = [m for m in res["mutants"] if askable(m["outcome"])]
    assert not in_decoy, [(m["key"], m["outcome"]) for m in in_decoy]


# ------------------------------------------------------------------------------------------------ probes, contexts
def _stmt(draw, depth: int) -> str:
    """A statement that holds MARK somewhere, in the shapes people write: plain, in a condition, in an unbraced or a
    braced body of if / else / for / while."""
    if depth == 0:
        return draw(st.sampled_from(["y[i] = f(MARK);", "f(MARK);", "int v = g(1, MARK) + 2;"]))
    inner = _stmt(draw, depth - 1)
    return draw(st.sampled_from([
        "if (c) {inner}", "if (c) {{ a(); {inner} }}", "for (int k = 0; k < n; ++k) {inner}",
        "while (c) {inner}", "if (c) a(); else {inner}", "if (c) {{ a(); }} else {inner}",
        "do {inner} while (c);", "for (int k = 0; k < n; ++k) {{ a(); {inner} b(); }}",
        "\n#pragma unroll\n    for (int k = 0; k < 4; ++k) {inner}", "{{\n#pragma unroll 2\n for (;;) {inner} }}"])
                ).format(inner=inner)


@st.composite
def _nested(draw):
    return "void k() { a(); " + _stmt(draw, draw(st.integers(0, 4))) + " b(); }"


@given(_nested())
@settings(max_examples=200, deadline=None)
def test_the_probe_is_placed_where_the_changed_statement_starts(code):
    """statement_start: the start of the innermost statement holding the change — inside every unbraced body it lies
    in (a trap before the `if` would fire whether or not its body runs), never inside brackets."""
    from autograder.mutation import mask, statement_start

    i = code.index("MARK")
    s = statement_start(mask(code), i)
    inner = next(p for p in ("y[i] = f(MARK);", "int v = g(1, MARK) + 2;", "f(MARK);") if p in code)
    assert s == code.index(inner), (code, code[s:])


@st.composite
def _statement_list(draw):
    """Statements of a body, each of the nested shapes, with its text: (code, [statement text ...])."""
    parts = [_stmt(draw, draw(st.integers(0, 3))).replace("MARK", f"m{i}") for i in range(draw(st.integers(1, 4)))]
    return "void k() { " + " ".join(parts) + " }", parts


@given(_statement_list())
@settings(max_examples=200, deadline=None)
def test_a_poison_leaves_out_exactly_the_statement_it_names(case):
    """statement_end: from each statement's start, one past its last character — a control statement with its whole
    body (an if with its else, a do-while with its condition), a braced block, a plain statement to its `;` —
    so a poison that leaves a statement out leaves out that statement and nothing else."""
    from autograder.mutation import mask
    from autograder.poisons import statement_end

    code, parts = case
    at = len("void k() { ")
    for part in parts:
        start = at + len(part) - len(part.lstrip())
        assert code[start:statement_end(mask(code), at)].strip() == part.strip(), (code, part)
        at += len(part) + 1


def test_every_poison_of_every_course_solution_is_the_kernel_with_one_place_changed():
    """Each mutant of each day's course solution has poisons (kinds in order: value, self, near, use), each the
    unmutated kernel with one value wrapped (the poison helpers prepended) or one statement left out (nothing else) —
    never the mutant; and at least one of them compiles (what the GPU then measures)."""
    from autograder.poisons import poisons_of
    from kernels.compile import CompileError, compile_cuda

    kinds, compiled = ["value", "self", "near", "use"], 0
    for spec in SPECS_WITH_MUTANTS:
        src, var = course_solution(spec.slug), next(iter(spec.exercises.values())).answer_var
        for m in mutate(spec.slug, src):
            poisons = poisons_of(m, src)
            assert poisons, (spec.slug, m.key)
            order = [kinds.index(k) for k, _ in poisons]
            assert order == sorted(order), (spec.slug, m.key, order)
            prelude, name = poison_prelude(src)
            for k, p in poisons:  # the helper only where a value is poisoned: nothing else a kernel could sense
                assert p.startswith(prelude) == (k == "value") and p != src and p != m.source
                body = p[len(prelude):] if k == "value" else p
                assert (name in body) == (k == "value") and len(body) >= len(src) - 1
                assert body.count("\n") == src.count("\n")  # every line where it was: __LINE__ as in the kernel
            if m.key in {"tail_guard_dropped#1", "proxy_fence_removed#1", "release_before_read#1"}:
                ok = []
                for _, p in poisons:
                    try:
                        ok.append(bool(compile_cuda(p, name=var)))
                    except CompileError:
                        ok.append(False)
                assert any(ok), (spec.slug, m.key)
                compiled += 1
    assert compiled >= 3  # the sites named are in the course solutions (naive_loads, tma, warp_specialization)


def test_a_kernel_cannot_tell_a_poison_from_itself_at_compile_time():
    """decoy_names.cu looks, at compile time, for what a "value" poison adds to the kernel: the helper (by name, a
    call that compiles only where it is declared) and the lines (its own __LINE__). Compiled by NVRTC here with that
    test made a static_assert: the kernel itself compiles, and so must every poison of its mutants that compiles at
    all for another reason than the assertion — a poison the kernel could sense would make any decoy line seem to
    reach the output."""
    from autograder.poisons import poisons_of
    from kernels.compile import CompileError, compile_cuda

    src = DECOY_NAMES.replace('extern "C" __global__', 'static_assert(!kSensed, "sensed");\nextern "C" __global__', 1)
    compile_cuda(src, name="KERNEL_SRC")
    values = 0
    for m in mutate("naive_loads", src):
        for k, p in poisons_of(m, src):
            values += k == "value"
            try:
                compile_cuda(p, name="KERNEL_SRC")
            except CompileError as exc:
                assert "sensed" not in str(exc), (m.key, k)
    assert values >= 2  # the decoy's load width and lane stride are values


def test_a_probe_goes_before_a_pragma_that_belongs_to_its_statement():
    """A statement that a `#pragma unroll` (or an nbgrader marker line) precedes: the trap goes at the end of the line
    before, never onto the preprocessor line (it would not compile) nor between the pragma and its loop."""
    from autograder.mutation import mask, statement_start

    code = "void k() { a();\n#pragma unroll\n    for (int k = 0; k < f(MARK); ++k) b(); }"
    assert statement_start(mask(code), code.index("MARK")) == code.index(";") + 1


def test_every_probe_of_every_course_solution_places_one_trap_on_its_changed_line():
    """Each non-constant mutant of each day's course solution has probes; each is the mutant with the trap helper
    prepended and one trap call placed at or before its changed text, on the changed line or the statement start
    before it; a constant's mutant has none."""
    from autograder.mutation import PROBE_PRELUDE

    for spec in SPECS_WITH_MUTANTS:
        for m in mutate(spec.slug, course_solution(spec.slug)):
            if m.op.define or re.search(r"#\s*define|constexpr", m.before):
                assert m.probes == (), m.key
                continue
            assert m.probes, (spec.slug, m.key)
            for p in m.probes:
                assert p.startswith(PROBE_PRELUDE) and p.count("course_probe_trap()") == 2, (spec.slug, m.key)
                body = p[len(PROBE_PRELUDE):]
                line = body[:body.index("course_probe_trap()")].count("\n") + 1
                assert line <= m.line + 1 and body.replace("course_probe_trap(); ", "").replace(
                    "(course_probe_trap(), ", "(") .count("\n") == m.source.count("\n"), (spec.slug, m.key, line)


def test_a_probe_that_compiles_traps_exactly_at_its_line():
    """NVRTC compiles the probes of a day's mutants (one of each mutant's places, at least), and a trap that is placed
    is in the SASS (BPT.TRAP); the mutant itself has none."""
    from kernels.compile import CompileError, compile_cuda
    from kernels.sass import disassemble

    def traps(cubin):
        return sum("TRAP" in i.opcode for instrs in disassemble(cubin).values() for i in instrs)

    for m in mutate("tma", course_solution("tma"))[:3]:
        built = []
        for p in m.probes:
            try:
                built.append(compile_cuda(p, name="probe.cu"))
            except CompileError:
                continue
        assert built, m.key
        assert traps(built[0]) > traps(compile_cuda(m.source, name="probe.cu")), m.key


def test_a_change_the_compiler_removes_is_the_same_code():
    """_same_code compares the plain builds' cubins: a change in a comment or in code the compiler drops is the same
    code; a change that reaches the kernel is not."""
    ex = next(iter(next(s for s in all_specs() if s.slug == "naive_loads").exercises.values()))
    base = course_solution("naive_loads")
    assert mutants_child._same_code(ex, base, base + "\n// a comment\n")
    assert mutants_child._same_code(ex, base, base.replace("{", "{ if (false) { int unused_ = 3; (void)unused_; }", 1))
    assert not mutants_child._same_code(ex, base, mutate("naive_loads", base)[0].source)


def test_each_mutant_runs_in_a_process_of_its_own_and_its_records_come_back(monkeypatch):
    """_fresh_context forks: what the measuring process changes stays there (a new CUDA context there, nothing of the
    last one's); its records come back in order; a fatal record kills it (its kernel may never end), and so does
    silence past idle_s; one that dies without its done record, or raises, is not done."""
    got = []
    monkeypatch.setattr(mutants_child, "_emit", got.append)
    state = {"marker": False}

    def measure(recs, fatal=False, die=False, raise_=False, silent=False):
        def f():
            state["marker"] = True
            for r in recs:
                mutants_child._send(r)
            if fatal:
                mutants_child._send({"event": "run", "m": 0, "fatal": True})
                time.sleep(60)  # a hang for good: killed
            if silent:
                time.sleep(60)  # a wait nothing bounds: no record, ever
            if die:
                os.kill(os.getpid(), signal.SIGKILL)
            if raise_:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            mutants_child._send({"event": "done", "m": 0})
        return f

    import os
    import signal

    assert mutants_child._fresh_context(measure([{"event": "run", "m": 0, "run": 0}])) == "done"
    assert not state["marker"] and [r["event"] for r in got] == ["run", "done"]
    t0 = time.time()
    assert mutants_child._fresh_context(measure([], fatal=True)) == "fatal" and time.time() - t0 < 30
    t0 = time.time()
    assert mutants_child._fresh_context(measure([], silent=True), idle_s=0.5) == "silent" and time.time() - t0 < 30
    assert mutants_child._fresh_context(measure([], die=True)) == "died"
    got.clear()
    assert mutants_child._fresh_context(measure([], raise_=True)) == "died"
    assert got[0]["event"] == "failed" and not got[0]["course"] and "illegal memory" in got[0]["detail"]


@pytest.mark.parametrize("state, want", [
    ({"same": True, "probed": True, "probe": {"ran": True, "detail": ""}}, "not in the kernel"),
    ({"probed": True, "probe": {"ran": False, "detail": "never fired"}}, "did not run"),
    ({"probed": True, "probe": {"ran": None, "detail": "none compiled"}}, "not probed"),
    ({"probed": True, "probe": None}, "not probed"),
    ({"probed": True, "probe": {"ran": True, "detail": ""}, "poison": {"reaches": True, "detail": ""}},
     "no observable change"),
    ({"probed": True, "probe": {"ran": True, "detail": ""}, "poison": {"reaches": False, "detail": ""}},
     "does not reach the output"),
    ({"probed": True, "probe": {"ran": True, "detail": ""}, "poison": {"reaches": None, "detail": ""}}, "not probed"),
    ({"probed": True, "probe": {"ran": True, "detail": ""}}, "not probed"),
    ({"probed": False, "poison": {"reaches": True, "detail": ""}}, "no observable change"),
    ({"probed": False}, "not probed"),
])
def test_a_mutant_that_changed_nothing_is_kept_only_where_its_line_runs(state, want):
    from autograder.understanding import askable

    runs = [{"class": "correct", "detail": "", "run": r} for r in range(3)]
    res = mutants._result({"recs": runs, "speed": None, "s": 1.0, **state}, "TESTGPU")
    assert res["outcome"] == want and askable(res["outcome"]) == (want == "no observable change")
    slow = mutants._result({"recs": runs, "speed": {"outputs_ok": {"k": True}, "ratio": {
        "lo": 1.2, "median": 1.3, "hi": 1.4, "says": "1.3x"}}, "s": 1.0, **state}, "TESTGPU")
    assert slow["outcome"] == "slower"  # what was observed needs no probe


@pytest.mark.parametrize("senses", [False, True])
def test_a_decoy_that_runs_but_is_overwritten_does_not_choose_its_keys(tmp_path, monkeypatch, senses):
    """The decoy copy runs — one thread of block 0 stores its 8 elements — and the real code (in a form no operator
    matches) then writes every element, those 8 included. The trap at each of the decoy's changed lines fires (the
    line runs), yet no change there can reach the output: every mutant is "no observable change", which its author
    knew without measuring. A mutant whose changed line runs but whose effect never reaches the output must not be
    asked. `senses` (decoy_senses.cu): the kernel also goes wrong where its module's first launch is at the bench
    shape, a launch the instrument never makes: a check launched otherwise than the instrument is told apart."""
    import torch

    from autograder import hangs_trace
    from autograder.understanding import askable
    from kernels import device

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(device, "gpu", lambda: {"name": "TESTGPU"})
    monkeypatch.setattr(hangs_trace, "debug_cubin", lambda src, var: (src, {}))
    opens = "if (blockIdx.x == 0 && threadIdx.x == 0) {"
    src = (DECOY_SENSES if senses else DECOY_RUNS).replace("decoy copy", f"decoy copy {time.time()}")
    monkeypatch.setattr(mutants_child, "_run_once", _decoy_gpu(src, opens, runs=True, senses=senses))
    monkeypatch.setattr(mutants_child, "_speed", lambda ex, wl, base, s, rounds, seed: {
        "ratio": {"lo": 0.99, "median": 1.0, "hi": 1.01, "says": "1.000x"},
        "outputs_ok": {"kernel": True, "mutant": True}})
    _in_process_child(monkeypatch, "naive_loads")
    res = mutants.measure_answer("naive_loads", src, runs=3, rounds=8, device="TESTGPU", progress=None)
    assert len(res["mutants"]) >= 4
    asked = [m for m in res["mutants"] if askable(m["outcome"])]
    assert not asked, [(m["key"], m["outcome"]) for m in asked]
