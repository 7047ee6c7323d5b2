"""Week 2, day 4: what the GEMM model (kernels/gemm/model.py) was fitted on and how it does, as data: the fitted
constants, the rows they were fitted to and the rows held out, the fit run, the constants by kind (physics with its
source, fitted with its rows), and every held-out row outside +-10 % on each recorded GPU with the reason. model.py
re-exports every name; kernels.models reads FIT from there."""

from __future__ import annotations

__all__ = ["CONSTANTS", "FIT", "FIT_ROWS", "HELD_OUT", "HELD_OUT_BAND", "KNOWN_MISSES", "RUNG6_HELD_OUT"]

# Fitted constants (see FIT).
CONSTANTS = {"TC_EFF": 0.7868, "L2_TBPS": 10.0, "LATENCY_NS": 878.5, "BUBBLE_NS": 114.0,
             "EPILOGUE_NS": 5725.4, "FMA_TFLOPS": 30.3, "START_NS": 5328.2}
HELD_OUT_BAND = 0.10  # held-out rows within +-10 % on each recorded GPU, or named in FIT
# Rung 6 (r6_store_warp.cu) is held out at every shape: the model's whole account of its gain over rung 5 is one
# term with no constant of its own — the per-tile epilogue E falls from the fitted EPILOGUE_NS to the shared-memory
# staging (_staging_ns, computed from the SM's shared-memory rate) — so its rows test that account instead of tuning
# the constants to it. Records taken before rung 6 (the H200's) have no such rows: HELD_OUT_CHECK checks what a record
# measured.
RUNG6_HELD_OUT = ("store_warp 8192x8192x8192", "store_warp 2048x2048x2048", "store_warp 128x8192x8192")
# Rows (bench row names "<rung> <shape>") the constants are fit to, and rows held out and checked against them.
# Each fit row pins a term where it binds: FMA (tiled), the round trip (wgmma, s1), the drain (rung 3 at 4 stages),
# L2 (s2 at 8192^3 and at 2048^3, where nothing comes from DRAM), the tensor core against L2 (rung 4, and rung 5,
# whose multicast halves B's L2 bytes and nothing else), epilogue and start (rung 4 at 2048^3, rung 3 skinny; rung 2 and
# rung 3 with one stage at 2048^3, one tile a CTA); the tensor cores' sustained fraction TC_EFF where W binds at
# 8192^3 (rungs 4 and 5, Triton's kernel, and the exercise at four stages, whose epilogue term is the computed
# staging: its time there is the tensor term and START_NS alone). Seven fitted constants on fourteen rows: the course's
# rule, at most one fitted constant per two rows it is fitted on.
FIT_ROWS = ("tiled 8192x8192x8192", "wgmma 8192x8192x8192", "pipelined s1 8192x8192x8192",
            "pipelined s2 8192x8192x8192", "pipelined 8192x8192x8192", "persistent 8192x8192x8192",
            "cluster 8192x8192x8192", "pipelined 128x8192x8192", "persistent 2048x2048x2048",
            "pipelined s2 2048x2048x2048", "wgmma 2048x2048x2048", "pipelined s1 2048x2048x2048",
            "triton 8192x8192x8192", "exercise s4 8192x8192x8192")
# Held out: every other modelled row, each a rung at a shape or depth it was never fitted at — the skinny shape for
# every rung but rung 3, rung 3 at six stages, Triton's kernel at 2048^3 and skinny, rung 6 (RUNG6_HELD_OUT), the
# exercise at one stage, and rungs 1, 3 and 5 at 2048^3.
HELD_OUT = ("pipelined 2048x2048x2048", "cluster 2048x2048x2048", "triton 2048x2048x2048",
            "tiled 128x8192x8192", "wgmma 128x8192x8192", "pipelined s1 128x8192x8192", "pipelined s2 128x8192x8192",
            "persistent 128x8192x8192", "cluster 128x8192x8192", "triton 128x8192x8192",
            "tiled 2048x2048x2048", "pipelined s6 128x8192x8192", "pipelined s6 2048x2048x2048",
            "exercise s1 8192x8192x8192", "pipelined s6 8192x8192x8192") + RUNG6_HELD_OUT
# Fit by model.fit(rows, copy ceiling, FIT_ROWS, iters=3000, sm_mhz=run_sm_mhz(record)) to the record of an H100 run
# (kernels/gemm/recorded_h100.json, every row on the exercise's inputs; tests/test_gemm.py refits it): worst error on
# the fit rows FIT["band"]; a refit started from these constants returns them. Started from the constants of the fit
# before it (the tensor rate then held at the run's cuBLAS, TC_EFF = that rate over the clock-adjusted peak). The
# loss has other minima, which other starts reach: one with a lower summed loss but BUBBLE_NS near zero (rung 3 bound
# by L2, not by its drain) and a larger worst fit-row error; this one has the smallest worst fit-row error of those
# found, TC_EFF differs little between them, and its tensor busy share of rungs 5 and 6 agrees with ncu's counter
# (within the 4 points tests/test_gemm.py allows).
# EPILOGUE_NS and START_NS trade against each other where a CTA has one tile (2048^3);
# the 8192^3 rows of rungs 4 and 5 (sixteen tiles a CTA) pin EPILOGUE_NS. DRAM is not a constant: every prediction
# takes the copy ceiling of its own run (dram_tbps; DRAM_TBPS, the fit run's, where none is given), nor is the SM
# clock (sm_mhz: run_sm_mhz of a record; SM_MHZ, the fit run's mean, where none is given).
FIT = {"source": "kernels/gemm/recorded_h100.json: NVIDIA H100 80GB HBM3, driver 580.159.04, 2026-11-26, "
                 "make gpu-test",
       "device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "date": "2026-11-26", "copy_tbps": 3.0028,
       "sm_mhz": 1886.5, "rows": len(FIT_ROWS), "band": 0.052, **CONSTANTS,
       # Held-out rows outside +-10 % on each recorded GPU (prediction / measurement - 1), with these constants and
       # the record's own copy ceiling and SM clock (HELD_OUT_CHECK.errors(record)): named, not hidden. All are below
       # the course's hard band (20 %) but one: rung 3 with six stages at 8192^3 on the H100 (stage_depth_story).
       "held_out_outside_band": {
           "h100": {"pipelined 2048x2048x2048": -0.136, "triton 2048x2048x2048": -0.122,
                    "tiled 128x8192x8192": +0.147, "wgmma 128x8192x8192": -0.123,
                    "pipelined s6 8192x8192x8192": +0.332},
           "h200": {"pipelined 2048x2048x2048": -0.168, "triton 2048x2048x2048": -0.165,
                    "tiled 128x8192x8192": +0.143, "wgmma 128x8192x8192": -0.120, "persistent 128x8192x8192": -0.154,
                    "cluster 128x8192x8192": -0.134, "triton 128x8192x8192": -0.126,
                    "pipelined s6 128x8192x8192": -0.153, "pipelined s6 2048x2048x2048": -0.162,
                    "store_warp 128x8192x8192": -0.119}}}
_SKINNY_WHY = ("the skinny shape: 64 tiles on 132 SMs, one tile a CTA and nothing to overlap its fill and epilogue "
               "with; the model charges each CTA the whole serial sum (its one skinny fit row is rung 3)")
_ROUNDS_WHY = ("256 tiles on 132 SMs: two rounds of one CTA per SM, each paying the whole epilogue and fill in the "
               "model; the GPU ran faster than that serial sum")
_TRITON_WHY = "Triton's own epilogue (a TMA store) and scheduling, modelled as rung 4 with 3 stages"
_TILED_WHY = ("not explained: rung 1 (fp32 FMA, no tensor core) at the skinny shape runs below the FMA rate fitted on "
              "the square shapes, by about as much on both GPUs")
# The constants by kind (kernels.models): "physics" with its source, "fitted" with the rows it was fitted on; the
# held-out rows' regime; every row of FIT_ROWS + HELD_OUT outside +-10 % per GPU, and why.
FIT.update(constants={
    **{k: {"kind": "fitted", "rows": FIT_ROWS} for k in ("TC_EFF", "L2_TBPS", "LATENCY_NS", "BUBBLE_NS",
                                                          "EPILOGUE_NS", "START_NS")},
    "FMA_TFLOPS": {"kind": "fitted", "rows": ("tiled 8192x8192x8192",)},
    "TC_FLOP_PER_CLK_SM": {"kind": "physics", "source": "dense bf16 FLOP per SM per clock of Hopper's tensor cores: "
                                                        "the H100 datasheet's dense bf16 peak over its 132 SMs at the "
                                                        "clock it assumes (sim.H100), 4 tensor cores x 512 FMA x 2 "
                                                        "(Hopper whitepaper)"},
    "sm_mhz": {"kind": "physics", "source": "the SM clock measured in the same run as each record (kernels.clock: "
                                            "the mean of its rows' sm_mhz, record_sm_mhz); a record that sampled "
                                            "none: the clock the datasheet's peak assumes (sim.H100.clock_ghz)"},
    "SMS": {"kind": "physics", "source": "132 SMs (H100 datasheet; the H200 is the same GH100 die)"},
    "resident_ctas": {"kind": "physics", "source": "228 KiB shared memory and 64K registers per SM (CUDA guide, "
                                                   "cc 9.0) against the kernel's SASS and launch"},
    "L2_BYTES": {"kind": "physics", "source": "50 MB L2 (H100 whitepaper)"},
    "copy_tbps": {"kind": "physics", "source": "the copy ceiling measured in the same run as each record (DRAM)"}},
    held_out_regime="rungs at shapes or depths never fitted: the skinny shape (all but rung 3), six stages, Triton "
                    "at 2048^3 and skinny, rung 6, the exercise at one stage, rungs 1/3/5 at 2048^3",
    misses={"h100": {"pipelined 2048x2048x2048": "rung 3 at 2048^3: " + _ROUNDS_WHY,
                     "triton 2048x2048x2048": _TRITON_WHY, "tiled 128x8192x8192": _TILED_WHY,
                     "wgmma 128x8192x8192": _SKINNY_WHY,
                     "pipelined s6 8192x8192x8192": "KNOWN_MISSES: six stages read B from DRAM once per CTA"},
            "h200": {"pipelined 2048x2048x2048": "rung 3 at 2048^3: " + _ROUNDS_WHY,
                     "triton 2048x2048x2048": _TRITON_WHY, "tiled 128x8192x8192": _TILED_WHY,
                     "wgmma 128x8192x8192": _SKINNY_WHY, "persistent 128x8192x8192": _SKINNY_WHY,
                     "cluster 128x8192x8192": _SKINNY_WHY, "triton 128x8192x8192": _SKINNY_WHY,
                     "pipelined s6 128x8192x8192": _SKINNY_WHY, "store_warp 128x8192x8192": _SKINNY_WHY,
                     "pipelined s6 2048x2048x2048": "six stages leave one CTA per SM at 2048^3: " + _ROUNDS_WHY,
                     "pipelined s2 2048x2048x2048": "a fit row on the H100: the H200 ran it faster than the H100 on "
                                                    "the same SM, at a shape that reads no DRAM (no term of the model "
                                                    "differs between them there but the SM clock, which the H200's "
                                                    "record did not sample for this row: the datasheet's, below the "
                                                    "H100 run's)"}})
# The one row outside the hard band, and why (stage_depth_story computes it from a record).
KNOWN_MISSES = {"pipelined s6 8192x8192x8192": (
    "four and six stages leave the same one CTA per SM, so the model predicts them alike; on the H100 six stages ran "
    "near the floor of reading B from DRAM once per CTA (the two CTAs that share each B panel out of step: ncu "
    "measured far more DRAM bytes for six stages than for four, which read what the in-step wave predicts — "
    "stage_depth_story prints the bytes of the record's GPU), four stages did not; the H200's faster DRAM hides most "
    "of it")}
