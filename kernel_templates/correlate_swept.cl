// correlate, VARIANT_SWEPT: included by correlate.cl, whose macros, types and helpers it uses.

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
    zero(acc);

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

// A plane's offset is an int wherever the last one fits; more planes than that need a long.
// -DPLANE=long tests that path at any size.
#ifndef PLANE
#if KSG * OW * OH <= 2147483648
#define PLANE int
#else
#define PLANE long
#endif
#endif

// Adds the KSG planes of partial sums, in a fixed order (so results repeat bit for bit).
__kernel void correlate_sum(__global const float* restrict part, __global float* restrict out) {
    const int i = get_global_id(0);
    if (i >= OW * OH) return;
    float s = 0.0f;
    for (PLANE g = 0; g < KSG; ++g) s += part[g * (OW * OH) + i];
    out[i] = s;
}
