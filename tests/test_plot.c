/* test_plot.c — line and bar charts (plot.h): geometry measured on the canvas (a
 * power law is a straight line on a log axis, bar heights are proportional to
 * values), gaps, legends in every position, PNG output and every error path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "render/plot.h"

static int same(dfl_rgb a, dfl_rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }

static long count_color(const dfl_canvas *c, dfl_rgb k)
{
    long n = 0;
    for (int y = 0; y < c->h; y++)
        for (int x = 0; x < c->w; x++) n += same(dfl_canvas_get(c, x, y), k);
    return n;
}

static void test_palette(void **state)
{
    (void)state;
    assert_true(same(dfl_plot_color(0), dfl_plot_color(8)));
    assert_false(same(dfl_plot_color(0), dfl_plot_color(1)));
    dfl_rgb blue = {0, 114, 178}; /* Okabe-Ito blue (colour-blind safe) */
    assert_true(same(dfl_plot_color(0), blue));
}

/* y = 10^(x/2) on a log axis: the line's pixels fit a straight line. */
static void test_log_line_is_straight(void **state)
{
    (void)state;
    double x[9], y[9];
    for (int i = 0; i < 9; i++) x[i] = i, y[i] = pow(10, i / 2.0);
    dfl_rgb red = {200, 0, 0};
    /* 3 units wide: the anti-aliased line keeps fully covered (exactly red) centre pixels */
    dfl_plot_series s = {"power law", x, y, 9, 1, red, DFL_MARKER_NONE, DFL_DASH_SOLID, 3};
    dfl_line_chart p = dfl_line_chart_default();
    p.series = &s;
    p.n_series = 1;
    p.y.scale = DFL_SCALE_LOG;
    p.legend = DFL_LEGEND_OFF;
    p.grid = 0;
    p.width = 800, p.height = 600;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_OK);
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    for (int yy = 0; yy < c->h; yy++)
        for (int xx = 0; xx < c->w; xx++)
            if (same(dfl_canvas_get(c, xx, yy), red)) sx += xx, sy += yy, sxx += (double)xx * xx, sxy += (double)xx * yy, n++;
    assert_true(n > 300);
    double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), icpt = (sy - slope * sx) / n, worst = 0;
    for (int yy = 0; yy < c->h; yy++)
        for (int xx = 0; xx < c->w; xx++)
            if (same(dfl_canvas_get(c, xx, yy), red)) {
                double d = fabs(yy - (icpt + slope * xx));
                if (d > worst) worst = d;
            }
    assert_true(slope < 0); /* rising values go up the image */
    assert_true(worst < 2.5);
    dfl_canvas_destroy(c);
}

static void test_gaps_and_legends(void **state)
{
    (void)state;
    double y1[6] = {1, 2, NAN, 4, -1, 6}, y2[6] = {0.5, 0.1, 0.2, 0.3, 0.4, 0.2};
    dfl_plot_series s[2] = {{"with gaps", NULL, y1, 6, 0, {0, 0, 0}, DFL_MARKER_AUTO, DFL_DASH_DASHED, 0},
                            {"second", NULL, y2, 6, 0, {0, 0, 0}, DFL_MARKER_AUTO, DFL_DASH_DOTTED, 0}};
    const char *ticks[6] = {"L0", "L1", "L2", "L3", "L4", "L5"};
    dfl_legend_pos pos[] = {DFL_LEGEND_AUTO,     DFL_LEGEND_INSIDE_TR, DFL_LEGEND_INSIDE_TL, DFL_LEGEND_INSIDE_BR,
                            DFL_LEGEND_INSIDE_BL, DFL_LEGEND_RIGHT,    DFL_LEGEND_BELOW,     DFL_LEGEND_OFF};
    for (int log = 0; log < 2; log++)
        for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
            dfl_line_chart p = dfl_line_chart_default();
            p.title = "title";
            p.subtitle = "subtitle";
            p.note = "a note\nsecond line";
            p.x.label = "layer";
            p.x.tick_labels = ticks;
            p.x.n_tick_labels = 6;
            p.y.label = "abs(x)";
            p.y.scale = log ? DFL_SCALE_LOG : DFL_SCALE_LINEAR;
            p.series = s;
            p.n_series = 2;
            p.legend = pos[i];
            dfl_canvas *c;
            dfl_error err;
            assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_OK);
            assert_int_equal(c->w, DFL_PLOT_DEFAULT_W);
            assert_true(count_color(c, dfl_plot_color(0)) > 50);
            assert_true(count_color(c, dfl_plot_color(1)) > 50);
            dfl_canvas_destroy(c);
        }
}

static void test_line_errors(void **state)
{
    (void)state;
    double y[3] = {1, 2, 3}, xbad[3] = {0, NAN, 2};
    dfl_plot_series s = {"s", NULL, y, 3, 0, {0, 0, 0}, DFL_MARKER_AUTO, DFL_DASH_SOLID, 0};
    dfl_canvas *c = NULL;
    dfl_error err;
    dfl_line_chart p = dfl_line_chart_default();
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE); /* no series */
    assert_null(c);
    p.series = &s;
    p.n_series = 1;
    p.y.scale = DFL_SCALE_LOG;
    p.y.has_min = 1;
    p.y.min = 0;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "not positive"));
    p.y.scale = DFL_SCALE_LINEAR;
    p.y.min = 5, p.y.has_max = 1, p.y.max = 5;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "not below"));
    p.y = dfl_line_chart_default().y;
    s.x = xbad;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "x[1]"));
    s.x = NULL;
    s.n = -1;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE);
    s.n = 3;
    p.width = 60, p.height = 50;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "too small"));
    p.width = 5000000;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_ERR_USAGE); /* canvas limit */
    /* a flat series and an empty one still draw */
    double flat[3] = {2, 2, 2};
    s.y = flat;
    p.width = 0, p.height = 0;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_OK);
    dfl_canvas_destroy(c);
    s.n = 0;
    assert_int_equal(dfl_plot_line_canvas(&p, &c, &err), DFL_OK);
    dfl_canvas_destroy(c);
}

/* Height of the bar of colour k whose column is x (pixels of that colour). */
static int bar_height(const dfl_canvas *c, int x, dfl_rgb k)
{
    int n = 0;
    for (int y = 0; y < c->h; y++) n += same(dfl_canvas_get(c, x, y), k);
    return n;
}

static void test_bars_proportional(void **state)
{
    (void)state;
    const char *groups[4] = {"a", "b", "c", "d"};
    const char *series[1] = {"values"};
    double v[4] = {1, 2, 3, NAN};
    dfl_rgb k = {10, 120, 60};
    dfl_bar_chart p = dfl_bar_chart_default();
    p.groups = groups, p.n_groups = 4, p.series = series, p.n_series = 1, p.values = v, p.colors = &k;
    p.legend = DFL_LEGEND_OFF;
    p.grid = 0;
    p.width = 800, p.height = 600;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_OK);
    /* the bars' centre columns: runs of columns holding the bar colour */
    int xs[4], nb = 0, in = 0, start = 0;
    for (int x = 0; x < c->w && nb < 4; x++) {
        int hit = bar_height(c, x, k) > 0;
        if (hit && !in) start = x, in = 1;
        if (!hit && in) xs[nb++] = (start + x) / 2, in = 0;
    }
    assert_int_equal(nb, 3); /* the NaN bar is not drawn */
    int h1 = bar_height(c, xs[0], k), h2 = bar_height(c, xs[1], k), h3 = bar_height(c, xs[2], k);
    assert_true(abs(h2 - 2 * h1) <= 2);
    assert_true(abs(h3 - 3 * h1) <= 2);
    dfl_canvas_destroy(c);
}

static void test_bars_all_options(void **state)
{
    (void)state;
    const char *groups[3] = {"a very long group label indeed", "b", "c"};
    const char *series[3] = {"one", "two", "three"};
    double v[9] = {0.5, -0.2, 0.3, 0.1, 0.2, 0.3, 0.4, 0.01, 0.6}, e[9] = {0.05, 0.02, 0.03, 0.01, 0.02, 0.03,
                                                                          0.04, 0.01, NAN};
    for (int log = 0; log < 2; log++)
        for (int leg = 0; leg <= DFL_LEGEND_OFF; leg++) {
            dfl_bar_chart p = dfl_bar_chart_default();
            p.title = "bars", p.subtitle = "sub", p.note = "note";
            p.groups = groups, p.n_groups = 3, p.series = series, p.n_series = 3, p.values = v, p.errors = e;
            p.x_label = "segment", p.y.label = "share", p.value_labels = 1;
            p.y.scale = log ? DFL_SCALE_LOG : DFL_SCALE_LINEAR;
            p.legend = (dfl_legend_pos)leg;
            dfl_canvas *c;
            dfl_error err;
            assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_OK);
            assert_true(count_color(c, dfl_plot_color(2)) > 100);
            dfl_canvas_destroy(c);
        }
    /* errors */
    dfl_bar_chart p = dfl_bar_chart_default();
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_ERR_USAGE);
    p.n_series = 3, p.series = series, p.n_groups = 3, p.groups = groups;
    assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_ERR_USAGE); /* no values */
    p.values = v;
    p.value_precision = 40;
    assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_ERR_USAGE);
    p.value_precision = 3;
    p.y.has_min = 1, p.y.min = INFINITY;
    assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_ERR_USAGE);
    p.y.has_min = 0;
    p.width = 70, p.height = 60;
    assert_int_equal(dfl_plot_bar_canvas(&p, &c, &err), DFL_ERR_USAGE);
}

static void test_png(void **state)
{
    (void)state;
    char path[] = "/tmp/dfl_plot_XXXXXX.png";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    double y[2] = {1, 2};
    dfl_plot_series s = {"s", NULL, y, 2, 0, {0, 0, 0}, DFL_MARKER_AUTO, DFL_DASH_SOLID, 0};
    dfl_line_chart p = dfl_line_chart_default();
    p.series = &s, p.n_series = 1;
    dfl_error err;
    assert_int_equal(dfl_plot_line_write(&p, path, 0, &err), DFL_ERR_EXISTS);
    assert_int_equal(dfl_plot_line_write(&p, path, 1, &err), DFL_OK);
    FILE *f = fopen(path, "rb");
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_int_equal(sig[1], 'P');
    const char *g[1] = {"g"}, *sr[1] = {"s"};
    dfl_bar_chart b = dfl_bar_chart_default();
    b.groups = g, b.n_groups = 1, b.series = sr, b.n_series = 1, b.values = y;
    assert_int_equal(dfl_plot_bar_write(&b, path, 0, &err), DFL_ERR_EXISTS);
    assert_int_equal(dfl_plot_bar_write(&b, path, 1, &err), DFL_OK);
    unlink(path);
    /* the format comes from the extension: unknown ones are refused, naming the file */
    assert_int_equal(dfl_plot_bar_write(&b, "/tmp/dfl_plot_figure.gif", 1, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "figure.gif"));
    assert_int_equal(access("/tmp/dfl_plot_figure.gif", F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_palette),          cmocka_unit_test(test_log_line_is_straight),
        cmocka_unit_test(test_gaps_and_legends), cmocka_unit_test(test_line_errors),
        cmocka_unit_test(test_bars_proportional), cmocka_unit_test(test_bars_all_options),
        cmocka_unit_test(test_png),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
