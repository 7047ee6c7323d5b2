"""Week 3 day 1's pictures (kernels/fp8_gemm/pictures.py), on CPU: what they draw is the kernel's contract, not just a
figure. The sa_t entries one CTA reads at k-block kb are exactly row kb, columns m0 .. m0 + 127 — one contiguous
512-byte run of sa_t's memory holding sa[m0 .., kb] — and a ring simulated with the picture's offsets hands the
consumer the right scales at every k-block; the sb entry is sb[n0 / 128, kb] at flat index n_tile * kblocks + kb; the
stage is kb % STAGES; the figure outlines exactly those; the K-major verdicts; the quantization demo's ordering; the
record lines with and without a record."""

from __future__ import annotations

import io
import random

import pytest
import torch

from kernels.fp8_gemm import launch, pictures as P, workload

SHAPES = [(128, 128, 128), (256, 256, 1024), (384, 640, 1152), (640, 256, 896)]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    return buf.getvalue()


def _cases(seed: int, count: int = 12):
    rng = random.Random(seed)
    for _ in range(count):
        m, n, k = rng.choice(SHAPES)
        yield (m, n, k), rng.randrange(0, m, 128), rng.randrange(0, n, 128), rng.randrange(k // 128)


def test_sa_t_entries_are_row_kb_cols_m0_and_one_contiguous_run():
    for shape, m0, n0, kb in _cases(1):
        m, n, k = shape
        mask = P.sa_t_mask(shape, m0, kb)
        assert tuple(mask.shape) == (k // 128, m)
        rows, cols = mask.nonzero(as_tuple=True)
        assert set(rows.tolist()) == {kb} and cols.tolist() == list(range(m0, m0 + 128)), (shape, m0, kb)
        u = P.scale_use(shape, m0, n0, kb)
        assert (u["sa_t_row"], list(u["sa_t_cols"])) == (kb, list(range(m0, m0 + 128)))
        assert u["sa_t_shape"] == (k // 128, m) and u["sa_box_bytes"] == 512 == launch.SA_BYTES
        # the run of sa_t's memory at that byte offset is sa[m0 .. m0 + 127, kb], in order
        inp = workload.make_inputs(shape, seed=kb, device="cpu")
        flat = inp["sa_t"].flatten()
        start = u["sa_t_byte_offset"] // 4
        assert u["sa_t_byte_offset"] % 4 == 0
        assert torch.equal(flat[start:start + 128], inp["sa"][m0:m0 + 128, kb])
        assert torch.equal(flat[start:start + 128], inp["sa_t"][mask])


def test_sb_entry_is_one_float_at_n_tile_times_kblocks_plus_kb():
    for shape, m0, n0, kb in _cases(2):
        _, n, k = shape
        u = P.scale_use(shape, m0, n0, kb)
        assert u["sb_shape"] == (n // 128, k // 128) and u["sb_index"] == (n0 // 128, kb)
        assert u["sb_flat"] == (n0 // 128) * (k // 128) + kb
        mask = P.sb_mask(shape, n0, kb)
        assert int(mask.sum()) == 1 and tuple(mask.nonzero()[0].tolist()) == u["sb_index"]
        sb = workload.make_inputs(shape, seed=0, device="cpu")["sb"]
        assert sb.flatten()[u["sb_flat"]] == sb[u["sb_index"]] == sb[mask][0]


def test_ring_slot_and_offsets_follow_the_kernel():
    """Stage kb % STAGES, use kb // STAGES and its parity; the tiles at s * 32 KiB (B 16 KiB after A), the scales
    after the tile ring; every slot inside launch.smem_bytes less its 1 KiB of alignment slack, none overlapping."""
    for stages in (2, 3, launch.STAGES):
        kblocks = 13
        slots = P.ring_slots(kblocks, stages)
        assert sorted(kb for kbs in slots.values() for kb in kbs) == list(range(kblocks))
        spans = []
        for kb in range(kblocks):
            u = P.scale_use((256, 256, 128 * kblocks), 128, 0, kb, stages)
            assert (u["slot"], u["use"], u["parity"]) == (kb % stages, kb // stages, (kb // stages) & 1)
            assert kb in slots[u["slot"]]
            assert u["smem_a"] == u["slot"] * launch.STAGE_TILES and u["smem_b"] == u["smem_a"] + 128 * 128
            assert u["smem_sa"] == stages * launch.STAGE_TILES + u["slot"] * launch.SA_BYTES
            assert u["smem_sa"] + launch.SA_BYTES <= launch.smem_bytes(stages) - 1024
            spans += [(u["smem_a"], u["smem_a"] + 128 * 128), (u["smem_b"], u["smem_b"] + 128 * 128),
                      (u["smem_sa"], u["smem_sa"] + launch.SA_BYTES)]
        spans = sorted(set(spans))
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans
    assert P.SA_BASE == launch.STAGES * launch.STAGE_TILES


def test_a_ring_run_with_the_pictures_offsets_hands_each_k_block_its_scales():
    """The producer copies sa_t's 512 bytes at sa_t_byte_offset into the slot at smem_sa, k-block after k-block; the
    consumer of k-block kb reads sa_ring[s * BM + r] right after — it is sa[m0 + r, kb], also once the ring wraps."""
    shape, m0 = (384, 128, 128 * 15), 256
    inp = workload.make_inputs(shape, seed=3, device="cpu")
    sa_t_bytes = inp["sa_t"].flatten()
    smem = torch.full((launch.smem_bytes() // 4,), float("nan"))
    for kb in range(shape[2] // 128):
        u = P.scale_use(shape, m0, 0, kb)
        src = u["sa_t_byte_offset"] // 4
        dst = u["smem_sa"] // 4
        smem[dst:dst + 128] = sa_t_bytes[src:src + 128]                       # the TMA box
        ring = smem[P.SA_BASE // 4:]
        got = ring[u["slot"] * 128:(u["slot"] + 1) * 128]                     # sa_ring[s * BM + r]
        assert torch.equal(got, inp["sa"][m0:m0 + 128, kb]), kb


def test_bad_tiles_are_refused():
    for kw in ({"m0": 64}, {"n0": 256}, {"kb": 8}, {"kb": -1}, {"shape": (200, 256, 1024)}):
        args = {"shape": (256, 256, 1024), "m0": 128, "n0": 128, "kb": 7} | kw
        with pytest.raises(ValueError):
            P.scale_use(**args)
    with pytest.raises(ValueError):
        P.ring_slots(0)


def test_scale_layout_figure_outlines_what_the_cta_reads():
    shape, m0, n0, kb = (384, 256, 1152), 256, 128, 7
    u = P.scale_use(shape, m0, n0, kb)
    fig = P.plot_scale_layout(shape, m0, n0, kb)
    _png(fig)
    ax_a, ax_b, ax_sat, ax_sb, ax_ring = fig.axes
    by_gid = {p.get_gid(): p for ax in fig.axes for p in ax.patches if p.get_gid()}
    assert set(by_gid) == {"a_tile", "b_tile", "sa_box", "sb_cell", "stage"}
    box = lambda p: (p.get_x(), p.get_y(), p.get_width(), p.get_height())  # noqa: E731
    assert box(by_gid["a_tile"]) == (kb * 128, m0, 128, 128) and by_gid["a_tile"] in ax_a.patches
    assert box(by_gid["b_tile"]) == (kb * 128, n0, 128, 128) and by_gid["b_tile"] in ax_b.patches
    assert box(by_gid["sa_box"]) == (m0, kb, 128, 1) and by_gid["sa_box"] in ax_sat.patches
    assert box(by_gid["sb_cell"]) == (kb, n0 // 128, 1, 1) and by_gid["sb_cell"] in ax_sb.patches
    assert by_gid["stage"] in ax_ring.patches and by_gid["stage"].get_x() == pytest.approx(u["slot"] * 1.1 - 0.04)
    # the images are the scales: sa_t as it lies in memory, sb
    sa, sb = P._example_scales(shape)
    assert torch.equal(torch.as_tensor(ax_sat.images[0].get_array()), sa.t())
    assert torch.equal(torch.as_tensor(ax_sb.images[0].get_array()), sb)
    sb_labels = sorted(int(t.get_text()) for t in ax_sb.texts)
    assert sb_labels == list(range(sb.numel()))
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + " " + " ".join(
        ax.get_title() for ax in fig.axes)
    assert f"byte {u['sa_t_byte_offset']}" in texts and f"sb[{u['sb_flat']}]" in texts
    assert f"k-block {kb} -> stage s = {kb} % {launch.STAGES} = {u['slot']}" in texts
    assert f"{2 * 128 * 128 + 512} bytes of expect-tx" in texts
    stage_labels = [t.get_text() for t in ax_ring.texts if t.get_text().startswith("stage ")]
    assert stage_labels == [f"stage {s}\nkb {', '.join(map(str, kbs)) or '-'}"
                            for s, kbs in P.ring_slots(shape[2] // 128).items()]


def test_k_major_verdicts_and_picture():
    verdict = {(c["product"].split(" (")[0], c["operand"]): P.k_major(c) for c in P.K_MAJOR_CASES}
    assert verdict == {("D = A · Bᵀ", "A"): True, ("D = A · Bᵀ", "B"): True, ("S = Q · Kᵀ", "Q"): True,
                       ("S = Q · Kᵀ", "K"): True, ("O = P · V", "V"): False, ("O = P · V", "Vᵀ"): True}
    v = next(c for c in P.K_MAJOR_CASES if c["operand"] == "V")
    assert P.fp8_wgmma_reads(v) == "transpose first"
    assert all(P.fp8_wgmma_reads(c) == "as stored" for c in P.K_MAJOR_CASES if c is not v)
    fig = P.plot_k_major()
    _png(fig)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == len(P.K_MAJOR_CASES)
    assert [("MN-major" in t) for t in titles] == [not P.k_major(c) for c in P.K_MAJOR_CASES]
    for ax, c in zip(fig.axes, P.K_MAJOR_CASES):
        arrows = {p.get_gid(): p for p in ax.patches if p.get_gid()}
        (x0, y0), (x1, y1) = arrows["contracted"]._posA_posB
        assert (y0 == y1) == P.k_major(c)  # drawn along the contiguous rows exactly when K-major


def test_quantization_demo_shows_why_scales_and_why_fine_ones():
    tiny, huge, spiked = P.quantization_demo()
    for r in (tiny, huge):
        assert r["direct"] > 0.3 and r["per_tensor"] < 0.035 and r["per_1x128"] < 0.035, r
    assert spiked["per_tensor"] > 3 * spiked["per_1x128"] and spiked["per_1x128"] < 0.035, spiked


def _rounds_doc():
    return {"shape": [8192, 8192, 8192], "device": "NVIDIA Test GPU", "rounds": 18, "baseline": "cublaslt_blockwise",
            "tflops": {"block_scaled": 100.0, "cublaslt_blockwise": 120.0},
            "ratios": {"block_scaled": {"says": "behind: 0.80x (0.78-0.82x)"}},
            "sm_mhz": {"block_scaled": 1700.0, "cublaslt_blockwise": 1710.0},
            "accuracy": {"block_scaled": 1.7e-3, "cublaslt_blockwise": 1.7e-3},
            "kernels": {"block_scaled": ["fp8_gemm_block_scaled"], "cublaslt_blockwise": ["sm90_xmma_gemm"]},
            "skipped": {"triton_fp8": "needs triton"}}


def test_record_lines():
    from kernels.fp8_gemm import rounds

    assert P.accuracy_lines(None) == P.NO_RECORD == P.rounds_lines(None)
    bare = {"device": "NVIDIA Test GPU", "date": "2026-12-03", "rows": []}
    assert "holds no accuracy table" in P.accuracy_lines(bare) and "NVIDIA Test GPU" in P.accuracy_lines(bare)
    assert "holds no interleaved rounds" in P.rounds_lines(bare)
    rows = [{"name": "block_scaled", "rel_err_vs_fp32": 1.6e-3, "max_abs_err": 0.5, "rel_err_vs_unquantized": 3.7e-2,
             "runs": 3}]
    no_promo = [{"name": "block_scaled no promotion", "rel_err_vs_fp32": 2.5e-2, "max_abs_err": 4.0,
                 "rel_err_vs_unquantized": 4.5e-2, "runs": 1}]
    text = P.accuracy_lines(bare | {"accuracy": rows, "accuracy_no_promotion": no_promo})
    assert "recorded on NVIDIA Test GPU (2026-12-03)" in text
    assert "block_scaled no promotion" in text and "2.500e-02" in text and "1.600e-03" in text
    doc = bare | {"rounds": _rounds_doc()}
    assert P.rounds_lines(doc).endswith(rounds.table(doc["rounds"]))


def test_the_notebook_shows_the_pictures_and_the_record_lines():
    import nbformat

    from kernels.record import KERNELS

    nb = nbformat.read(str(KERNELS.parent / "solutions/week3/day1_fp8_gemm.ipynb"), as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for call in ("pictures.plot_scale_layout()", "pictures.plot_k_major()", "pictures.quantization_demo()",
                 "pictures.accuracy_lines(recorded)", "pictures.rounds_lines(recorded)", "torch.finfo(",
                 "launch.HAS_RUNG1", "launch.LEFT_OUT", "bench.check_all()"):
        assert call in code, call
    assert "day_cubin" not in code and "launch import cubin" not in code
