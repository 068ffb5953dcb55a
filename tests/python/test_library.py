"""python.library: libloom.so exports exactly the functions include/loom/ declares, and
the package's ctypes mirror of the structures, error codes, enums and table defaults is
what the C compiler says (tests/python/layout.c prints it).

Usage: test_library.py LAYOUT_PROGRAM INCLUDE_DIR"""

import ctypes
import glob
import json
import os
import re
import subprocess
import sys

import harness

import loom
from loom import _capi, _errors, _node, _table, data

layout_program, include_dir = sys.argv[1], sys.argv[2]
problems = []

# ---- exports: nothing internal, nothing public missing ----
declared = set()
for header in glob.glob(os.path.join(include_dir, "loom", "*.h")):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # comments mention calls
    declared |= set(re.findall(r"\b(loom_\w+)\s*\(", text))
nm = subprocess.run(["nm", "-D", "--defined-only", loom.library_path], capture_output=True,
                    text=True, check=True)
exported = {line.split()[-1] for line in nm.stdout.splitlines() if " T " in line}
if not declared:
    problems.append(f"no function declarations found in {include_dir}/loom")
if exported != declared:
    problems.append(f"exported but not declared: {sorted(exported - declared)}; "
                    f"declared but not exported: {sorted(declared - exported)}")
others = [line for line in nm.stdout.splitlines() if " T " not in line and " loom_" not in line
          and not line.split()[-1].startswith("_")]
if others:
    problems.append(f"other exported symbols: {others}")
bound = set(_capi._SIGNATURES)
if not bound <= declared:
    problems.append(f"the package binds undeclared functions: {sorted(bound - declared)}")

# ---- structures: offsets and sizes ----
c = json.loads(subprocess.run([layout_program], capture_output=True, text=True,
                              check=True).stdout)
for key, struct in (("table_opts", _capi.TableOpts), ("stats", _capi.Stats),
                    ("dataset", _capi.Dataset), ("libsvm_opts", _capi.LibsvmOpts),
                    ("ratings", _capi.Ratings), ("ratings_opts", _capi.RatingsOpts)):
    fields = dict(c[key])
    size = fields.pop("size")[1]
    if ctypes.sizeof(struct) != size:
        problems.append(f"{key}: ctypes size {ctypes.sizeof(struct)}, C {size}")
    names = [name for name, _ in struct._fields_]
    if names != list(fields):
        problems.append(f"{key}: ctypes fields {names}, C fields {list(fields)}")
    for name, (offset, fsize) in fields.items():
        f = getattr(struct, name, None)
        if f is None or (f.offset, f.size) != (offset, fsize):
            problems.append(f"{key}.{name}: ctypes {f and (f.offset, f.size)}, C {(offset, fsize)}")

# ---- error codes and enums ----
errors = c["errors"]
if len(_errors.CODE_NAMES) != errors["count"] or loom.EINVAL != errors["LOOM_EINVAL"] or \
        loom.ESTATE != errors["LOOM_ESTATE"]:
    problems.append(f"error codes: C {errors}, Python {_errors.CODE_NAMES}")
enums = c["enums"]
python_enums = {
    **{f"LOOM_{t.upper()}": i for i, t in enumerate(("f32", "f64", "i32", "i64"))},
    **{f"LOOM_{m.upper()}": i for i, m in enumerate(_table.CONSISTENCY)},
    **{f"LOOM_{s.upper()}": i for i, s in enumerate(_table.STORAGE)},
    **{f"LOOM_INIT_{s.upper()}": i for i, s in enumerate(_table.INIT)},
    **{f"LOOM_{r.upper()}": i for i, r in enumerate(_node.ROLES)},
    **{f"LOOM_IDS_{s.upper()}": i for i, s in enumerate(data.IDS)},
    **{f"LOOM_LABELS_{s.upper()}": i for i, s in enumerate(data.LABELS)},
    **{f"LOOM_PRIORITY_{p.upper()}": i for i, p in enumerate(_table.PRIORITY)},
}
if python_enums != enums:
    problems.append(f"enums: Python {python_enums}, C {enums}")
for i, dtype in enumerate(_table.DTYPES):
    if _capi.lib.loom_type_size(i) != dtype.itemsize:
        problems.append(f"type {i}: C size {_capi.lib.loom_type_size(i)}, numpy {dtype}")

# ---- the package's table defaults are LOOM_TABLE_OPTS_DEFAULT ----
o = _table.table_opts()
for name, value in c["defaults"].items():
    mine = getattr(o, name)
    mine = mine.decode() if isinstance(mine, bytes) else mine
    if mine != value:
        problems.append(f"default {name}: Python {mine!r}, C {value!r}")

if problems:
    harness.fail("\n  ".join(["the package does not match the C library:"] + problems))
print(f"{len(exported)} exported functions = the headers' declarations; "
      f"{sum(len(c[k]) - 1 for k in ('table_opts', 'stats', 'dataset', 'libsvm_opts', 'ratings', 'ratings_opts'))} fields, "
      "enums, codes, defaults match")
