"""Rewrite a committed checkpoint as a hostile but careful user would: change
rows of a table in its server parts, then recompute every CRC-32C, size and
the manifest's end checksum, so that the checkpoint still verifies and only a
reader that checks what the parts say can tell (tests/ft/test_ckpt_hostile.sh).

Usage: ckpt_rewrite.py DIR TABLE KEY [KEY_END]
  the first row of TABLE in the newest checkpoint's last server part gets key
  KEY; with KEY_END, TABLE's definition in every server part of the
  checkpoint gets that key_end. Formats: src/ft/ft.h, src/ps/server_ckpt.c
  (sections), src/ps/tabledef.c (definitions)."""
import glob
import os
import struct
import sys


def crc32c(data, crc=0):
    table = crc32c.table
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    crc32c.table.append(c)


def sections(body):
    """(name, offset of the section in body, length) of a server part's body."""
    pos, out = 0, []
    while pos < len(body):
        (nl,) = struct.unpack_from("<H", body, pos)
        name = body[pos + 2 : pos + 2 + nl].decode()
        (sl,) = struct.unpack_from("<Q", body, pos + 2 + nl)
        out.append((name, pos + 10 + nl, sl))
        pos += 10 + nl + sl
    return out


def key_end_offset(sec):
    """Offset of key_end in a section: [u32 def length][name][updater][u8 type]
    [u32 width][u8 storage][u64 key_begin][u64 key_end]..."""
    pos = 4
    for _ in range(2):  # name, updater: [u16 length][bytes]
        (n,) = struct.unpack_from("<H", sec, pos)
        pos += 2 + n
    return pos + 1 + 4 + 1 + 8


def main():
    ck, table, key = sys.argv[1], sys.argv[2], int(sys.argv[3])
    key_end = int(sys.argv[4]) if len(sys.argv) > 4 else None
    newest = sorted(glob.glob(os.path.join(ck, "ckpt-*", "MANIFEST")))[-1]
    lines = open(newest, "rb").read().decode().splitlines(keepends=True)
    text = "".join(lines[:-1])
    assert lines[-1] == "end %08x\n" % crc32c(text.encode()), "CRC-32C differs from Loom's"
    server = [i for i, l in enumerate(lines) if l.startswith("part server ")]
    for i in server:
        f = lines[i].split()
        path = os.path.join(ck, f[4])
        part = bytearray(open(path, "rb").read())
        body = 40  # the header
        for name, off, _ in sections(bytes(part[body:])):
            if name != table:
                continue
            sec = body + off
            if key_end is not None:
                struct.pack_into("<Q", part, sec + key_end_offset(part[sec:]), key_end)
            (deflen,) = struct.unpack_from("<I", part, sec)
            rows_at = sec + 4 + deflen + 8
            (rows,) = struct.unpack_from("<Q", part, rows_at)
            if i == server[-1]:
                assert rows > 0, "no row of %s in %s" % (table, path)
                struct.pack_into("<Q", part, rows_at + 8, key)
        open(path, "wb").write(part)
        f[5], f[6] = str(len(part)), "%08x" % crc32c(bytes(part))
        lines[i] = " ".join(f) + "\n"
    text = "".join(lines[:-1])
    open(newest, "w").write(text + "end %08x\n" % crc32c(text.encode()))


main()
