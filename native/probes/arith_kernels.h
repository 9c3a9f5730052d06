/* arith_kernels.h -- the arith probe's kernels, instantiated once per flavour (precision x register width).
 * Not a normal header: arith.c defines the flavour's macros, includes this file, and undefines them.
 *
 *   FL            flavour token (fp64_avx512f, ...): functions are named arith_FL_OP_{lat,thr}
 *   TGT           function attribute selecting the instruction set (may be empty)
 *   VT, ET        register type, element type
 *   SET1(v)       broadcast v to every lane
 *   ADD SUB MUL DIV   (a, b) -> a op b
 *   FMA(a, b, c)  a x b + c, one rounding (define ARITH_NO_FMA when the flavour has none)
 *   SQRT(a)       square root
 *   STOREU(p, v)  store every lane of v at p
 *   VLANES        elements per register stored (optional: sizeof(VT) / sizeof(ET); SVE's registers are
 *                 sizeless, their length known at run time: svcntd() ...)
 *   HIDE(v)       an empty asm that makes v opaque to the compiler (its value is unknown, so x * y with
 *                 y = 1.000001 cannot be folded; every operation stays an instruction)
 *
 * Each OP has a latency kernel (one chain: every operation waits for the previous one) and a throughput
 * kernel (ARITH_CHAINS independent chains interleaved, enough to cover latency x ports of every op on
 * current cores: FMA 4 cycles x 2 ports = 8 in flight). The operations, with in = {x0, y, z}:
 *   add  x = x + y   sub  x = x - y   mul  x = x * y   div  x = y / x   fma  x = x * y + z   sqrt  x = sqrt(x)
 * ARITH_FMA_SELF (aarch64): fma is x = x * z + x instead. NEON's FMLA overwrites its addend, so x * y + z
 * needed a copy of z before every FMLA (a register move per operation, on the FP pipes in the throughput
 * kernel); with x as the addend too there is none, and the chain still runs through the multiplier (its
 * full latency, not the shorter accumulator forwarding some Arm cores have).
 * ARITH_OPAQUE_STEPS: HIDE every result (plain C scalar flavours: else GCC packs twelve scalar chains into
 * six 2-lane SIMD operations and the "scalar" throughput is NEON's).
 * After `steps` loop steps (8 operations per chain each) every lane of every chain is stored to out.
 */
#define ARITH_CAT_(a, b, c, d) arith_##a##_##b##_##c##d
#define ARITH_FN(fl, op, kind) ARITH_CAT_(fl, op, kind, )

#ifdef ARITH_OPAQUE_STEPS
#define ARITH_AFTER_(v) HIDE(v) /* every result opaque: plain C scalars are not packed into SIMD (SLP) */
#else
#define ARITH_AFTER_(v) (void)0
#endif
#ifdef ARITH_FMA_SELF
#define ARITH_FMA_STEP_(v) v = FMA(v, z, v) /* x = x * z + x: one register, no copy of an addend */
#else
#define ARITH_FMA_STEP_(v) v = FMA(v, y, z)
#endif
#define ARITH_STEP_add(v) v = ADD(v, y); ARITH_AFTER_(v)
#define ARITH_STEP_sub(v) v = SUB(v, y); ARITH_AFTER_(v)
#define ARITH_STEP_mul(v) v = MUL(v, y); ARITH_AFTER_(v)
#define ARITH_STEP_div(v) v = DIV(y, v); ARITH_AFTER_(v)
#define ARITH_STEP_fma(v) ARITH_FMA_STEP_(v); ARITH_AFTER_(v)
#define ARITH_STEP_sqrt(v) v = SQRT(v); ARITH_AFTER_(v)

#define ARITH_LAT(fl, op)                                                                                     \
    TGT __attribute__((noinline)) void ARITH_FN(fl, op, lat)(uint64_t steps, const void *in_, void *out_)    \
    {                                                                                                         \
        const ET *in = in_;                                                                                   \
        VT x = SET1(in[0]), y = SET1(in[1]), z = SET1(in[2]);                                                 \
        HIDE(x);                                                                                              \
        HIDE(y);                                                                                              \
        HIDE(z);                                                                                              \
        (void)z;                                                                                              \
        for (uint64_t i = 0; i < steps; i++) {                                                                \
            ARITH_STEP_##op(x); ARITH_STEP_##op(x); ARITH_STEP_##op(x); ARITH_STEP_##op(x);                   \
            ARITH_STEP_##op(x); ARITH_STEP_##op(x); ARITH_STEP_##op(x); ARITH_STEP_##op(x);                   \
        }                                                                                                     \
        STOREU((ET *)out_, x);                                                                                \
    }

#define ARITH_ALL(M) M(c0) M(c1) M(c2) M(c3) M(c4) M(c5) M(c6) M(c7) M(c8) M(c9) M(c10) M(c11)
#define ARITH_DECL(c) VT c = x0; HIDE(c); /* twelve chains the compiler cannot prove equal (else: one chain) */
#ifdef VLANES
#define ARITH_VLANES_ (VLANES)
#else
#define ARITH_VLANES_ (sizeof(VT) / sizeof(ET))
#endif
#define ARITH_STORE(c) STOREU(o, c); o += ARITH_VLANES_;

#define ARITH_THR(fl, op)                                                                                     \
    TGT __attribute__((noinline)) void ARITH_FN(fl, op, thr)(uint64_t steps, const void *in_, void *out_)    \
    {                                                                                                         \
        const ET *in = in_;                                                                                   \
        VT x0 = SET1(in[0]), y = SET1(in[1]), z = SET1(in[2]);                                                \
        HIDE(x0);                                                                                             \
        HIDE(y);                                                                                              \
        HIDE(z);                                                                                              \
        (void)z;                                                                                              \
        ARITH_ALL(ARITH_DECL)                                                                                 \
        for (uint64_t i = 0; i < steps * 8; i++) {                                                            \
            ARITH_STEP_##op(c0); ARITH_STEP_##op(c1); ARITH_STEP_##op(c2); ARITH_STEP_##op(c3);               \
            ARITH_STEP_##op(c4); ARITH_STEP_##op(c5); ARITH_STEP_##op(c6); ARITH_STEP_##op(c7);               \
            ARITH_STEP_##op(c8); ARITH_STEP_##op(c9); ARITH_STEP_##op(c10); ARITH_STEP_##op(c11);             \
        }                                                                                                     \
        ET *o = out_;                                                                                         \
        ARITH_ALL(ARITH_STORE)                                                                                \
    }

ARITH_LAT(FL, add)
ARITH_LAT(FL, sub)
ARITH_LAT(FL, mul)
ARITH_LAT(FL, div)
ARITH_LAT(FL, sqrt)
ARITH_THR(FL, add)
ARITH_THR(FL, sub)
ARITH_THR(FL, mul)
ARITH_THR(FL, div)
ARITH_THR(FL, sqrt)
#ifndef ARITH_NO_FMA
ARITH_LAT(FL, fma)
ARITH_THR(FL, fma)
#endif
#undef ARITH_VLANES_
#undef ARITH_AFTER_
#undef ARITH_FMA_STEP_
