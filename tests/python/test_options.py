"""python.options: an integer option outside the range of its C field raises ValueError
naming the option and its range, before ctypes could store it modulo the field's width
(width=2**32+1 once opened a width-1 table, staleness=2**32+2 a staleness of 2,
flush_rows=2**64 a flush_rows of 0); the bounds themselves reach C unchanged; a float is
a TypeError, not truncated. The readers' shard, shards and max_features alike."""

import harness

import loom
from loom import _table

U32, U64, INT = 2**32 - 1, 2**64 - 1, 2**31 - 1
# option: (lowest, highest) accepted; the struct field it fills
BOUNDS = {
    "width": (1, U32, "width"),
    "staleness": (0, INT, "staleness"),
    "init_seed": (0, U64, "init_seed"),
    "flush_rows": (0, U32, "flush_rows"),
    "queue_rows": (0, U32, "queue_rows"),
}
problems = []


def refused(call, name, low, high, value):
    try:
        call()
    except ValueError as e:
        want = f"{name} must be an integer from {low} to {high}, not {value}"
        if str(e) != want:
            problems.append(f"{name}={value}: ValueError {str(e)!r}, expected {want!r}")
    except Exception as e:  # the wrapped value went on to C (here: Table(None, ...))
        problems.append(f"{name}={value} was accepted and then raised {e!r}")
    else:
        problems.append(f"{name}={value} was accepted")


for name, (low, high, field) in BOUNDS.items():
    for value in (high + 1, high + 2, 2**32 + 1, 2**32 + 2, 2**64, low - 1, -(2**63)):
        if low <= value <= high:  # 2**32 + 1 is a valid 64-bit seed
            continue
        # Table() checks its options before it touches the node, so none is needed here.
        refused(lambda: loom.Table(None, "t", **{name: value}), name, low, high, value)
    for value in (low, high):
        got = getattr(_table.table_opts(**{name: value}), field)
        if got != value:
            problems.append(f"{name}={value} reached C as {got}")
    try:
        _table.table_opts(**{name: 1.5})
        problems.append(f"{name}=1.5 was accepted")
    except TypeError:
        pass

for i, name in enumerate(("key_range[0]", "key_range[1]")):
    for value in (2**64, -1):
        pair = [0, 0]
        pair[i] = value
        refused(lambda: _table.table_opts(key_range=tuple(pair)), name, 0, U64, value)
o = _table.table_opts(key_range=(U64, U64))
if (o.key_begin, o.key_end) != (U64, U64):
    problems.append(f"key_range=({U64}, {U64}) reached C as ({o.key_begin}, {o.key_end})")

# The readers check before they open the file: the path need not exist.
for reader in (loom.read_libsvm, loom.read_ratings):
    refused(lambda: reader("missing", 2**32, 2**32 + 1), "shard", 0, INT, 2**32)
    refused(lambda: reader("missing", 0, 2**32 + 1), "shards", 1, INT, 2**32 + 1)
refused(lambda: loom.read_libsvm("missing", max_features=2**64), "max_features", 0, U64, 2**64)

if problems:
    harness.fail("\n  ".join(["integer options:"] + problems))
print(f"{len(BOUNDS) + 5} integer options refused outside their C ranges, bounds kept")
