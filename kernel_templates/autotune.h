// Helpers shared by autotune's templates. A template includes it with #include "autotune.h";
// autotune inlines the file (the device compiles one string), with #line directives so that
// compiler messages still name the file and line they come from.

// MULTIPLY_ADD(c, a, b): c += a * b, or c = mad(a, b, c) with USE_CL_MAD=1 (CLBlast's switch).
// Plain a*b + c is contracted to an FMA by every compiler seen here; PoCL lowers mad() to a
// call, 4x slower (5 vs 21 GFLOP/s in the FMA-chain ceiling kernel). A template may choose
// the default per variant before including this file; statement-like, so no parentheses.
#ifndef USE_CL_MAD
#define USE_CL_MAD 0
#endif
#if USE_CL_MAD
#define MULTIPLY_ADD(c, a, b) c = mad(a, b, c)
#else
#define MULTIPLY_ADD(c, a, b) c += a * b
#endif

// VECTORW(t, w): the vector type t<w> with the width a macro (VECTORW(float, VW) is float4
// when VW is 4); VLOADW(w, i, p) / VSTOREW(w, x, i, p): vload<w> / vstore<w> likewise.
// Two levels, so that w expands before it is pasted.
#define VECTORW(t, w) _AT_VECTORW(t, w)
#define _AT_VECTORW(t, w) t##w
#define VLOADW(w, i, p) _AT_VLOADW(w, i, p)
#define _AT_VLOADW(w, i, p) vload##w(i, p)
#define VSTOREW(w, x, i, p) _AT_VSTOREW(w, x, i, p)
#define _AT_VSTOREW(w, x, i, p) vstore##w(x, i, p)
