// correlate, VARIANT_DIRECT: included by correlate.cl, whose macros, types and helpers it uses.

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
    PRELOAD(win, b_row, W);
    #pragma unroll UNROLL
    for (int x = 0; x < n; ++x) {
        SLIDE_IN(win, b_row, W, x);
        slide(a_row[x], win, acc);
    }
}

__kernel __attribute__((reqd_work_group_size(WGX, WGY, 1)))
void correlate(__global const float4* restrict A, __global const float4* restrict B,
               __global float* restrict out) {
    const int dx0 = get_global_id(0) * OPX;
    const int dy0 = get_global_id(1) * OPY;
    if (dx0 >= OW || dy0 >= OH) return;  // the global size was rounded up to the work-group

    acc_t acc[OPY][OPX];
    zero(acc);
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
