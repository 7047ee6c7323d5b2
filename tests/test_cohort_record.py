"""The cohorts graded on a GPU (autograder/recorded_cohort_<gpu>.json, written by `make gpu-test`) against what the
course expects of it today: the same students, the same expected scores, every score equal to its expectation, and
the hard cases issue-by-issue present (a hang, an illegal address, a side-stream cheat, a cached-result cheat).
When an expected score changes, this test says the record is stale until the GPU run is repeated — unless the record
declares it: `pending_regrade` names each student whose graded row no longer stands (with the expectation of today
and the reason), and every student it does not name must still match exactly."""

import json
from pathlib import Path

import pytest

from autograder.cohort import build, members_of

AUTOGRADER = Path(__file__).resolve().parent.parent / "autograder"
RECORDS = sorted(AUTOGRADER.glob("recorded_cohort_*.json"))


@pytest.fixture(scope="module")
def record():
    """Every cohort graded on a GPU, newest file last: {cohort: its record} (each names its device)."""
    if not RECORDS:
        pytest.skip("no cohort graded on a GPU yet (make gpu-test writes autograder/recorded_cohort_<gpu>.json)")
    out = {}
    for p in RECORDS:
        for cohort, rec in json.loads(p.read_text()).items():
            out[cohort] = rec
    return out


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_each_cohort_record_names_the_gpu_of_its_file(path):
    """recorded_cohort_h100.json holds H100 gradings only, recorded_cohort_h200.json H200 ones: no number under
    another GPU's name."""
    from kernels.record import device_tag

    for cohort, rec in json.loads(path.read_text()).items():
        assert f"recorded_cohort_{device_tag(rec['device'])}.json" == path.name, (cohort, rec["device"])


def _pending(rec: dict, made: dict) -> dict:
    """The students a record declares not yet re-graded: each must carry today's expectation (a declaration cannot hide
    a student it does not name, nor a value it got wrong), with a reason."""
    pend = rec.get("pending_regrade") or {}
    students = pend.get("students", {})
    if students:
        assert pend.get("reason"), "a pending re-grade says why"
    for student, want in students.items():
        assert student in made and made[student].expected_gpu == pytest.approx(want), f"{student}: declared {want}"
    return students


@pytest.mark.parametrize("cohort", ["gpu20", "rest"])
def test_recorded_cohort_matches_todays_expectations(record, cohort, tmp_path):
    assert cohort in record, f"cohort {cohort} was not graded on the H100"
    rec = record[cohort]
    assert rec["device"].startswith("NVIDIA H100") and rec["date"] and rec["driver"]
    made = {m.student: m for m in build(tmp_path, "week1", members_of(cohort))}
    rows = {r["student"]: r for r in rec["rows"]}
    assert set(rows) == set(made), f"stale record: students differ ({set(rows) ^ set(made)})"
    pending = _pending(rec, made)
    for student, m in made.items():
        if student in pending:
            continue
        r = rows[student]
        assert r["expected"] == pytest.approx(m.expected_gpu), f"{student}: the expectation changed since the run"
        assert r["ok"] and r["got"] == pytest.approx(r["expected"]), f"{student}: graded {r['got']}"
        for flag in m.flags + m.gpu_flags:
            assert flag in r["flags"], f"{student}: flag {flag} not raised on the H100"
    assert (rec["ok"] or pending) and rec["students"] == len(made) >= (20 if cohort == "gpu20" else 1)


def test_gpu20_holds_the_hard_cases(record):
    flags = {r["student"]: r["flags"] for r in record["gpu20"]["rows"]}
    assert any("timeout" in f for f in flags.values()), "no hang in the cohort"
    assert any("illegal-address" in f for f in flags.values()), "no illegal address in the cohort"
    assert "side-stream" in flags["naive-loads-side-stream"]
    assert "inconsistent-results" in flags["naive-loads-cached-result"]
    assert "deleted-cell" in flags["tamper"] and flags["malformed"] == []


def test_the_integrity_cohort_got_its_true_scores_and_no_secret_reached_feedback(record, tmp_path):
    """The hostile answers (autograder.cohort.INTEGRITY) graded through nbgrader on a Hopper GPU: every score its
    expectation (every part graded on a Hopper GPU), every flag raised, the seed in no feedback."""
    assert "integrity" in record, "the integrity cohort was not graded on a GPU (make gpu-test --cohort integrity)"
    rec = record["integrity"]
    assert rec["device"].startswith("NVIDIA H") and rec["date"] and rec["driver"]
    made = {m.student: m for m in build(tmp_path, "week1", members_of("integrity"))}
    rows = {r["student"]: r for r in rec["rows"]}
    assert set(rows) == set(made), f"stale record: students differ ({set(rows) ^ set(made)})"
    pending = _pending(rec, made)
    assert set(pending) <= {"good"}, "every hostile answer must have been graded to its expectation"
    for student, m in made.items():
        if student in pending:
            continue
        r = rows[student]
        assert r["expected"] == pytest.approx(m.expected_gpu), student
        assert r["ok"] and r["got"] == pytest.approx(r["expected"]), f"{student}: graded {r['got']}"
        for flag in m.flags + m.gpu_flags:
            assert flag in r["flags"], f"{student}: flag {flag} not raised on the GPU"
    assert (rec["ok"] or pending) and rec.get("secret_leaked_into") == []


def test_every_known_answer_was_graded_under_nbgrader_on_a_gpu(record):
    graded = {r["student"] for c in ("gpu20", "rest", "integrity") if c in record for r in record[c]["rows"]}
    every = {m.replace("_", "-") for c in ("rest", "gpu20", "integrity") for m in members_of(c)}
    assert every <= graded, f"not graded on a GPU: {sorted(every - graded)}"


def test_a_partial_regrade_replaces_only_its_rows_and_leaves_pending(tmp_path):
    """tools/gpu_check.py --members (tools/gpu_cohort.py): the re-graded students' rows replace theirs, they leave
    pending_regrade (which goes when empty), the entry says when and on what; a student not in the cohort, or another
    GPU, is refused."""
    import importlib.util
    import random

    spec = importlib.util.spec_from_file_location("gpu_cohort", AUTOGRADER.parent / "tools" / "gpu_cohort.py")
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    names = [f"s{i}" for i in range(random.randint(4, 9))]
    rows = [{"student": n, "expected": 5.0, "got": 5.0, "ok": True, "wall_s": 1.0, "flags": []} for n in names]
    dev = {"name": "NVIDIA H100 80GB HBM3", "driver": "1"}
    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"c": {"device": dev["name"], "date": "d0", "rows": rows, "ok": True,
                                      "pending_regrade": {"reason": "r", "students": {names[0]: 3.0,
                                                                                       names[1]: 4.0}}}}))
    again = {"rows": [{"student": names[0], "expected": 3.0, "got": 3.0, "ok": True, "wall_s": 2.0,
                       "flags": ["x: timeout: hung"]}], "wall_s": 9.0, "ok": True}
    gc.record_regrade("c", again, device=dev, date="d1", path=path)
    e = json.loads(path.read_text())["c"]
    assert [r["student"] for r in e["rows"]] == names and e["date"] == "d0"
    assert e["rows"][0]["got"] == 3.0 and e["rows"][0]["flags"] == ["timeout"] and e["rows"][2] == rows[2]
    assert e["pending_regrade"]["students"] == {names[1]: 4.0} and e["regraded"][0]["students"] == [names[0]]
    again["rows"][0]["student"] = names[1]
    again["rows"][0]["ok"] = False
    gc.record_regrade("c", again, device=dev, date="d1", path=path)
    e = json.loads(path.read_text())["c"]
    assert "pending_regrade" not in e and not e["ok"] and len(e["regraded"]) == 2
    again["rows"][0]["student"] = "nobody"
    with pytest.raises(ValueError):
        gc.record_regrade("c", again, device=dev, path=path)
    with pytest.raises(ValueError):
        gc.record_regrade("c", again, device={"name": "NVIDIA H200", "driver": "1"}, path=path)


def test_the_readme_quotes_the_recorded_gpu20_batch(record):
    """README's "Grading a large class" figure for the gpu20 cohort is the record's, with its date."""
    rec = record["gpu20"]
    text = " ".join((AUTOGRADER.parent / "README.md").read_text().split())
    assert f"gpu20` cohort in {rec['batch_wall_s']} s on one H100 on {rec['date']}" in text
