/* test_view_request.c — the viewer's request parser and checks (pure functions, no
 * server): every endpoint's parameters, percent-escapes, each HTTP status a request can
 * get and its message, zoom levels and tile counts against brute force, and the
 * catalog checks (layers, heads, rows, maps, deltas). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_request.h"

static int parse(const char *target, dfl_view_request *r, dfl_error *err)
{
    return dfl_view_request_parse("GET", target, r, err);
}

/* Parse must fail with `code` and a message containing `needle`. */
static void expect(const char *method, const char *target, int code, const char *needle)
{
    dfl_view_request r;
    dfl_error err = {0};
    int got = dfl_view_request_parse(method, target, &r, &err);
    if (got != code || !strstr(err.msg, needle)) {
        print_error("%s %s: got %d '%s', expected %d '%s'\n", method, target, got, err.msg, code, needle);
        fail();
    }
}

static void test_endpoints(void **state)
{
    (void)state;
    dfl_view_request r;
    dfl_error err;
    assert_int_equal(parse("/", &r, &err), 0);
    assert_int_equal(r.kind, DFL_VIEW_ASSET);
    assert_int_equal(r.asset, 0);
    assert_int_equal(parse("/app.js", &r, &err), 0);
    assert_int_equal(r.asset, 1);
    assert_int_equal(parse("/app.css", &r, &err), 0);
    assert_int_equal(r.asset, 2);
    assert_int_equal(parse("/api/dumps", &r, &err), 0);
    assert_int_equal(r.kind, DFL_VIEW_DUMPS);
    assert_int_equal(parse("/api/tile?d=1&s=2&l=3&h=4&m=diff&z=5&x=6&y=7&vmin=-0.5&vmax=2e-1&scale=sqrt&cmap=magma"
                           "&pool=max&minus=0&rev=3",
                           &r, &err),
                     0);
    assert_int_equal(r.kind, DFL_VIEW_TILE_REQ);
    assert_true(r.dump == 1 && r.sample == 2 && r.layer == 3 && r.head == 4 && r.minus == 0);
    assert_true(r.z == 5 && r.x == 6 && r.y == 7);
    assert_int_equal(r.map, DFL_VIEW_DIFF);
    assert_true(r.has_limits && r.vmin == -0.5 && r.vmax == 0.2);
    assert_int_equal(r.scale, DFL_SCALE_SQRT);
    assert_int_equal(r.cmap, DFL_CMAP_MAGMA);
    assert_int_equal(r.pool, DFL_POOL_MAX);
    /* defaults */
    assert_int_equal(parse("/api/row?d=0&s=0&l=0&h=0&m=map1&q=9", &r, &err), 0);
    assert_true(r.topk == 10 && r.width == 512 && r.minus == -1 && r.k == -1);
    assert_int_equal(parse("/api/thumb?d=0&s=0&l=0&h=0&m=map2", &r, &err), 0);
    assert_true(r.px == 96 && r.map == DFL_VIEW_MAP2);
    /* escapes, '+', empty pieces, HEAD */
    assert_int_equal(parse("/api/cell?%64=1&&s=%32&l=0&h=0&q=3&k=+1&", &r, &err), 400); /* "+1" is " 1" */
    assert_int_equal(parse("/api/cell?%64=1&&s=%32&l=0&h=0&q=3&k=1&", &r, &err), 0);
    assert_true(r.dump == 1 && r.sample == 2 && r.k == 1);
    assert_int_equal(dfl_view_request_parse("HEAD", "/api/dumps", &r, &err), 0);
    assert_true(r.head_only);
}

static void test_errors(void **state)
{
    (void)state;
    expect("POST", "/api/dumps", 405, "method POST not allowed");
    expect("DELETE", "/", 405, "GET or HEAD");
    expect("GET", "/nope", 404, "no such page: /nope");
    expect("GET", "/../etc/passwd", 404, "no such page");
    expect("GET", "/api/dumps/", 404, "no such page");
    expect("GET", "/app.js%00", 404, "no such page");
    expect("GET", "/api/dumps?d=0", 400, "/api/dumps takes no parameter 'd'");
    expect("GET", "/api/sample?d=0", 400, "needs parameter 's'");
    expect("GET", "/api/sample?d=0&s=1&d=0", 400, "parameter d given twice");
    expect("GET", "/api/sample?d&s=1", 400, "parameter d has no value");
    expect("GET", "/api/sample?d=&s=1", 400, "parameter d: expected an integer");
    expect("GET", "/api/sample?d=16&s=1", 400, "in [0, 15]");
    expect("GET", "/api/sample?d=0x1&s=1", 400, "parameter d");
    expect("GET", "/api/sample?d= 1&s=1", 400, "parameter d");
    expect("GET", "/api/sample?d=1&s=-1", 400, "parameter s");
    expect("GET", "/api/sample?d=%4&s=1", 400, "parameter d: malformed");
    expect("GET", "/api/sample?d=%00&s=1", 400, "parameter d: malformed");
    expect("GET", "/api/sample?d=%zz&s=1", 400, "malformed");
    expect("GET", "/api/sample?%zz=1", 400, "malformed parameter name");
    expect("GET", "/api/sample?s=1&d=11111111111111111111111111111111111111111111111111111111111111111111", 400,
           "longer than 63 bytes");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map3&z=0&x=0&y=0&vmin=0&vmax=1", 400, "expected map1, map2 or diff");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=63&x=0&y=0&vmin=0&vmax=1", 400, "parameter z");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=nan&vmax=1", 400, "finite");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=1&vmax=1", 400, "vmin < vmax");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=1&scale=cubic", 400, "scale");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=1&pool=median", 400, "pool");
    expect("GET", "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=0", 400, "needs parameter 'vmax'");
    expect("GET", "/api/row?d=0&s=0&l=0&h=0&m=map1&q=1&topk=201", 400, "parameter topk");
    expect("GET", "/api/row?d=0&s=0&l=0&h=0&m=map1&q=1&width=4097", 400, "parameter width");
    expect("GET", "/api/thumb?d=0&s=0&l=0&h=0&m=map1&px=8", 400, "parameter px");
    expect("GET", "/api/colormap?cmap=jet", 400, "colormap");
    expect("GET", "/api/ticks?vmin=0&vmax=1&div=2", 400, "parameter div");
    expect("GET", "/api/ticks?vmin=0", 400, "needs parameter 'vmax'");
    char longer[DFL_VIEW_MAX_TARGET + 40];
    snprintf(longer, sizeof longer, "/api/dumps?%0*d", DFL_VIEW_MAX_TARGET, 0);
    expect("GET", longer, 414, "longer than 2048 bytes");
    dfl_view_request r;
    dfl_error err;
    assert_int_equal(dfl_view_request_parse(NULL, "/", &r, &err), 400);
}

/* zmax and tile counts against brute force */
static void test_levels(void **state)
{
    (void)state;
    int64_t sizes[] = {1, 255, 256, 257, 511, 512, 513, 600, 16384, 16385, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t n = sizes[i], z = 0;
        while ((n + (1 << z) - 1) / (1 << z) > DFL_VIEW_TILE)
            z++;
        assert_int_equal(dfl_view_zmax(n, n / 2 + 1), z);
        for (int64_t l = 0; l <= z; l++) {
            int64_t nx, ny, cells = (int64_t)DFL_VIEW_TILE << l, want = 0;
            dfl_view_tiles(n / 2 + 1, n, l, &nx, &ny);
            for (int64_t c = 0; c < n; c += cells)
                want++;
            assert_int_equal(nx, want);
            assert_int_equal(ny, (n / 2 + 1 + cells - 1) / cells);
        }
        int64_t nx;
        dfl_view_tiles(n, n, z, &nx, NULL);
        assert_int_equal(nx, 1);
    }
}

/* A catalog: dump 0 with two samples (layers {0, 2}, heads {1}, rows {3, 5, 9} of 10
 * tokens, map1 only; the second has no maps), dump 1 with the same tokens and all maps,
 * dump 2 with other tokens, an image sample (DiffCLIP / CLIP). */
static const int32_t L02[] = {0, 2}, H1[] = {1}, ROWS[] = {3, 5, 9};
static const dfl_view_sample_info S0[] = {{10, 3, 2, 1, L02, H1, ROWS, 1u, 42, 0},
                                          {10, 0, 0, 0, NULL, NULL, NULL, 0, 42, 0}};
static const dfl_view_sample_info S1[] = {{10, 3, 2, 1, L02, H1, ROWS, 7u, 42, 0}};
static const dfl_view_sample_info S2[] = {{10, 3, 2, 1, L02, H1, ROWS, 7u, 43, 1}}; /* an image sample */
static const dfl_view_dump_info DUMPS[] = {{2, S0}, {1, S1}, {1, S2}};
static const dfl_view_catalog CAT = {3, DUMPS};

static void check(const char *target, int code, const char *needle)
{
    dfl_view_request r;
    dfl_error err = {0};
    int got = parse(target, &r, &err);
    if (!got) got = dfl_view_request_check(&CAT, &r, &err);
    if (got != code || (needle && !strstr(err.msg, needle))) {
        print_error("%s: got %d '%s', expected %d '%s'\n", target, got, err.msg, code, needle ? needle : "");
        fail();
    }
}

static void test_catalog(void **state)
{
    (void)state;
    dfl_view_request r;
    dfl_error err;
    assert_int_equal(parse("/api/cell?d=1&s=0&l=2&h=1&q=9&k=4", &r, &err), 0);
    assert_int_equal(dfl_view_request_check(&CAT, &r, &err), 0);
    assert_true(r.li == 1 && r.hi == 0 && r.ri == 2);
    check("/api/dumps", 0, NULL);
    check("/api/sample?d=0&s=1", 0, NULL);
    check("/api/sample?d=3&s=0", 404, "no dump 3 (there are 3: 0..2)");
    check("/api/sample?d=0&s=2", 404, "dump 0 has no sample 2 (samples 0..1)");
    check("/api/limits?d=0&s=1&l=0&h=1&m=map1", 404, "has no attention maps");
    check("/api/limits?d=0&s=0&l=1&h=1&m=map1", 404, "layer 1 not captured (layers: 0..2, 2 of them)");
    check("/api/limits?d=0&s=0&l=0&h=0&m=map1", 404, "head 0 not captured");
    check("/api/limits?d=0&s=0&l=0&h=1&m=diff", 404, "this dump has no diff map");
    check("/api/limits?d=1&s=0&l=0&h=1&m=diff", 0, NULL);
    check("/api/limits?d=1&s=0&l=0&h=1&m=map1&minus=0", 0, NULL);
    check("/api/limits?d=1&s=0&l=0&h=1&m=map2&minus=0", 404, "dump 0 has no map2");
    check("/api/limits?d=1&s=0&l=0&h=1&m=map1&minus=2", 404, "other tokens or rows");
    check("/api/limits?d=1&s=0&l=0&h=1&m=map1&minus=5", 404, "no dump 5 to subtract");
    check("/api/tile?d=1&s=0&l=2&h=1&m=map1&z=0&x=0&y=0&vmin=0&vmax=1", 0, NULL);
    check("/api/tile?d=1&s=0&l=2&h=1&m=map1&z=1&x=0&y=0&vmin=0&vmax=1", 404, "zoom level 1 beyond 0");
    check("/api/tile?d=1&s=0&l=2&h=1&m=map1&z=0&x=1&y=0&vmin=0&vmax=1", 404, "no tile (1, 0) at level 0 (1 x 1");
    check("/api/cell?d=1&s=0&l=2&h=1&q=4&k=0", 404, "query row 4 not captured (3 rows, 3..9)");
    check("/api/cell?d=1&s=0&l=2&h=1&q=5&k=10", 404, "key 10 beyond the 10 tokens");
    check("/api/cell?d=1&s=0&l=2&h=1&q=5&k=9", 0, NULL); /* a masked (future) key is still a cell */
    check("/api/row?d=0&s=0&l=2&h=1&m=map1&q=3", 0, NULL);
    /* a cell asks for every map the dump has: m is not needed */
    check("/api/cell?d=0&s=0&l=2&h=1&q=3&k=0", 0, NULL);
    /* an image sample's input image: only an image sample has one */
    check("/api/image?d=2&s=0", 0, NULL);
    check("/api/image?d=0&s=0", 404, "sample 0 of dump 0 is not an image sample");
    check("/api/image?d=2&s=1", 404, "dump 2 has no sample 1");
    check("/api/image?d=2", 400, "needs parameter 's'");
    check("/api/image?d=2&s=0&m=map1", 400, "takes no parameter 'm'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_catalog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
