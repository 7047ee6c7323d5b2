// Known answer "include_environ" (grader integrity, the compiler): the kernel includes the grading process's
// environment file; a compiler that honours it quotes the file — the instructor's secret seed and every exported
// variable — in the error log, and the log reached the student's feedback. Expected: 0 everywhere, flag
// forbidden-include; the source is refused before the compiler reads any file, and the feedback holds no file
// content (tests/test_integrity.py checks that with a secret set).
#include <cuda_bf16.h>
#include "/proc/self/environ"

extern "C" __global__ void row_bias(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* y, long long n,
                                    int cols)
{
}
