"""The compile helper and the SASS reader (no GPU needed)."""

from pathlib import Path

import pytest

from kernels import sass
from kernels.compile import CompileError, NotAttempted, clean_source, compile_cuda, kernel_file

ROOT = Path(__file__).resolve().parent.parent


def test_copy_kernels_show_their_instructions():
    cubin = compile_cuda(kernel_file("naive_loads", "copy.cu"))
    assert set(cubin.kernels) >= {"copy_strided", "copy_scalar", "copy_vec16", "copy_grid_stride"}
    sass.require(cubin, "copy_vec16", ["LDG.E.128", "STG.E.128"])
    sass.require(cubin, "copy_scalar", ["LDG.E"], forbidden=["LDG.E.128"])
    ev = sass.path_evidence(cubin, "copy_grid_stride", ["LDG.E.128"])
    assert len(ev.found["LDG.E.128"]) >= 4  # four loads in flight per iteration
    with pytest.raises(sass.SassPathError, match="MISSING LDG.E.128"):
        sass.require(cubin, "copy_scalar", ["LDG.E.128"])
    assert not any(op.startswith(("LDL", "STL")) for k in cubin.kernels for op in sass.opcodes(cubin, k))


def test_path_check_looks_only_in_the_named_kernel():
    src = r'''
    extern "C" __global__ void dead(const float4* x, float4* y) { y[threadIdx.x] = x[threadIdx.x]; }
    extern "C" __global__ void work(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }
    '''
    cubin = compile_cuda(src, name="two.cu")
    assert sass.path_evidence(cubin, "dead", ["LDG.E.128"]).ok
    assert not sass.path_evidence(cubin, "work", ["LDG.E.128"]).ok
    with pytest.raises(KeyError, match="not in the module"):
        sass.path_evidence(cubin, "missing", ["LDG.E"])


def test_compile_error_names_the_students_source_and_line():
    src = 'extern "C" __global__ void k(float* y) {\n  y[0] = 1.0f\n}\n'
    with pytest.raises(CompileError) as err:
        compile_cuda(src, name="ROW_BIAS_CU")
    text = str(err.value)
    assert "ROW_BIAS_CU" in text and ("line 2" in text or "line 3" in text)
    assert "default_program" not in text


def test_unattempted_stub_is_not_a_compiler_error():
    stub = 'extern "C" __global__ void k() {\n    # YOUR CODE HERE\n    raise NotImplementedError()\n}\n'
    with pytest.raises(NotAttempted, match="not attempted"):
        compile_cuda(stub)


def test_solution_markers_become_blank_lines_keeping_line_numbers():
    src = "a\n### BEGIN SOLUTION\nb\n### END SOLUTION\nc"
    assert clean_source(src).splitlines() == ["a", "", "b", "", "c"]


def test_cache_returns_the_same_cubin_and_options_change_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void k(int* p) { *p = N; }'
    a = compile_cuda(src, defines={"N": 1})
    b = compile_cuda(src, defines={"N": 1})
    c = compile_cuda(src, defines={"N": 2})
    assert a.path == b.path and a.data == b.data
    assert c.path != a.path
    assert a.path.is_relative_to(tmp_path)


def test_the_cache_keys_the_course_headers_by_content_not_by_folder(tmp_path, monkeypatch):
    """A student release carries its own copy of kernels/include: the same source and headers share one cubin;
    a header that says something else does not."""
    import shutil

    from kernels import compile as comp

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    src = '#include "course.cuh"\nextern "C" __global__ void k(int* p) { *p = 3; }'
    here = compile_cuda(src)
    copy = tmp_path / "release" / "kernels" / "include"
    shutil.copytree(comp.COURSE_INCLUDE, copy)
    monkeypatch.setattr(comp, "COURSE_INCLUDE", copy)
    comp.include_dirs.cache_clear()
    try:
        assert comp.include_dirs()[0] == str(copy)
        assert compile_cuda(src).path == here.path, "the copied headers hit the same cache entry"
        nested = '#include "mbarrier.cuh"\nextern "C" __global__ void k(int* p) { *p = 4; }'
        before = compile_cuda(nested).path
        (copy / "wgmma.cuh").write_text((copy / "wgmma.cuh").read_text() + "\n// a header neither includes\n")
        (copy / "block_scaled.cuh").unlink()  # as a student release leaves it out
        assert compile_cuda(src).path == here.path and compile_cuda(nested).path == before, \
            "a header the source does not include is not its key"
        (copy / "course.cuh").write_text((copy / "course.cuh").read_text() + "\n// another header\n")
        assert compile_cuda(src).path != here.path, "an edited header compiles again"
        assert compile_cuda(nested).path != before, "and so does a source that includes it through another header"
    finally:
        comp.include_dirs.cache_clear()


def _make_slowly(path: str, log: str, barrier) -> bytes:
    """A process of the race below: waits for the others, then asks for the same cached bytes."""
    import time

    from kernels.paths import made_once

    def make(tmp: Path) -> None:
        with open(log, "a") as f:
            f.write("made\n")
        time.sleep(0.5)
        tmp.write_bytes(b"cubin bytes " + path.encode())

    barrier.wait()
    return made_once(Path(path), make).read_bytes()


def test_parallel_processes_make_a_cached_file_once_and_a_failure_caches_nothing(tmp_path):
    """Parallel test workers and grading lanes that miss the same compile or listing at once: one makes it, the
    others wait and read it (kernels.paths.made_once: compile_cuda, the SASS reader, the grading template)."""
    import multiprocessing as mp

    from kernels.paths import made_once

    target, log = tmp_path / "k.cubin", tmp_path / "log"
    ctx = mp.get_context("fork")
    with ctx.Manager() as m:
        barrier = m.Barrier(3)
        with ctx.Pool(3) as pool:
            got = pool.starmap(_make_slowly, [(str(target), str(log), barrier)] * 3)
    assert got == [b"cubin bytes " + str(target).encode()] * 3
    assert log.read_text() == "made\n", "one process made it, two waited"
    assert not list(tmp_path.glob(".*.tmp")), "nothing half-written left"

    failed = tmp_path / "bad.cubin"

    def boom(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise RuntimeError("compile error")

    with pytest.raises(RuntimeError, match="compile error"):
        made_once(failed, boom)
    assert not failed.exists() and not list(tmp_path.glob(".*.tmp")), "nothing left of a failed make"
    assert made_once(failed, lambda tmp: tmp.write_bytes(b"now")).read_bytes() == b"now", "the next caller makes it"
