"""Statements of the course held to what they are about: the PTX contract, the records (kernels/<slug>/recorded_<gpu>.json),
the SASS (kernels.sass, nvdisasm on CPU) and the grader's specs (kernels/<slug>/spec.toml). Each test reads the
prose of a solutions notebook (weeks/ is generated from them), a kernel's header comment, the README or a spec's
comment, and checks it against what code computes from those sources — so a sentence that contradicts them (the
ones of the issue: a register contract said to be ptxas's, a wait comparison drawn from confounded rows, a wait
sold on a cost the record did not measure, the overlap rung's softmax under the wrong GEMM, a quiz reason naming the
wrong choices, an STG count and an epilogue time from nowhere, bars typed against their calibration, three targets
in three places, a gain said to shrink where the cell prints +0 %, a syllabus "being written", a spec's "no table
yet" above its table, a CTA-scoped remote release said to follow from the memory model) fails here.

Kept in a module of its own (not the days' test modules): the checks cut across days and share the readers below."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from autograder.known import kernel_source
from autograder.spec import all_specs, load
from kernels import record
from kernels.compile import advisories, compile_cuda, kernel_file
from kernels.sass import disassemble, opcodes

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
GEMM_NB, ATTN_NB = "week2/day4_gemm.ipynb", "week2/day5_attention.ipynb"
MC_NB, WS_NB = "week2/day3_multicast.ipynb", "week2/day2_warp_specialization.ipynb"


def _cells(rel: str) -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(str(SOLUTIONS / rel), as_version=4).cells}


def _markdown(rel: str) -> str:
    return "\n".join(c.source for c in _cells(rel).values() if c.cell_type == "markdown")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# ------------------------------------------------------------------------------ 1. the wgmma register contract
GEMM_WAITS = (("pipelined", "gemm_pipelined", "        wgmma_wait<0>();  // this warp's wgmma are done with stage s ...\n"),
              ("persistent", "gemm_persistent",
               "                wgmma_wait<1>();  // New: the previous k-tile's group has retired; this one may still run\n"))


def test_gemm_register_contract_is_ptxs_and_ptxas_repair_is_an_advisory():
    """Day 4 teaches the register half of the wgmma discipline as the PTX contract, with ptxas's repair a silent
    serialization that the compile's advisory shows and the check flags (the known answer reads_before_wait), not
    as something ptxas guards; and what section 4b says of rungs 3 and 4 with their wait deleted is what the
    compile does: rung 3 gets an injected wait (an advisory), rung 4 none and the release before any wait."""
    from kernels.gemm.launch import release_order, source

    md = _flat(_markdown(GEMM_NB))
    assert "guards the registers by itself" not in md and "tracks the registers itself" not in md
    for said in ("`wgmma.wait_group` that retires", "C7517", "`ptxas-advisory`", "reads_before_wait"):
        assert said in md, said
    expected = tomllib.loads((ROOT / "kernels/gemm/grading/known/expected.toml").read_text())
    assert "ptxas-advisory: C7517" in expected["reads_before_wait"]["flags"]
    seen = {}
    for variant, kernel, wait_line in GEMM_WAITS:
        src = source(variant)
        assert wait_line in src  # the line the notebook's cell deletes
        for what, text in (("written", src), ("deleted", src.replace(wait_line, ""))):
            cub = compile_cuda(text, name=f"{kernel}.cu")
            seen[variant, what] = ([a[:5] for a in advisories(cub)], release_order(cub, kernel))
    print(seen)
    assert seen["pipelined", "written"][0] == [] and seen["persistent", "written"][0] == []
    assert seen["pipelined", "deleted"][0][:1] in (["C7517"], ["C7518"])  # ptxas injected a wait: serialized
    assert seen["persistent", "deleted"][0] == [] and seen["persistent", "deleted"][1][0].startswith("SYNCS.ARRIVE")
    said = _flat(_cells(GEMM_NB)["90910f3c"].source)
    assert "in rung 4 (and in the mainloop the exercise gives you) ptxas reports nothing" in said
    assert "the release comes first" in said


# ------------------------------------------------------------------------------ 2. wait<1> vs wait<0>: confounded
def test_gemm_wait_comparison_is_not_sold_as_a_result():
    """The records set the exercise's wait<0> kernel beside rung 4's wait<1>, which differ in their epilogue too
    (the model's configs say so): the notebook may not conclude from them that wait<1> "is not the win"."""
    from kernels.gemm import model, workload

    cfgs = model.configs_for(workload.BENCH_SHAPE)
    assert cfgs["exercise"].epilogue != cfgs["persistent"].epilogue  # the confound
    md = _flat(_markdown(GEMM_NB))
    assert "is not the win" not in md and "records agree that the second consumer is the win" not in md
    summary = _flat(_cells(GEMM_NB)["a3a9fea8"].source)
    assert "not measured unconfounded" in summary
    assert "What `wgmma_wait<1>` buys by itself was not measured" in md


# ------------------------------------------------------------------------------ 3. bulk_wait vs bulk_wait_read
def _sass_texts(cubin) -> dict[str, list[str]]:
    return {k: [i.text for i in v] for k, v in disassemble(cubin).items()}


@pytest.mark.parametrize("where", ["tma_copy.cu", "gemm solution"])
def test_bulk_wait_and_bulk_wait_read_are_one_wait_the_full_one_invalidating_l1(where):
    """cp.async.bulk.wait_group.read N and cp.async.bulk.wait_group N wait on the same scoreboard (DEPBAR.LE SB0, N)
    in the course's kernels — the day-5 copy rung and the GEMM exercise's solution, each compiled as written and
    with every bulk_wait_read<N> made bulk_wait<N> — and the full wait adds one CCTL.IVALL after it (the L1
    invalidated for the thread's later loads); nothing else differs (NOP padding aside). So the two are taught as
    contracts: the same wait, and the record measured no cost between them."""
    import difflib

    if where == "tma_copy.cu":
        src, name = kernel_file("tma", "tma_copy.cu").read_text(), "tma_copy.cu"
    else:
        src, name = kernel_source("gemm", "correct"), "GEMM_EPILOGUE_CU"
    assert "bulk_wait_read<" in src
    read, full = ({k: [t for t in v if t != "NOP"] for k, v in _sass_texts(compile_cuda(s, name=name)).items()}
                  for s in (src, src.replace("bulk_wait_read<", "bulk_wait<")))
    assert read.keys() == full.keys()
    added = 0
    for k in read:
        for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, read[k], full[k], autojunk=False).get_opcodes():
            if op == "equal":
                continue
            assert op == "insert" and set(full[k][b0:b1]) == {"CCTL.IVALL"}, (k, op, read[k][a0:a1], full[k][b0:b1])
            assert full[k][b0 - 1].startswith("DEPBAR.LE SB0, 0x"), full[k][b0 - 1]
            added += b1 - b0
    assert added >= 1
    summary = _flat(_cells(GEMM_NB)["a3a9fea8"].source)
    assert "`DEPBAR.LE SB0, N` in the SASS); the full wait adds one `CCTL.IVALL`" in summary


def test_gemm_teaches_the_bulk_wait_contracts_not_a_cost():
    """What the two waits promise (the read done: the staging reusable; the whole store done: its global writes),
    the SASS they share, and the record's outcome of the known answer that waits for the writes (timed like the
    solution: full throughput points) — no sentence that the full wait costs the overlap."""
    md = _flat(_markdown(GEMM_NB))
    assert "times what that costs" not in md
    summary = _flat(_cells(GEMM_NB)["a3a9fea8"].source)
    for said in ("finished *reading* shared memory", "their global writes included",
                 "choose by the contract, not by a cost"):
        assert said in summary, said
    q4 = _cells(GEMM_NB)["a1cc62a3"].source
    assert "take away the overlap" not in q4 and "the contract of reuse is the read" in q4
    expected = tomllib.loads((ROOT / "kernels/gemm/grading/known/expected.toml").read_text())
    assert expected["serial_epilogue"]["throughput"] == expected["correct"]["throughput"] == 2


# ------------------------------------------------------------------------------ 4. the overlap rung's softmax
def test_attention_overlap_softmax_runs_under_the_previous_tiles_pv():
    """r2_overlap.cu's round j issues S_j and O += P_{j-1} V_{j-1} and waits for S_j only: the softmax of
    tile j runs under the PV of tile j - 1. Every sentence of the day that puts the softmax of tile `j` under a GEMM
    of a tile names tile `j − 1`."""
    src = kernel_file("attention", "r2_overlap.cu").read_text()
    assert "issues S_j = Q K_j^T AND O += P_{j-1} V_{j-1}" in src
    assert "wgmma_wait<1>();                                  // S_j complete (K_j read); PV_{j-1} may still run" in src
    md = _flat(_markdown(ATTN_NB))
    claims = re.findall(r"softmax of tile `j` under the (.{0,40}?) of tile `j ([+−-]) 1`", md)
    assert claims, "the summary's sentence on the overlap rung is gone"
    assert all(sign in "−-" for _, sign in claims), claims


# The softmax of tile j put under (or beside) a GEMM of tile j + 1 / the next tile, or a GEMM of tile j + 1 put
# under the softmax: what r2_overlap.cu does not do (its round j runs softmax(S_j) under PV_{j-1}).
SOFTMAX_UNDER_NEXT = (
    re.compile(r"softmax\b[^.;:]{0,80}?\b(?:under|beside|overlapp?(?:ed|ing|s)?|while)\b[^.;:]{0,60}?"
               r"(?:\bj\s*\+\s*1\b|j₊₁|\bnext (?:K/V )?tile\b)", re.I),
    re.compile(r"(?:GEMMs?|QK\^?T|QKᵀ|\bPV\b|\bP V\b)[^.;:]{0,30}?\b(?:tile|round)\s*j\s*\+\s*1\b[^.;:]{0,40}?"
               r"\b(?:under|overlap\w*|beside|while)\b[^.;:]{0,30}?softmax", re.I))


def _softmax_under_next(text: str) -> list[str]:
    flat = _flat(re.sub(r"`|^\s*(?://|#)", "", text, flags=re.M))
    return [m.group(0) for rx in SOFTMAX_UNDER_NEXT for m in rx.finditer(flat)]


def test_no_text_of_the_day_puts_the_softmax_under_the_next_tiles_gemms():
    """Day 5's notebook (every cell), the README and the attention sources (kernels/attention/*.py, *.cu and the
    shared softmax.cuh): no sentence puts the softmax of tile j under the GEMMs of tile j + 1 (the issue's wording)."""
    for wrong in ("the softmax of tile j runs under the GEMMs of tile j+1",
                  "the softmax of tile `j` under the `P V` GEMM of tile `j + 1`",
                  "// its softmax overlaps the QK^T of the next tile", "the QK^T of tile j + 1 runs under its softmax"):
        assert _softmax_under_next(wrong), wrong
    assert not _softmax_under_next("the softmax of tile `j` under the `P V` GEMM of tile `j − 1` inside one warpgroup")
    texts = {"README.md": (ROOT / "README.md").read_text(),
             ATTN_NB: "\n".join(c.source for c in _cells(ATTN_NB).values())}
    attn = ROOT / "kernels" / "attention"
    for f in [*attn.glob("*.py"), *attn.glob("*.cu"), ROOT / "kernels" / "include" / "softmax.cuh"]:
        texts[str(f.relative_to(ROOT))] = f.read_text()
    bad = {k: hits for k, t in texts.items() if (hits := _softmax_under_next(t))}
    assert not bad, bad


# ------------------------------------------------------------------------------ 5. the multicast quiz's q2 reason
def test_multicast_q2_reason_names_the_choices_it_means():
    """q2's choices are byte counts; the key is what lands in one CTA (its x tile and both W slices). The reason
    names, as 'leaving the peer's slice unannounced', exactly the choices below the key, and never the key."""
    cells = _cells(MC_NB)
    quiz = next(c.source for c in cells.values() if c.cell_type == "markdown" and c.source.startswith("### Quiz"))
    q2 = _flat(quiz[quiz.index("**q2.**"):quiz.index("**q3.**")])
    choices = {m[0]: int(m[1]) for m in re.findall(r"\*\*([a-d])\)\*\* (\d+)", q2)}
    answers = next(c.source for c in cells.values()
                   if c.metadata.get("nbgrader", {}).get("grade_id") == "multicast_quiz_answers")
    key = re.search(r'"q2": "([a-d])"', answers)[1]
    tile = 64 * 128 * 2  # x tile 64 x 128 bf16; W tile the same size (2 slices)
    assert choices[key] == 2 * tile
    reason = cells["5d4b8f1c"].source
    clause = reason[:reason.index("unannounced")]
    clause = clause[clause.rindex(". ") + 2:]  # the sentence that ends "... unannounced"
    named = {x for group in re.findall(r"\(([a-d](?:, [a-d])*)\)", clause) for x in group.split(", ")}
    assert named == {k for k, v in choices.items() if v < choices[key]}, named


# ------------------------------------------------------------------------------ 6. rung 6's header: STG and E
def test_store_warp_header_counts_stg_from_sass_and_epilogue_from_model():
    """r6_store_warp.cu's header says how many plain stores rung 5's epilogue issues per thread (counted in the
    SASS of gemm_cluster) and how long the model's epilogue takes per tile (epilogue.rung6_gain's, the fitted
    EPILOGUE_NS), each as the code computes it."""
    from kernels.gemm import epilogue
    from kernels.gemm.launch import cubin

    stg = Counter(opcodes(cubin("cluster"), "gemm_cluster"))["STG.E"]
    epi_us = epilogue.rung6_gain()["cluster"]["epilogue_ns"] / 1e3
    print(f"gemm_cluster: {stg} STG.E; the model's epilogue per tile: {epi_us:.2f} us")
    header = _flat(kernel_file("gemm", "r6_store_warp.cu").read_text().split("#include")[0].replace("//", ""))
    assert f"store C with {stg} plain STG.E per thread and tile" in header
    assert f"EPILOGUE_NS, {epi_us:.2f} us a tile" in header
    assert "128 plain STG" not in header and "~ 7 us" not in header


# ------------------------------------------------------------------------------ 7. bars in prose
BAR_TYPED = re.compile(r"\b[Bb]ar\b[^.×]{0,80}?(\d\.\d+)\s*×")


def typed_bars_off_calibration(text: str, spec) -> list[str]:
    """The fractions typed as a bar in `text` that differ from a calibrated fraction of the spec on some GPU."""
    fractions = {c.fraction for e in spec.exercises.values() for c in e.parts["throughput"].calibration}
    return [m[1] for m in BAR_TYPED.finditer(_flat(text))
            if any(abs(float(m[1]) - f) > 1e-9 for f in fractions)]


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.slug)
def test_no_bar_typed_in_prose_against_its_calibration(spec):
    """A notebook shows the record of the GPU it runs on: a bar typed in its prose must be the calibrated fraction
    on every GPU the spec calibrates (else the prose says "printed" and a cell prints bar_of_record)."""
    text = _markdown(f"{spec.assignment}/{spec.notebook}")
    assert typed_bars_off_calibration(text, spec) == []


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.slug)
def test_no_bar_typed_in_prose_at_all(spec):
    """Stricter: a notebook types no bar fraction, not even a calibrated one (a typed 0.85× names no GPU; the
    record shown may be another GPU's, calibrated to another fraction): its prose says "printed" and a code cell
    prints the spec's line for the record's GPU (Exercise.bar_of_record)."""
    rel = f"{spec.assignment}/{spec.notebook}"
    assert [m[0] for m in BAR_TYPED.finditer(_flat(_markdown(rel)))] == []
    code = "\n".join(c.source for c in _cells(rel).values() if c.cell_type == "code")
    assert "bar_of_record(recorded)" in code, spec.slug
    # the old texts of day 1 and week 2 day 1 (calibrated fractions, typed): caught
    for old in ("Today's bar for the graded exercise is **0.85× the copy ceiling**",
                "**Bar:** ≥ 0.75× the D2D copy ceiling"):
        assert BAR_TYPED.search(old), old


def test_the_bar_check_catches_the_old_tma_and_multicast_text():
    tma, mc = load("tma"), load("multicast")
    assert typed_bars_off_calibration("Today's bar for the graded exercise is **0.90× the copy ceiling**", tma) == ["0.90"]
    assert typed_bars_off_calibration("The exercise's bar is **0.73× the copy ceiling**", mc) == ["0.73"]
    assert typed_bars_off_calibration("the course's 16-byte copy must reach 0.90×.", tma) == []
    for slug, ex in (("tma", "tma_add"), ("multicast", "bcast_add")):
        spec = load(slug)
        code = "\n".join(c.source for c in _cells(f"{spec.assignment}/{spec.notebook}").values()
                         if c.cell_type == "code")
        assert f'autograder.spec.load("{slug}").exercises["{ex}"].bar_of_record(recorded)[1]' in code


# ------------------------------------------------------------------------------ 8. day 4's targets
def test_gemm_targets_are_one_table_printed_from_their_sources():
    """Day 4's three targets (the day's goal, rung 6's parity, the exercise's bar) in one printed table
    (statements.targets_table), each fraction from where it is set (bench.GOAL, bench.PARITY_GOAL, the spec's
    calibration for the record's GPU); the prose types none of them (no fraction of cuBLAS, no target figure)."""
    from kernels.gemm import bench, statements

    md = _flat(_markdown(GEMM_NB))
    assert not re.search(r"\d\.\d+\s*×\s*(?:of )?cuBLAS", md) and "at or above cuBLAS" not in md
    ex = load("gemm").exercises["gemm_epilogue"]
    fractions = {bench.GOAL, bench.PARITY_GOAL, ex.parts["throughput"].fraction,
                 *(c.fraction for c in ex.parts["throughput"].calibration)}
    typed = [m for m in re.findall(r"(\d+\.\d+)\s*(?:×|x\b)", md) if float(m) in fractions]
    assert typed == [], typed
    assert "| the day's goal |" not in md and "statements.targets_table" in md  # the table is printed, not typed
    code = _cells(GEMM_NB)["4c4e5778"].source
    for printed in ('statements.targets_table(recorded, autograder.spec.load("gemm").exercises["gemm_epilogue"])',
                    "bench.goal_line(recorded)", "bench.parity_line(recorded)",
                    'exercises["gemm_epilogue"].bar_of_record(recorded)[1]'):
        assert printed in code, printed
    for tag, doc in record.load_all("gemm").items():
        rows = {t["target"]: t for t in statements.targets(doc, ex)}
        assert list(rows) == ["the day's goal", "parity", "the exercise's bar"]
        frac = ex.parts["throughput"].fraction_for(record.device_tag(doc["device"]))[0]
        assert (rows["the day's goal"]["at_least"], rows["parity"]["at_least"],
                rows["the exercise's bar"]["at_least"]) == (bench.GOAL, bench.PARITY_GOAL, frac)
        assert rows["the day's goal"]["recorded"] == pytest.approx(
            doc["best_cuda_tflops"] / doc["cublas_same_shape_tflops"])
        text = statements.targets_table(doc, ex)
        assert doc["device"] in text and all(f"{t['at_least']:.2f}x" in text for t in rows.values())


# ------------------------------------------------------------------------------ 9. day 2's model gain
def test_ws_gain_sentence_says_what_the_cell_prints():
    """The cell of section 2 prints the model's gain of warp specialization per ring depth (to the percent) at the
    copy ceiling of the record shown; the sentence under it says what it prints on every record (and on none)."""
    from kernels.warp_specialization import model

    cells = _cells(WS_NB)
    code = cells["f18f9c75"].source
    assert "for s in (1, 2, 4, 8):" in code and "({w / u - 1:+.0%})" in code
    ceilings = [(record.load("warp_specialization", t) or {}).get("ceilings", {}).get("copy_tbps", 3.0)
                for t in record.tags("warp_specialization")] + [3.0]
    gains = [w / u - 1 for c in ceilings for s in (1, 2, 4, 8)
             for u, w in [[model.predict_config(model.Config(v, s, 62), c) for v in ("uniform", "ws")]]]
    printed = {f"{g:+.0%}" for g in gains}
    print(printed, [f"{g:+.2%}" for g in gains])
    text = _flat(cells["a4f75371"].source)
    assert all(0 <= g < 0.01 for g in gains) and printed <= {"+0%", "+1%"}, f"the cell prints {printed}: say so"
    assert "below one percent at every depth, on every record: the cell prints it as +0 % (+1 % at most)" in text
    assert "shrinks" not in text


# ------------------------------------------------------------------------------ 10. README, gemm spec, cluster arrive
def test_readme_syllabus_is_written_and_the_gemm_spec_comment_has_its_table():
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| w(\d)d(\d) \| `(?:weeks/week\d/)?(day\d_\w+)(?:\.ipynb)?`", readme, re.M)
    assert {w for w, _, _ in rows} == {"1", "2", "3"} and len(rows) == 11, rows  # weeks 1, 2 and week 3 day 1
    for w, _, name in rows:  # every day of the syllabus is a notebook of the course
        assert (SOLUTIONS / f"week{w}" / f"{name}.ipynb").exists(), name
    assert "being written" not in readme
    for path in sorted((ROOT / "kernels").glob("*/spec.toml")):
        text = path.read_text()
        if ".throughput.calibration." in text:
            assert "No table yet" not in text, path.name


def test_cta_scoped_remote_arrive_is_called_practice_not_derived():
    """The plain remote arrive (release at CTA scope) that frees a peer's stage is CUTLASS's practice; the PTX
    memory model does not derive it. Day 3's text, the demo kernel's comment and the wrapper's say so."""
    said = _flat(_cells(MC_NB)["23dd2e20"].source)
    assert "practice, not derived" in said and "CUTLASS" in said and "so CUTLASS's form" not in said
    demo = _flat(kernel_file("multicast", "cluster_demo.cu").read_text().replace("//", ""))
    assert "arrive suffices" not in demo and "practice, not derived from the PTX memory model" in demo
    wrapper = _flat((ROOT / "kernels/include/cluster.cuh").read_text().replace("//", ""))
    assert "so no cluster-scope release fence is needed" not in wrapper and "Practice, not derived" in wrapper


# ------------------------------------------------------------------------------ week 2 days 1-3: rounds printed
@pytest.mark.parametrize("slug", ["swizzle", "warp_specialization", "multicast"])
def test_each_copy_day_prints_its_claims_in_rounds_where_it_prints_its_record(slug, capsys):
    """Week 2 days 1-3 state their claims against the D2D copy: the notebook prints them from the rounds records
    (kernels.claims.print_claims, the median ratio's interval per GPU), in the cell that prints the day's record, and
    what it prints names every recorded claim of the day with its interval."""
    from kernels.claims import claims_table, print_claims

    rel = next(str(p.relative_to(p.parents[1])) for p in (Path(__file__).resolve().parents[1] / "solutions")
               .glob(f"week2/day*_{slug}.ipynb"))
    code = [c.source for c in _cells(rel).values() if c.cell_type == "code"]
    cell = next(c for c in code if f'kernels.claims.print_claims("{slug}")' in c)
    assert "kernels.record" in cell and "bar_of_record(recorded)" in cell
    rows = claims_table(slug)
    assert rows, f"no rounds recorded for {slug}"
    print_claims(slug)
    out = capsys.readouterr().out
    for r in rows:
        assert f"{r['lo']:.3f}-{r['hi']:.3f}x" in out and r["claim"] in out and r["device"] in out
