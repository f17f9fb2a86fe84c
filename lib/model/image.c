/* image.c — PNG and JPEG decoding, PIL's resampling and CLIP's preprocessing (image.h). */
#include "model/image.h"

#include <jpeglib.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIXELS ((int64_t)1 << 28)

/* ---------------------------------------------------------------- PNG */

typedef struct png_fail {
    char msg[200];
} png_fail;

static void png_error_fn(png_structp png, png_const_charp msg)
{
    png_fail *f = png_get_error_ptr(png);
    snprintf(f->msg, sizeof f->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warning_fn(png_structp png, png_const_charp msg)
{
    (void)png, (void)msg;
}

static dfl_status read_png(FILE *fp, const char *path, dfl_image *out, dfl_error *err)
{
    png_fail fail = {""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &fail, png_error_fn, png_warning_fn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    }
    uint8_t *volatile rgb = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        free(rgb), free(rows);
        png_destroy_read_struct(&png, &info, NULL);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: corrupt PNG: %s", path, fail.msg);
    }
    png_init_io(png, fp);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((int64_t)w * h > MAX_PIXELS) png_error(png, "image larger than 2^28 pixels");
    int type = png_get_color_type(png, info);
    /* 8-bit RGB as PIL's convert("RGB"): palette and grey expanded, 16-bit samples cut to
     * their high byte (PIL's "RGB;16B" raw mode), alpha dropped without compositing */
    if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);
    if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    if (type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3) png_error(png, "unexpected row layout after conversion");
    rgb = dfl__alloc_array((size_t)w * h, 3);
    rows = dfl__alloc_array(h, sizeof *rows);
    if (!rgb || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = rgb + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    out->width = w, out->height = h, out->rgb = rgb;
    return DFL_OK;
}

/* ---------------------------------------------------------------- JPEG */

typedef struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_fail;

static void jpeg_exit(j_common_ptr c)
{
    jpeg_fail *f = (jpeg_fail *)c->err;
    c->err->format_message(c, f->msg);
    longjmp(f->jump, 1);
}

static void jpeg_quiet(j_common_ptr c, int level)
{
    (void)c, (void)level;
}

static dfl_status read_jpeg(FILE *fp, const char *path, dfl_image *out, dfl_error *err)
{
    struct jpeg_decompress_struct d;
    jpeg_fail fail;
    uint8_t *volatile rgb = NULL;
    d.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_exit;
    fail.mgr.emit_message = jpeg_quiet;
    fail.msg[0] = 0;
    if (setjmp(fail.jump)) {
        jpeg_destroy_decompress(&d);
        free(rgb);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: corrupt JPEG: %s", path, fail.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_stdio_src(&d, fp);
    jpeg_read_header(&d, TRUE);
    if (d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK) {
        snprintf(fail.msg, sizeof fail.msg, "CMYK JPEG is not supported");
        longjmp(fail.jump, 1);
    }
    if ((int64_t)d.image_width * d.image_height > MAX_PIXELS) {
        snprintf(fail.msg, sizeof fail.msg, "image larger than 2^28 pixels");
        longjmp(fail.jump, 1);
    }
    /* PIL's decoder settings: libjpeg's defaults (islow DCT, fancy upsampling) */
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    if (d.output_components != 3) {
        snprintf(fail.msg, sizeof fail.msg, "%d components after RGB conversion", d.output_components);
        longjmp(fail.jump, 1);
    }
    size_t w = d.output_width, h = d.output_height;
    rgb = dfl__alloc_array(w * h, 3);
    if (!rgb) {
        snprintf(fail.msg, sizeof fail.msg, "out of memory");
        longjmp(fail.jump, 1);
    }
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = rgb + (size_t)d.output_scanline * w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    out->width = (int64_t)w, out->height = (int64_t)h, out->rgb = rgb;
    return DFL_OK;
}

dfl_status dfl_image_read(const char *path, dfl_image *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return dfl__fail(err, DFL_ERR_IO, "%s: cannot open the image", path);
    unsigned char sig[8] = {0};
    size_t n = fread(sig, 1, sizeof sig, fp);
    rewind(fp);
    dfl_status s;
    if (n == 8 && png_sig_cmp(sig, 0, 8) == 0)
        s = read_png(fp, path, out, err);
    else if (n >= 3 && sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF)
        s = read_jpeg(fp, path, out, err);
    else
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: neither a PNG nor a JPEG file", path);
    fclose(fp);
    return s;
}

void dfl_image_free(dfl_image *im)
{
    if (!im) return;
    free(im->rgb);
    im->rgb = NULL;
}

/* ---------------------------------------------------------------- PIL's resampling */

#define PRECISION_BITS (32 - 8 - 2)

static double bilinear(double x)
{
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double bicubic(double x) /* a = −0.5 */
{
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* Pillow's precompute_coeffs and normalize_coeffs_8bpc: for each output index, the
 * first input index bounds[2i], the count bounds[2i + 1] and ksize fixed-point weights. */
static int coeffs(int64_t in_size, int64_t out_size, dfl_clip_interp interp, int64_t *ksize_out, int64_t **bounds_out,
                  int32_t **kk_out)
{
    double support0 = interp == DFL_CLIP_BICUBIC ? 2.0 : 1.0;
    double (*filter)(double) = interp == DFL_CLIP_BICUBIC ? bicubic : bilinear;
    double scale = (double)in_size / (double)out_size, fscale = scale < 1.0 ? 1.0 : scale;
    double support = support0 * fscale;
    int64_t ksize = (int64_t)ceil(support) * 2 + 1;
    double *k = dfl__alloc_array((size_t)(out_size * ksize), sizeof *k);
    int64_t *bounds = dfl__alloc_array((size_t)out_size * 2, sizeof *bounds);
    int32_t *kk = dfl__alloc_array((size_t)(out_size * ksize), sizeof *kk);
    if (!k || !bounds || !kk) {
        free(k), free(bounds), free(kk);
        return 0;
    }
    for (int64_t xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / fscale;
        int64_t xmin = (int64_t)(center - support + 0.5), xmax = (int64_t)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *kr = k + xx * ksize;
        int64_t x = 0;
        for (; x < xmax; x++) {
            double wgt = filter((x + xmin - center + 0.5) * ss);
            kr[x] = wgt;
            ww += wgt;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) kr[x] /= ww;
        for (; x < ksize; x++)
            kr[x] = 0;
        bounds[xx * 2] = xmin, bounds[xx * 2 + 1] = xmax;
    }
    for (int64_t i = 0; i < out_size * ksize; i++)
        kk[i] =
            k[i] < 0 ? (int32_t)(-0.5 + k[i] * (1 << PRECISION_BITS)) : (int32_t)(0.5 + k[i] * (1 << PRECISION_BITS));
    free(k);
    *ksize_out = ksize, *bounds_out = bounds, *kk_out = kk;
    return 1;
}

static uint8_t clip8(int64_t v)
{
    if (v >= ((int64_t)1 << PRECISION_BITS << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

dfl_status dfl_image_resize(const dfl_image *in, int64_t w, int64_t h, dfl_clip_interp interp, dfl_image *out,
                            dfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (w < 1 || h < 1 || w * h > MAX_PIXELS)
        return dfl__fail(err, DFL_ERR_USAGE, "cannot resize to %lld × %lld", (long long)w, (long long)h);
    int64_t W = in->width, H = in->height;
    int64_t kx = 0, ky = 0, *bx = NULL, *by = NULL;
    int32_t *kkx = NULL, *kky = NULL;
    uint8_t *tmp = NULL, *dst = dfl__alloc_array((size_t)(w * h), 3);
    int ok = dst && coeffs(W, w, interp, &kx, &bx, &kkx) && coeffs(H, h, interp, &ky, &by, &kky);
    /* Pillow: the horizontal pass only over the input rows the vertical one reads */
    int64_t y0 = ok ? by[0] : 0, y1 = ok ? by[h * 2 - 2] + by[h * 2 - 1] : 0;
    if (ok && W != w) ok = (tmp = dfl__alloc_array((size_t)(w * (y1 - y0)), 3)) != NULL;
    if (!ok) {
        free(dst), free(bx), free(by), free(kkx), free(kky), free(tmp);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory resizing to %lld × %lld", (long long)w, (long long)h);
    }
    const uint8_t *src = in->rgb;
    int64_t src_w = W, row0 = 0;
    if (W != w) { /* horizontal pass: tmp[y1 − y0, w] */
        for (int64_t y = y0; y < y1; y++)
            for (int64_t xx = 0; xx < w; xx++) {
                const int32_t *k = kkx + xx * kx;
                int64_t xmin = bx[xx * 2], xn = bx[xx * 2 + 1];
                for (int c = 0; c < 3; c++) {
                    int64_t ss = (int64_t)1 << (PRECISION_BITS - 1);
                    for (int64_t x = 0; x < xn; x++)
                        ss += (int64_t)in->rgb[(y * W + xmin + x) * 3 + c] * k[x];
                    tmp[((y - y0) * w + xx) * 3 + c] = clip8(ss);
                }
            }
        src = tmp, src_w = w, row0 = y0;
    }
    if (H != h) { /* vertical pass */
        for (int64_t yy = 0; yy < h; yy++) {
            const int32_t *k = kky + yy * ky;
            int64_t ymin = by[yy * 2] - row0, yn = by[yy * 2 + 1];
            for (int64_t xx = 0; xx < w; xx++)
                for (int c = 0; c < 3; c++) {
                    int64_t ss = (int64_t)1 << (PRECISION_BITS - 1);
                    for (int64_t y = 0; y < yn; y++)
                        ss += (int64_t)src[((ymin + y) * src_w + xx) * 3 + c] * k[y];
                    dst[(yy * w + xx) * 3 + c] = clip8(ss);
                }
        }
    } else {
        memcpy(dst, src, (size_t)(w * h * 3));
    }
    free(bx), free(by), free(kkx), free(kky), free(tmp);
    out->width = w, out->height = h, out->rgb = dst;
    return DFL_OK;
}

/* ---------------------------------------------------------------- CLIP's preprocessing */

dfl_status dfl_image_preprocess(const dfl_image *in, const dfl_clip_preprocess *p, float *out, dfl_image_geometry *geo,
                                uint8_t *rgb, dfl_error *err)
{
    /* torchvision Resize(int): the shorter side to p->resize, the longer to
     * int(resize · long / short) */
    int64_t W = in->width, H = in->height, shorter = W <= H ? W : H, longer = W <= H ? H : W;
    int64_t nl = (int64_t)((double)(p->resize * longer) / (double)shorter);
    int64_t nw = W <= H ? p->resize : nl, nh = W <= H ? nl : p->resize;
    dfl_image r = {0};
    dfl_status s;
    if (nw == W && nh == H) { /* PIL's resize returns a copy */
        r = *in;
    } else if ((s = dfl_image_resize(in, nw, nh, p->interp, &r, err))) {
        return s;
    }
    /* torchvision CenterCrop: offsets int(round((size − crop) / 2)), Python's round (ties to even) */
    int64_t C = p->crop, top = (int64_t)nearbyint((double)(nh - C) / 2.0),
            left = (int64_t)nearbyint((double)(nw - C) / 2.0);
    for (int c = 0; c < 3; c++) {
        float mean = (float)p->mean[c], sd = (float)p->std[c];
        for (int64_t y = 0; y < C; y++)
            for (int64_t x = 0; x < C; x++) {
                float v = (float)r.rgb[((top + y) * nw + left + x) * 3 + c] / 255.0f;
                out[(c * C + y) * C + x] = (v - mean) / sd;
            }
    }
    if (rgb)
        for (int64_t y = 0; y < C; y++)
            memcpy(rgb + y * C * 3, r.rgb + ((top + y) * nw + left) * 3, (size_t)C * 3);
    if (r.rgb != in->rgb) dfl_image_free(&r);
    if (geo) *geo = (dfl_image_geometry){W, H, nw, nh, left, top, C};
    return DFL_OK;
}
