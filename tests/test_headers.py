"""Mechanisms live in headers: each PTX instruction the course's kernels use is wrapped once, in
kernels/include/<mechanism>.cuh, with its contract beside it; the course's own kernels include those headers rather
than carrying inline copies. (A student's answer cell may still write its own wrappers: that is the exercise.)"""

import re
from pathlib import Path

import pytest

from kernels.compile import COURSE_INCLUDE, compile_cuda
from kernels.sass import opcodes

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
    "warpgroup.cuh": ("setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32", "elect.sync"),
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
    for cu in sorted((ROOT / "kernels").rglob("*.cu")):
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
    from kernels.known import kernel_source

    src = kernel_source(slug, "solution")
    for h in headers:
        assert f'#include "{h}"' in src, f"{slug}'s solution does not include {h}"
    assert not re.search(r"\basm\b", src), f"{slug}'s solution writes PTX inline: use the header's wrappers"
