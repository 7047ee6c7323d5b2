// Known answer "include_macro" (grader integrity, the compiler): the same file read through a macro and the `%:`
// digraph of `#`, which a pattern looking for "#include" followed by a path does not see. Expected: 0 everywhere,
// flag forbidden-include (a header must be named literally).
#include <cuda_bf16.h>
#define PARENT_ENV </proc/self/../self/environ>
%:include PARENT_ENV

extern "C" __global__ void row_bias(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* y, long long n,
                                    int cols)
{
}
