#!/usr/bin/env python3
"""Packs a trained model file as a built-in prior (docs/prior.md, "Shipping").

Usage: scripts/prior-pack.py IN.safetensors OUT.safetensors [--ctx BITS] [--meta KEY=VALUE]...

IN is a model file in lmzip's native layout (`lmzip train --out`, or `--save-weights`).
OUT keeps the network's weights only, as F16 (lmzip widens F16 to f32 exactly, so every
build starts from the same bits): optimizer moments, state and the other `lmzip.` resume
data are dropped, since a run starts its optimizer fresh from a prior. With --ctx, the
context tables are resized to 2^BITS rows per table, as src/prior/mod.rs fits them at run
time (a row of the smaller table averages the rows of the larger one that share its top
bits). The output's bytes depend on the input alone: tensors in name order, sorted keys.
Prints the SHA-256 of OUT, which src/prior/mod.rs pins.
"""

import hashlib
import json
import struct
import sys

CONTEXT = "model.context_embeddings.weight"
TABLES = 3


def read(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, t in header.items():
        start, end = t["data_offsets"]
        raw = data[start:end]
        if t["dtype"] == "F32":
            values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        elif t["dtype"] == "F16":
            values = list(struct.unpack(f"<{len(raw) // 2}e", raw))
        else:
            sys.exit(f"{path}: tensor {name} is {t['dtype']}; F32 or F16 expected")
        tensors[name] = (t["shape"], values)
    return tensors, meta


def fit_rows(values, shape, bits):
    rows, width = shape
    per_from = rows // TABLES
    per_to = 1 << bits
    out = []
    for t in range(TABLES):
        for r in range(per_to):
            if per_to >= per_from:
                src = t * per_from + r // (per_to // per_from)
                out.extend(values[src * width : (src + 1) * width])
            else:
                group = per_from // per_to
                acc = [0.0] * width
                for k in range(group):
                    src = t * per_from + r * group + k
                    row = values[src * width : (src + 1) * width]
                    acc = [a + b for a, b in zip(acc, row)]
                out.extend(a / group for a in acc)
    return [TABLES * per_to, width], out


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    ctx = None
    extra_meta = {}
    i = 0
    while i < len(argv):
        if argv[i] == "--ctx":
            ctx = int(argv[i + 1])
            args.remove(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--meta":
            key, _, value = argv[i + 1].partition("=")
            extra_meta[key] = value
            args.remove(argv[i + 1])
            i += 2
            continue
        i += 1
    if len(args) != 2:
        sys.exit(__doc__)
    src, dst = args
    tensors, meta = read(src)
    out = {}
    for name, (shape, values) in sorted(tensors.items()):
        if name.startswith("lmzip."):
            continue
        if name == CONTEXT and ctx is not None:
            shape, values = fit_rows(values, shape, ctx)
        try:
            raw = struct.pack(f"<{len(values)}e", *values)
        except OverflowError:
            sys.exit(f"tensor {name} holds a value beyond F16's range")
        out[name] = (shape, raw)
    keep = {k: v for k, v in meta.items() if k in ("lmzip.model", "lmzip.numerics")}
    keep.update({f"lmzip.prior.{k}": v for k, v in extra_meta.items()})
    header = {"__metadata__": dict(sorted(keep.items()))} if keep else {}
    offset = 0
    for name, (shape, raw) in out.items():
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    blob = struct.pack("<Q", len(text)) + text + b"".join(raw for _, raw in out.values())
    open(dst, "wb").write(blob)
    print(f"{dst}: {len(blob)} bytes, SHA-256 {hashlib.sha256(blob).hexdigest()}")


if __name__ == "__main__":
    main(sys.argv[1:])
