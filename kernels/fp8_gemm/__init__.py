"""Day 1 of week3: FP8 GEMM with block scaling."""
