// One per-element formula computed different ways ("Benchmark Leak" CUDA Fortran notes):
//
//     y = x^P / (1 + x) + (2 + x) / (3 + x*x)        x in [0.5, 2), P a small integer
//
// Both terms are positive (y > 0.7), so the relative error of y is well defined, and the
// formula exercises a power, two divisions and a multiply-add.
//
// FORMULA: how x^P is computed
//   FORMULA_POW            pow(x, (float)P)                  (the write-up's x**8.0)
//   FORMULA_POWR           powr(x, (float)P)                 (x >= 0 only, may skip sign handling)
//   FORMULA_EXP_LOG        exp(P * log(x))                   (log's error is amplified P times)
//   FORMULA_NATIVE_EXP_LOG native_exp(P * native_log(x))     (implementation-defined accuracy)
//   FORMULA_MUL            x*x*...*x, P-1 multiplications    (the write-up's x**8)
//   FORMULA_POWN           pown(x, P)
// DIVISION: how a / b is computed
//   DIVISION_DIV           a / b
//   DIVISION_RECIP         a * (1.0f / b)
//   DIVISION_NATIVE        native_divide(a, b)
//   DIVISION_NATIVE_RECIP  a * native_recip(b)
// EXPR: EXPR_LONG computes y in one expression; EXPR_SHORT in several statements with
//   named temporaries. The math is the same, but OpenCL C (like C) contracts a*b + c into
//   an fma only within one expression, so the two can round differently unless
//   -cl-mad-enable / -cl-fast-relaxed-math lets the compiler contract across statements.
// WG work-items per work-group, IPT elements per work-item: work-item l of group g handles
// elements g*WG*IPT + k*WG + l (k < IPT), so consecutive work-items touch consecutive
// elements (coalesced on GPUs, unit-stride vectors on CPUs).
// Build flags (-cl-fast-relaxed-math, -cl-mad-enable, -cl-denorms-are-zero,
// -cl-no-signed-zeros) are tuned by the search space as compiler options.

#ifndef N
#define N 4194304   // elements
#endif
#ifndef P
#define P 8         // the power x^P
#endif
#ifndef WG
#define WG 64       // work-group size
#endif
#ifndef IPT
#define IPT 1       // elements per work-item
#endif
#if !defined(FORMULA_POW) && !defined(FORMULA_POWR) && !defined(FORMULA_EXP_LOG) && \
    !defined(FORMULA_NATIVE_EXP_LOG) && !defined(FORMULA_MUL) && !defined(FORMULA_POWN)
#define FORMULA_POW 1
#endif
#if !defined(DIVISION_DIV) && !defined(DIVISION_RECIP) && !defined(DIVISION_NATIVE) && \
    !defined(DIVISION_NATIVE_RECIP)
#define DIVISION_DIV 1
#endif
#if !defined(EXPR_LONG) && !defined(EXPR_SHORT)
#define EXPR_LONG 1
#endif

#define CHUNK (WG * IPT)  // elements per work-group
// Only sizes the chunk does not divide pay for a bounds check.
#define RAGGED (N % CHUNK != 0)
// Indexes are ints wherever the grid's last one (below N + CHUNK) fits, as for every N up to
// 2^31 - CHUNK; only larger sizes pay for 64-bit indexes. -DINDEX=long tests that path at any N.
#ifndef INDEX
#if N + CHUNK <= 2147483648
#define INDEX int
#else
#define INDEX long
#endif
#endif

#if defined(FORMULA_MUL)
// P-1 multiplications, left to right like a hand-written x*x*...*x.
inline float ipow(float x) {
    float r = x;
    #pragma unroll
    for (int k = 1; k < P; ++k) r *= x;
    return r;
}
#define POWER(x) ipow(x)
#elif defined(FORMULA_POWR)
#define POWER(x) powr((x), (float)P)
#elif defined(FORMULA_EXP_LOG)
#define POWER(x) exp((float)P * log(x))
#elif defined(FORMULA_NATIVE_EXP_LOG)
#define POWER(x) native_exp((float)P * native_log(x))
#elif defined(FORMULA_POWN)
#define POWER(x) pown((x), P)
#else
#define POWER(x) pow((x), (float)P)
#endif

#if defined(DIVISION_RECIP)
#define DIV(a, b) ((a) * (1.0f / (b)))
#elif defined(DIVISION_NATIVE)
#define DIV(a, b) native_divide((a), (b))
#elif defined(DIVISION_NATIVE_RECIP)
#define DIV(a, b) ((a) * native_recip(b))
#else
#define DIV(a, b) ((a) / (b))
#endif

inline float formula(float x) {
#ifdef EXPR_SHORT
    const float power = POWER(x);
    const float left_den = 1.0f + x;
    const float left = DIV(power, left_den);
    const float right_num = 2.0f + x;
    const float square = x * x;
    const float right_den = square + 3.0f;
    const float right = DIV(right_num, right_den);
    return left + right;
#else
    return DIV(POWER(x), 1.0f + x) + DIV(2.0f + x, x * x + 3.0f);
#endif
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void mathpath(__global const float* restrict x, __global float* restrict y) {
    const INDEX base = get_group_id(0) * CHUNK + get_local_id(0);
    #pragma unroll
    for (int k = 0; k < IPT; ++k) {
        const INDEX i = base + k * WG;
#if RAGGED
        if (i >= N) return;
#endif
        y[i] = formula(x[i]);
    }
}
