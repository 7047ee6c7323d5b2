"""Mechanisms live in headers: each PTX instruction the course's kernels use is wrapped once, in
kernels/include/<mechanism>.cuh, with its contract beside it; the course's own kernels include those headers rather
than carrying inline copies. (A student's answer cell may still write its own wrappers: that is the exercise.)"""

import re
from pathlib import Path

import pytest

from kernels.compile import COURSE_INCLUDE, compile_cuda
from kernels.sass import opcodes
from autograder.known import known_cu_files

ROOT = Path(__file__).resolve().parent.parent
HEADERS = {
    "cp_async.cuh": ("cp.async.ca.shared.global", "cp.async.cg.shared.global", "cp.async.commit_group",
                     "cp.async.wait_group"),
    "mbarrier.cuh": ("mbarrier.init", "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity", "mbarrier.arrive."),
    "swizzle.cuh": ("ld.volatile.shared.v4.b32", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                    "stmatrix.sync.aligned.m8n8.x4.shared.b16"),
    "cluster.cuh": ("%%cluster_ctarank", "%%cluster_nctarank", "barrier.cluster.arrive.release", "barrier.cluster.wait",
                    "mapa.shared::cluster", "ld.shared::cluster", "st.async.shared::cluster",
                    "mbarrier.arrive.shared::cluster", ".multicast::cluster"),
    "warpgroup.cuh": ("setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32", "elect.sync", "bar.sync"),
    "tma.cuh": ("cp.async.bulk.tensor.2d.shared::cluster", "cp.async.bulk.tensor.2d.global", "cp.async.bulk.commit_group",
                "cp.async.bulk.wait_group", "fence.proxy.async"),
}


@pytest.mark.parametrize("header", sorted(HEADERS))
def test_each_mechanism_header_compiles_alone_and_holds_its_ptx(header):
    text = (COURSE_INCLUDE / header).read_text()
    assert text.startswith(f"// {header}") and "#pragma once" in text
    for ptx in HEADERS[header]:
        assert ptx in text, f"{header} lacks {ptx}"
    compile_cuda(f'#include "{header}"\nextern "C" __global__ void k() {{}}\n', name=f"{header}_alone")


def test_the_course_kernels_use_the_headers_not_inline_copies():
    wrapped = [p for ptxs in HEADERS.values() for p in ptxs]
    for cu in sorted(p for p in (ROOT / "kernels").rglob("*.cu") if "grading" not in p.parts):
        inline = [p for p in wrapped if re.search(r'asm\s+volatile\s*\(\s*"[^"]*' + re.escape(p), cu.read_text())]
        assert not inline, f"{cu.relative_to(ROOT)} writes {inline} inline: include kernels/include/ instead"


def test_a_kernel_built_on_the_headers_emits_the_instructions():
    src = ('#include "cp_async.cuh"\n#include "mbarrier.cuh"\n#include "tma.cuh"\n'
           'extern "C" __global__ void k(const float* x, const __grid_constant__ CUtensorMap m) {\n'
           '  __shared__ alignas(128) float s[1024]; __shared__ alignas(8) unsigned long long bar;\n'
           '  cp_async_cg16(&s[4 * threadIdx.x], x + 4 * threadIdx.x); cp_async_commit(); cp_async_wait<0>();\n'
           '  if (threadIdx.x == 0) { mbar_init(smem_addr(&bar), 1); fence_barrier_init();\n'
           '    mbar_arrive_expect_tx(smem_addr(&bar), 4096); tma_load_2d(smem_addr(s), &m, 0, 0, smem_addr(&bar));\n'
           '    mbar_wait(smem_addr(&bar), 0); fence_proxy_async(); tma_store_2d(&m, 0, 0, smem_addr(s));\n'
           '    bulk_commit(); bulk_wait<0>(); }\n}\n')
    ops = opcodes(compile_cuda(src, name="HEADERS_CU"), "k")
    for want in ("LDGSTS.E.BYPASS.128", "LDGDEPBAR", "UTMALDG.2D", "UTMASTG.2D", "SYNCS.ARRIVE.TRANS64"):
        assert any(o == want or o.startswith(want + ".") for o in ops), (want, sorted(set(ops)))


@pytest.mark.parametrize("slug, headers", [("ldgsts", ("cp_async.cuh",)), ("tma", ("mbarrier.cuh", "tma.cuh")),
                                           ("warp_specialization", ("mbarrier.cuh", "tma.cuh", "warpgroup.cuh")),
                                           ("swizzle", ("mbarrier.cuh", "tma.cuh", "swizzle.cuh")),
                                           ("multicast", ("mbarrier.cuh", "tma.cuh", "cluster.cuh"))])
def test_the_solutions_answer_cells_use_the_headers(slug, headers):
    # The course's solution of day 3 / day 5 (the answer cell of the solutions notebook) includes the mechanism's
    # header and writes none of its PTX inline; the notebook prints the header where the lesson is the instruction.
    from autograder.known import kernel_source

    src = kernel_source(slug, "solution")
    for h in headers:
        assert f'#include "{h}"' in src, f"{slug}'s solution does not include {h}"
    assert not re.search(r"\basm\b", src), f"{slug}'s solution writes PTX inline: use the header's wrappers"


# ------------------------------------------------------------------------------------------- SASS held to a record
# Every course kernel's SASS is recorded (a digest per extern "C" entry, tests/data/sass_digests.json) and compared on
# every run: a change of a header, a wrapper or a kernel that moves any instruction of any kernel fails here, named
# by file and entry. Comments, line numbers and code under a macro no course build defines (COURSE_DEBUG_BARRIERS)
# do not move the SASS. A change that is meant to move it is recorded on purpose:
#     COURSE_UPDATE_SASS=1 python -m pytest tests/test_headers.py -k recorded_sass -n 0
# and the commit says why the SASS moved. The digests hold for the NVRTC they were recorded with (another compiler
# emits other SASS: the test then skips and says so).
SASS_DIGESTS = ROOT / "tests" / "data" / "sass_digests.json"
UPDATE_HOW = "COURSE_UPDATE_SASS=1 python -m pytest tests/test_headers.py -k recorded_sass -n 0"
# known answers that must never compile (the compile helper refuses their include before NVRTC reads a file)
REFUSED = {f"kernels/naive_loads/grading/known/{n}.cu" for n in ("include_environ", "include_macro")}


def course_kernel_files() -> list[Path]:
    """Every .cu file of the course: the topics' kernels and the known answers' kernels (the course solutions among
    them), each compiled as its launcher compiles it (no define: every tunable has a default in its file)."""
    files = sorted(p for p in (ROOT / "kernels").rglob("*.cu") if "grading" not in p.parts) + \
        known_cu_files()  # the topics' kernels, then the known answers
    return [f for f in files if str(f.relative_to(ROOT)) not in REFUSED]


# Known answers given as base + mutate that are held too, under "<their expected.toml> [<name>]": kernels of their
# own, written as the changes that make them out of the course solution (autograder/known.py) — the record holds the
# kernel, however its text is stored.
HELD_MUTATED = (("ldgsts", "plain_loads"), ("pipeline", "not_pipelined"), ("pipeline", "reads_twice"))


def course_kernel_sources() -> dict[str, str | Path]:
    """What the record holds: every course .cu file (course_kernel_files), each course solution, the HELD_MUTATED
    known answers and every measured rung given as base + mutate (autograder.known.RUNGS) ({record key: a path or
    the source text})."""
    from autograder.known import RUNGS, known_dir, kernel_source, rung_source, rungs, solution_kernel
    from autograder.spec import all_specs

    out: dict[str, str | Path] = {str(f.relative_to(ROOT)): f for f in course_kernel_files()}
    for spec in all_specs():  # each course solution (known answer "correct"), read from its solutions notebook
        out[f"kernels/{spec.slug}/grading/known/expected.toml [correct]"] = solution_kernel(spec.slug)
    for slug, name in HELD_MUTATED:
        out[f"kernels/{slug}/grading/known/expected.toml [{name}]"] = kernel_source(slug, name)
    for slug in sorted(d.name for d in (ROOT / "kernels").iterdir() if (known_dir(d.name) / RUNGS).is_file()):
        for r in rungs(slug):
            out[f"kernels/{slug}/grading/known/{RUNGS} [{r.name}]"] = rung_source(slug, r.name)
    return out


def _compiled_name(key: str) -> str | None:
    """A known answer is compiled under the name the grader gives it (the exercise's source variable, as
    kernels.topic.answer_cubin does), so that the record, the benchmark and the grader share one cubin; a topic's own
    .cu file under its file name (compile_cuda's default for a path)."""
    parts = Path(key.split(" [")[0]).parts
    if parts[0] != "kernels" or parts[2:4] != ("grading", "known"):
        return None
    from autograder import spec

    return next(iter(spec.load(parts[1]).exercises.values())).answer_var


def sass_digests() -> dict[str, dict[str, str]]:
    """{file: {entry: sha256 of its SASS instructions}} (addresses left out; branch targets are in the text)."""
    import hashlib

    from kernels.sass import disassemble

    out = {}
    for key, src in course_kernel_sources().items():
        funcs = disassemble(compile_cuda(src, name=_compiled_name(key)))
        out[key] = {k: hashlib.sha256("\n".join(i.text for i in ins).encode()).hexdigest()[:20]
                    for k, ins in sorted(funcs.items())}
    return out


def test_every_course_kernel_keeps_its_recorded_sass():
    import json
    import os

    from kernels.compile import ARCH, nvrtc_version

    now = sass_digests()
    if os.environ.get("COURSE_UPDATE_SASS") == "1":
        SASS_DIGESTS.write_text(json.dumps(
            {"what": "sha256 (20 hex digits) of each course kernel entry's SASS instructions, per .cu file",
             "arch": ARCH, "nvrtc": nvrtc_version(), "update": UPDATE_HOW, "digests": now}, indent=1) + "\n")
        return
    rec = json.loads(SASS_DIGESTS.read_text())
    if rec["nvrtc"] != nvrtc_version():
        pytest.skip(f"SASS digests recorded with NVRTC {rec['nvrtc']}, this is NVRTC {nvrtc_version()}: another "
                    f"compiler emits other SASS (record them for this one: {UPDATE_HOW})")
    old = rec["digests"]
    problems = [f"{f}: new file, not recorded" for f in sorted(set(now) - set(old))]
    problems += [f"{f}: recorded, no longer a course kernel file" for f in sorted(set(old) - set(now))]
    for f in sorted(set(now) & set(old)):
        for k in sorted(set(now[f]) | set(old[f])):
            if k not in old[f]:
                problems.append(f"{f}: {k}: new entry, not recorded")
            elif k not in now[f]:
                problems.append(f"{f}: {k}: recorded entry is gone")
            elif now[f][k] != old[f][k]:
                problems.append(f"{f}: {k}: SASS changed")
    assert not problems, ("the SASS of course kernels differs from the record (tests/data/sass_digests.json):\n  "
                          + "\n  ".join(problems) + f"\nIf that is meant (a kernel or header edited on purpose), "
                          f"record it: {UPDATE_HOW}, and say in the commit why the SASS moved.")


def test_the_sass_record_catches_a_moved_instruction(tmp_path, monkeypatch):
    # the digest is of the instructions: a comment does not move it, one changed operand does
    import hashlib

    from kernels.sass import disassemble

    def digest(src):
        ins = disassemble(compile_cuda(src, name="digest_probe.cu"))["k"]
        return hashlib.sha256("\n".join(i.text for i in ins).encode()).hexdigest()[:20]

    base = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 2.0f; }\n'
    assert digest("// a comment\n" + base) == digest(base)
    assert digest(base.replace("2.0f", "3.0f")) != digest(base)
