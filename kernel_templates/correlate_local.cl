// correlate, VARIANT_LOCAL: included by correlate.cl, whose macros, types and helpers it uses.

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
    zero(acc);

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
                PRELOAD(win, b_row, BX);
                #pragma unroll UNROLL
                for (int c = 0; c < TX; ++c) {
                    SLIDE_IN(win, b_row, BX, c);
                    slide(as[r][c], win, acc);
                }
            }
        }
    }
    if (dx0 < OW && dy0 < OH) store(out, dx0, dy0, acc);
}
