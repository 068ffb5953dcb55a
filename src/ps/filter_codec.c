/* filter_codec: fixed-point quantisation of values and byte compression of
 * whole messages (lz4, zstd).
 *
 * Quantisation (DiFacto's, Li's thesis eq. 10.23, with one scale per block of
 * FILTER_QUANT_BLOCK values instead of per message so that one large value
 * does not flatten a whole message): a block's scale is s = max|x| / L with
 * L = 2^(bits-1) - 1, and x goes out as the integer z = floor(x / s + u), u
 * uniform in [0, 1), clamped to [-L, L]. The receiver reads z * s: off by less
 * than s (one step), and right on average, E[z * s] = x, because rounding up
 * happens with probability equal to the fraction rounded off.
 * Block layout: the f64 scales of every block, then every value's integer
 * (int8, or little-endian int16).
 *
 * Compression is lossless. Receivers refuse frames claiming more than
 * FILTER_MAX_RATIO times their size (a decompression bomb): a zstd frame that
 * would shrink more is followed by a skippable frame of zeros up to that ratio;
 * an lz4 message that would goes uncompressed. The decoders are given the exact size the frame
 * claims and refuse anything that does not decompress to exactly that. */
#include <lz4.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/msg.h"
#include "loom/error.h"
#include "ps/filter_impl.h"

/* A zstd skippable frame's header: magic, u32 length of what follows. */
#define SKIPPABLE_HEADER 8

static size_t blocks(size_t count)
{
    return (count + FILTER_QUANT_BLOCK - 1) / FILTER_QUANT_BLOCK;
}

size_t filter_quant_size(size_t count, int bits)
{
    return blocks(count) * 8 + count * (size_t)(bits / 8);
}

static double steps(int bits)
{
    return bits == 8 ? 127.0 : 32767.0;
}

int filter_quant_encode(filter_chain *c, const double *vals, size_t count, int bits, uint8_t *out)
{
    double levels = steps(bits);
    uint8_t *ints = out + blocks(count) * 8;
    for (size_t b = 0; b * FILTER_QUANT_BLOCK < count; b++) {
        size_t from = b * FILTER_QUANT_BLOCK, to = from + FILTER_QUANT_BLOCK;
        if (to > count) to = count;
        double max = 0;
        for (size_t i = from; i < to; i++) {
            if (!isfinite(vals[i])) return LOOM_EINVAL;
            if (fabs(vals[i]) > max) max = fabs(vals[i]);
        }
        double scale = max / levels;
        uint64_t bitsof;
        memcpy(&bitsof, &scale, 8);
        msg_store_u64(out + 8 * b, bitsof);
        for (size_t i = from; i < to; i++) {
            double z = scale > 0 ? floor(vals[i] / scale + filter_uniform(c)) : 0;
            if (z > levels) z = levels;
            if (z < -levels) z = -levels;
            if (bits == 8) {
                ints[i] = (uint8_t)(int8_t)z;
            } else {
                uint16_t u = (uint16_t)(int16_t)z;
                ints[2 * i] = (uint8_t)u;
                ints[2 * i + 1] = (uint8_t)(u >> 8);
            }
        }
    }
    return 0;
}

int filter_quant_decode(const uint8_t *in, size_t count, int bits, loom_type t, void *out)
{
    double levels = steps(bits);
    const uint8_t *ints = in + blocks(count) * 8;
    for (size_t b = 0; b * FILTER_QUANT_BLOCK < count; b++) {
        uint64_t bitsof = msg_load_u64(in + 8 * b);
        double scale;
        memcpy(&scale, &bitsof, 8);
        if (!isfinite(scale) || scale < 0) return LOOM_EPROTO;
        size_t from = b * FILTER_QUANT_BLOCK, to = from + FILTER_QUANT_BLOCK;
        if (to > count) to = count;
        for (size_t i = from; i < to; i++) {
            double z = bits == 8 ? (double)(int8_t)ints[i]
                                 : (double)(int16_t)(uint16_t)(ints[2 * i] | ints[2 * i + 1] << 8);
            if (z < -levels) return LOOM_EPROTO; /* -128 or -32768: never encoded */
            double x = z * scale;
            if (t == LOOM_F32)
                ((float *)out)[i] = (float)x;
            else
                ((double *)out)[i] = x;
        }
    }
    return 0;
}

int filter_compress(int codec, int level, const uint8_t *body, size_t len, uint8_t **out,
                    size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    size_t bound = codec == 1 ? (size_t)LZ4_compressBound((int)len) : ZSTD_compressBound(len);
    if (bound == 0) return LOOM_ELIMIT;
    uint8_t *z = malloc(bound);
    if (!z) return LOOM_ENOMEM;
    size_t zlen;
    if (codec == 1) {
        int r = LZ4_compress_default((const char *)body, (char *)z, (int)len, (int)bound);
        zlen = r > 0 ? (size_t)r : 0;
    } else {
        size_t r = ZSTD_compress(z, bound, body, len, level);
        zlen = ZSTD_isError(r) ? 0 : r;
    }
    /* zstd: a frame that shrank more than the receivers take gets a skippable
     * frame after it, up to len / FILTER_MAX_RATIO bytes in all, which
     * ZSTD_decompress passes over: far smaller than the message uncompressed
     * (a 4 MB message of empty sparse rows goes as 16 KB, not 4 MB). */
    size_t padded = zlen;
    if (codec == 2 && zlen && (uint64_t)zlen * FILTER_MAX_RATIO < len) {
        padded = (len + FILTER_MAX_RATIO - 1) / FILTER_MAX_RATIO;
        if (padded < zlen + SKIPPABLE_HEADER) padded = zlen + SKIPPABLE_HEADER;
        if (padded < bound) {
            size_t skip = padded - zlen - SKIPPABLE_HEADER;
            uint8_t *h = z + zlen;
            for (int i = 0; i < 4; i++) {
                h[i] = (uint8_t)(ZSTD_MAGIC_SKIPPABLE_START >> (8 * i));
                h[4 + i] = (uint8_t)(skip >> (8 * i));
            }
            memset(h + SKIPPABLE_HEADER, 0, skip);
            zlen = padded;
        }
    }
    if (zlen == 0 || zlen >= len || (uint64_t)zlen * FILTER_MAX_RATIO < len) {
        free(z);
        return 0;
    }
    *out = z;
    *outlen = zlen;
    return 0;
}

int filter_decompress(int codec, const uint8_t *in, size_t len, uint8_t *out, size_t body_len)
{
    if (codec == 1) {
        if (len > (size_t)LZ4_MAX_INPUT_SIZE) return LOOM_EPROTO;
        int r = LZ4_decompress_safe((const char *)in, (char *)out, (int)len, (int)body_len);
        return r >= 0 && (size_t)r == body_len ? 0 : LOOM_EPROTO;
    }
    unsigned long long claimed = ZSTD_getFrameContentSize(in, len);
    if (claimed != body_len) return LOOM_EPROTO;
    size_t r = ZSTD_decompress(out, body_len, in, len);
    return !ZSTD_isError(r) && r == body_len ? 0 : LOOM_EPROTO;
}
