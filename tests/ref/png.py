"""png.py — a small PNG decoder (zlib from the standard library, numpy for the pixels)
so that chart tests can measure what was drawn without an imaging package.

read_png(path) -> uint8 array [height, width, channels] for 8-bit greyscale, RGB and
RGBA images (no interlacing, no palette): what difflens and cairo write.

bars(img, baseline_tol=2) finds filled, saturated rectangles standing on a common
baseline (the bars of a bar chart) and returns them left to right as
(x0, x1, top, bottom, rgb) tuples; blobs(...) finds filled markers of a colour and
grid_lines(...) the light grey grid lines of a chart panel.
"""
import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != SIGNATURE:
        raise ValueError("%s: not a PNG" % path)
    pos, idat, head = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = head
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise ValueError("%s: only 8-bit grey/RGB/RGBA, non-interlaced PNGs are read here" % path)
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * channels)
    bpp, stride = channels, w * channels
    out = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int64)
    for y in range(h):
        ftype, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if ftype == 0:
            cur = line
        elif ftype == 1:  # Sub: a running sum per channel, modulo 256
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(stride) % 256
        elif ftype == 2:  # Up
            cur = (line + prev) % 256
        elif ftype in (3, 4):  # Average, Paeth: sequential along the row
            cur = np.zeros(stride, np.int64)
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                c = prev[i - bpp] if i >= bpp else 0
                pred = (a + prev[i]) // 2 if ftype == 3 else _paeth(a, prev[i], c)
                cur[i] = (line[i] + pred) % 256
        else:
            raise ValueError("%s: bad filter type %d in row %d" % (path, ftype, y))
        out[y] = cur
        prev = cur
    return out.reshape(h, w, channels)


def _rgb(img):
    return img[:, :, :3].astype(np.int64) if img.shape[2] >= 3 else np.repeat(img.astype(np.int64), 3, axis=2)


def saturated(img, min_chroma=60):
    """Mask of coloured pixels (not white, grey or black text and axes)."""
    rgb = _rgb(img)
    return (rgb.max(axis=2) - rgb.min(axis=2)) >= min_chroma


def bars(img, min_width=8, baseline_tol=2):
    """Filled saturated rectangles on the most common bottom row, left to right:
    (x0, x1, top, bottom, rgb) with x1 exclusive. A bar of zero height is missing."""
    rgb, mask = _rgb(img), saturated(img)
    h, w = mask.shape
    runs, x = [], 0
    while x < w:
        if not mask[:, x].any():
            x += 1
            continue
        rows = np.nonzero(mask[:, x])[0]
        bottom = rows.max()
        colour = tuple(rgb[bottom, x])
        x0 = x
        # one run: neighbouring columns with the same colour at the same bottom
        while x < w and mask[:, x].any() and np.nonzero(mask[:, x])[0].max() == bottom and \
                tuple(rgb[bottom, x]) == colour:
            x += 1
        col = mask[:, x0]
        top = bottom
        while top > 0 and col[top - 1] and tuple(rgb[top - 1, x0]) == colour:
            top -= 1
        runs.append((x0, x, top, bottom, colour))
    runs = [r for r in runs if r[1] - r[0] >= min_width]
    if not runs:
        return []
    bottoms = [r[3] for r in runs]
    base = max(set(bottoms), key=bottoms.count)
    return [r for r in runs if abs(r[3] - base) <= baseline_tol]


def blobs(img, colour, tol=40, core=2):
    """Centres (x, y) of filled blobs (markers) of `colour`: pixels whose whole
    (2·core+1)² neighbourhood has the colour, grouped into connected pieces. Lines
    thinner than 2·core+1 pixels disappear."""
    rgb = _rgb(img)
    near = (np.abs(rgb - np.array(colour)).sum(axis=2) <= tol)
    h, w = near.shape
    solid = near.copy()
    for dy in range(-core, core + 1):
        for dx in range(-core, core + 1):
            shifted = np.zeros_like(near)
            shifted[max(0, -dy):h - max(0, dy), max(0, -dx):w - max(0, dx)] = \
                near[max(0, dy):h - max(0, -dy), max(0, dx):w - max(0, -dx)]
            solid &= shifted
    seen = np.zeros_like(solid)
    out = []
    for y, x in zip(*np.nonzero(solid)):
        if seen[y, x]:
            continue
        stack, pts = [(y, x)], []
        seen[y, x] = True
        while stack:
            cy, cx = stack.pop()
            pts.append((cy, cx))
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if 0 <= ny < h and 0 <= nx < w and solid[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
        ys, xs = zip(*pts)
        out.append((float(np.mean(xs)), float(np.mean(ys))))
    return out


def grid_lines(panel, axis):
    """Centres of the light grey grid lines of a chart panel: rows (axis 1) or columns
    (axis 0) that are grey over more than 40% of the panel."""
    p = panel.astype(int)
    grey = (p.max(axis=2) - p.min(axis=2) < 10) & (p.min(axis=2) > 150) & (p.min(axis=2) < 250)
    idx = np.nonzero(grey.mean(axis=axis) > 0.4)[0]
    groups = np.split(idx, np.nonzero(np.diff(idx) > 1)[0] + 1) if len(idx) else []
    return [float(g.mean()) for g in groups]
