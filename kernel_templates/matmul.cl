// Single-precision matrix multiply C = A * B, parameterised for autotune.
//
// Variants (the TU Hamburg "Dataparallel Programming on GPUs" family and beyond):
//   ALGO_NAIVE : one output per work-item, operands straight from global memory.
//   ALGO_BLOCKED : WPTM x WPTN outputs per work-item straight from global memory (no local
//                memory, no barriers), B rows read as vectors of width VW; suits CPUs.
//   ALGO_TILED : work-group tile MWG x NWG of C, K-tiles of depth KWG staged in local memory,
//                WPTM x WPTN outputs per work-item (2D register blocking), vector loads of width
//                VW, optional padding of the local tiles (PAD), strided or contiguous ownership of
//                outputs (SM, SN), double-buffered local tiles with register prefetch (DB), and a
//                K loop unrolled by UNROLL. The NVIDIA-SDK BLOCK_SIZE kernel is MWG = NWG = KWG =
//                MDIMC = NDIMC = BLOCK_SIZE; "two outputs per thread" is WPTN = 2. With KSPLIT > 1
//                (split-K, for a C too small to fill the device), work-group z takes the z-th
//                chunk of K and writes its partial product to a scratch buffer; matmul_reduce
//                sums them into C.
//
// Storage: LAYOUT_ROW (default) or LAYOUT_COL. Column-major C = A*B is computed as the
// row-major product C^T = B^T * A^T, which reads the same buffers with M and N swapped.
// All parameters arrive as -D macros; the defaults below let the file compile alone.
//
// Any M, N, K (edges): where the tiles do not divide the matrix, the last tile along M or N
// is shifted back to end at the matrix's edge, overlapping its neighbour (the rows and
// columns they share are computed twice, with the same operations in the same order, so both
// write the same value); that needs no test in any loop. A partial last K-tile (tiled) is
// filled with zeros. The naive variant returns from work-items outside C. All of it is under
// #if, so sizes the tiles divide compile exactly as before.

#ifndef M
#define M 256        // rows of A and C
#endif
#ifndef N
#define N 256        // columns of B and C
#endif
#ifndef K
#define K 256        // columns of A, rows of B
#endif
#if !defined(ALGO_NAIVE) && !defined(ALGO_TILED) && !defined(ALGO_BLOCKED)
#define ALGO_TILED 1
#endif
#ifndef MWG
#define MWG 64       // C tile rows per work-group
#endif
#ifndef NWG
#define NWG 64       // C tile columns per work-group
#endif
#ifndef KWG
#define KWG 16       // tiled: K-tile depth staged in local memory
#endif
#ifndef MDIMC
#define MDIMC 16     // work-group rows
#endif
#ifndef NDIMC
#define NDIMC 16     // work-group columns
#endif
#ifndef VW
#define VW 4         // vector width of global loads (blocked: of B rows and C stores)
#endif
#ifndef SM
#define SM 0         // tiled: outputs along M contiguous (0), strided (1), float4 groups strided (2)
#endif
#ifndef SN
#define SN 0         // tiled: the same along N
#endif
#ifndef PAD
#define PAD 0        // tiled: floats of padding per local tile row
#endif
#ifndef DB
#define DB 0         // tiled: double-buffered local tiles with register prefetch
#endif
#ifndef UNROLL
#define UNROLL 1     // unroll factor of the inner K loop
#endif
#ifndef KSPLIT
#define KSPLIT 1     // tiled: K split over this many work-groups, whose partial products are summed
#endif
// The tiled variant was tuned for GPUs, where mad() and a contracted a*b + c are the same
// FFMA; the blocked variant runs on CPUs too, where mad() is slow (see autotune.h).
#if !defined(USE_CL_MAD) && defined(ALGO_TILED)
#define USE_CL_MAD 1
#endif
#include "autotune.h"

// Row-major view: R[MR x NR] = X[MR x K] * Y[K x NR].
#ifdef LAYOUT_COL
#define MR N
#define NR M
#define XPTR B
#define YPTR A
#else
#define MR M
#define NR N
#define XPTR A
#define YPTR B
#endif

#define WPTM (MWG / MDIMC)  // outputs per work-item along M
#define WPTN (NWG / NDIMC)  // outputs per work-item along N
#define NT (MDIMC * NDIMC)  // work-items per work-group
#define KCHUNK (((K + KSPLIT - 1) / KSPLIT + KWG - 1) / KWG * KWG)  // split-K: K per work-group

// floatv: the vector of VW floats that global loads (and the blocked variant's stores) use
#if VW == 1
typedef float floatv;
#define VLOAD(i, p) ((p)[i])
#define VSTORE(v, i, p) ((p)[i] = (v))
#elif VW == 2 || VW == 4 || VW == 8
typedef VECTORW(float, VW) floatv;
#define VLOAD(i, p) VLOADW(VW, i, p)
#define VSTORE(v, i, p) VSTOREW(VW, v, i, p)
#else
#error "VW must be 1, 2, 4 or 8"
#endif

#ifdef ALGO_NAIVE

__kernel void matmul(__global const float* restrict A, __global const float* restrict B,
                     __global float* restrict C) {
    const int col = get_global_id(0);  // along NR (contiguous in R)
    const int row = get_global_id(1);  // along MR
#if MR % MDIMC || NR % NDIMC
    if (row >= MR || col >= NR) return;
#endif
    const __global float* x = XPTR + (size_t)row * K;
    const __global float* y = YPTR + col;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += x[k] * y[(size_t)k * NR];
    }
    C[(size_t)row * NR + col] = acc;
}

#elif defined(ALGO_BLOCKED)

__kernel void matmul(__global const float* restrict A, __global const float* restrict B,
                     __global float* restrict C) {
#if NR % NWG || MR % MWG  // edge items shift back to end at the edge (vload needs no alignment)
    const int n0 = min((int)get_global_id(0) * WPTN, NR - WPTN);
    const int m0 = min((int)get_global_id(1) * WPTM, MR - WPTM);
#else
    const int n0 = get_global_id(0) * WPTN;
    const int m0 = get_global_id(1) * WPTM;
#endif
    const __global float* X = XPTR + (size_t)m0 * K;
    const __global float* Y = YPTR + n0;
    floatv acc[WPTM][WPTN / VW];
    #pragma unroll
    for (int i = 0; i < WPTM; ++i) {
        #pragma unroll
        for (int j = 0; j < WPTN / VW; ++j) acc[i][j] = (floatv)(0.0f);
    }
    #pragma unroll UNROLL
    for (int k = 0; k < K; ++k) {
        floatv b[WPTN / VW];
        #pragma unroll
        for (int j = 0; j < WPTN / VW; ++j) b[j] = VLOAD(j, Y + (size_t)k * NR);
        #pragma unroll
        for (int i = 0; i < WPTM; ++i) {
            const floatv a = (floatv)(X[(size_t)i * K + k]);
            #pragma unroll
            for (int j = 0; j < WPTN / VW; ++j) MULTIPLY_ADD(acc[i][j], a, b[j]);
        }
    }
    #pragma unroll
    for (int i = 0; i < WPTM; ++i) {
        #pragma unroll
        for (int j = 0; j < WPTN / VW; ++j) VSTORE(acc[i][j], j, C + (size_t)(m0 + i) * NR + n0);
    }
}

#else

// Which output row/column (within the tile) a work-item owns for register index i.
// 0: contiguous; 1: strided by the work-group dimension (conflict-free scalar reads);
// 2: groups of 4 contiguous outputs strided by 4 x the dimension (conflict-free float4 reads).
#if SM == 2
#define OWN_M(tm, i) (((i) / 4) * (MDIMC * 4) + (tm) * 4 + (i) % 4)
#elif SM == 1
#define OWN_M(tm, i) ((tm) + (i) * MDIMC)
#else
#define OWN_M(tm, i) ((tm) * WPTM + (i))
#endif
#if SN == 2
#define OWN_N(tn, j) (((j) / 4) * (NDIMC * 4) + (tn) * 4 + (j) % 4)
#elif SN == 1
#define OWN_N(tn, j) ((tn) + (j) * NDIMC)
#else
#define OWN_N(tn, j) ((tn) * WPTN + (j))
#endif

#define LDX (MWG + PAD)  // local X tile stored transposed: Xs[k][m]
#define LDY (NWG + PAD)  // local Y tile: Ys[k][n]
#define XVECS (MWG * KWG / VW / NT)  // vectors of X each work-item loads per K-tile
#define YVECS (KWG * NWG / VW / NT)

// Global → registers: this work-item's share of the next K-tile. Where K and NR are multiples
// of VW, so are the offsets (KWG and NWG are, and so is a tile shifted back to NR - NWG), and a
// vector pointer is aligned: one wide load, where vloadN of a float pointer compiles to VW
// scalar loads on NVIDIA. Other sizes load element by element.
inline void fetch(const __global float* restrict X, const __global float* restrict Y,
                  int bm, int bn, int k0, int tid, floatv* xr, floatv* yr) {
    #pragma unroll
    for (int i = 0; i < XVECS; ++i) {
        const int v = tid + i * NT;
        const int r = v / (KWG / VW), c = v % (KWG / VW);
#if K % VW  // rows of X are not whole vectors (nor aligned): element by element, zeros beyond K
        float e[VW];
        #pragma unroll
        for (int w = 0; w < VW; ++w) {
            const int k = k0 + c * VW + w;
            e[w] = k < K ? X[(size_t)(bm + r) * K + k] : 0.0f;
        }
        xr[i] = VLOAD(0, e);
#elif K % KWG  // the last K-tile is partial: zeros beyond K (vectors are whole)
        xr[i] = k0 + c * VW < K ? *(const __global floatv*)(X + (size_t)(bm + r) * K + k0 + c * VW)
                                : (floatv)(0.0f);
#else
        xr[i] = *(const __global floatv*)(X + (size_t)(bm + r) * K + k0 + c * VW);
#endif
    }
    #pragma unroll
    for (int i = 0; i < YVECS; ++i) {
        const int v = tid + i * NT;
        const int r = v / (NWG / VW), c = v % (NWG / VW);
#if NR % VW  // rows of Y are not aligned to vectors: element by element (a tile is inside NR)
        float e[VW];
        #pragma unroll
        for (int w = 0; w < VW; ++w)
            e[w] = k0 + r < K ? Y[(size_t)(k0 + r) * NR + bn + c * VW + w] : 0.0f;
        yr[i] = VLOAD(0, e);
#elif K % KWG
        yr[i] = k0 + r < K ? *(const __global floatv*)(Y + (size_t)(k0 + r) * NR + bn + c * VW)
                           : (floatv)(0.0f);
#else
        yr[i] = *(const __global floatv*)(Y + (size_t)(k0 + r) * NR + bn + c * VW);
#endif
    }
}

// Registers → local tiles (X transposed so the compute loop reads consecutive m).
inline void stash(__local float* xs, __local float* ys, int tid, const floatv* xr, const floatv* yr) {
    #pragma unroll
    for (int i = 0; i < XVECS; ++i) {
        const int v = tid + i * NT;
        const int r = v / (KWG / VW), c = (v % (KWG / VW)) * VW;
#if VW == 1
        xs[c * LDX + r] = xr[i];
#else
        const float* e = (const float*)&xr[i];
        #pragma unroll
        for (int w = 0; w < VW; ++w) xs[(c + w) * LDX + r] = e[w];
#endif
    }
    #pragma unroll
    for (int i = 0; i < YVECS; ++i) {
        const int v = tid + i * NT;
        const int r = v / (NWG / VW), c = (v % (NWG / VW)) * VW;
#if VW == 1 || PAD % VW == 0  // rows of the Y tile keep the vector alignment
        *(__local floatv*)(ys + r * LDY + c) = yr[i];
#else
        const float* e = (const float*)&yr[i];
        #pragma unroll
        for (int w = 0; w < VW; ++w) ys[r * LDY + c + w] = e[w];
#endif
    }
}

inline void multiply(__local const float* xs, __local const float* ys, int tm, int tn,
                     float acc[WPTM][WPTN]) {
    #pragma unroll UNROLL
    for (int k = 0; k < KWG; ++k) {
        float a[WPTM], b[WPTN];
#if SM == 2  // offsets are multiples of 4 floats (PAD is 0 or 4): one 16-byte load per group
        #pragma unroll
        for (int i = 0; i < WPTM; i += 4)
            vstore4(*(__local const float4*)(xs + k * LDX + OWN_M(tm, i)), 0, a + i);
#else
        #pragma unroll
        for (int i = 0; i < WPTM; ++i) a[i] = xs[k * LDX + OWN_M(tm, i)];
#endif
#if SN == 2
        #pragma unroll
        for (int j = 0; j < WPTN; j += 4)
            vstore4(*(__local const float4*)(ys + k * LDY + OWN_N(tn, j)), 0, b + j);
#else
        #pragma unroll
        for (int j = 0; j < WPTN; ++j) b[j] = ys[k * LDY + OWN_N(tn, j)];
#endif
        #pragma unroll
        for (int i = 0; i < WPTM; ++i) {
            #pragma unroll
            for (int j = 0; j < WPTN; ++j) MULTIPLY_ADD(acc[i][j], a[i], b[j]);
        }
    }
}

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1)))
void matmul(__global const float* restrict A, __global const float* restrict B,
            __global float* restrict C) {
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * NDIMC + tn;
#if NR % NWG || MR % MWG  // the last tiles shift back to end at the edge (see the top)
    const int bn = min((int)get_group_id(0) * NWG, NR - NWG), bm = min((int)get_group_id(1) * MWG, MR - MWG);
#else
    const int bn = get_group_id(0) * NWG, bm = get_group_id(1) * MWG;
#endif
    const __global float* X = XPTR;
    const __global float* Y = YPTR;
#if KSPLIT > 1  // this work-group's chunk of K (a multiple of KWG), and its partial product's place
    const int k_begin = get_group_id(2) * KCHUNK, k_end = min(K, k_begin + KCHUNK);
    C += (size_t)get_group_id(2) * MR * NR;
#define K_BEGIN k_begin
#define K_END k_end
#else
#define K_BEGIN 0
#define K_END K
#endif

    __local float xs[(DB + 1) * KWG * LDX] __attribute__((aligned(16)));
    __local float ys[(DB + 1) * KWG * LDY] __attribute__((aligned(16)));
    floatv xr[XVECS], yr[YVECS];

    float acc[WPTM][WPTN];
    #pragma unroll
    for (int i = 0; i < WPTM; ++i) {
        #pragma unroll
        for (int j = 0; j < WPTN; ++j) acc[i][j] = 0.0f;
    }

#if DB
    // Two local buffers: while tile t is multiplied from one, tile t+1 is already in
    // registers and goes to the other, so each K-tile needs one barrier instead of two.
    fetch(X, Y, bm, bn, K_BEGIN, tid, xr, yr);
    stash(xs, ys, tid, xr, yr);
    barrier(CLK_LOCAL_MEM_FENCE);
    int cur = 0;
    for (int k0 = K_BEGIN; k0 < K_END; k0 += KWG) {
        const int more = k0 + KWG < K_END;
        if (more) fetch(X, Y, bm, bn, k0 + KWG, tid, xr, yr);
        multiply(xs + cur * KWG * LDX, ys + cur * KWG * LDY, tm, tn, acc);
        if (more) stash(xs + (1 - cur) * KWG * LDX, ys + (1 - cur) * KWG * LDY, tid, xr, yr);
        barrier(CLK_LOCAL_MEM_FENCE);
        cur = 1 - cur;
    }
#else
    for (int k0 = K_BEGIN; k0 < K_END; k0 += KWG) {
        fetch(X, Y, bm, bn, k0, tid, xr, yr);
        stash(xs, ys, tid, xr, yr);
        barrier(CLK_LOCAL_MEM_FENCE);
        multiply(xs, ys, tm, tn, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif

    #pragma unroll
    for (int i = 0; i < WPTM; ++i) {
        const size_t row = (size_t)(bm + OWN_M(tm, i)) * NR;
        #pragma unroll
        for (int j = 0; j < WPTN; ++j) C[row + bn + OWN_N(tn, j)] = acc[i][j];
    }
}

#if KSPLIT > 1
// Split-K, second step: C = the sum of the KSPLIT partial products in P (each MR x NR).
__kernel void matmul_reduce(__global const float* restrict P, __global float* restrict C) {
    const size_t i = get_global_id(0);
    if (i >= (size_t)MR * NR) return;
    float sum = P[i];
    for (int s = 1; s < KSPLIT; ++s) sum += P[(size_t)s * MR * NR + i];
    C[i] = sum;
}
#endif

#endif
