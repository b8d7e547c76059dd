// Product of a large number by one digit without carry propagation, parameterised for autotune
// (Bainville 2009, "GPU Benchmarks: product by one digit", second algorithm).
//
// X = sum x[i]·B^i with B = 2^LOG_BASE and redundant signed digits |x[i]| <= M = 2B-1; the digit
// k has |k| <= B-1. Each product p[i] = x[i]·k (64-bit) is split into three components
//   lo = p & (B-1)  in [0, B-1],  mid = (p >> L) & (B-1)  in [0, B-1],  hi = p >> 2L  in [-2, 1]
// (>> is arithmetic on signed long, so p = lo + mid·B + hi·B^2 exactly, negative p included),
// and output digit i sums the components landing on position i:
//   z[i] = lo[i] + mid[i-1] + hi[i-2]      (out-of-range terms are 0), i = 0 .. N+1.
// Bounds: |p| <= (2B-1)(B-1) < 2B^2 gives hi in [-2, 1], so z[i] in [-2, 2B-1] ⊂ [-M, M]: the
// output is a valid input again. M = 2B-1 < 2^31 needs LOG_BASE <= 30; |p| < 2^61 fits a long.
//
// Variants (VARIANT_*):
//   V1 : one output digit per work-item, reading x[i], x[i-1], x[i-2] from global memory.
//   V2 : each work-item computes one product into local memory (WG+2 products: the group's own
//        and the two before it), then sums components from its neighbours' products.
//   V3 : BLOCK_SIZE consecutive output digits per work-item; the two previous products are
//        carried in registers, so each digit is loaded once (plus 2 per block); blocks of a
//        multiple of 4 digits use int4 loads and stores.
//   V4 : two kernels: mul1_split writes lo/mid/hi into three scratch arrays, mul1_sum adds them.
// All parameters arrive as -D macros; the defaults below let the file compile alone.

#ifndef N
#define N 4096           // digits of the number
#endif
#ifndef LOG_BASE
#define LOG_BASE 30      // bits per digit
#endif
#ifndef WG
#define WG 64            // work-group size
#endif
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 1     // v3: output digits per work-item
#endif
#if !defined(VARIANT_V1) && !defined(VARIANT_V2) && !defined(VARIANT_V3) && !defined(VARIANT_V4)
#define VARIANT_V1 1
#endif

#if LOG_BASE > 30 || LOG_BASE < 1
#error "LOG_BASE must be in 1..30 (digits up to 2B-1 must fit a signed 32-bit int)"
#endif

#define NOUT (N + 2)     // digits of the product: two more than the input
// Digit indexes are ints wherever the grid's last one (below NOUT + WG·BLOCK_SIZE) fits, as for
// every N up to 2^31 - 2^16 in every configuration; only larger numbers pay for 64-bit indexes.
// -DINDEX=long tests that path at any N.
#ifndef INDEX
#if NOUT + WG * BLOCK_SIZE <= 2147483648
#define INDEX int
#else
#define INDEX long
#endif
#endif
#define MASK ((1L << LOG_BASE) - 1)

// Components of p = x·k: each fits an int, and lo + mid + hi cannot overflow an int.
#define LO(p) ((int)((p) & MASK))
#define MID(p) ((int)(((p) >> LOG_BASE) & MASK))
#define HI(p) ((int)((p) >> (2 * LOG_BASE)))

// Product of digit i, or 0 outside 0..N-1 (positions -2, -1, N, N+1 contribute nothing).
inline long product(__global const int* x, const INDEX i, const int k) {
    return (i >= 0 && i < N) ? (long)x[i] * (long)k : 0L;
}

#if defined(VARIANT_V1)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void mul1(__global const int* x, __global int* z, const int k) {
    const INDEX i = get_global_id(0);
    if (i >= NOUT) return;
    z[i] = LO(product(x, i, k)) + MID(product(x, i - 1, k)) + HI(product(x, i - 2, k));
}

#elif defined(VARIANT_V2)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void mul1(__global const int* x, __global int* z, const int k) {
    __local long prod[WG + 2];  // prod[j] = product of digit g0 - 2 + j
    const int l = get_local_id(0);
    const INDEX g0 = get_group_id(0) * WG;
    prod[l + 2] = product(x, g0 + l, k);
    if (l < 2) prod[l] = product(x, g0 - 2 + l, k);
    barrier(CLK_LOCAL_MEM_FENCE);
    const INDEX i = g0 + l;
    if (i < NOUT) z[i] = LO(prod[l + 2]) + MID(prod[l + 1]) + HI(prod[l]);
}

#elif defined(VARIANT_V3)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void mul1(__global const int* x, __global int* z, const int k) {
    const INDEX i0 = get_global_id(0) * BLOCK_SIZE;
    if (i0 >= NOUT) return;
    long p2 = product(x, i0 - 2, k);  // product of digit i-2
    long p1 = product(x, i0 - 1, k);  // product of digit i-1
    if (i0 + BLOCK_SIZE <= N) {
        // interior block: every digit exists, no bounds checks in the loop
#if BLOCK_SIZE % 4 == 0
        // i0 is a multiple of 4: whole int4 loads and stores (16-byte transactions)
        __global const int4* xv = (__global const int4*)(x + i0);
        __global int4* zv = (__global int4*)(z + i0);
        #pragma unroll
        for (int j = 0; j < BLOCK_SIZE / 4; ++j) {
            const int4 d = xv[j];
            const long q0 = (long)d.x * k, q1 = (long)d.y * k, q2 = (long)d.z * k, q3 = (long)d.w * k;
            zv[j] = (int4)(LO(q0) + MID(p1) + HI(p2), LO(q1) + MID(q0) + HI(p1),
                           LO(q2) + MID(q1) + HI(q0), LO(q3) + MID(q2) + HI(q1));
            p2 = q2;
            p1 = q3;
        }
#else
        #pragma unroll
        for (int j = 0; j < BLOCK_SIZE; ++j) {
            const long p = (long)x[i0 + j] * (long)k;
            z[i0 + j] = LO(p) + MID(p1) + HI(p2);
            p2 = p1;
            p1 = p;
        }
#endif
    } else {
        for (int j = 0; j < BLOCK_SIZE && i0 + j < NOUT; ++j) {
            const long p = product(x, i0 + j, k);
            z[i0 + j] = LO(p) + MID(p1) + HI(p2);
            p2 = p1;
            p1 = p;
        }
    }
}

#elif defined(VARIANT_V4)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void mul1_split(__global const int* x, const int k, __global int* lo, __global int* mid,
                __global int* hi) {
    const INDEX i = get_global_id(0);
    if (i >= N) return;
    const long p = (long)x[i] * (long)k;
    lo[i] = LO(p);
    mid[i] = MID(p);
    hi[i] = HI(p);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void mul1_sum(__global const int* lo, __global const int* mid, __global const int* hi,
              __global int* z) {
    const INDEX i = get_global_id(0);
    if (i >= NOUT) return;
    z[i] = (i < N ? lo[i] : 0) + (i >= 1 && i <= N ? mid[i - 1] : 0) + (i >= 2 ? hi[i - 2] : 0);
}

#endif
