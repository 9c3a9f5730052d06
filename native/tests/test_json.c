/* test_json.c -- the JSON-lines writer: exact output, escapes, 64-bit integers, shortest round-trip doubles. */
#define _GNU_SOURCE
#include "check.h"
#include "ts_json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int main(void)
{
    ts_json j;
    ts_json_init(&j);
    ts_json_record(&j, "config");
    ts_json_str(&j, "probe", "l2sum");
    ts_json_arr(&j, "cpus");
    ts_json_i64(&j, NULL, 0);
    ts_json_i64(&j, NULL, 2);
    ts_json_close(&j);
    ts_json_obj(&j, "params");
    ts_json_null(&j, "x");
    ts_json_bool(&j, "y", true);
    ts_json_obj(&j, "z");
    ts_json_close(&j);
    ts_json_arr(&j, "e");
    ts_json_close(&j);
    ts_json_close(&j);
    ts_json_end(&j);
    CHECK_STR(j.buf, "{\"record\":\"config\",\"probe\":\"l2sum\",\"cpus\":[0,2],"
                     "\"params\":{\"x\":null,\"y\":true,\"z\":{},\"e\":[]}}\n");
    ts_json_clear(&j);

    ts_json_record(&j, "w");
    ts_json_str(&j, "m", "a\"b\\c\nd\te\x01");
    ts_json_str(&j, "n", NULL);
    ts_json_end(&j);
    CHECK_STR(j.buf, "{\"record\":\"w\",\"m\":\"a\\\"b\\\\c\\nd\\te\\u0001\",\"n\":null}\n");
    ts_json_clear(&j);

    ts_json_record(&j, "i");
    ts_json_u64(&j, "tsc", UINT64_MAX);
    ts_json_i64(&j, "neg", INT64_MIN);
    ts_json_int_or_null(&j, "thread", -1);
    ts_json_int_or_null(&j, "cpu", 3);
    ts_json_end(&j);
    CHECK_STR(j.buf, "{\"record\":\"i\",\"tsc\":18446744073709551615,\"neg\":-9223372036854775808,"
                     "\"thread\":null,\"cpu\":3}\n");
    ts_json_clear(&j);

    /* doubles: fewest digits that read back exactly */
    char b[40];
    CHECK_STR(ts_json_fmt_double(0.1, b, sizeof b), "0.1");
    CHECK_STR(ts_json_fmt_double(3.0, b, sizeof b), "3");
    CHECK_STR(ts_json_fmt_double(-2.5e-300, b, sizeof b), "-2.5e-300");
    CHECK_STR(ts_json_fmt_double(1.0 / 3.0, b, sizeof b), "0.3333333333333333");
    CHECK_STR(ts_json_fmt_double(0.1 + 0.2, b, sizeof b), "0.30000000000000004");
    CHECK_STR(ts_json_fmt_double(NAN, b, sizeof b), "null");
    CHECK_STR(ts_json_fmt_double(-INFINITY, b, sizeof b), "null");
    double values[] = {2100000149.3760562, 1e22, 5e-324, 123456789012345678.0, 0.000312};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        CHECK(strtod(ts_json_fmt_double(values[i], b, sizeof b), NULL) == values[i]);

    /* append moves complete lines and clears the source */
    ts_json k;
    ts_json_init(&k);
    ts_json_record(&k, "a");
    ts_json_end(&k);
    ts_json_record(&j, "b");
    ts_json_end(&j);
    ts_json_append(&j, &k);
    CHECK_STR(j.buf, "{\"record\":\"b\"}\n{\"record\":\"a\"}\n");
    CHECK(k.len == 0);

    /* growth past the initial buffer */
    ts_json_clear(&j);
    ts_json_record(&j, "big");
    ts_json_arr(&j, "pa");
    for (int i = 0; i < 100000; i++)
        ts_json_u64(&j, NULL, 4096u * (unsigned)i);
    ts_json_close(&j);
    ts_json_end(&j);
    CHECK(j.len > 100000 && j.buf[j.len - 1] == '\n' && strstr(j.buf, ",409595904]}") != NULL);
    ts_json_free(&j);
    ts_json_free(&k);
    CHECK_DONE();
}
