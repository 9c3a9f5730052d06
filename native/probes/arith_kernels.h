/* arith_kernels.h -- the arith probe's kernels, written once and generated per flavour (precision x register
 * width) from arith.c's table of flavours, one row each:
 *
 *   X(FL, PRECISION, WIDTH, BITS, LANES, STRIDE, TGT, VT, ET, FAMILY, P, FMA)
 *
 *   FL            flavour token (fp64_avx512f, ...): functions are named arith_FL_OP_{lat,thr}
 *   PRECISION, WIDTH, BITS, LANES, STRIDE   the flavour's descriptor (arith.c: struct flavour)
 *   TGT           function attribute selecting the instruction set (may expand to nothing)
 *   VT, ET        register type, element type
 *   FAMILY, P     how an operation is spelled: FAMILY names a set of ARITH_FAMILY_op macros (X86 intrinsics,
 *                 NEON, SVE, SCALAR_C operators), P the parenthesised words they take (X86: (_mm256, pd, pd),
 *                 the prefix, the operation's suffix and the register's suffix: _mm256_add_pd)
 *   FMA           yes | no: whether the flavour has a fused multiply-add (no: its fma kernels are NULL)
 *
 * A family defines, for its P = (p...):
 *   ARITH_F_set1(p..., v)           broadcast v to every lane
 *   ARITH_F_bin(p..., op, a, b)     a op b, op one of add sub mul div
 *   ARITH_F_fma(p..., a, b, c)      a x b + c, one rounding
 *   ARITH_F_sqrt(p..., a)           square root
 *   ARITH_F_store(p..., ptr, v)     store every lane of v at ptr
 *   ARITH_F_lanes(p..., vt, et)     elements per register stored (SVE's registers are sizeless, their length
 *                                   known at run time: svcntd() ...)
 *   ARITH_F_after(p..., v)          after every operation: nothing, or HIDE(v) (see ARITH_OPAQUE_STEPS)
 * and the including file defines HIDE(v), an empty asm that makes v opaque to the compiler (its value is
 * unknown, so x * y with y = 1.000001 cannot be folded; every operation stays an instruction).
 *
 * Each OP has a latency kernel (one chain: every operation waits for the previous one) and a throughput
 * kernel (ARITH_CHAINS independent chains interleaved, enough to cover latency x ports of every op on
 * current cores: FMA 4 cycles x 2 ports = 8 in flight). The operations, with in = {x0, y, z}:
 *   add  x = x + y   sub  x = x - y   mul  x = x * y   div  x = y / x   fma  x = x * y + z   sqrt  x = sqrt(x)
 * ARITH_FMA_SELF (aarch64): fma is x = x * z + x instead. NEON's FMLA overwrites its addend, so x * y + z
 * needed a copy of z before every FMLA (a register move per operation, on the FP pipes in the throughput
 * kernel); with x as the addend too there is none, and the chain still runs through the multiplier (its
 * full latency, not the shorter accumulator forwarding some Arm cores have).
 * ARITH_OPAQUE_STEPS: the SCALAR_C family HIDEs every result (plain C scalar flavours on aarch64: else GCC
 * packs twelve scalar chains into six 2-lane SIMD operations and the "scalar" throughput is NEON's).
 * After `steps` loop steps (8 operations per chain each) every lane of every chain is stored to out.
 */
#ifndef ARITH_KERNELS_H
#define ARITH_KERNELS_H

/* ARITH_CALL(F, P, op, args...) -> ARITH_F_op(p..., args...): P's words become the first arguments */
#define ARITH_UNPACK_(...) __VA_ARGS__
#define ARITH_APPLY_(m, args) m args
#define ARITH_CALL(F, P, op, ...) ARITH_APPLY_(ARITH_##F##_##op, (ARITH_UNPACK_ P, __VA_ARGS__))

/* X86: P = (prefix, operation suffix, register suffix); scalar sd/sh take their upper lanes from a second
 * operand of sqrt, ss has no such form */
#define ARITH_X86_set1(pre, os, vs, v) pre##_set1_##vs(v)
#define ARITH_X86_bin(pre, os, vs, op, a, b) pre##_##op##_##os(a, b)
#define ARITH_X86_fma(pre, os, vs, a, b, c) pre##_fmadd_##os(a, b, c)
#define ARITH_X86_sqrt(pre, os, vs, a) ARITH_X86_SQRT_##os(pre##_sqrt_##os, a)
#define ARITH_X86_SQRT_sd(fn, a) fn(a, a)
#define ARITH_X86_SQRT_sh(fn, a) fn(a, a)
#define ARITH_X86_SQRT_ss(fn, a) fn(a)
#define ARITH_X86_SQRT_pd(fn, a) fn(a)
#define ARITH_X86_SQRT_ps(fn, a) fn(a)
#define ARITH_X86_SQRT_ph(fn, a) fn(a)
#define ARITH_X86_store(pre, os, vs, p, v) pre##_storeu_##vs(p, v)
#define ARITH_X86_lanes(pre, os, vs, vt, et) (sizeof(vt) / sizeof(et))
#define ARITH_X86_after(pre, os, vs, v) (void)0

/* NEON: P = (element bits): vaddq_f64 ...; vfmaq(c, a, b) = c + a x b */
#define ARITH_NEON_set1(n, v) vdupq_n_f##n(v)
#define ARITH_NEON_bin(n, op, a, b) v##op##q_f##n(a, b)
#define ARITH_NEON_fma(n, a, b, c) vfmaq_f##n(c, a, b)
#define ARITH_NEON_sqrt(n, a) vsqrtq_f##n(a)
#define ARITH_NEON_store(n, p, v) vst1q_f##n((float##n##_t *)(p), v)
#define ARITH_NEON_lanes(n, vt, et) (sizeof(vt) / sizeof(et))
#define ARITH_NEON_after(n, v) (void)0

/* SVE: P = (element bits, svcnt letter): every lane active (svptrue; _x: inactive lanes don't care) */
#define ARITH_SVE_set1(n, c, v) svdup_f##n(v)
#define ARITH_SVE_bin(n, c, op, a, b) sv##op##_f##n##_x(svptrue_b##n(), a, b)
#define ARITH_SVE_fma(n, c, a, b, d) svmad_f##n##_x(svptrue_b##n(), a, b, d)
#define ARITH_SVE_sqrt(n, c, a) svsqrt_f##n##_x(svptrue_b##n(), a)
#define ARITH_SVE_store(n, c, p, v) svst1_f##n(svptrue_b##n(), (float##n##_t *)(p), v)
#define ARITH_SVE_lanes(n, c, vt, et) svcnt##c()
#define ARITH_SVE_after(n, c, v) (void)0

/* SCALAR_C: P = (sqrt function, fma function (a, b, c) -> a x b + c); C operators on one element */
#define ARITH_C_SYM_add +
#define ARITH_C_SYM_sub -
#define ARITH_C_SYM_mul *
#define ARITH_C_SYM_div /
#define ARITH_SCALAR_C_set1(sq, fm, v) (v)
#define ARITH_SCALAR_C_bin(sq, fm, op, a, b) ((a) ARITH_C_SYM_##op (b))
#define ARITH_SCALAR_C_fma(sq, fm, a, b, c) fm(a, b, c)
#define ARITH_SCALAR_C_sqrt(sq, fm, a) sq(a)
#define ARITH_SCALAR_C_store(sq, fm, p, v) (*(p) = (v))
#define ARITH_SCALAR_C_lanes(sq, fm, vt, et) 1
#ifdef ARITH_OPAQUE_STEPS
#define ARITH_SCALAR_C_after(sq, fm, v) HIDE(v) /* every result opaque: no packing into SIMD (SLP) */
#else
#define ARITH_SCALAR_C_after(sq, fm, v) (void)0
#endif

#ifdef ARITH_FMA_SELF
#define ARITH_FMA_STEP_(F, P, v) v = ARITH_CALL(F, P, fma, v, z, v) /* x = x * z + x: no copy of an addend */
#else
#define ARITH_FMA_STEP_(F, P, v) v = ARITH_CALL(F, P, fma, v, y, z)
#endif
#define ARITH_BIN_STEP_(F, P, op, v) v = ARITH_CALL(F, P, bin, op, v, y)
#define ARITH_STEP_add(F, P, v) ARITH_BIN_STEP_(F, P, add, v); ARITH_CALL(F, P, after, v)
#define ARITH_STEP_sub(F, P, v) ARITH_BIN_STEP_(F, P, sub, v); ARITH_CALL(F, P, after, v)
#define ARITH_STEP_mul(F, P, v) ARITH_BIN_STEP_(F, P, mul, v); ARITH_CALL(F, P, after, v)
#define ARITH_STEP_div(F, P, v) v = ARITH_CALL(F, P, bin, div, y, v); ARITH_CALL(F, P, after, v)
#define ARITH_STEP_fma(F, P, v) ARITH_FMA_STEP_(F, P, v); ARITH_CALL(F, P, after, v)
#define ARITH_STEP_sqrt(F, P, v) v = ARITH_CALL(F, P, sqrt, v); ARITH_CALL(F, P, after, v)
#define ARITH_STEP8_(op, F, P, v)                                                                             \
    ARITH_STEP_##op(F, P, v); ARITH_STEP_##op(F, P, v); ARITH_STEP_##op(F, P, v); ARITH_STEP_##op(F, P, v); \
    ARITH_STEP_##op(F, P, v); ARITH_STEP_##op(F, P, v); ARITH_STEP_##op(F, P, v); ARITH_STEP_##op(F, P, v)

/* the kernels' common opening: operands broadcast, every one opaque */
#define ARITH_OPERANDS_(F, P, vt, et, x)                                                                      \
    const et *in = in_;                                                                                       \
    vt x = ARITH_CALL(F, P, set1, in[0]), y = ARITH_CALL(F, P, set1, in[1]), z = ARITH_CALL(F, P, set1, in[2]); \
    HIDE(x);                                                                                                  \
    HIDE(y);                                                                                                  \
    HIDE(z);                                                                                                  \
    (void)z

#define ARITH_LAT(fl, op, tgt, vt, et, F, P)                                                                  \
    tgt __attribute__((noinline)) void arith_##fl##_##op##_lat(uint64_t steps, const void *in_, void *out_) \
    {                                                                                                         \
        ARITH_OPERANDS_(F, P, vt, et, x);                                                                     \
        for (uint64_t i = 0; i < steps; i++) {                                                                \
            ARITH_STEP8_(op, F, P, x);                                                                        \
        }                                                                                                     \
        ARITH_CALL(F, P, store, (et *)out_, x);                                                               \
    }

/* twelve chains the compiler cannot prove equal (else: one chain), stored one register after another */
#define ARITH_ALL_(M, a) M(c0, a) M(c1, a) M(c2, a) M(c3, a) M(c4, a) M(c5, a) M(c6, a) M(c7, a) M(c8, a) \
    M(c9, a) M(c10, a) M(c11, a)
#define ARITH_DECL_(c, a) ARITH_DECL2_(c, ARITH_UNPACK_ a)
#define ARITH_DECL2_(c, a) ARITH_DECL3_(c, a)
#define ARITH_DECL3_(c, vt, et, F, P) vt c = x0; HIDE(c);
#define ARITH_STORE_(c, a) ARITH_STORE2_(c, ARITH_UNPACK_ a)
#define ARITH_STORE2_(c, a) ARITH_STORE3_(c, a)
#define ARITH_STORE3_(c, vt, et, F, P) ARITH_CALL(F, P, store, o, c); o += ARITH_CALL(F, P, lanes, vt, et);
#define ARITH_STEP12_(op, F, P)                                                                               \
    ARITH_STEP_##op(F, P, c0); ARITH_STEP_##op(F, P, c1); ARITH_STEP_##op(F, P, c2);                         \
    ARITH_STEP_##op(F, P, c3); ARITH_STEP_##op(F, P, c4); ARITH_STEP_##op(F, P, c5);                         \
    ARITH_STEP_##op(F, P, c6); ARITH_STEP_##op(F, P, c7); ARITH_STEP_##op(F, P, c8);                         \
    ARITH_STEP_##op(F, P, c9); ARITH_STEP_##op(F, P, c10); ARITH_STEP_##op(F, P, c11)

#define ARITH_THR(fl, op, tgt, vt, et, F, P)                                                                  \
    tgt __attribute__((noinline)) void arith_##fl##_##op##_thr(uint64_t steps, const void *in_, void *out_) \
    {                                                                                                         \
        ARITH_OPERANDS_(F, P, vt, et, x0);                                                                    \
        ARITH_ALL_(ARITH_DECL_, (vt, et, F, P))                                                               \
        for (uint64_t i = 0; i < steps * 8; i++) {                                                            \
            ARITH_STEP12_(op, F, P);                                                                          \
        }                                                                                                     \
        et *o = out_;                                                                                         \
        ARITH_ALL_(ARITH_STORE_, (vt, et, F, P))                                                              \
    }

/* One flavour's kernels from its table row: both kernels of every operation (fma where FMA is yes). */
#define ARITH_PAIR_(fl, op, tgt, vt, et, F, P)                                                                \
    ARITH_LAT(fl, op, tgt, vt, et, F, P) ARITH_THR(fl, op, tgt, vt, et, F, P)
#define ARITH_FMA_PAIR_yes(fl, tgt, vt, et, F, P) ARITH_PAIR_(fl, fma, tgt, vt, et, F, P)
#define ARITH_FMA_PAIR_no(fl, tgt, vt, et, F, P)
#define ARITH_KERNELS(fl, precision, width, bits, lanes, stride, tgt, vt, et, F, P, fma)                     \
    ARITH_PAIR_(fl, add, tgt, vt, et, F, P)                                                                   \
    ARITH_PAIR_(fl, sub, tgt, vt, et, F, P)                                                                   \
    ARITH_PAIR_(fl, mul, tgt, vt, et, F, P)                                                                   \
    ARITH_PAIR_(fl, div, tgt, vt, et, F, P)                                                                   \
    ARITH_PAIR_(fl, sqrt, tgt, vt, et, F, P)                                                                  \
    ARITH_FMA_PAIR_##fma(fl, tgt, vt, et, F, P)

/* The kernels of one flavour in op index order (arith.c: add mul div fma sqrt sub), latency or throughput. */
#define ARITH_FMA_FN_yes(fl, kind) arith_##fl##_fma_##kind
#define ARITH_FMA_FN_no(fl, kind) NULL
#define ARITH_FNS(fl, kind, fma)                                                                              \
    {arith_##fl##_add_##kind, arith_##fl##_mul_##kind, arith_##fl##_div_##kind, ARITH_FMA_FN_##fma(fl, kind), \
     arith_##fl##_sqrt_##kind, arith_##fl##_sub_##kind}

#endif
