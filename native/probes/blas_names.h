/* blas_names.h -- the BLAS/LAPACK names the probes call, mapped to a library's own symbol names.
 *
 * A CBLAS found on the system exports the plain names (cblas_dgemm, dgetrf_). OpenBLAS from PyPI
 * (`scipy-openblas32`, what `pip install` uses where the system has no BLAS) exports every symbol behind a
 * prefix (scipy_cblas_dgemm, scipy_dgetrf_, scipy_openblas_get_config) so that it never clashes with another
 * BLAS in the same process; its pkg-config file says so with -DBLAS_SYMBOL_PREFIX=scipy_. CMake defines
 * TS_BLAS_PREFIX_SCIPY for such a library, and this header maps the calls (blas.c's run-time queries try
 * the prefixed names by themselves). LP64 only (32-bit
 * integers): `scipy-openblas64`'s ILP64 names (scipy_cblas_dgemm64_) take 64-bit integers and are not used.
 */
#ifndef TS_BLAS_NAMES_H
#define TS_BLAS_NAMES_H

#ifdef TS_BLAS_PREFIX_SCIPY
#define cblas_dgemm scipy_cblas_dgemm
#define cblas_dgemv scipy_cblas_dgemv
#define dgetrf_ scipy_dgetrf_
#define dgetrs_ scipy_dgetrs_
#endif

#endif
