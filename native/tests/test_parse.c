/* test_parse.c -- option value parsers, page policies and region footprints. */
#define _GNU_SOURCE
#include "check.h"
#include "ts_mem.h"
#include "ts_util.h"

#include <stdint.h>

int main(void)
{
    uint64_t u;
    CHECK(ts_parse_bytes("64", &u) == 0 && u == 64);
    CHECK(ts_parse_bytes("4k", &u) == 0 && u == 4096);
    CHECK(ts_parse_bytes("4K", &u) == 0 && u == 4096);
    CHECK(ts_parse_bytes("2m", &u) == 0 && u == 2u << 20);
    CHECK(ts_parse_bytes("2MiB", &u) == 0 && u == 2u << 20);
    CHECK(ts_parse_bytes("1kb", &u) == 0 && u == 1024);
    CHECK(ts_parse_bytes("1g", &u) == 0 && u == 1u << 30);
    CHECK(ts_parse_bytes("3t", &u) == 0 && u == UINT64_C(3) << 40);
    CHECK(ts_parse_bytes("0", &u) == 0 && u == 0);
    CHECK(ts_parse_bytes("k", &u) != 0);
    CHECK(ts_parse_bytes("", &u) != 0);
    CHECK(ts_parse_bytes("-1", &u) != 0);
    CHECK(ts_parse_bytes("1.5k", &u) != 0);
    CHECK(ts_parse_bytes("3m3", &u) != 0);
    CHECK(ts_parse_bytes("2x", &u) != 0);
    CHECK(ts_parse_bytes("20000000000g", &u) != 0); /* 2e10 x 2^30 overflows 64 bits */
    CHECK(ts_parse_bytes("99999999999999999999", &u) != 0);

    int64_t i;
    CHECK(ts_parse_i64("1000", &i) == 0 && i == 1000);
    CHECK(ts_parse_i64("-5", &i) == 0 && i == -5);
    CHECK(ts_parse_i64("10x", &i) != 0);
    CHECK(ts_parse_i64("", &i) != 0);
    CHECK(ts_parse_i64(" 1", &i) != 0);
    CHECK(ts_parse_i64("1e3", &i) != 0);
    CHECK(ts_parse_u64("7", &u) == 0 && u == 7);
    CHECK(ts_parse_u64("-7", &u) != 0);

    double d;
    CHECK(ts_parse_double("0.95", &d) == 0 && d == 0.95);
    CHECK(ts_parse_double("1e2", &d) == 0 && d == 100.0);
    CHECK(ts_parse_double("abc", &d) != 0);
    CHECK(ts_parse_double("1.0.0", &d) != 0);
    CHECK(ts_parse_double("inf", &d) != 0);
    CHECK(ts_parse_double("nan", &d) != 0);

    ts_page p;
    CHECK(ts_page_parse("4k", &p) == 0 && p == TS_PAGE_4K);
    CHECK(ts_page_parse("THP", &p) == 0 && p == TS_PAGE_THP);
    CHECK(ts_page_parse("2m", &p) == 0 && p == TS_PAGE_2M && ts_page_bytes(p) == 2u << 20);
    CHECK(ts_page_parse("1g", &p) == 0 && p == TS_PAGE_1G && ts_page_bytes(p) == 1u << 30);
    CHECK(ts_page_parse("3m", &p) != 0);
    CHECK(ts_page_parse("", &p) != 0);
    CHECK_STR(ts_page_name(TS_PAGE_THP), "thp");

    /* footprint: offset + bytes rounded up to whole pages */
    CHECK(ts_region_footprint(TS_PAGE_4K, 0, 1) == 4096);
    CHECK(ts_region_footprint(TS_PAGE_4K, 64, 4096) == 8192);
    CHECK(ts_region_footprint(TS_PAGE_THP, 0, 1992256 * 2) == 4u << 20);
    CHECK(ts_region_footprint(TS_PAGE_1G, 512u << 20, 600u << 20) == UINT64_C(2) << 30);

    char b[32];
    CHECK_STR(ts_fmt_bytes(512, b, sizeof b), "512 B");
    CHECK_STR(ts_fmt_bytes(300u << 20, b, sizeof b), "300 MiB");
    CHECK_STR(ts_fmt_bytes(1992256, b, sizeof b), "1.9 MiB");
    CHECK_STR(ts_fmt_bytes(UINT64_C(1) << 30, b, sizeof b), "1 GiB");

    double v[] = {5, 1, 4, 2};
    CHECK(ts_median_inplace(v, 4) == 3.0 && v[0] == 1 && v[3] == 5);
    double w[] = {7};
    CHECK(ts_median_inplace(w, 1) == 7.0);
    CHECK_DONE();
}
