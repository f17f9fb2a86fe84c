/* deflate_rle.c — deflate with runs of the previous byte as its only matches, in one
 * dynamic-Huffman block (deflate_rle.h). Hand-written because it measurably wins (3.2×
 * libdeflate's level 2 at the same size on map planes): libdeflate looks up a window of
 * earlier bytes at every byte, where a byte plane of attention weights has hardly any
 * repeat but a run of its previous byte. */
#include "dump/deflate_rle.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bit writer stores its 64-bit buffer as little-endian bytes"
#endif

/* ---------------------------------------------------------------- alphabets */

#define N_LITLEN   286 /* literals 0-255, end of block 256, lengths 257-285 */
#define END_BLOCK  256
#define N_DIST     2 /* code 0 (distance 1) is the one used; code 1 completes the code */
#define N_CLEN     19
#define MAX_BITS   15 /* longest literal/length code */
#define MAX_CLEN   7  /* longest code-length code */
#define MIN_MATCH  3
#define MAX_MATCH  258
#define STORED_MAX 65535

/* RFC 1951 3.2.5: the first length of each length code, and its extra bits. */
static const uint16_t len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
/* the order the code-length code's lengths are sent in */
static const uint8_t clen_order[N_CLEN] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

/* For each match length: its length code's index (0-28); 258 takes code 285. */
static uint8_t g_len_code[MAX_MATCH + 1];
static pthread_once_t g_len_once = PTHREAD_ONCE_INIT;

static void build_len_codes(void)
{
    for (int len = MIN_MATCH, c = 0; len <= MAX_MATCH; len++) {
        while (c < 28 && len_base[c + 1] <= len)
            c++;
        g_len_code[len] = (uint8_t)c;
    }
}

/* ---------------------------------------------------------------- runs */

/* The length of the run of in[i - 1]'s value from i on (at most min(n - i, 258)). */
static size_t run_at(const unsigned char *in, size_t n, size_t i)
{
    size_t max = n - i < MAX_MATCH ? n - i : MAX_MATCH, r = 0;
    const uint64_t pattern = 0x0101010101010101ull * in[i - 1];
    while (r + 8 <= max) {
        uint64_t x;
        memcpy(&x, in + i + r, 8);
        x ^= pattern;
        if (x) return r + (size_t)(__builtin_ctzll(x) / 8);
        r += 8;
    }
    while (r < max && in[i + r] == in[i - 1])
        r++;
    return r;
}

/* The first position j >= i (i >= 1) where a match can start — in[j], in[j + 1] and
 * in[j + 2] all equal in[j - 1] — or n when there is none. Eight bytes at a time and
 * no branch per byte: the bytes of one plane equal their neighbour often enough that a
 * byte-wise test mispredicts on a large share of them. */
static size_t next_match(const unsigned char *in, size_t n, size_t i)
{
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
    for (; i + 8 <= n; i += 6) {
        uint64_t x, y;
        memcpy(&x, in + i, 8);
        memcpy(&y, in + i - 1, 8);
        uint64_t e = x ^ y;                                /* byte k zero: in[i + k] == in[i + k - 1] */
        uint64_t zero = ~(((e & low7) + low7) | e | low7); /* bit 7 of each zero byte */
        uint64_t three = zero & zero >> 8 & zero >> 16 & 0x0000808080808080ull; /* starts 0-5 */
        if (three) return i + (size_t)(__builtin_ctzll(three) / 8);
    }
    for (; i + 2 < n; i++)
        if (in[i] == in[i - 1] && in[i + 1] == in[i - 1] && in[i + 2] == in[i - 1]) return i;
    return n;
}

/* The token stream, walked the same way to count and to send: literals up to the next
 * place a match can start, the match (the run, at most 258 bytes), again; the first byte
 * is always a literal. span(ctx, k0, k1) takes the literals in[k0, k1), match(ctx, len)
 * one match. */
#define WALK_TOKENS(in, n, SPAN, MATCH)                                                                                \
    for (size_t lit_ = 0, from_ = 1;;) {                                                                               \
        size_t j_ = from_ < (n) ? next_match((in), (n), from_) : (n);                                                  \
        SPAN(lit_, j_);                                                                                                \
        if (j_ >= (n)) break;                                                                                          \
        size_t run_ = run_at((in), (n), j_);                                                                           \
        MATCH(run_);                                                                                                   \
        lit_ = from_ = j_ + run_;                                                                                      \
    }

/* Symbol counts of the token stream: literal/length symbols in freq, the match extra
 * bits in *extra_bits, matches (each a distance code) in *matches. */
static void count_tokens(const unsigned char *in, size_t n, uint32_t *freq, uint64_t *extra_bits, uint64_t *matches)
{
    uint32_t sub[4][256] = {{0}}; /* four tables: no chain of increments to one counter */
    uint64_t eb = 0, nm = 0;
#define COUNT_SPAN(k0, k1)                                                                                             \
    do {                                                                                                               \
        size_t k = (k0);                                                                                               \
        for (; k + 4 <= (k1); k += 4) {                                                                                \
            sub[0][in[k]]++;                                                                                           \
            sub[1][in[k + 1]]++;                                                                                       \
            sub[2][in[k + 2]]++;                                                                                       \
            sub[3][in[k + 3]]++;                                                                                       \
        }                                                                                                              \
        for (; k < (k1); k++)                                                                                          \
            sub[0][in[k]]++;                                                                                           \
    } while (0)
#define COUNT_MATCH(len)                                                                                               \
    do {                                                                                                               \
        int c = g_len_code[len];                                                                                       \
        freq[257 + c]++;                                                                                               \
        eb += len_extra[c];                                                                                            \
        nm++;                                                                                                          \
    } while (0)
    WALK_TOKENS(in, n, COUNT_SPAN, COUNT_MATCH)
#undef COUNT_SPAN
#undef COUNT_MATCH
    for (int v = 0; v < 256; v++)
        freq[v] += sub[0][v] + sub[1][v] + sub[2][v] + sub[3][v];
    freq[END_BLOCK]++;
    *extra_bits = eb;
    *matches = nm;
}

/* ---------------------------------------------------------------- Huffman codes */

static int by_weight(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Code lengths len[nsym] (0 for unused symbols) of a complete prefix code no longer than
 * maxlen for freq[nsym]: Huffman's lengths, then the longest shortened to maxlen and the
 * code made complete again by moving leaves down one level at a time (each move keeps
 * the Kraft sum, each removal from the deepest level lowers it by one unit). Fewer than
 * two used symbols get a second one (zlib's inflater refuses an incomplete code). */
static void huffman_lengths(const uint32_t *freq, int nsym, int maxlen, uint8_t *len)
{
    uint64_t leaf[N_LITLEN]; /* weight << 16 | symbol, ascending */
    int m = 0;
    for (int s = 0; s < nsym; s++)
        if (freq[s]) leaf[m++] = (uint64_t)freq[s] << 16 | (uint64_t)s;
    for (int s = 0; m < 2 && s < nsym; s++) /* a second symbol of weight 0 */
        if (!freq[s]) leaf[m++] = (uint64_t)s;
    qsort(leaf, (size_t)m, sizeof *leaf, by_weight);
    for (int s = 0; s < nsym; s++)
        len[s] = 0;

    /* two queues: the sorted leaves, and the inner nodes in the order they are made
     * (their weights never decrease); node i < m a leaf, m + j inner node j */
    uint64_t w_in[N_LITLEN];
    int parent[2 * N_LITLEN], depth[2 * N_LITLEN];
    int li = 0, ii = 0, made = 0;
    for (; made < m - 1; made++) {
        int pick[2];
        for (int t = 0; t < 2; t++) {
            int take_leaf = li < m && (ii >= made || (leaf[li] >> 16) <= w_in[ii]);
            pick[t] = take_leaf ? li++ : m + ii++;
        }
        uint64_t w = 0;
        for (int t = 0; t < 2; t++) {
            w += pick[t] < m ? leaf[pick[t]] >> 16 : w_in[pick[t] - m];
            parent[pick[t]] = m + made;
        }
        w_in[made] = w;
    }
    int root = m + made - 1, count[64] = {0};
    depth[root] = 0;
    for (int i = root - 1; i >= 0; i--) /* a parent is always made after its children */
        depth[i] = depth[parent[i]] + 1;
    for (int i = 0; i < m; i++)
        count[depth[i] < maxlen ? depth[i] : maxlen]++;

    /* Kraft sum in units of 2^-maxlen; over 2^maxlen only when lengths were cut */
    uint64_t kraft = 0;
    for (int l = 1; l <= maxlen; l++)
        kraft += (uint64_t)count[l] << (maxlen - l);
    while (kraft > (1ull << maxlen)) {
        count[maxlen]--;
        for (int l = maxlen - 1; l > 0; l--)
            if (count[l]) {
                count[l]--;
                count[l + 1] += 2;
                break;
            }
        kraft--;
    }
    /* the rarest symbols take the longest codes */
    for (int l = maxlen, i = 0; l >= 1; l--)
        for (int k = 0; k < count[l]; k++, i++)
            len[leaf[i] & 0xffff] = (uint8_t)l;
}

/* Canonical codes of len[nsym] (RFC 1951 3.2.2), bit-reversed: deflate sends a Huffman
 * code from its first bit, the bit writer from the lowest. */
static void canonical_codes(const uint8_t *len, int nsym, uint16_t *code)
{
    int count[MAX_BITS + 1] = {0};
    uint16_t next[MAX_BITS + 2];
    for (int s = 0; s < nsym; s++)
        count[len[s]]++;
    count[0] = 0;
    next[1] = 0;
    for (int l = 1; l <= MAX_BITS; l++)
        next[l + 1] = (uint16_t)((next[l] + count[l]) << 1);
    for (int s = 0; s < nsym; s++) {
        if (!len[s]) continue;
        uint16_t c = next[len[s]]++, r = 0;
        for (int b = 0; b < len[s]; b++)
            r = (uint16_t)(r << 1 | ((c >> b) & 1));
        code[s] = r;
    }
}

/* ---------------------------------------------------------------- header */

/* The code lengths of both alphabets as code-length symbols: 16 repeats the previous
 * length 3-6 times, 17 and 18 send 3-10 and 11-138 zeros. */
typedef struct clen_seq {
    uint8_t sym[N_LITLEN + N_DIST], extra[N_LITLEN + N_DIST];
    int n;
} clen_seq;

static void clen_put(clen_seq *q, int sym, int extra)
{
    q->sym[q->n] = (uint8_t)sym;
    q->extra[q->n++] = (uint8_t)extra;
}

static void clen_encode(const uint8_t *lens, int total, clen_seq *q)
{
    q->n = 0;
    for (int i = 0; i < total;) {
        int v = lens[i], run = 1;
        while (i + run < total && lens[i + run] == v)
            run++;
        i += run;
        if (v == 0) {
            for (; run >= 11; run -= run < 138 ? run : 138)
                clen_put(q, 18, (run < 138 ? run : 138) - 11);
            if (run >= 3) clen_put(q, 17, run - 3), run = 0;
        } else {
            clen_put(q, v, 0);
            for (run--; run >= 3; run -= run < 6 ? run : 6)
                clen_put(q, 16, (run < 6 ? run : 6) - 3);
        }
        for (; run > 0; run--)
            clen_put(q, v, 0);
    }
}

static const uint8_t clen_extra_bits[N_CLEN] = {[16] = 2, [17] = 3, [18] = 7};

/* ---------------------------------------------------------------- bit writer */

typedef struct bits {
    unsigned char *p;
    uint64_t buf;
    int n; /* bits in buf, fewer than 8 between calls */
} bits;

/* Append v's low k bits (k <= 32, v < 2^k). Stores all 8 bytes of the buffer and moves
 * on by its whole bytes: no branch, but up to 8 bytes past the stream's end written
 * (hence the bound's room). */
static inline void put(bits *b, uint64_t v, int k)
{
    b->buf |= v << b->n;
    b->n += k;
    memcpy(b->p, &b->buf, 8);
    int whole = b->n >> 3;
    b->p += whole;
    b->buf >>= 8 * whole;
    b->n &= 7;
}

static unsigned char *put_end(bits *b)
{
    if (b->n) *b->p++ = (unsigned char)b->buf;
    return b->p;
}

/* ---------------------------------------------------------------- the block */

/* Stored blocks of at most 65,535 bytes, 5 bytes of header each; one when n is 0. */
static size_t stored_size(size_t n)
{
    return n + 5 * (n ? (n - 1) / STORED_MAX + 1 : 1);
}

size_t dfl__deflate_rle_bound(size_t n)
{
    return stored_size(n) + 8;
}

size_t dfl__deflate_stored(const unsigned char *in, size_t n, unsigned char *out, int final)
{
    size_t at = 0, done = 0;
    do {
        size_t len = n - done < STORED_MAX ? n - done : STORED_MAX;
        out[at] = final && done + len == n; /* BFINAL on the last when final, BTYPE 00 */
        out[at + 1] = (unsigned char)(len & 0xff);
        out[at + 2] = (unsigned char)(len >> 8);
        out[at + 3] = (unsigned char)(~len & 0xff);
        out[at + 4] = (unsigned char)((~len >> 8) & 0xff);
        if (len) memcpy(out + at + 5, in + done, len);
        at += 5 + len;
        done += len;
    } while (done < n);
    return at;
}

size_t dfl__deflate_rle(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    pthread_once(&g_len_once, build_len_codes);
    uint32_t freq[N_LITLEN] = {0};
    uint64_t extra_bits, matches;
    count_tokens(in, n, freq, &extra_bits, &matches);

    uint8_t lens[N_LITLEN + N_DIST]; /* literal/length lengths, then the distance ones */
    huffman_lengths(freq, N_LITLEN, MAX_BITS, lens);
    int hlit = N_LITLEN;
    while (hlit > 257 && !lens[hlit - 1])
        hlit--;
    lens[hlit] = lens[hlit + 1] = 1; /* distance codes 0 and 1 */
    clen_seq q;
    clen_encode(lens, hlit + N_DIST, &q);
    uint32_t cfreq[N_CLEN] = {0};
    for (int i = 0; i < q.n; i++)
        cfreq[q.sym[i]]++;
    uint8_t clens[N_CLEN];
    huffman_lengths(cfreq, N_CLEN, MAX_CLEN, clens);
    int hclen = N_CLEN;
    while (hclen > 4 && !clens[clen_order[hclen - 1]])
        hclen--;

    /* the block's exact size, to choose between it and stored blocks */
    uint64_t nbits = 3 + 5 + 5 + 4 + 3 * (uint64_t)hclen + extra_bits + matches * 1;
    for (int i = 0; i < q.n; i++)
        nbits += clens[q.sym[i]] + clen_extra_bits[q.sym[i]];
    for (int s = 0; s < N_LITLEN; s++)
        nbits += (uint64_t)freq[s] * lens[s];
    size_t bytes = (size_t)((nbits + 7) / 8);
    if (bytes >= stored_size(n)) return cap < stored_size(n) ? 0 : dfl__deflate_stored(in, n, out, 1);
    if (cap < bytes + 8) return 0; /* the bit writer's room */

    uint16_t code[N_LITLEN], ccode[N_CLEN];
    canonical_codes(lens, hlit, code);
    canonical_codes(clens, N_CLEN, ccode);
    bits b = {out, 0, 0};
    put(&b, 1 | 2 << 1, 3); /* BFINAL, BTYPE 10: dynamic Huffman */
    put(&b, (uint64_t)(hlit - 257), 5);
    put(&b, N_DIST - 1, 5);
    put(&b, (uint64_t)(hclen - 4), 4);
    for (int i = 0; i < hclen; i++)
        put(&b, clens[clen_order[i]], 3);
    for (int i = 0; i < q.n; i++) {
        put(&b, ccode[q.sym[i]], clens[q.sym[i]]);
        if (clen_extra_bits[q.sym[i]]) put(&b, q.extra[i], clen_extra_bits[q.sym[i]]);
    }
    /* the tokens count_tokens saw: literals two to a store (2 × 15 bits at most), a
     * match as its length code, extra bits and distance code 0 (the one bit 0) */
    uint32_t lit[256]; /* code | length << 16 */
    for (int v = 0; v < 256; v++)
        lit[v] = code[v] | (uint32_t)lens[v] << 16;
#define SEND_SPAN(k0, k1)                                                                                              \
    do {                                                                                                               \
        size_t k = (k0);                                                                                               \
        for (; k + 2 <= (k1); k += 2) {                                                                                \
            uint32_t e0 = lit[in[k]], e1 = lit[in[k + 1]];                                                             \
            put(&b, (e0 & 0xffff) | (uint64_t)(e1 & 0xffff) << (e0 >> 16), (int)((e0 >> 16) + (e1 >> 16)));            \
        }                                                                                                              \
        if (k < (k1)) put(&b, lit[in[k]] & 0xffff, (int)(lit[in[k]] >> 16));                                           \
    } while (0)
#define SEND_MATCH(len)                                                                                                \
    do {                                                                                                               \
        int c = g_len_code[len], s = 257 + c;                                                                          \
        put(&b, code[s] | (uint64_t)((len)-len_base[c]) << lens[s], lens[s] + len_extra[c] + 1);                       \
    } while (0)
    WALK_TOKENS(in, n, SEND_SPAN, SEND_MATCH)
#undef SEND_SPAN
#undef SEND_MATCH
    put(&b, code[END_BLOCK], lens[END_BLOCK]);
    return (size_t)(put_end(&b) - out);
}
