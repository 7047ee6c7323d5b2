"""kernels.cycles and ncu's multi-launch raw page (kernels.ncu.parse_launches): the capstones against their vendor
kernels in SM cycles per launch — the launches cut at the markers, paired per round by the child's own sequence,
summarised as vendor / course with an interval — and make gpu-test's step 'cycles' (tools/gpu_cycles.py) with the
ncu call faked; the README's cycles block is the generated one."""
from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from kernels import cycles, ncu
from kernels.compare import balanced_rounds

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_cycles  # noqa: E402

C, T, F = cycles.CYCLES, cycles.NS, cycles.HZ
VENDOR_GEMM = "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT"
CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"


def _raw(rows: list[tuple[str, float, float, float]], units=("cycle", "ns", "hz")) -> str:
    """ncu --import --page raw --csv --print-units base of several launches, as ncu writes it: quoted fields, a units
    row, thousands separators, the launch columns before the metrics."""
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC", C, T, F]
    lines = [",".join(f'"{h}"' for h in head), ",".join(f'"{u}"' for u in [""] * 11 + list(units))]
    for i, (name, cyc, ns, hz) in enumerate(rows):
        vals = [str(i), "4242", "python3", "127.0.0.1", name, "1", "7", "(384, 1, 1)", "(128, 1, 1)", "0", "9.0",
                *(f"{v:,.0f}" if v >= 1000 else f"{v:g}" for v in (cyc, ns, hz))]
        lines.append(",".join(f'"{v}"' for v in vals))
    return "==PROF== Disconnected from process 4242\n" + "\n".join(lines) + "\n"


def test_the_raw_page_of_several_launches_is_read_row_by_row_in_base_units():
    text = _raw([("cycles_mark", 1234, 2016, 1_755_000_000), ("gemm_store_warp", 2_520_511, 1_436_192, 1_755_000_000),
                 (VENDOR_GEMM, 2_571_000, 1_465_000, 1_755_000_000)])
    got = ncu.parse_launches(text, [C, T, F])
    assert [g["kernel"] for g in got] == ["cycles_mark", "gemm_store_warp", VENDOR_GEMM]
    assert [g["id"] for g in got] == [0, 1, 2]
    assert got[1][C] == 2_520_511 and got[1][T] == 1_436_192 and got[1][F] == 1_755_000_000
    # other units, converted: a time in us and a clock in cycles per ns become ns and Hz
    other = ncu.parse_launches(_raw([("k", 10, 1.5, 1.755)], units=("cycle", "usecond", "cycle/nsecond")), [T, F])
    assert other[0][T] == pytest.approx(1500) and other[0][F] == pytest.approx(1.755e9)
    with pytest.raises(ncu.ProfileError, match="no column"):
        ncu.parse_launches(text, ["dram__bytes_read.sum"])
    with pytest.raises(ncu.ProfileError, match="no profiled launch"):
        ncu.parse_launches(text.splitlines()[0] + "\n" + text.splitlines()[1] + "\n", [C])


def test_a_real_raw_page_is_read_and_its_launches_give_the_recorded_gemm_comparisons():
    """kernels/gemm/ncu_raw_launches_h200.csv: ncu 2025.3's raw page of the GEMM child (H200, make gpu-test's step
    'cycles'), trimmed to the launch columns and the three metrics; its units row says "cycle", "ns", "hz"."""
    got = ncu.parse_launches((ROOT / "kernels" / "gemm" / "ncu_raw_launches_h200.csv").read_text(), list(cycles.METRICS))
    comps = cycles.plan("gemm")
    assert len(got) == len(comps) * (1 + 2 * cycles.ROUNDS) and [g["id"] for g in got] == list(range(len(got)))
    assert got[0]["kernel"] == cycles.MARK and got[1] == {"kernel": "gemm_store_warp", "id": 1, C: 2_188_212,
                                                          T: 1_354_336, F: pytest.approx(1_593_994_444.96)}
    doc = json.loads((ROOT / "kernels" / "gemm" / "cycles_h200.json").read_text())
    assert got == doc["launches"]
    assert json.loads(json.dumps(cycles.comparisons(comps, got, {}, doc["rounds"]))) == doc["comparisons"]


def test_every_cycles_record_is_what_its_own_launches_give():
    for slug, tag, doc in cycles.records():
        skipped = {c["comparison"]: c["skipped"] for c in doc["comparisons"] if "skipped" in c}
        again = cycles.comparisons(cycles.plan(slug), doc["launches"], skipped, doc["rounds"])
        assert json.loads(json.dumps(again)) == doc["comparisons"], (slug, tag)
        assert doc["metrics"] == list(cycles.METRICS) and {"device", "driver", "date", "what", "ncu"} <= set(doc)


def test_the_single_launch_parser_reads_the_first_row_as_before():
    text = _raw([("gemm_store_warp", 2_000_000, 1_000_000, 1.8e9), (VENDOR_GEMM, 5, 5, 5)])
    assert ncu.parse_raw(text, [C, T]) == {C: 2_000_000, T: 1_000_000}


def test_the_child_launches_each_side_first_and_last_equally_often_after_a_marker():
    assert balanced_rounds(["course", "vendor"], cycles.ROUNDS) == cycles.ROUNDS
    for slug in cycles.SLUGS:
        comps = cycles.plan(slug)
        seq = cycles.sequence(comps)
        assert [s for s in seq if s[0] == "mark"] == [("mark", i) for i in range(len(comps))]
        for i, comp in enumerate(comps):
            mine = seq[seq.index(("mark", i)) + 1:][:2 * cycles.ROUNDS]
            assert all(s[0] == "call" and s[1] == i for s in mine)
            by_round = [[s[3] for s in mine if s[2] == r] for r in range(cycles.ROUNDS)]
            assert all(sorted(o) == sorted([comp["course"], comp["vendor"]]) for o in by_round)
            assert by_round[0] == [comp["course"], comp["vendor"]]
            assert Counter(o[0] for o in by_round) == Counter(o[-1] for o in by_round) == {
                comp["course"]: cycles.ROUNDS // 2, comp["vendor"]: cycles.ROUNDS // 2}
        flt = cycles.kernel_filter(comps)
        assert flt.startswith("regex:") and re.search(flt[6:], cycles.MARK)
    names = {c["name"]: c for c in cycles.plan("attention")}
    assert set(names) == {"overlap / cuDNN, d128", "overlap / cuDNN, d128 causal", "overlap / cuDNN, d64"}
    d128 = names["overlap / cuDNN, d128"]["kernels"]
    assert re.search(d128["overlap"], "attn_overlap_d128_n128_k3v2_pp1") and re.search(d128["cudnn"], CUDNN)
    assert not re.search(d128["overlap"], "attn_overlap_d64_n128_k4v4_pp1") and not re.search(d128["cudnn"],
                                                                                            "gemm_store_warp")


def _launches(comps, speed: dict[str, float], per_call: dict[str, int] | None = None, seed: int = 0,
              skipped=()) -> list[dict]:
    """What ncu would see of the child's sequence: each call's cycles (the course's 1e6 per kernel, the vendor's
    1e6 x its comparison's `speed`, 0.2 % noise) at a clock that moves from call to call (1500-1980 MHz)."""
    rng, out = random.Random(seed), []
    names = {"store_warp": "gemm_store_warp", "cublas": VENDOR_GEMM, "cublaslt": "sm90_xmma_gemm_bf16bf16",
             "overlap": "attn_overlap_d128_n128_k3v2_pp1", "cudnn": CUDNN}

    def add(kernel, cyc):
        mhz = rng.uniform(1500, 1980)
        out.append({"kernel": kernel, "id": len(out), C: cyc, T: cyc / mhz * 1e3, F: mhz * 1e6})

    for step in cycles.sequence(comps):
        if step[0] == "mark":
            add(cycles.MARK, 1000)
            continue
        comp = comps[step[1]]
        if comp["name"] in skipped:
            continue
        side = step[3]
        base = 1e6 * (speed[comp["name"]] if side == comp["vendor"] else 1.0)
        k = (per_call or {}).get(side, 1)
        kernel = names[side]
        if side == "overlap" and "d64" in comp["name"]:
            kernel = "attn_overlap_d64_n128_k4v4_pp1"
        for _ in range(k):
            add(kernel, base / k * (1 + rng.gauss(0, 0.002)))
    return out


def test_the_rounds_are_paired_and_the_cycles_ratio_ignores_the_clock():
    comps = cycles.plan("gemm")
    speed = {comps[0]["name"]: 1.02, comps[1]["name"]: 0.95}
    got = cycles.comparisons(comps, _launches(comps, speed), {})
    ahead, behind = got
    assert ahead["cycles"]["median"] == pytest.approx(1.02, abs=0.005) and ahead["cycles"]["says"].startswith("ahead")
    assert behind["cycles"]["median"] == pytest.approx(0.95, abs=0.005)
    assert behind["cycles"]["says"].startswith("behind")
    # the durations moved with the clock of each launch: their ratio's interval is far wider than the cycles'
    width = lambda r: r["hi"] - r["lo"]  # noqa: E731
    assert width(ahead["duration"]) > 5 * width(ahead["cycles"])
    assert ahead["rounds"] == cycles.ROUNDS and len(ahead["per_round"]) == cycles.ROUNDS
    assert 1500 <= ahead["sm_mhz"]["store_warp"] <= 1980 and set(ahead["sm_mhz"]) == {"store_warp", "cublas"}
    assert ahead["kernels"] == {"store_warp": ["gemm_store_warp"], "cublas": [VENDOR_GEMM]}
    r0 = ahead["per_round"][0]
    assert r0["order"] == ["store_warp", "cublas"] and r0["store_warp"]["ids"] == [1] and r0["cublas"]["ids"] == [2]


def test_a_call_of_several_kernels_is_summed_and_a_launch_out_of_order_is_refused():
    comps = cycles.plan("attention")
    speed = {c["name"]: 1.0 for c in comps}
    got = cycles.comparisons(comps, _launches(comps, speed, per_call={"cudnn": 2}), {})
    assert all(c["cycles"]["median"] == pytest.approx(1.0, abs=0.01) for c in got)
    assert all(len(r["cudnn"]["ids"]) == 2 for c in got for r in c["per_round"])
    assert all(c["cycles"]["says"].startswith("within") for c in got)
    launches = _launches(comps, speed)
    swapped = list(launches)
    swapped[1], swapped[2] = swapped[2], swapped[1]  # round 0 wants the course's launch first
    with pytest.raises(ncu.ProfileError, match="round 0 wants overlap"):
        cycles.comparisons(comps, swapped, {})
    with pytest.raises(ncu.ProfileError, match="not the same number"):
        cycles.comparisons(comps, [x for k, x in enumerate(launches) if k != 3], {})
    with pytest.raises(ncu.ProfileError, match="before the first marker"):
        cycles.comparisons(comps, launches[1:], {})
    with pytest.raises(ncu.ProfileError, match="4 markers for 3 comparisons"):
        cycles.comparisons(comps, [*launches, {**launches[0], "id": len(launches)}], {})
    stray = [launches[0], {**launches[1], "kernel": "vectorized_elementwise_kernel"}, *launches[2:]]
    with pytest.raises(ncu.ProfileError, match="matches no side"):
        cycles.comparisons(comps, stray, {})


def _fake_ncu(monkeypatch, calls, skipped=None):
    def fake(cmd, names, *, kernel, workdir, from_start=True, **kw):
        slug = cmd[cmd.index("--child") + 1]
        comps = cycles.plan(slug)
        calls.append({"slug": slug, "kernel": kernel, "names": names, "from_start": from_start})
        Path(cmd[cmd.index("--status") + 1]).write_text(json.dumps({"done": True, "skipped": skipped or {}}))
        return _launches(comps, {c["name"]: 1.02 for c in comps}, skipped=skipped or {})

    monkeypatch.setattr(ncu, "launches", fake)


def test_the_cycles_step_writes_each_record_with_the_ncu_call_faked(tmp_path, monkeypatch):
    import kernels.device as device

    calls = []
    lt = "store_warp / cuBLASLt's best, 8192x8192x8192"
    _fake_ncu(monkeypatch, calls, skipped={lt: "cuBLASLt's best is not available here: ModuleNotFoundError"})
    monkeypatch.setattr(device, "gpu", lambda: {"name": "NVIDIA H200", "driver": "580.test"})
    monkeypatch.setattr(gpu_cycles, "ROOT", tmp_path)
    monkeypatch.setenv("COURSE_RECORD", "1")
    cmd = "python3 tools/gpu_check.py " + cycles.GPU_ARGS
    res = gpu_cycles.cycles_step(["tma", "attention", "gemm"], tmp_path / "out", cmd)
    assert res["ok"] and [c["slug"] for c in calls] == ["gemm", "attention"]
    assert all(c["from_start"] is False and c["names"] == list(cycles.METRICS) for c in calls)
    for slug in ("gemm", "attention"):
        doc = json.loads((tmp_path / "out" / slug / "cycles_h200.json").read_text())
        assert doc == json.loads((tmp_path / "kernels" / slug / "cycles_h200.json").read_text())
        assert doc["device"] == "NVIDIA H200" and doc["what"] == cmd and doc["rounds"] == cycles.ROUNDS
        assert [c["comparison"] for c in doc["comparisons"]] == [c["name"] for c in cycles.plan(slug)]
        for c in doc["comparisons"]:
            assert ("skipped" in c) == (c["comparison"] == lt)
            assert "skipped" in c or c["cycles"]["says"].startswith("ahead")
    table = cycles.markdown([(s, "h200", json.loads((tmp_path / "kernels" / s / "cycles_h200.json").read_text()))
                             for s in ("attention", "gemm")])
    rows = table.splitlines()[2:]
    assert len(rows) == 5 and sum("not measured" in r for r in rows) == 1
    assert all(r.startswith("| NVIDIA H200 (580.test, ") for r in rows)
    # without COURSE_RECORD nothing is written next to the code; a capstone that fails is reported, the other written
    monkeypatch.delenv("COURSE_RECORD")
    real = cycles.plan
    monkeypatch.setattr(cycles, "plan", lambda slug: 1 / 0 if slug == "gemm" else real(slug))
    res = gpu_cycles.cycles_step(["gemm", "attention"], tmp_path / "out2", cmd)
    assert not res["ok"] and "ZeroDivisionError" in res["gemm"]["error"] and res["attention"]["lines"]
    assert (tmp_path / "out2" / "attention" / "cycles_h200.json").exists()


def test_a_child_that_did_not_finish_is_an_error_not_a_record(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "launches", lambda cmd, names, **kw: [])
    with pytest.raises(ncu.ProfileError, match="did not finish"):
        cycles.measure("gemm", tmp_path)


def test_the_readme_cycles_block_is_the_generated_one():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- claims: end -->\n\n(.*?)\n\n<!-- cycles: generated by python -m kernels.cycles --markdown -->"
                  r"\n(.*?)\n<!-- cycles: end -->", text, re.S)
    assert m, "README has no generated cycles block right after the claims block"
    assert "SM cycles" in m.group(1)
    assert m.group(2) == cycles.markdown()
