#!/usr/bin/env python3
"""Stand-in for the Rust `newsdedup` binary, implementing the `batch`/`fingerprint` contract.

Why it exists: it lets the harness (and its tests) run end to end without a release build of
the Rust code. It is NOT the product's algorithm: it fingerprints NFKC-normalised, tag-stripped
content with a 64-bit simhash over character 3-grams and keeps its index in memory (a JSONL file
in --index-dir records what was indexed so a reused dir is visibly non-fresh). Index semantics
follow newsdedup's: only unique articles are indexed, candidates are fingerprints sharing one of
the four 16-bit blocks (exhaustive up to k=3), the match is the nearest (ties: earliest).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import unicodedata

_TAG = re.compile(r"<[^>]{0,200}>|&nbsp;")
_DROP = re.compile(r"[\s\W_]+", re.U)


def features(text: str) -> dict[str, int]:
    """Character trigram counts of the normalised text (title ignored, like a body fingerprint)."""
    norm = _DROP.sub("", unicodedata.normalize("NFKC", _TAG.sub("", text)).lower())
    counts: dict[str, int] = {}
    for i in range(max(1, len(norm) - 2)):
        gram = norm[i:i + 3]
        counts[gram] = counts.get(gram, 0) + 1
    return counts


_HASHES: dict[str, int] = {}


def _h(gram: str) -> int:
    v = _HASHES.get(gram)
    if v is None:
        if len(_HASHES) > 1_000_000:  # bound memory on the full corpus
            _HASHES.clear()
        v = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
        _HASHES[gram] = v
    return v


def simhash(text: str) -> int:
    """Weighted simhash; sums weights per (byte position, byte value) first, then per bit (8x fewer ops)."""
    per_byte = [[0] * 256 for _ in range(8)]
    for gram, w in features(text).items():
        h = _h(gram)
        for pos in range(8):
            per_byte[pos][(h >> (8 * pos)) & 0xFF] += w
    fp = 0
    for pos, table in enumerate(per_byte):
        total = sum(table)
        for bit in range(8):
            ones = sum(w for val, w in enumerate(table) if w and (val >> bit) & 1)
            if 2 * ones > total:
                fp |= 1 << (8 * pos + bit)
    return fp


class Index:
    """Hamming search over fingerprints sharing a 16-bit block (pigeonhole: exact for k <= 3)."""

    def __init__(self):
        self.blocks = [dict() for _ in range(4)]
        self.items: list[tuple[int, dict]] = []

    def add(self, fp: int, meta: dict) -> None:
        idx = len(self.items)
        self.items.append((fp, meta))
        for b in range(4):
            self.blocks[b].setdefault((fp >> (16 * b)) & 0xFFFF, []).append(idx)

    def nearest(self, fp: int, k: int):
        cands = set()
        for b in range(4):
            cands.update(self.blocks[b].get((fp >> (16 * b)) & 0xFFFF, ()))
        best = None
        for idx in sorted(cands):
            d = bin(fp ^ self.items[idx][0]).count("1")
            if d <= k and (best is None or d < best[0]):
                best = (d, idx)
        return best


def _open_in(path):
    return sys.stdin if path == "-" else open(path, encoding="utf-8")


def _open_out(path):
    return sys.stdout if path == "-" else open(path, "w", encoding="utf-8")


def _validate(line: str):
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("not an object")
    if not isinstance(obj.get("id"), str) or not obj["id"] or len(obj["id"].encode()) > 512:
        raise ValueError("bad id")
    if not isinstance(obj.get("content"), str):
        raise ValueError("bad content")
    return obj


def cmd_batch(args) -> int:
    os.makedirs(args.index_dir, exist_ok=True)
    index = Index()
    log = open(os.path.join(args.index_dir, "fake-index.jsonl"), "a", encoding="utf-8")
    with _open_in(args.input) as fin, _open_out(args.output) as fout:
        for n, line in enumerate(fin, 1):
            try:
                obj = _validate(line)
            except (ValueError, json.JSONDecodeError) as e:
                fout.write(json.dumps({"line": n, "dedup": {"decision": "invalid", "error": str(e)}}) + "\n")
                continue
            fp = simhash(obj["content"])
            best = index.nearest(fp, args.threshold)
            dedup = {"decision": "unique", "fingerprint": f"{fp:016x}"}
            if best is not None:
                meta = index.items[best[1]][1]
                dedup = {"decision": "duplicate", "fingerprint": f"{fp:016x}",
                         "match": dict(meta, distance=best[0])}
            if best is None:
                meta = {"id": obj["id"], "url": obj.get("url"), "title": obj.get("title"),
                        "fingerprint": f"{fp:016x}"}
                index.add(fp, meta)
                log.write(json.dumps({"id": obj["id"], "fp": meta["fingerprint"]}) + "\n")
            obj["dedup"] = dedup
            fout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    return 0


def cmd_fingerprint(args) -> int:
    with _open_in(args.input) as fin:
        for line in fin:
            obj = _validate(line)
            print(json.dumps({"id": obj["id"], "fingerprint": f"{simhash(obj['content']):016x}"}))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("batch")
    b.add_argument("--input", required=True)
    b.add_argument("--output", required=True)
    b.add_argument("--index-dir", required=True)
    b.add_argument("--threshold", type=int, default=3)
    b.add_argument("--quiet", action="store_true", help="accepted for compatibility (no progress lines anyway)")
    f = sub.add_parser("fingerprint")
    f.add_argument("--input", required=True)
    args = p.parse_args()
    return cmd_batch(args) if args.cmd == "batch" else cmd_fingerprint(args)


if __name__ == "__main__":
    sys.exit(main())
