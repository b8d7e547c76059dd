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
// alone.

#ifndef W
#define W 64
#endif
#ifndef H
#define H 64
#endif
#ifndef OW
#define OW 32
#endif
#ifndef OH
#define OH 32
#endif
#ifndef WGX
#define WGX 16
#endif
#ifndef WGY
#define WGY 1
#endif
#ifndef OPX
#define OPX 2
#endif
#ifndef OPY
#define OPY 2
#endif
#if !defined(VARIANT_DIRECT) && !defined(VARIANT_LOCAL) && !defined(VARIANT_SWEPT)
#define VARIANT_DIRECT 1
#endif
#ifndef KSL
#define KSL 1
#endif
#ifndef KSG
#define KSG 1
#endif
#ifndef TX
#define TX 32
#endif
#ifndef TY
#define TY 4
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#if !defined(ACC_DOT) && !defined(ACC_VEC) && !defined(ACC_CHAIN)
#define ACC_DOT 1
#endif

#if OW > W || OH > H
#error "offsets must fit in the image: OW <= W and OH <= H"
#endif

#ifdef ACC_VEC
typedef float4 acc_t;
#define ACC_ZERO ((float4)(0.0f))
#define ACCUM(acc, a, b) ((acc) += (a) * (b))  // contracted to FMAs; mad() is slow on PoCL
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

#if defined(VARIANT_DIRECT)

// One row y of A against rows y+dy0+j of B for x in [x_from, x_to): every B pixel is
// checked against the image (used only for the last OPX-1 columns and OPY-1 rows).
inline void row_guarded(const __global float4* restrict A, const __global float4* restrict B,
                        int y, int x_from, int x_to, int dx0, int dy0, acc_t acc[OPY][OPX]) {
    for (int x = x_from; x < x_to; ++x) {
        const float4 a = A[y * W + x];
        #pragma unroll
        for (int j = 0; j < OPY; ++j) {
            const int yy = y + dy0 + j;
            #pragma unroll
            for (int i = 0; i < OPX; ++i) {
                const int xx = x + dx0 + i;
                if (xx < W && yy < H) ACCUM(acc[j][i], a, B[yy * W + xx]);
            }
        }
    }
}

// x in [0, n) where all OPX x OPY B pixels are inside the image: no checks, and B pixels
// slide through a register window (win[j][i] = B(x+dx0+i, y+dy0+j)) so each step loads one
// new pixel per B row.
inline void row_fast(const __global float4* restrict A, const __global float4* restrict B,
                     int y, int n, int dx0, int dy0, acc_t acc[OPY][OPX]) {
    if (n <= 0) return;
    const __global float4* a_row = A + y * W;
    const __global float4* b_row = B + (y + dy0) * W + dx0;
    float4 win[OPY][OPX];
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX - 1; ++i) win[j][i] = b_row[j * W + i];
    }
    #pragma unroll UNROLL
    for (int x = 0; x < n; ++x) {
        const float4 a = a_row[x];
        #pragma unroll
        for (int j = 0; j < OPY; ++j) win[j][OPX - 1] = b_row[j * W + x + OPX - 1];
        slide(a, win, acc);
    }
}

__kernel __attribute__((reqd_work_group_size(WGX, WGY, 1)))
void correlate(__global const float4* restrict A, __global const float4* restrict B,
               __global float* restrict out) {
    const int dx0 = get_global_id(0) * OPX;
    const int dy0 = get_global_id(1) * OPY;
    if (dx0 >= OW || dy0 >= OH) return;  // the global size was rounded up to the work-group

    acc_t acc[OPY][OPX];
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) acc[j][i] = ACC_ZERO;
    }
    // The overlap of the block's first output (dx0, dy0) is the largest; later outputs of
    // the block lose their last columns/rows through the zero extension of B.
    const int nx = W - dx0, ny = H - dy0;
    const int nx_full = nx - (OPX - 1), ny_full = ny - (OPY - 1);
    for (int y = 0; y < ny; ++y) {
        if (y < ny_full) {
            row_fast(A, B, y, nx_full, dx0, dy0, acc);
            row_guarded(A, B, y, max(nx_full, 0), nx, dx0, dy0, acc);
        } else {
            row_guarded(A, B, y, 0, nx, dx0, dy0, acc);
        }
    }
    store(out, dx0, dy0, acc);
}

#elif defined(VARIANT_LOCAL)

#define BX (TX + WGX * OPX - 1)  // B tile columns
#define BY (TY + WGY * OPY - 1)  // B tile rows

__kernel __attribute__((reqd_work_group_size(WGX, WGY, 1)))
void correlate(__global const float4* restrict A, __global const float4* restrict B,
               __global float* restrict out) {
    __local float4 as[TY][TX];
    __local float4 bs[BY][BX];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int tid = ly * WGX + lx;
    const int gx0 = get_group_id(0) * (WGX * OPX), gy0 = get_group_id(1) * (WGY * OPY);
    const int dx0 = gx0 + lx * OPX, dy0 = gy0 + ly * OPY;
    // The group's largest overlap; every work-item walks it (barriers need all of them) and
    // the zero-filled B tile removes the terms outside each output's own overlap.
    const int nx = W - gx0, ny = H - gy0;

    acc_t acc[OPY][OPX];
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) acc[j][i] = ACC_ZERO;
    }

    for (int y0 = 0; y0 < ny; y0 += TY) {
        for (int x0 = 0; x0 < nx; x0 += TX) {
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int t = tid; t < TY * TX; t += WGX * WGY) {
                const int r = t / TX, c = t % TX;
                const int x = x0 + c, y = y0 + r;
                as[r][c] = (x < nx && y < ny) ? A[y * W + x] : (float4)(0.0f);
            }
            for (int t = tid; t < BY * BX; t += WGX * WGY) {
                const int r = t / BX, c = t % BX;
                const int x = gx0 + x0 + c, y = gy0 + y0 + r;
                bs[r][c] = (x < W && y < H) ? B[y * W + x] : (float4)(0.0f);
            }
            barrier(CLK_LOCAL_MEM_FENCE);

            for (int r = 0; r < TY; ++r) {
                const __local float4* b_row = &bs[r + ly * OPY][lx * OPX];
                float4 win[OPY][OPX];
                #pragma unroll
                for (int j = 0; j < OPY; ++j) {
                    #pragma unroll
                    for (int i = 0; i < OPX - 1; ++i) win[j][i] = b_row[j * BX + i];
                }
                #pragma unroll UNROLL
                for (int c = 0; c < TX; ++c) {
                    const float4 a = as[r][c];
                    #pragma unroll
                    for (int j = 0; j < OPY; ++j) win[j][OPX - 1] = b_row[j * BX + c + OPX - 1];
                    slide(a, win, acc);
                }
            }
        }
    }
    if (dx0 < OW && dy0 < OH) store(out, dx0, dy0, acc);
}

#else  // VARIANT_SWEPT

#define KS (KSG * KSL)

// Step s of the sweep: load A(a0 + s*WGX) into window slot k (= s % OPX) and the OPY B
// pixels at u0 + s*WGX, and add the terms of outputs i < live; slot (k - i) % OPX holds
// output i's A pixel. k, live and guard are constants once the caller's loop is unrolled.
inline void sweep(const __global float4* restrict a_row, const __global float4* restrict b_row,
                  int a0, int u0, int s, int k, int live, bool guard, const bool row_ok[OPY],
                  float4 win[OPX], acc_t acc[OPY][OPX]) {
    const int ai = a0 + s * WGX, u = u0 + s * WGX;
    win[k] = guard && ai < 0 ? (float4)(0.0f) : a_row[ai];
    float4 b[OPY];
    #pragma unroll
    for (int j = 0; j < OPY; ++j) b[j] = row_ok[j] ? b_row[j * W + u] : (float4)(0.0f);
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) {
            if (i < live) ACCUM(acc[j][i], win[(k - i + OPX) % OPX], b[j]);
        }
    }
}

__kernel __attribute__((reqd_work_group_size(WGX, WGY, KSL)))
void correlate(__global const float4* restrict A, __global const float4* restrict B,
               __global float* restrict out) {
    const int tx = get_local_id(0), tz = get_local_id(2);
    const int dxb = get_group_id(0) * (WGX * OPX);  // outputs dx = dxb + tx + i*WGX
    const int dy0 = get_global_id(1) * OPY;         // outputs dy = dy0 + j
    // this work-item's slice of the rows y in [0, H - dy0) that its first output row overlaps
    const int ny = max(H - dy0, 0);
    const int rows = (ny + KS - 1) / KS;
    const int y_begin = get_global_id(2) * rows, y_end = min(ny, y_begin + rows);

    acc_t acc[OPY][OPX];
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) acc[j][i] = ACC_ZERO;
    }

    for (int y = y_begin; y < y_end; ++y) {
        bool row_ok[OPY];  // B row y + dy is inside the image (zero extension otherwise)
        #pragma unroll
        for (int j = 0; j < OPY; ++j) row_ok[j] = j == 0 || y + dy0 + j < H;  // y < H - dy0
        const __global float4* a_row = A + y * W;
        const __global float4* b_row = B + (y + dy0) * W;
        // u = dxb + r + s*WGX; output i needs A(u - dx_i) = A(r - tx + (s - i)*WGX): the pixel
        // loaded i steps ago. The window is circular: step s writes slot s % OPX, so with the
        // OPX steps of a round unrolled every slot index is a constant and no register moves.
        // A pixel left of the image (u < dx_i) is zero, which also makes the window start empty.
        for (int r = 0; r < WGX; ++r) {
            const int u0 = dxb + r;
            const int steps = (W - u0 + WGX - 1) / WGX;
            const int full = steps - steps % OPX;
            float4 win[OPX];
            #pragma unroll
            for (int i = 0; i < OPX; ++i) win[i] = (float4)(0.0f);
            int s = 0;
            if (full > 0) {
                // the first round, peeled: before step i, output i's A pixel is left of the
                // image (skip those terms), and only step 0 can reach left of it
                #pragma unroll
                for (int k = 0; k < OPX; ++k) {
                    sweep(a_row, b_row, r - tx, u0, k, k, k + 1, k == 0, row_ok, win, acc);
                }
                s = OPX;
            }
            #pragma unroll UNROLL
            for (; s < full; s += OPX) {
                #pragma unroll
                for (int k = 0; k < OPX; ++k) {
                    sweep(a_row, b_row, r - tx, u0, s + k, k, OPX, false, row_ok, win, acc);
                }
            }
            #pragma unroll
            for (int k = 0; k < OPX - 1; ++k) {
                if (s + k < steps) sweep(a_row, b_row, r - tx, u0, s + k, k, OPX, true, row_ok, win, acc);
            }
        }
    }

    float sum[OPY][OPX];
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) sum[j][i] = REDUCE(acc[j][i]);
    }
#if KSL > 1
    // slices 1.. hand their sums to slice 0 of the same work-group
    __local float part[KSL - 1][OPY * OPX][WGY][WGX];
    const int ty = get_local_id(1);
    if (tz > 0) {
        #pragma unroll
        for (int j = 0; j < OPY; ++j) {
            #pragma unroll
            for (int i = 0; i < OPX; ++i) part[tz - 1][j * OPX + i][ty][tx] = sum[j][i];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tz > 0) return;
    for (int t = 0; t < KSL - 1; ++t) {
        #pragma unroll
        for (int j = 0; j < OPY; ++j) {
            #pragma unroll
            for (int i = 0; i < OPX; ++i) sum[j][i] += part[t][j * OPX + i][ty][tx];
        }
    }
#endif
    // KSG > 1: slice group g writes plane g of the partial sums that correlate_sum adds up
    __global float* plane = out + get_group_id(2) * (OW * OH);
    #pragma unroll
    for (int j = 0; j < OPY; ++j) {
        #pragma unroll
        for (int i = 0; i < OPX; ++i) {
            const int dx = dxb + tx + i * WGX, dy = dy0 + j;
            if (dx < OW && dy < OH) plane[dy * OW + dx] = sum[j][i];
        }
    }
}

// Adds the KSG planes of partial sums, in a fixed order (so results repeat bit for bit).
__kernel void correlate_sum(__global const float* restrict part, __global float* restrict out) {
    const int i = get_global_id(0);
    if (i >= OW * OH) return;
    float s = 0.0f;
    for (int g = 0; g < KSG; ++g) s += part[g * (OW * OH) + i];
    out[i] = s;
}

#endif
