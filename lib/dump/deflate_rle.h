/* deflate_rle.h — internal to the dump writer: a deflate encoder (RFC 1951) made for the
 * high byte planes of attention maps.
 *
 * It looks for one kind of repeat only: a run of the previous byte's value, sent as a
 * match at distance 1 (the causal zeros of a diagonal tile, an exponent that repeats);
 * everything else goes out as literals, all in one dynamic-Huffman block built from the
 * input's own frequencies. That is zlib's Z_RLE strategy: on the high byte planes of
 * f16 maps it compresses as well as libdeflate's level 2 (0.390 against 0.392 of the
 * plane on the bench model's maps; libdeflate's level 1, 0.44) at about 3× its speed,
 * because it never searches a window. When the block would be no smaller than the
 * input, the input goes out in stored blocks. Any inflater reads the result. */
#ifndef DFL_DEFLATE_RLE_H
#define DFL_DEFLATE_RLE_H

#include <stddef.h>

/* Raw deflate of in[n] into out[cap], ending with a final block: returns the bytes
 * written, 0 when cap is too small (then out holds nothing usable). cap of
 * dfl__deflate_rle_bound(n) always suffices. Thread-safe, no allocation. */
size_t dfl__deflate_rle(const unsigned char *in, size_t n, unsigned char *out, size_t cap);

/* in[n] as deflate's stored blocks of at most 65,535 bytes (one, empty, when n is 0),
 * the last marked final when `final`: returns the bytes written, n + 5 per block, which
 * out must hold. */
size_t dfl__deflate_stored(const unsigned char *in, size_t n, unsigned char *out, int final);

/* The most dfl__deflate_rle can write for n input bytes: the stored form, 5 bytes
 * a 65,535-byte block, plus 8 bytes of room for its bit writer. */
size_t dfl__deflate_rle_bound(size_t n);

#endif
