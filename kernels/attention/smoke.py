"""A quick first look on the GPU (seconds): each CUDA entry and the exercise's solution on one awkward shape per
head dim, relative error against the fp32 math reference. Run in a subprocess with a timeout before the benchmark:
a hang here costs seconds, not the run. python -m kernels.attention.smoke"""

from __future__ import annotations


def main() -> int:
    import torch

    from ..check import compare
    from ..topic import answer_cubin, run_answer
    from .launch import STAGES, attention
    from .workload import make_inputs, reference

    bad = 0
    for shape in ((1, 2, 200, 128, 0), (1, 3, 77, 64, 1), (1, 2, 1000, 128, 1)):
        inp = make_inputs(shape, 5)
        ref = reference(inp)
        for st in STAGES[shape[3]]:
            out = attention(inp["q"], inp["k"], inp["v"], bool(shape[4]), stages=st)
            torch.cuda.synchronize()
            rep = compare(out, ref, rtol=1e-2)
            bad += not rep.ok
            print(f"cuda s{st} {shape}: {rep.message.splitlines()[0]}", flush=True)
        if shape[3] == 128:
            out = torch.full_like(inp["q"], float("nan"))
            run_answer("attention", answer_cubin("attention", "correct"), inp, out)
            torch.cuda.synchronize()
            rep = compare(out, ref, rtol=1e-2)
            bad += not rep.ok
            print(f"attn_kv correct {shape}: {rep.message.splitlines()[0]}", flush=True)
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
