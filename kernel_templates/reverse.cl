// Reverse a byte buffer: dst[N - 1 - i] = src[i]. Parameterised for autotune.
//
// Variants (the 2011 "OpenCL simple memory manipulation tests" family and beyond):
//   ELEM_CHAR, VW = 1     : one char per work-item (the write-up's baseline).
//   ELEM_CHAR, VW = 4..16 : a charVW loaded with vloadVW and reversed with one swizzle
//                           (VW = 16 is the write-up's `.sFEDCBA9876543210` kernel).
//   ELEM_UINT, VW = 4..64 : a uint(VW/4) vector (VW = 64 is the write-up's uint16); every
//                           uint is byte-swapped and the uints are reversed. BSWAP picks the
//                           byte swap: BSWAP_CHAR4 `as_uint(as_char4(x).s3210)` per component
//                           (the write-up), BSWAP_SHIFT shifts and masks on the whole vector,
//                           BSWAP_ROTATE two rotates and a bitselect on the whole vector.
//   ITEMS vectors per work-item, either consecutive (COALESCE = 0) or WG vectors apart so a
//   work-group's loads of one item are adjacent (COALESCE = 1, the GPU-friendly order).
//   USE_RESTRICT (a tunable parameter, 0 or 1) declares src and dst restrict; they must not overlap.
//
// Geometry: kernel `reverse` covers the first MAIN = N / CHUNK * CHUNK bytes with
// N / CHUNK work-groups of WG items; kernel `reverse_tail` moves the remaining N % CHUNK
// bytes one per work-item, so any N >= 1 is reversed exactly.
// All parameters arrive as -D macros; the defaults below let the file compile alone.

#ifndef N
#define N 16777216   // bytes to reverse
#endif
#if !defined(ELEM_CHAR) && !defined(ELEM_UINT)
#define ELEM_CHAR 1
#endif
#ifndef VW
#define VW 16        // bytes per vector
#endif
#if !defined(BSWAP_CHAR4) && !defined(BSWAP_SHIFT) && !defined(BSWAP_ROTATE)
#define BSWAP_CHAR4 1
#endif
#ifndef ITEMS
#define ITEMS 1      // vectors per work-item
#endif
#ifndef COALESCE
#define COALESCE 0   // a work-item's vectors: consecutive (0) or WG vectors apart (1)
#endif
#ifndef WG
#define WG 64        // work-group size of the main kernel
#endif
#include "autotune.h"

#if defined(USE_RESTRICT) && USE_RESTRICT
#define RESTRICT restrict
#else
#define RESTRICT
#endif

#define CHUNK ((size_t)VW * ITEMS * WG)  // bytes per work-group of the main kernel
#define MAIN ((size_t)N / CHUNK * CHUNK)  // bytes the main kernel covers

#ifdef ELEM_CHAR
// ------------------------------------------------------------------ char vectors

#if VW == 1
typedef uchar vec_t;
#define LOAD(v, p) ((p)[v])
#define REVERSE(x) (x)
#define STORE(x, o, p) ((p)[o] = (x))
#else
#if VW == 2
typedef uchar2 vec_t;
#define REVERSE(x) ((x).s10)
#elif VW == 4
typedef uchar4 vec_t;
#define REVERSE(x) ((x).s3210)
#elif VW == 8
typedef uchar8 vec_t;
#define REVERSE(x) ((x).s76543210)
#elif VW == 16
typedef uchar16 vec_t;
#define REVERSE(x) ((x).sFEDCBA9876543210)
#else
#error "ELEM_CHAR needs VW in 1, 2, 4, 8, 16"
#endif
#define LOAD(v, p) VLOADW(VW, v, p)
// vstoreN on a uchar pointer needs only byte alignment, so any output offset is legal.
#define STORE(x, o, p) VSTOREW(VW, x, 0, (p) + (o))
#endif

#else
// ------------------------------------------------------------------ uint vectors

// Byte swap of one uint the write-up's way: through a char4 swizzle.
#define BS1(u) as_uint(as_uchar4(u).s3210)

#if VW == 4
typedef uint vec_t;
#define LOAD(v, p) ((p)[v])
#define REV_UINTS(x) (x)
#define REV_BS1(x) BS1(x)
#elif VW == 8
typedef uint2 vec_t;
#define LOAD(v, p) vload2(v, p)
#define REV_UINTS(x) ((x).s10)
#define REV_BS1(x) ((uint2)(BS1((x).s1), BS1((x).s0)))
#elif VW == 16
typedef uint4 vec_t;
#define LOAD(v, p) vload4(v, p)
#define REV_UINTS(x) ((x).s3210)
#define REV_BS1(x) ((uint4)(BS1((x).s3), BS1((x).s2), BS1((x).s1), BS1((x).s0)))
#elif VW == 32
typedef uint8 vec_t;
#define LOAD(v, p) vload8(v, p)
#define REV_UINTS(x) ((x).s76543210)
#define REV_BS1(x) ((uint8)(BS1((x).s7), BS1((x).s6), BS1((x).s5), BS1((x).s4), \
                            BS1((x).s3), BS1((x).s2), BS1((x).s1), BS1((x).s0)))
#elif VW == 64
typedef uint16 vec_t;
#define LOAD(v, p) vload16(v, p)
#define REV_UINTS(x) ((x).sFEDCBA9876543210)
#define REV_BS1(x) ((uint16)(BS1((x).sF), BS1((x).sE), BS1((x).sD), BS1((x).sC), \
                             BS1((x).sB), BS1((x).sA), BS1((x).s9), BS1((x).s8), \
                             BS1((x).s7), BS1((x).s6), BS1((x).s5), BS1((x).s4), \
                             BS1((x).s3), BS1((x).s2), BS1((x).s1), BS1((x).s0)))
#else
#error "ELEM_UINT needs VW in 4, 8, 16, 32, 64"
#endif

#if defined(BSWAP_SHIFT)
inline vec_t bswap(vec_t x) {
    return (x >> 24) | ((x >> 8) & (vec_t)0xFF00u) | ((x << 8) & (vec_t)0xFF0000u) | (x << 24);
}
#define REVERSE(x) REV_UINTS(bswap(x))
#elif defined(BSWAP_ROTATE)
// rotate by 8 puts bytes 3 and 1 in place, rotate by 24 bytes 2 and 0; bitselect merges them.
inline vec_t bswap(vec_t x) {
    return bitselect(rotate(x, (vec_t)24u), rotate(x, (vec_t)8u), (vec_t)0x00FF00FFu);
}
#define REVERSE(x) REV_UINTS(bswap(x))
#else
#define REVERSE(x) REV_BS1(x)
#endif

// The output offset N - (v + 1) * VW is uint-aligned only when N is a multiple of 4;
// otherwise the reversed uints are written as bytes (vstore on uchar needs no alignment).
#if N % 4 == 0
#if VW == 4
#define STORE(x, o, p) (((__global uint*)((p) + (o)))[0] = (x))
#elif VW == 8
#define STORE(x, o, p) vstore2(x, 0, (__global uint*)((p) + (o)))
#elif VW == 16
#define STORE(x, o, p) vstore4(x, 0, (__global uint*)((p) + (o)))
#elif VW == 32
#define STORE(x, o, p) vstore8(x, 0, (__global uint*)((p) + (o)))
#else
#define STORE(x, o, p) vstore16(x, 0, (__global uint*)((p) + (o)))
#endif
#else
#if VW == 4
#define STORE(x, o, p) vstore4(as_uchar4(x), 0, (p) + (o))
#elif VW == 8
#define STORE(x, o, p) vstore8(as_uchar8(x), 0, (p) + (o))
#elif VW == 16
#define STORE(x, o, p) vstore16(as_uchar16(x), 0, (p) + (o))
#elif VW == 32
#define STORE(x, o, p) do { vstore16(as_uchar16((x).lo), 0, (p) + (o)); \
                            vstore16(as_uchar16((x).hi), 1, (p) + (o)); } while (0)
#else
#define STORE(x, o, p) do { vstore16(as_uchar16((x).lo.lo), 0, (p) + (o)); \
                            vstore16(as_uchar16((x).lo.hi), 1, (p) + (o)); \
                            vstore16(as_uchar16((x).hi.lo), 2, (p) + (o)); \
                            vstore16(as_uchar16((x).hi.hi), 3, (p) + (o)); } while (0)
#endif
#endif

#endif

#ifdef ELEM_CHAR
#define SRC_T uchar
#else
#define SRC_T uint  // src is 4-byte aligned and read at multiples of VW >= 4 bytes
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void reverse(__global const uchar* RESTRICT src, __global uchar* RESTRICT dst) {
    const __global SRC_T* s = (const __global SRC_T*)src;
#if COALESCE
    // item k of every work-item in a group is one contiguous run of WG vectors
    const size_t first = get_group_id(0) * (size_t)(WG * ITEMS) + get_local_id(0);
#define STEP WG
#else
    const size_t first = get_global_id(0) * (size_t)ITEMS;
#define STEP 1
#endif
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const size_t v = first + (size_t)k * STEP;  // vector index: bytes [v * VW, v * VW + VW)
        const vec_t x = LOAD(v, s);
        STORE(REVERSE(x), (size_t)N - (v + 1) * VW, dst);
    }
}

// The last N % CHUNK bytes, one per work-item (a second launch step; skipped when N % CHUNK == 0).
__kernel void reverse_tail(__global const uchar* RESTRICT src, __global uchar* RESTRICT dst) {
    const size_t i = MAIN + get_global_id(0);
    dst[(size_t)N - 1 - i] = src[i];
}
