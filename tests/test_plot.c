/* test_plot.c — line and bar charts (plot.h): geometry measured on the canvas (a
 * power law is a straight line on a log axis, bar heights are proportional to
 * values), gaps, legends in every position, every error path, and PNG files decoded
 * with libpng (an independent decoder) whose pixels are checked: bar tops on the value
 * axis's grid lines, a heatmap's extreme cells in viridis's published end colours, ink
 * in the axis and label bands. */
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

#include <png.h>

#include "render/plot.h"

static int same(dfl_rgb a, dfl_rgb b)
{
    return a.r == b.r && a.g == b.g && a.b == b.b;
}

static long count_color(const dfl_canvas *c, dfl_rgb k)
{
    long n = 0;
    for (int y = 0; y < c->h; y++)
        for (int x = 0; x < c->w; x++)
            n += same(dfl_canvas_get(c, x, y), k);
    return n;
}

/* ------------------------------------------------------------ decoded PNGs */

/* The PNG at path decoded by libpng as 8-bit RGB, [h][w][3] (caller frees), or NULL. */
static uint8_t *read_png_rgb(const char *path, int *w, int *h)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path)) return NULL;
    im.format = PNG_FORMAT_RGB;
    uint8_t *buf = malloc(PNG_IMAGE_SIZE(im));
    if (!buf || !png_image_finish_read(&im, NULL, buf, 0, NULL)) {
        free(buf);
        png_image_free(&im);
        return NULL;
    }
    *w = (int)im.width;
    *h = (int)im.height;
    return buf;
}

static int px_is(const uint8_t *img, int w, int x, int y, dfl_rgb k)
{
    const uint8_t *p = img + ((size_t)y * (size_t)w + (size_t)x) * 3;
    return p[0] == k.r && p[1] == k.g && p[2] == k.b;
}

/* Dark (text or axis) pixels in the box [x0, x1) x [y0, y1). */
static long ink_in(const uint8_t *img, int w, int x0, int y0, int x1, int y1)
{
    long n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            const uint8_t *p = img + ((size_t)y * (size_t)w + (size_t)x) * 3;
            n += p[0] < 120 && p[1] < 120 && p[2] < 120;
        }
    return n;
}

static void temp_png(char *path)
{
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
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
    for (int i = 0; i < 9; i++)
        x[i] = i, y[i] = pow(10, i / 2.0);
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
            if (same(dfl_canvas_get(c, xx, yy), red))
                sx += xx, sy += yy, sxx += (double)xx * xx, sxy += (double)xx * yy, n++;
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
    dfl_legend_pos pos[] = {DFL_LEGEND_AUTO,      DFL_LEGEND_INSIDE_TR, DFL_LEGEND_INSIDE_TL, DFL_LEGEND_INSIDE_BR,
                            DFL_LEGEND_INSIDE_BL, DFL_LEGEND_RIGHT,     DFL_LEGEND_BELOW,     DFL_LEGEND_OFF};
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
    for (int y = 0; y < c->h; y++)
        n += same(dfl_canvas_get(c, x, y), k);
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
    double v[9] = {0.5, -0.2, 0.3, 0.1, 0.2, 0.3, 0.4, 0.01, 0.6},
           e[9] = {0.05, 0.02, 0.03, 0.01, 0.02, 0.03, 0.04, 0.01, NAN};
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
    int w, h;
    uint8_t *img = read_png_rgb(path, &w, &h); /* a PNG libpng decodes, of the default size */
    assert_non_null(img);
    assert_int_equal(w, DFL_PLOT_DEFAULT_W);
    assert_int_equal(h, DFL_PLOT_DEFAULT_H);
    free(img);
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

/* Bars of 1, 2 and 4 on a 0..4 axis with grid lines at 0, 1, 2, 3, 4, written as PNG
 * and decoded: each bar's top row is the row of the grid line of its value (within
 * 1 px), read off the grid lines left of the first bar. */
static void test_png_bar_tops_on_grid(void **state)
{
    (void)state;
    char path[] = "/tmp/dfl_plot_bars_XXXXXX.png";
    temp_png(path);
    const char *groups[3] = {"a", "b", "c"}, *series[1] = {"v"};
    double v[3] = {1, 2, 4};
    dfl_rgb k = {10, 120, 60}, grid = {226, 226, 226};
    dfl_bar_chart p = dfl_bar_chart_default();
    p.groups = groups, p.n_groups = 3, p.series = series, p.n_series = 1, p.values = v, p.colors = &k;
    p.legend = DFL_LEGEND_OFF;
    p.grid = 1;
    p.y.has_min = 1, p.y.min = 0, p.y.has_max = 1, p.y.max = 4, p.y.integer_ticks = 1;
    p.width = 600, p.height = 500;
    dfl_error err;
    assert_int_equal(dfl_plot_bar_write(&p, path, 1, &err), DFL_OK);
    int w, h;
    uint8_t *img = read_png_rgb(path, &w, &h);
    unlink(path);
    assert_non_null(img);
    assert_int_equal(w, 600);
    assert_int_equal(h, 500);
    /* the bars: runs of columns holding the bar colour; each one's top row */
    int x0[3], x1[3], top[3], nb = 0, in = 0;
    for (int x = 0; x < w && nb < 3; x++) {
        int t = -1;
        for (int y = 0; y < h && t < 0; y++)
            if (px_is(img, w, x, y, k)) t = y;
        if (t >= 0 && !in) x0[nb] = x, top[nb] = t, in = 1;
        if (t < 0 && in) x1[nb++] = x, in = 0;
    }
    assert_int_equal(nb, 3);
    /* the baseline (value 0): the row below the first bar's last */
    int base = top[0];
    while (base < h && px_is(img, w, (x0[0] + x1[0]) / 2, base, k))
        base++;
    /* grid lines above it: rows that are grid-coloured in the column just left of the
     * first bar, top to bottom the values 4, 3, 2, 1 */
    int gx = x0[0] - 3, rows[16], ng = 0;
    for (int y = 0; y < base - 2 && ng < 16; y++)
        if (px_is(img, w, gx, y, grid) && !(ng && rows[ng - 1] >= y - 2)) rows[ng++] = y;
    assert_int_equal(ng, 4);
    int row_of[5] = {base, rows[3], rows[2], rows[1], rows[0]};
    for (int i = 0; i < 3; i++) {
        int want = row_of[(int)v[i]];
        if (abs(top[i] - want) > 1) fail_msg("bar %d (value %g): top row %d, grid line at %d", i, v[i], top[i], want);
        assert_true(x1[i] - x0[i] > 20);
    }
    free(img);
}

/* A 2 x 2 heatmap of 0, 1/3, 2/3, 1 on a 0..1 viridis scale, written as PNG and
 * decoded: the minimum cell is viridis's first published colour #440154, the maximum
 * its last #fde725, the others neither. */
static void test_png_heatmap_extremes(void **state)
{
    (void)state;
    char path[] = "/tmp/dfl_plot_heat_XXXXXX.png";
    temp_png(path);
    dfl_canvas *c;
    dfl_error err;
    dfl_rgb white = {255, 255, 255}, grey = {200, 200, 200};
    assert_int_equal(dfl_canvas_create(100, 100, white, &c, &err), DFL_OK);
    float v[4] = {0.0f, 1.0f / 3, 2.0f / 3, 1.0f}; /* [2][2] */
    dfl_norm nm;
    memset(&nm, 0, sizeof nm);
    nm.scale = DFL_SCALE_LINEAR, nm.vmin = 0, nm.vmax = 1;
    dfl_canvas_heatmap_box(c, 10, 10, 80, 80, v, 2, 2, &nm, DFL_CMAP_VIRIDIS, grey, grey);
    assert_int_equal(dfl_png_write(c, path, 1, NULL, NULL, 0, &err), DFL_OK);
    dfl_canvas_destroy(c);
    int w, h;
    uint8_t *img = read_png_rgb(path, &w, &h);
    unlink(path);
    assert_non_null(img);
    dfl_rgb first = {0x44, 0x01, 0x54}, last = {0xfd, 0xe7, 0x25};
    /* cell centres: (row 0, col 0) = 0 ... (row 1, col 1) = 1 */
    assert_true(px_is(img, w, 30, 30, first));
    assert_true(px_is(img, w, 70, 70, last));
    assert_false(px_is(img, w, 70, 30, first) || px_is(img, w, 70, 30, last));
    assert_false(px_is(img, w, 30, 70, first) || px_is(img, w, 30, 70, last));
    assert_true(px_is(img, w, 5, 5, white)); /* outside the map */
    free(img);
}

/* A line chart with a title and axis labels, as PNG: ink in the title band, the
 * y-label band on the left and the x-label band at the bottom. */
static void test_png_axes_not_blank(void **state)
{
    (void)state;
    char path[] = "/tmp/dfl_plot_axes_XXXXXX.png";
    temp_png(path);
    double y[5] = {1, 2, 3, 2, 1};
    dfl_plot_series s = {"s", NULL, y, 5, 0, {0, 0, 0}, DFL_MARKER_NONE, DFL_DASH_SOLID, 0};
    dfl_line_chart p = dfl_line_chart_default();
    p.series = &s, p.n_series = 1, p.legend = DFL_LEGEND_OFF, p.grid = 0;
    p.title = "TITLE", p.x.label = "position", p.y.label = "share";
    p.width = 600, p.height = 400;
    dfl_error err;
    assert_int_equal(dfl_plot_line_write(&p, path, 1, &err), DFL_OK);
    int w, h;
    uint8_t *img = read_png_rgb(path, &w, &h);
    unlink(path);
    assert_non_null(img);
    assert_true(ink_in(img, w, 0, 0, w, h / 12) > 20);                /* title */
    assert_true(ink_in(img, w, 0, h / 4, w / 12, 3 * h / 4) > 20);    /* y label and tick labels */
    assert_true(ink_in(img, w, w / 4, h - h / 8, 3 * w / 4, h) > 20); /* x label and tick labels */
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_palette),
        cmocka_unit_test(test_log_line_is_straight),
        cmocka_unit_test(test_gaps_and_legends),
        cmocka_unit_test(test_line_errors),
        cmocka_unit_test(test_bars_proportional),
        cmocka_unit_test(test_bars_all_options),
        cmocka_unit_test(test_png),
        cmocka_unit_test(test_png_bar_tops_on_grid),
        cmocka_unit_test(test_png_heatmap_extremes),
        cmocka_unit_test(test_png_axes_not_blank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
