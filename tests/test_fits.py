"""kernels.fits.kept: a fit is computed once per input and library version, kept in the process and on disk, and
handed back as a fresh copy; inputs that are not plain data are never kept."""

from __future__ import annotations

import json
import random

from kernels import fits


def _counting():
    calls = []

    def fit(rows, scale=1.0):
        calls.append(rows)
        return {"sum": sum(r * scale for r in rows), "rows": list(rows)}

    fit.__qualname__ = f"fit_{random.getrandbits(48)}"  # a name no earlier test kept
    return fits.kept(fit), calls


def test_a_fit_is_computed_once_per_input_and_each_caller_gets_its_own_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    fit, calls = _counting()
    rows = [random.random() for _ in range(random.randint(1, 9))]
    a = fit(rows, scale=2.0)
    a["sum"] = float("nan")  # a caller that changes its result changes nobody else's
    b = fit(list(rows), scale=2.0)
    assert len(calls) == 1 and b == {"sum": sum(r * 2.0 for r in rows), "rows": rows}
    fit(rows, scale=3.0)
    fit(rows + [1.0], scale=2.0)
    assert len(calls) == 3  # another argument is another key
    written = list((tmp_path / "fits").glob("*.json"))
    assert len(written) == 3 and any(json.loads(p.read_text()) == b for p in written)


def test_a_result_on_disk_is_read_by_another_process_and_a_library_change_is_another_key(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    fit, calls = _counting()
    fit([1.0, 2.0])
    monkeypatch.setattr(fits, "_MEMORY", {})  # a new process: nothing in memory, the file on disk
    assert fit([1.0, 2.0])["sum"] == 3.0 and len(calls) == 1
    monkeypatch.setattr(fits, "_MEMORY", {})
    monkeypatch.setattr(fits, "library_hash", lambda: "another version of kernels/")
    fit([1.0, 2.0])
    assert len(calls) == 2


def test_inputs_that_are_not_plain_data_are_not_kept_and_results_json_changes_stay_in_the_process(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    calls = []

    def pair(x):
        calls.append(x)
        return (x, x)  # a tuple: JSON would give back a list

    pair.__qualname__ = f"pair_{random.getrandbits(48)}"
    pair = fits.kept(pair)
    assert pair(1.5) == (1.5, 1.5) and pair(1.5) == (1.5, 1.5) and len(calls) == 1  # kept in the process
    assert not list((tmp_path / "fits").glob("*.json"))  # never written
    monkeypatch.setattr(fits, "_MEMORY", {})
    assert pair(1.5) == (1.5, 1.5) and len(calls) == 2  # another process computes it again

    class Row(float):
        pass

    assert fits.plain_repr([Row(1.0)]) is None and fits.plain_repr({"a": [1, 2.5, None]}) == "{'a': [1, 2.5, None]}"
    fit, seen = _counting()
    fit([Row(1.0)])
    fit([Row(1.0)])
    assert len(seen) == 2 and not list((tmp_path / "fits").glob("*.json"))
