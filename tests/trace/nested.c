/* nested.c -- nested parallel regions (2 x 2 threads) with a barrier and a single: the trace tests' nesting case.
 * Run with OMP_MAX_ACTIVE_LEVELS=2; prints s=9. */
#include <omp.h>
#include <stdio.h>
int main(void){ long s=0;
#pragma omp parallel num_threads(2) reduction(+:s)
 {
#pragma omp parallel num_threads(2) reduction(+:s)
  { s += omp_get_level(); 
#pragma omp barrier
  }
#pragma omp single
  s += 1;
 }
 printf("s=%ld\n", s); return 0; }
