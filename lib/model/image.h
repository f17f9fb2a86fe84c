/* image.h — images in for the vision towers: PNG (libpng) and JPEG (libjpeg-turbo)
 * decoded to 8-bit RGB as PIL's Image.open(...).convert("RGB") gives them, and CLIP's
 * preprocessing (docs/format.md "DiffCLIP and its CLIP baseline"): the shorter side
 * resized with PIL's antialiased bilinear or bicubic filter on 8-bit pixels (Pillow's
 * Resample.c: separable passes, horizontal then vertical, 22-bit fixed-point
 * coefficients, rounding to 8 bits after each pass), torchvision's centre crop, then
 * x/255 and (x − mean)/std per channel.
 */
#ifndef DFL_IMAGE_H
#define DFL_IMAGE_H

#include <stdint.h>

#include "base/status.h"
#include "model/clip.h"

/* An 8-bit RGB image, rows top to bottom, pixels r, g, b. */
typedef struct dfl_image {
    int64_t width, height;
    uint8_t *rgb; /* [height, width, 3], owned (dfl_image_free) */
} dfl_image;

/* Decode a PNG or JPEG file (told by its first bytes) into *out. PNG: palette, grey
 * and 16-bit samples expanded as PIL does (16-bit: the high byte), alpha dropped
 * (convert("RGB") drops it too). JPEG: baseline or progressive, YCbCr or grey (CMYK
 * is refused). DFL_ERR_IO, DFL_ERR_FORMAT (not PNG or JPEG, corrupt, too large:
 * more than 2^28 pixels), DFL_ERR_NOMEM. */
dfl_status dfl_image_read(const char *path, dfl_image *out, dfl_error *err);

/* Free the pixels; accepts an image never filled (rgb NULL). */
void dfl_image_free(dfl_image *im);

/* PIL's Image.resize((w, h), BILINEAR or BICUBIC) of in into *out (caller frees).
 * DFL_ERR_USAGE for a size below 1, DFL_ERR_NOMEM. */
dfl_status dfl_image_resize(const dfl_image *in, int64_t w, int64_t h, dfl_clip_interp interp, dfl_image *out,
                            dfl_error *err);

/* Where the model's input sits in the original image: the resized size and the crop's
 * offset in resized pixels (original x maps to x · resized_w / width − left). */
typedef struct dfl_image_geometry {
    int64_t width, height;        /* the original */
    int64_t resized_w, resized_h; /* after Resize(resize) */
    int64_t left, top, crop;      /* CenterCrop(crop) */
} dfl_image_geometry;

/* The preprocessing of p on in: out[3, crop, crop] f32 (caller-owned), *geo (may be
 * NULL) where it came from, rgb[crop, crop, 3] (may be NULL) the cropped 8-bit pixels
 * before normalisation (what the model sees, for overlays). DFL_ERR_NOMEM. */
dfl_status dfl_image_preprocess(const dfl_image *in, const dfl_clip_preprocess *p, float *out, dfl_image_geometry *geo,
                                uint8_t *rgb, dfl_error *err);

#endif
