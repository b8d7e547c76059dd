// Cross-correlation of two float4 images, parameterised for autotune.
//
// imgA and imgB are W x H images of float4, row-major (pixel (x, y) at index y*W + x).
// out is OW x OH floats, row-major (offset (dx, dy) at index dy*OW + dx):
//   out(dx, dy) = sum over y in [0, H-dy), x in [0, W-dx) of dot(A(x, y), B(x+dx, y+dy)).
// Equivalently B is zero outside the image and the sum runs over all of A's pixels with
// x < W-dx, y < H-dy; every variant below relies on that zero extension at the edges.
//
// Variants (the "Optimization madness" / IBM "Multicore CPUs can match GPUs" family, and one
// written for wide GPUs):
//   VARIANT_DIRECT : OPX x OPY neighbouring outputs per work-item straight from global memory.
//                    OPX = OPY = 1 is the naive kernel (WGY = 1: the write-up's 1D work-groups);
//                    2x2 won in the write-up. Each A pixel is loaded once for all outputs and
//                    B pixels slide through a register window along x, so a step of x loads
//                    1 + OPY float4s for OPX*OPY terms instead of 2 per term.
//   VARIANT_LOCAL  : the same, but the work-group stages a TY x TX tile of A and the matching
//                    (TY + WGY*OPY - 1) x (TX + WGX*OPX - 1) tile of the moving image B in
//                    local memory (zero-filled outside the image, so no bounds checks inside).
//   VARIANT_SWEPT  : walks B's pixels u = x + dx instead of A's, so the OPY B pixels of a step
//                    are the same for every work-item of a row (one broadcast load each) and A
//                    slides through the register window. A work-item's OPX outputs are strided
//                    by WGX, which keeps the one new A load per step coalesced across the row.
//                    The sum over rows y is split into KSL slices inside the work-group (added
//                    in local memory) and KSG slices across work-groups (added by a second
//                    kernel, correlate_sum), which gives a wide GPU enough work-items.
//   UNROLL         : unroll factor of the inner loop (swept: of its rounds of OPX steps).
//   ACC_VEC        : float4 accumulators (a*b added lane-wise, reduced once at the end)
//                    instead of ACC_DOT's one dot() per term; ACC_CHAIN: a scalar accumulator
//                    fed by four chained multiply-adds per term.
// Output sizes need not divide the work-group tile: work-items past the edge compute nothing
// or skip their stores. All parameters arrive as -D macros; the defaults let the file compile
// alone. The variants' kernels are in correlate_direct.cl, correlate_local.cl and
// correlate_swept.cl, included at the end (as CLBlast splits xgemm into parts).

#ifndef W
#define W 64        // image width in float4 pixels
#endif
#ifndef H
#define H 64        // image height
#endif
#ifndef OW
#define OW 32       // offsets dx in [0, OW)
#endif
#ifndef OH
#define OH 32       // offsets dy in [0, OH)
#endif
#ifndef WGX
#define WGX 16      // work-group columns (along dx)
#endif
#ifndef WGY
#define WGY 1       // work-group rows (along dy)
#endif
#ifndef OPX
#define OPX 2       // outputs per work-item along dx
#endif
#ifndef OPY
#define OPY 2       // outputs per work-item along dy
#endif
#if !defined(VARIANT_DIRECT) && !defined(VARIANT_LOCAL) && !defined(VARIANT_SWEPT)
#define VARIANT_DIRECT 1
#endif
#ifndef KSL
#define KSL 1       // swept: row slices per work-group
#endif
#ifndef KSG
#define KSG 1       // swept: row slices across work-groups
#endif
#ifndef TX
#define TX 32       // local: A tile columns
#endif
#ifndef TY
#define TY 4        // local: A tile rows
#endif
#ifndef UNROLL
#define UNROLL 1    // unroll factor of the inner loop (swept: of its rounds)
#endif
#if !defined(ACC_DOT) && !defined(ACC_VEC) && !defined(ACC_CHAIN)
#define ACC_DOT 1
#endif
#include "autotune.h"

#ifdef ACC_VEC
typedef float4 acc_t;
#define ACC_ZERO ((float4)(0.0f))
#define ACCUM(acc, a, b) MULTIPLY_ADD(acc, a, b)
#define REDUCE(acc) ((acc).x + (acc).y + (acc).z + (acc).w)
#elif defined(ACC_CHAIN)
// one expression of four contractible a*b + c: four FMAs into a scalar accumulator, a quarter
// of ACC_VEC's registers (dot() may compile to a multiply, three FMAs and an add)
typedef float acc_t;
#define ACC_ZERO 0.0f
#define ACCUM(acc, a, b) \
    ((acc) = (acc) + (a).x * (b).x + (a).y * (b).y + (a).z * (b).z + (a).w * (b).w)
#define REDUCE(acc) (acc)
#else
typedef float acc_t;
#define ACC_ZERO 0.0f
#define ACCUM(acc, a, b) ((acc) += dot((a), (b)))
#define REDUCE(acc) (acc)
#endif

inline void zero(acc_t acc[OPY][OPX]) {
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) acc[j][i] = ACC_ZERO;
    }
}

// Stores the work-item's block of outputs with origin (dx0, dy0), skipping those past the edge.
inline void store(__global float* restrict out, int dx0, int dy0, acc_t acc[OPY][OPX]) {
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) {
            if (dx0 + i < OW && dy0 + j < OH) out[(dy0 + j) * OW + dx0 + i] = REDUCE(acc[j][i]);
        }
    }
}

// One step of the direct and local variants' sliding window (win[j][i] = B pixel under output
// (i, j)): add the A pixel's terms, then shift the window left by one column. Private arrays
// only, so both address spaces share it; the caller loads win[j][OPX - 1] beforehand.
inline void slide(float4 a, float4 win[OPY][OPX], acc_t acc[OPY][OPX]) {
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) ACCUM(acc[j][i], a, win[j][i]);
    }
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX - 1; ++i) win[j][i] = win[j][i + 1];
    }
}

// The sliding window's loads, from B pixels in global (direct) or local (local) memory: a
// function cannot take both address spaces in OpenCL 1.2. PRELOAD fills columns 0..OPX-2
// from b_row (rows `pitch` apart); SLIDE_IN loads column OPX-1 for step x.
#define PRELOAD(win, b_row, pitch)                                            \
    for (int j_ = 0; j_ < OPY; ++j_)                                          \
        for (int i_ = 0; i_ < OPX - 1; ++i_) win[j_][i_] = b_row[j_ * (pitch) + i_]
#define SLIDE_IN(win, b_row, pitch, x)                                        \
    for (int j_ = 0; j_ < OPY; ++j_) win[j_][OPX - 1] = b_row[j_ * (pitch) + (x) + OPX - 1]

#if defined(VARIANT_DIRECT)
#include "correlate_direct.cl"
#elif defined(VARIANT_LOCAL)
#include "correlate_local.cl"
#else
#include "correlate_swept.cl"
#endif
