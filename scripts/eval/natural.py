#!/usr/bin/env python3
"""Natural pair benchmark: real corpus near-duplicates, read blind by people, scored on a batch run.

The planted reposts of quality.py are edits we wrote ourselves. This benchmark takes pairs that
occur naturally in the corpus (the silver char 5-gram pairs, plus pairs the engine links that the
silver file lacks), has two readers label them blind (one report or not, and what kind of
repeat), and scores a `newsdedup batch` run over the plain corpus against those labels.

  select   [--engine-output OUT] [--contained N] [--dissimilar-output OUT]
                                   -> natural/pairs.jsonl (ids, numbers, strata, tune/test split)
  stream   --out FILE              the plain corpus in stream order (what `batch` reads)
  packets  --out DIR --readers N   blind reading packets + empty label files, OUTSIDE the repo
  merge    --a DIR --b DIR         agreement (Cohen's kappa) -> natural/disagreements.jsonl;
                                   with natural/resolved.jsonl -> natural/labels.jsonl
  score    --output OUT | --run    recall / precision per stratum with Wilson 95% intervals

Only ids, numbers, labels and the readers' one-line reasons are written into the repository;
article text goes to the packets and stream files outside it. Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

sys.dont_write_bytecode = True  # keep __pycache__ out of the repository tree
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from judge import CONTAINMENT_MIN, JACCARD_MIN, char5, shingles  # noqa: E402
from stream import content_len, load_corpus, write_jsonl  # noqa: E402

SHARED = os.environ.get("NEWSDEDUP_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
CORPUS = os.path.join(SHARED, "data", "corpus")
SILVER = os.path.join(SHARED, "data", "labeled", "silver_char5_minhash_pairs.jsonl")
DEFAULT_BIN = os.environ.get("NEWSDEDUP_BIN",
                             os.path.expanduser("~/.cache/newsdedup/target/release/newsdedup"))
NATURAL = os.path.join(HERE, "natural")
PAIRS = os.path.join(NATURAL, "pairs.jsonl")
LABELS = os.path.join(NATURAL, "labels.jsonl")
DISAGREEMENTS = os.path.join(NATURAL, "disagreements.jsonl")
RESOLVED = os.path.join(NATURAL, "resolved.jsonl")
AGREEMENT = os.path.join(NATURAL, "agreement.json")
GUIDE = os.path.join(NATURAL, "GUIDE.md")

SEED = 20240622
# Silver pairs per Jaccard band (the 0.5-0.8 band, where the engine is weakest, oversampled).
BANDS = ("exact", "0.9-1", "0.8-0.9", "0.5-0.8", "0.3-0.5", "0-0.3")
QUOTAS = {"exact": 20, "0.9-1": 50, "0.8-0.9": 50, "0.5-0.8": 120, "0.3-0.5": 80, "0-0.3": 80}
CONTAINMENT_BANDS = ("<0.8", "0.8-0.95", ">=0.95")
DIRECTIONS = ("later_shorter", "same_length", "later_longer")
SAME_LENGTH_TOLERANCE = 0.05
ENGINE_MAX = 60
# `select --contained`: the earlier text (nearly) whole in the later (share of its 5-grams found
# there), and under this share of the later's length.
CONTAINED_MIN, CONTAINED_MAX_SHARE = 0.8, 0.55
PACKET_SIZE = 55
TEXT_MAX, TEXT_TAIL = 3000, 600  # a longer text shows its first 2,400 and last 600 characters
SAME_RELATIONS = ("copy", "rewrite", "excerpt", "extension")
DIFFERENT_RELATIONS = ("digest", "template", "series", "other")
QUOTE_RUN = 10  # a reason sharing this many consecutive characters with an article quotes it
TARGETS = {"recall": (">=", 0.95), "precision": (">=", 0.97), "extension_recall": (">=", 0.90),
           "digest_flagged": ("<=", 0.01)}
_WS = re.compile(r"\s+")


# ----------------------------------------------------------------------------- small helpers

def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def inside_repo(path: str, allow_target: bool = False) -> bool:
    """True when path (resolved) lies inside the repository (target/ optionally exempt)."""
    real = os.path.realpath(path) + os.sep
    repo = os.path.realpath(REPO) + os.sep
    if not real.startswith(repo):
        return False
    return not (allow_target and real.startswith(os.path.join(repo, "target") + os.sep))


def refuse_repo(path: str, what: str, allow_target: bool = False) -> None:
    if inside_repo(path, allow_target):
        raise SystemExit(f"{what} {os.path.abspath(path)} is inside the repository {REPO}: article text "
                         "is copyrighted and must stay out of git (use a path outside it, e.g. under /tmp)")


def pair_key(earlier: str, later: str) -> str:
    return f"{earlier}|{later}"


def key_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score 95% interval for k successes in n trials (None when n == 0)."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def cohen_kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters' categorical labels (None if undefined: no items or pe == 1)."""
    n = len(pairs)
    if n == 0:
        return None
    po = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(ca[c] * cb[c] for c in set(ca) | set(cb)) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1 - pe)


class UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while x != root:  # path compression
            nxt = self.parent.get(x, x)
            self.parent[x] = root
            x = nxt
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


# ----------------------------------------------------------------------------- order and strata

def natural_order(corpus_dir: str) -> list[dict]:
    """The natural stream: the plain corpus, no planted reposts, in quality.py's corpus order.

    stream.load_corpus interleaves the corpus files proportionally; quality.py inserts its
    reposts into exactly this order, so "later" here is later in both streams. select (the
    direction of a pair) and score (the stream the batch run reads) both use this one function.
    """
    if not os.path.isdir(corpus_dir) or not glob.glob(os.path.join(corpus_dir, "*.jsonl")):
        raise SystemExit(f"corpus not found: no *.jsonl under {corpus_dir} (set --corpus or NEWSDEDUP_SHARED)")
    return load_corpus(corpus_dir)


def jaccard_band(jac: float, exact: bool) -> str:
    if exact:
        return "exact"
    for low, name in ((0.9, "0.9-1"), (0.8, "0.8-0.9"), (0.5, "0.5-0.8"), (0.3, "0.3-0.5")):
        if jac >= low:
            return name
    return "0-0.3"


def containment_band(cont: float) -> str:
    return ">=0.95" if cont >= 0.95 else "0.8-0.95" if cont >= 0.8 else "<0.8"


def direction(len_earlier: int, len_later: int) -> str:
    if abs(len_later - len_earlier) <= SAME_LENGTH_TOLERANCE * max(len_earlier, len_later, 1):
        return "same_length"
    return "later_longer" if len_later > len_earlier else "later_shorter"


def pair_record(x: dict, y: dict, pos: dict[str, int], source: str) -> dict:
    """Ids, similarity numbers and strata of one corpus pair (x, y in any order)."""
    earlier, later = (x, y) if pos[x["id"]] < pos[y["id"]] else (y, x)
    se, sl = shingles(earlier["content"]), shingles(later["content"])
    jac, cont = char5(se, sl)
    inter = len(se & sl)
    le, ll = content_len(earlier["content"]), content_len(later["content"])
    exact = _WS.sub("", earlier["content"]) == _WS.sub("", later["content"])
    return {"pair": pair_key(earlier["id"], later["id"]), "earlier": earlier["id"], "later": later["id"],
            "stratum": {"jaccard_band": jaccard_band(jac, exact), "containment_band": containment_band(cont),
                        "direction": direction(le, ll)},
            "jaccard": round(jac, 4), "containment": round(cont, 4),
            "a_in_b": round(inter / len(sl), 4), "b_in_a": round(inter / len(se), 4),
            "len_earlier": le, "len_later": ll, "exact_same_content": exact, "source": source}


def allocate(sizes: dict[tuple, int], total: int) -> dict[tuple, int]:
    """Equal shares per cell, capped by the cell's size, the rest passed on (water-filling)."""
    alloc = {k: 0 for k in sizes}
    remaining = total
    open_cells = sorted((k for k, n in sizes.items() if n > 0), key=lambda k: (-sizes[k], k))
    while remaining > 0 and open_cells:
        share = remaining // len(open_cells)
        if share == 0:
            for k in open_cells[:remaining]:
                alloc[k] += 1
            break
        for k in open_cells:
            take = min(share, sizes[k] - alloc[k])
            alloc[k] += take
            remaining -= take
        open_cells = [k for k in open_cells if alloc[k] < sizes[k]]
    return alloc


def stratified_sample(records: list[dict], total: int, cell, seed: str) -> list[dict]:
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: r["pair"]):
        cells[cell(rec)].append(rec)
    alloc = allocate({k: len(v) for k, v in cells.items()}, total)
    picked = []
    for k in sorted(cells):
        picked.extend(random.Random(f"{seed}:{k}").sample(cells[k], alloc[k]))
    return picked


def split_cell(rec: dict) -> tuple:
    s = rec["stratum"]
    return rec["source"], s["jaccard_band"], s["containment_band"], s["direction"]


def assign_splits(records: list[dict]) -> None:
    """tune/test, fixed by the pair key's sha256 and balanced within each stratum cell.

    In a cell, pairs are ordered by hash and alternate; the first one's hash parity decides
    where the alternation starts. A pair that already has a split keeps it.
    """
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        if rec.get("split") not in ("tune", "test"):
            cells[split_cell(rec)].append(rec)
    for members in cells.values():
        members.sort(key=lambda r: key_hash(r["pair"]))
        start = int(key_hash(members[0]["pair"]), 16) % 2
        for i, rec in enumerate(members):
            rec["split"] = ("tune", "test")[(start + i) % 2]


def ordered_record(rec: dict) -> dict:
    keys = ("pair", "earlier", "later", "stratum", "jaccard", "containment", "a_in_b", "b_in_a",
            "len_earlier", "len_later", "exact_same_content", "source", "split")
    return {k: rec[k] for k in keys}


def sort_key(rec: dict) -> tuple:
    return (("silver", "engine", "contained", "dissimilar").index(rec["source"]),
            BANDS.index(rec["stratum"]["jaccard_band"]), rec["pair"])


def silver_records(articles: list[dict], silver_path: str) -> list[dict]:
    """Every pair of the silver file, once, with its numbers and strata (source `silver`)."""
    by_id = {a["id"]: a for a in articles}
    pos = {a["id"]: i for i, a in enumerate(articles)}
    records, seen = [], set()
    for row in read_jsonl(silver_path):
        if row["a"] not in by_id or row["b"] not in by_id:
            raise SystemExit(f"silver pair {row['a']} / {row['b']}: id not in the corpus")
        rec = pair_record(by_id[row["a"]], by_id[row["b"]], pos, "silver")
        if rec["pair"] not in seen:
            seen.add(rec["pair"])
            records.append(rec)
    return records


def select_silver(silver: list[dict], quotas: dict[str, int] = QUOTAS) -> list[dict]:
    """The stratified silver selection from `silver_records`."""
    # Low-Jaccard silver pairs only when one text is (nearly) inside the other.
    records = [r for r in silver if r["stratum"]["jaccard_band"] != "0-0.3" or r["containment"] >= 0.8]
    picked = []
    for band in BANDS:
        members = [r for r in records if r["stratum"]["jaccard_band"] == band]
        picked.extend(stratified_sample(members, quotas.get(band, 0),
                                        lambda r: (r["stratum"]["containment_band"], r["stratum"]["direction"]),
                                        f"{SEED}:silver:{band}"))
    return picked


def engine_links(output_path: str) -> list[tuple[str, str]]:
    """(id, match id) of every `duplicate` line of a batch output."""
    links = []
    with open(output_path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            obj = json.loads(line)
            dedup = obj.get("dedup") or {}
            match = dedup.get("match") or {}
            if dedup.get("decision") == "duplicate" and match.get("id") and obj.get("id"):
                links.append((obj["id"], match["id"]))
    return links


def linked_records(articles: list[dict], output_path: str, exclude: set[frozenset], source: str) -> list[dict]:
    """A pair record (of `source`) for every pair the engine links directly that is not in `exclude`."""
    by_id = {a["id"]: a for a in articles}
    pos = {a["id"]: i for i, a in enumerate(articles)}
    records, seen = [], set()
    for x, y in engine_links(output_path):
        key = frozenset((x, y))
        if x == y or key in exclude or key in seen or x not in by_id or y not in by_id:
            continue
        seen.add(key)
        records.append(pair_record(by_id[x], by_id[y], pos, source))
    return records


def select_engine(articles: list[dict], output_path: str, exclude: set[frozenset], n: int) -> list[dict]:
    """Up to n pairs the engine links directly that are not in `exclude`, stratified by band x direction."""
    return stratified_sample(linked_records(articles, output_path, exclude, "engine"), n,
                             lambda r: (r["stratum"]["jaccard_band"], r["stratum"]["direction"]),
                             f"{SEED}:engine")


def select_dissimilar(articles: list[dict], output_path: str, exclude: set[frozenset]) -> list[dict]:
    """Every pair the engine links directly, not in `exclude`, whose character 5-gram Jaccard is
    under 0.5 and containment under 0.8: the links the planted set's judge (judge.py) cannot call
    right, so only a reading can tell whether they are one report."""
    return [r for r in linked_records(articles, output_path, exclude, "dissimilar")
            if r["jaccard"] < JACCARD_MIN and r["containment"] < CONTAINMENT_MIN]


def share_band(rec: dict) -> str:
    """The earlier text's length as a share of the later's, in the bands that tell a digest's item
    (a small part) from an update's original (most of it)."""
    share = rec["len_earlier"] / max(1, rec["len_later"])
    return "<0.25" if share < 0.25 else "0.25-0.4" if share < 0.4 else "0.4-0.55"


def select_contained(silver: list[dict], exclude: set[str], n: int) -> list[dict]:
    """Up to n pairs of `silver_records` not in `exclude` whose earlier text is (nearly) whole in
    the later one and under 55% of its length: the pairs where an update (one report) and a digest
    (a small item among others) must be told apart. Stratified by the earlier text's share."""
    records = [{**r, "source": "contained"} for r in silver
               if r["pair"] not in exclude and r["b_in_a"] >= CONTAINED_MIN
               and r["len_earlier"] < CONTAINED_MAX_SHARE * r["len_later"]]
    return stratified_sample(records, n, share_band, f"{SEED}:contained")


def build_pairs(articles: list[dict], silver_path: str, existing: list[dict], engine_output: str | None,
                quotas: dict[str, int] = QUOTAS, engine_max: int = ENGINE_MAX,
                contained: int = 0, dissimilar_output: str | None = None) -> list[dict]:
    """The silver selection (recomputed; must equal what `existing` holds) plus engine pairs, plus
    up to `contained` (in all) pairs of an earlier text held as a small part of a later one, plus
    the engine's links in `dissimilar_output` that char 5-gram similarity cannot confirm.

    Pairs already in `existing` are never changed or dropped, so splits stay fixed once labelled.
    """
    records = silver_records(articles, silver_path)
    silver = select_silver(records, quotas)
    assign_splits(silver)
    old_silver = {r["pair"]: r for r in existing if r["source"] == "silver"}
    if old_silver:
        new = {r["pair"]: r["split"] for r in silver}
        if {k: r["split"] for k, r in old_silver.items()} != new:
            raise SystemExit("the silver selection differs from the existing pairs file (corpus, silver file "
                             "or selection code changed): refusing to move labelled pairs; remove the file "
                             "deliberately to start over")
    engine = [r for r in existing if r["source"] == "engine"]
    if engine_output:
        exclude = {frozenset((r["a"], r["b"])) for r in read_jsonl(silver_path)}
        exclude |= {frozenset((r["earlier"], r["later"])) for r in existing}
        added = select_engine(articles, engine_output, exclude, max(0, engine_max - len(engine)))
        assign_splits(added)
        engine += added
    held = [r for r in existing if r["source"] == "contained"]
    if contained > len(held):
        exclude = {r["pair"] for r in silver + engine + held}
        added = select_contained(records, exclude, contained - len(held))
        assign_splits(added)
        held += added
    dissimilar = [r for r in existing if r["source"] == "dissimilar"]
    if dissimilar_output:
        exclude = {frozenset((r["earlier"], r["later"])) for r in silver + engine + held + dissimilar}
        added = select_dissimilar(articles, dissimilar_output, exclude)
        assign_splits(added)
        dissimilar += added
    return sorted(silver + engine + held + dissimilar, key=sort_key)


def cmd_select(args) -> int:
    articles = natural_order(args.corpus)
    if not os.path.exists(args.silver):
        raise SystemExit(f"silver pairs not found: {args.silver}")
    existing = read_jsonl(args.pairs) if os.path.exists(args.pairs) else []
    pairs = build_pairs(articles, args.silver, existing, args.engine_output, contained=args.contained,
                        dissimilar_output=args.dissimilar_output)
    os.makedirs(os.path.dirname(os.path.abspath(args.pairs)), exist_ok=True)
    write_jsonl(args.pairs, [ordered_record(r) for r in pairs])
    print(f"select: {len(pairs)} pairs -> {args.pairs}")
    print_strata(pairs)
    return 0


def print_strata(pairs: list[dict]) -> None:
    for field in ("source", "jaccard_band", "containment_band", "direction", "split"):
        counts = Counter(r[field] if field in ("source", "split") else r["stratum"][field] for r in pairs)
        print(f"  {field:17s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    cells = Counter((r["stratum"]["jaccard_band"], r["split"]) for r in pairs)
    print("  band x split      " + ", ".join(f"{b} {cells[(b, 'tune')]}/{cells[(b, 'test')]}"
                                             for b in BANDS if cells[(b, 'tune')] + cells[(b, 'test')]))


# ----------------------------------------------------------------------------- stream

def cmd_stream(args) -> int:
    refuse_repo(args.out, "--out", allow_target=True)
    articles = natural_order(args.corpus)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
    write_jsonl(args.out, articles)
    print(f"stream: {len(articles)} articles -> {args.out}")
    return 0


# ----------------------------------------------------------------------------- packets

def normalise(text: str) -> str:
    """Whitespace runs inside a line -> one space; blank lines dropped; paragraphs kept."""
    lines = (_WS.sub(" ", line).strip() for line in (text or "").splitlines())
    return "\n".join(line for line in lines if line)


def clip(text: str, limit: int = TEXT_MAX, tail: int = TEXT_TAIL) -> str:
    if len(text) <= limit:
        return text
    head = limit - tail
    return f"{text[:head]}\n[... {len(text) - limit} characters cut here ...]\n{text[-tail:]}"


PACKET_HEAD = """newsdedup natural pairs: packet {no:02d} of {total:02d} ({n} pairs)

For every pair below decide whether the LATER article is the same report as the EARLIER one (a
reader of the later would learn nothing new of substance) and fill in your own label file
(reader_<x>/packet_{no:02d}.jsonl, one line per pair, same order):
  label     "same" or "different"
  relation  same:      copy | rewrite | excerpt | extension
            different: digest | template | series | other
  reason    one line in your own words; do NOT quote the articles (a few characters at most)
The rules and examples are in GUIDE.md next to this file. Judge from the texts alone; work on your
own (do not compare notes with the other reader).
"""


def render_packet(no: int, total: int, pairs: list[dict], by_id: dict[str, dict]) -> str:
    out = [PACKET_HEAD.format(no=no, total=total, n=len(pairs))]
    for i, rec in enumerate(pairs, 1):
        out.append("=" * 78)
        out.append(f"PAIR {i}/{len(pairs)}   {rec['pair']}")
        for role in ("earlier", "later"):
            art = by_id[rec[role]]
            text = normalise(art.get("content", ""))
            out.append("-" * 78)
            length = content_len(art.get("content", ""))
            out.append(f"{role.upper()}   {art['id']}   length {length} chars without whitespace "
                       f"(title {content_len(art.get('title') or '')})")
            out.append(f"TITLE: {normalise(art.get('title') or '') or '(none)'}")
            out.append("TEXT:")
            out.append(clip(text) if text else "(empty)")
        out.append("")
    return "\n".join(out) + "\n"


def reader_names(n: int) -> list[str]:
    return [f"reader_{chr(ord('a') + i)}" for i in range(n)]


def chunks(items: list, size: int) -> list[list]:
    n = max(1, math.ceil(len(items) / size))
    base, extra = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        step = base + (1 if k < extra else 0)
        out.append(items[i:i + step])
        i += step
    return out


def packeted(out_dir: str) -> tuple[set[str], int]:
    """Pairs already in the label files under out_dir, and the highest packet number there."""
    done, last = set(), 0
    for path in glob.glob(os.path.join(out_dir, "reader_*", "packet_*.jsonl")):
        last = max(last, int(re.sub(r"\D", "", os.path.basename(path)) or 0))
        done |= {r["pair"] for r in read_jsonl(path)}
    return done, last


def write_packets(pairs: list[dict], articles_by_id: dict[str, dict], out_dir: str, readers: int,
                  size: int = PACKET_SIZE, new_only: bool = False) -> int:
    """Blind packets (pairs in a hash order that mixes strata and splits) + empty label files.

    new_only: only pairs not yet in a packet under out_dir, numbered after the existing packets
    (engine pairs added once readers have started). Returns the number of packets written.
    """
    refuse_repo(out_dir, "--out")
    missing = sorted({i for r in pairs for i in (r["earlier"], r["later"]) if i not in articles_by_id})
    if missing:
        raise SystemExit(f"{len(missing)} pair ids not in the corpus, e.g. {missing[:3]}")
    first = 1
    if new_only:
        done, last = packeted(out_dir)
        pairs, first = [r for r in pairs if r["pair"] not in done], last + 1
        if not pairs:
            return 0
    os.makedirs(out_dir, exist_ok=True)
    shuffled = sorted(pairs, key=lambda r: key_hash(f"packet:{r['pair']}"))
    groups = chunks(shuffled, size)
    total = first - 1 + len(groups)
    names = reader_names(readers)
    for name in names:
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    for no, group in enumerate(groups, first):
        with open(os.path.join(out_dir, f"packet_{no:02d}.txt"), "w", encoding="utf-8") as fh:
            fh.write(render_packet(no, total, group, articles_by_id))
        for name in names:
            path = os.path.join(out_dir, name, f"packet_{no:02d}.jsonl")
            if os.path.exists(path) and any(r.get("label") for r in read_jsonl(path)):
                raise SystemExit(f"{path} already holds labels: refusing to overwrite a reader's work")
            write_jsonl(path, [{"pair": r["pair"], "label": "", "relation": "", "reason": ""} for r in group])
    if os.path.exists(GUIDE):
        shutil.copyfile(GUIDE, os.path.join(out_dir, "GUIDE.md"))
    return len(groups)


def cmd_packets(args) -> int:
    refuse_repo(args.out, "--out")
    pairs = read_jsonl(args.pairs)
    articles = natural_order(args.corpus)
    n = write_packets(pairs, {a["id"]: a for a in articles}, args.out, args.readers, args.size, args.new)
    print(f"packets: {n} packets written to {args.out}/packet_NN.txt "
          f"(empty label files in {', '.join(reader_names(args.readers))}/)")
    return 0


# ----------------------------------------------------------------------------- merge

def load_reader(dir_path: str, known: set[str]) -> tuple[dict[str, dict], list[str]]:
    """A reader's labels by pair (filled lines only) and the problems found."""
    files = sorted(glob.glob(os.path.join(dir_path, "*.jsonl")))
    if not files:
        raise SystemExit(f"no label files (*.jsonl) in {dir_path}")
    labels, problems = {}, []
    for path in files:
        for n, row in enumerate(read_jsonl(path), 1):
            where = f"{os.path.basename(path)}:{n}"
            pair = row.get("pair")
            if pair not in known:
                problems.append(f"{where}: pair {pair!r} is not in the pairs file")
                continue
            label = (row.get("label") or "").strip().lower()
            relation = (row.get("relation") or "").strip().lower()
            reason = _WS.sub(" ", row.get("reason") or "").strip()
            if not label:
                continue
            allowed = SAME_RELATIONS if label == "same" else DIFFERENT_RELATIONS if label == "different" else ()
            if not allowed:
                problems.append(f"{where}: label {label!r} is not same/different")
            elif relation not in allowed:
                problems.append(f"{where}: relation {relation!r} is not one of {'/'.join(allowed)} for {label}")
            elif pair in labels:
                problems.append(f"{where}: pair {pair} labelled twice")
            else:
                labels[pair] = {"label": label, "relation": relation, "reason": reason}
    return labels, problems


def agreement(a: dict[str, dict], b: dict[str, dict]) -> dict:
    both = sorted(set(a) & set(b))
    lab = [(a[p]["label"], b[p]["label"]) for p in both]
    rel_same = [(a[p]["relation"], b[p]["relation"]) for p in both
                if a[p]["label"] == b[p]["label"] == "same"]
    joint = [(f"{a[p]['label']}/{a[p]['relation']}", f"{b[p]['label']}/{b[p]['relation']}") for p in both]

    def summary(items):
        kappa = cohen_kappa(items)
        return {"n": len(items), "agree": sum(x == y for x, y in items),
                "rate": round(sum(x == y for x, y in items) / len(items), 4) if items else None,
                "kappa": round(kappa, 4) if kappa is not None else None}

    return {"pairs_labelled_by_both": len(both), "label": summary(lab),
            "relation_when_both_same": summary(rel_same), "label_and_relation": summary(joint),
            "confusion_label": {f"{x}|{y}": n for (x, y), n in sorted(Counter(lab).items())}}


def reason_quotes(reason: str, texts: list[str], run: int = QUOTE_RUN) -> bool:
    """True if the reason shares `run` consecutive (whitespace-free) characters with any text,
    counting runs that hold a non-ASCII character only: a Latin-script name (which the guide
    allows) is not a quotation of the Chinese text."""
    r = _WS.sub("", reason)
    if len(r) < run:
        return False
    flat = [_WS.sub("", t or "") for t in texts]
    return any(not r[i:i + run].isascii() and r[i:i + run] in t
               for i in range(len(r) - run + 1) for t in flat)


def merge_labels(pairs: list[dict], a: dict[str, dict], b: dict[str, dict],
                 resolved: dict[str, dict] | None) -> tuple[list[dict], list[dict], list[str]]:
    """(final labels or [] while unresolved, disagreements, problems)."""
    final, disagreements, problems = [], [], []
    for rec in pairs:
        p = rec["pair"]
        la, lb = a.get(p), b.get(p)
        if la is None or lb is None:
            problems.append(f"{p}: not labelled by {'reader A' if la is None else 'reader B'}")
            continue
        if la["label"] == lb["label"] and la["relation"] == lb["relation"]:
            final.append({"pair": p, "label": la["label"], "relation": la["relation"],
                          "reason": la["reason"] or lb["reason"], "readers_agreed": True})
            continue
        disagreements.append({"pair": p, "split": rec["split"],
                              "on": "label" if la["label"] != lb["label"] else "relation",
                              "a": la, "b": lb})
        res = (resolved or {}).get(p)
        if res is None:
            continue
        label, relation = (res.get("label") or "").strip(), (res.get("relation") or "").strip()
        allowed = SAME_RELATIONS if label == "same" else DIFFERENT_RELATIONS if label == "different" else ()
        if relation not in allowed:
            problems.append(f"resolved {p}: label/relation {label!r}/{relation!r} not valid")
            continue
        final.append({"pair": p, "label": label, "relation": relation,
                      "reason": _WS.sub(" ", res.get("reason") or "").strip(), "readers_agreed": False})
    unresolved = [d["pair"] for d in disagreements if d["pair"] not in {f["pair"] for f in final}]
    if unresolved:
        return [], disagreements, problems + ([] if resolved is None else
                                              [f"{len(unresolved)} disagreements not in resolved.jsonl, "
                                               f"e.g. {unresolved[0]}"])
    return final, disagreements, problems


def cmd_merge(args) -> int:
    pairs = read_jsonl(args.pairs)
    known = {r["pair"] for r in pairs}
    a, prob_a = load_reader(args.a, known)
    b, prob_b = load_reader(args.b, known)
    problems = [f"A {p}" for p in prob_a] + [f"B {p}" for p in prob_b]
    resolved = {r["pair"]: r for r in read_jsonl(args.resolved)} if os.path.exists(args.resolved) else None
    final, disagreements, merge_problems = merge_labels(pairs, a, b, resolved)
    problems += merge_problems
    agr = agreement(a, b)
    agr["disagreements"] = {"total": len(disagreements),
                            "on_label": sum(d["on"] == "label" for d in disagreements),
                            "on_relation": sum(d["on"] == "relation" for d in disagreements)}
    print(f"merge: {len(pairs)} pairs; reader A labelled {len(a)}, reader B {len(b)}; "
          f"both {agr['pairs_labelled_by_both']}")
    for name in ("label", "relation_when_both_same", "label_and_relation"):
        s = agr[name]
        if s["n"]:
            kappa = "n/a" if s["kappa"] is None else f"{s['kappa']:.3f}"
            print(f"  {name:24s} agree {s['agree']}/{s['n']} ({s['rate']:.1%}), Cohen's kappa {kappa}")
    print(f"  confusion (A|B)          {agr['confusion_label']}")
    print(f"  disagreements            {agr['disagreements']['total']} "
          f"({agr['disagreements']['on_label']} on label, {agr['disagreements']['on_relation']} on relation)")
    write_jsonl(args.disagreements, disagreements)
    print(f"  -> {args.disagreements}")
    for line in problems[:20]:
        print(f"  problem: {line}", file=sys.stderr)
    if problems:
        raise SystemExit(f"merge: {len(problems)} problems (above); labels.jsonl not written")
    if not final:
        print(f"  resolve the disagreements into {args.resolved} (one line each: "
              '{"pair", "label", "relation", "reason"}) and run merge again')
        return 0
    if os.path.isdir(args.corpus) and glob.glob(os.path.join(args.corpus, "*.jsonl")):
        by_id = {x["id"]: x for x in load_corpus(args.corpus)}
        pair_ids = {r["pair"]: (r["earlier"], r["later"]) for r in pairs}
        quoting = [f["pair"] for f in final
                   if reason_quotes(f["reason"], [by_id[i].get(k) or "" for i in pair_ids[f["pair"]]
                                                  for k in ("title", "content")])]
        if quoting:
            raise SystemExit(f"merge: {len(quoting)} reasons quote {QUOTE_RUN}+ consecutive characters of article "
                             f"text (e.g. {quoting[:5]}); reword them (resolved.jsonl or the readers' files)")
    else:
        print("  (corpus absent: reasons not checked for quotes)", file=sys.stderr)
    write_jsonl(args.labels, final)
    with open(args.agreement, "w", encoding="utf-8") as fh:
        json.dump(agr, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"  -> {args.labels} ({len(final)} labels: {sum(f['readers_agreed'] for f in final)} agreed, "
          f"{sum(not f['readers_agreed'] for f in final)} resolved); {args.agreement}")
    return 0


# ----------------------------------------------------------------------------- score

def decisions(output_path: str) -> dict[str, dict]:
    """id -> the `dedup` object of its output line (the last one, if an id repeats)."""
    out = {}
    with open(output_path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                if obj.get("id") is not None:
                    out[obj["id"]] = obj.get("dedup") or {}
    return out


def describe_decision(dedup: dict) -> str:
    """One article's decision in a few words: `duplicate of ID (rule, relation, d N)` or `unique`."""
    match = dedup.get("match") or {}
    if dedup.get("decision") != "duplicate":
        return dedup.get("decision") or "no decision"
    return (f"duplicate of {match.get('id')} ({match.get('rule')}, {match.get('relation')}, "
            f"d {match.get('distance')})")


LIST_KINDS = ("missed", "false", "errors", "all")


def listed_pairs(items: list[tuple[dict, bool]], dec: dict[str, dict], kind: str) -> list[dict]:
    """The scored pairs one by one (`kind`: missed = same and not linked, false = different and
    linked, errors = both, all), with both articles' decisions (`dec`, from `decisions`), for
    reading the tuning half."""
    rows = []
    for lab, linked in items:
        wrong = linked != (lab["label"] == "same")
        if kind == "missed" and not (wrong and lab["label"] == "same"):
            continue
        if kind == "false" and not (wrong and lab["label"] == "different"):
            continue
        if kind == "errors" and not wrong:
            continue
        rows.append({"pair": lab["pair"], "label": lab["label"], "relation": lab["relation"], "linked": linked,
                     "jaccard": lab.get("jaccard"), "a_in_b": lab.get("a_in_b"), "b_in_a": lab.get("b_in_a"),
                     "len_earlier": lab.get("len_earlier"), "len_later": lab.get("len_later"),
                     "earlier_decision": describe_decision(dec.get(lab["earlier"], {})),
                     "later_decision": describe_decision(dec.get(lab["later"], {})),
                     "reason": lab.get("reason", "")})
    return rows


def format_listed(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        outcome = ("linked" if r["linked"] else "not linked")
        lines.append(f"{r['label']}/{r['relation']} {outcome}: {r['pair']}  J {r['jaccard']} "
                     f"a_in_b {r['a_in_b']} b_in_a {r['b_in_a']} length {r['len_earlier']} -> {r['len_later']}")
        lines.append(f"    later: {r['later_decision']}; earlier: {r['earlier_decision']}")
        lines.append(f"    reader: {r['reason']}")
    return "\n".join(lines)


def chains(output_path: str) -> tuple[UnionFind, set[str]]:
    """Duplicate chains of a batch output (union-find over id -> match id) and the ids it holds."""
    uf, seen = UnionFind(), set()
    with open(output_path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj.get("id") is not None:
                seen.add(obj["id"])
            dedup = obj.get("dedup") or {}
            match = dedup.get("match") or {}
            if dedup.get("decision") == "duplicate" and match.get("id") and obj.get("id") is not None:
                uf.union(obj["id"], match["id"])
    return uf, seen


def relation_agreement(items: list[tuple[dict, bool]], dec: dict[str, dict]) -> dict:
    """How often the engine's `match.relation` is the readers' relation, over the `same` pairs the
    engine links directly (the later's match names the earlier, or names its original `via` it):
    the relation auditors read in `articles.duplicate`. A pair linked only through a chain has no
    relation of its own and is not counted. `dec`: the run's decisions (`decisions`). Confusion:
    reader relation -> engine relation -> pairs."""
    confusion: dict[str, dict[str, int]] = {r: {} for r in SAME_RELATIONS}
    agree = n = 0
    for lab, linked in items:
        if lab["label"] != "same" or not linked:
            continue
        match = (dec.get(lab["later"]) or {}).get("match") or {}
        if lab["earlier"] not in (match.get("id"), match.get("via")):
            continue
        engine = match.get("relation") or "none"
        row = confusion.setdefault(lab["relation"], {})
        row[engine] = row.get(engine, 0) + 1
        n += 1
        agree += engine == lab["relation"]
    return {"agree": rate(agree, n), "confusion": confusion}


def rate(k: int, n: int) -> dict:
    ci = wilson(k, n)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None,
            "ci95": [round(ci[0], 4), round(ci[1], 4)] if ci else None}


# Sources chosen from the engine's own links: they count for precision, never for the recall or
# the flagged rate (every pair of them is linked, so they would move both by their selection).
LINKED_SOURCES = ("engine", "dissimilar")


def group_stats(items: list[tuple[dict, bool]]) -> dict:
    """items: (label row joined with its pair, linked). Recall and flagged rate (over pairs not
    chosen from the engine's links), precision (over every linked pair)."""
    sampled = [(lab, linked) for lab, linked in items if lab["source"] not in LINKED_SOURCES]
    same = [linked for lab, linked in sampled if lab["label"] == "same"]
    diff = [linked for lab, linked in sampled if lab["label"] == "different"]
    linked = [lab["label"] == "same" for lab, linked in items if linked]
    return {"pairs": len(items), "recall": rate(sum(same), len(same)),
            "precision": rate(sum(linked), len(linked)), "flagged": rate(sum(diff), len(diff))}


GROUPS = ("jaccard_band", "containment_band", "direction", "relation", "source")


def group_value(field: str, lab: dict) -> str:
    if field == "relation":
        return f"{lab['label']}/{lab['relation']}"
    if field == "source":
        return lab["source"]
    return lab["stratum"][field]


def score(pairs: list[dict], labels: list[dict], output_path: str, split: str, listing: str | None = None) -> dict:
    by_pair = {r["pair"]: r for r in pairs}
    unknown = [lab["pair"] for lab in labels if lab["pair"] not in by_pair]
    if unknown:
        raise SystemExit(f"{len(unknown)} labelled pairs are not in the pairs file, e.g. {unknown[0]}")
    rows = [{**by_pair[lab["pair"]], **lab} for lab in labels]
    rows = [r for r in rows if split == "all" or r["split"] == split]
    if not rows:
        raise SystemExit(f"no labelled pairs in split {split!r}")
    uf, seen = chains(output_path)
    absent = [r["pair"] for r in rows if r["earlier"] not in seen or r["later"] not in seen]
    absent_set = set(absent)
    items = [(r, uf.find(r["earlier"]) == uf.find(r["later"])) for r in rows if r["pair"] not in absent_set]
    if not items:
        raise SystemExit(f"none of the {len(rows)} labelled pairs has both ids in {output_path}: "
                         "was it run over the natural stream?")
    report = {"split": split, "output": os.path.abspath(output_path), "labelled": len(rows),
              "absent_from_output": len(absent), "absent_examples": absent[:5],
              "overall": group_stats(items), "by": {}}
    for field in GROUPS:
        groups: dict[str, list] = defaultdict(list)
        for lab, linked in items:
            groups[group_value(field, lab)].append((lab, linked))
        order = {"jaccard_band": BANDS, "containment_band": CONTAINMENT_BANDS, "direction": DIRECTIONS}.get(field)
        keys = sorted(groups, key=lambda k: (order.index(k) if order and k in order else 99, k))
        report["by"][field] = {k: group_stats(groups[k]) for k in keys}
    rel = report["by"]["relation"]
    report["headline"] = {
        "recall": report["overall"]["recall"], "precision": report["overall"]["precision"],
        "extension_recall": rel.get("same/extension", {}).get("recall", rate(0, 0)),
        "digest_flagged": rel.get("different/digest", {}).get("flagged", rate(0, 0)),
        "different_flagged": report["overall"]["flagged"]}
    report["targets"] = {k: {"op": op, "value": v,
                             "met": _met(report["headline"][k]["rate"], op, v)} for k, (op, v) in TARGETS.items()}
    dec = decisions(output_path)
    report["relation"] = relation_agreement(items, dec)
    if listing:
        report["listed"] = {"kind": listing, "pairs": listed_pairs(items, dec, listing)}
    return report


def relation_columns(agreement: dict) -> list[str]:
    """The engine relations of a confusion table: the four, then any other the run gave."""
    others = {e for row in agreement["confusion"].values() for e in row} - set(SAME_RELATIONS)
    return list(SAME_RELATIONS) + sorted(others)


def format_relation(agreement: dict) -> list[str]:
    """The relation agreement as a confusion table (reader relation by row)."""
    engines = relation_columns(agreement)
    lines = ["reader / engine".ljust(16) + "".join(f"{e:>10s}" for e in engines)]
    for reader, row in agreement["confusion"].items():
        lines.append(f"{reader:16s}" + "".join(f"{row.get(e, 0):>10d}" for e in engines))
    return lines


def _met(value: float | None, op: str, target: float) -> bool | None:
    if value is None:
        return None
    return value >= target if op == ">=" else value <= target


def fmt_rate(r: dict) -> str:
    if not r["n"]:
        return f"{'-':>7s} {'':15s}"
    return f"{r['k']:>3d}/{r['n']:<3d} {r['rate']:.3f} [{r['ci95'][0]:.2f},{r['ci95'][1]:.2f}]"


def format_table(report: dict) -> str:
    lines = [f"natural pairs, split {report['split']}: {report['labelled']} labelled, "
             f"{report['absent_from_output']} absent from the output"
             + (f"; configuration: {report['config']}" if report.get("config") else "")]
    h = report["headline"]
    for name in ("recall", "precision", "extension_recall", "digest_flagged", "different_flagged"):
        t = report["targets"].get(name)
        target = "" if not t else f"   target {t['op']} {t['value']}: " + \
            {True: "met", False: "NOT met", None: "n/a"}[t["met"]]
        lines.append(f"  {name:18s} {fmt_rate(h[name])}{target}")
    lines.append("")
    head = f"{'stratum':28s} {'pairs':>5s}  {'recall (same linked)':26s} {'precision (linked same)':26s} " \
           f"{'flagged (different linked)':26s}"
    lines.append(head)
    lines.append("-" * len(head))

    def row(name: str, s: dict) -> str:
        return f"{name:28s} {s['pairs']:>5d}  {fmt_rate(s['recall']):26s} {fmt_rate(s['precision']):26s} " \
               f"{fmt_rate(s['flagged']):26s}"

    lines.append(row("all", report["overall"]))
    for field, groups in report["by"].items():
        for k, s in groups.items():
            lines.append(row(f"{field}={k}", s))
    if "relation" in report:
        lines += ["", f"relation (match.relation = the readers', same pairs linked directly): "
                      f"{fmt_rate(report['relation']['agree'])}"]
        lines += ["  " + line for line in format_relation(report["relation"])]
    return "\n".join(lines)


def run_batch(binary: str, stream_path: str, out_path: str, index_dir: str) -> None:
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"binary not found or not executable: {binary} (build it or pass --bin)")
    shutil.rmtree(index_dir, ignore_errors=True)
    cmd = [binary, "batch", "--input", stream_path, "--output", out_path, "--index-dir", index_dir, "--quiet"]
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    shutil.rmtree(index_dir, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"batch failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    print(f"run: {' '.join(cmd)} ({time.time() - t0:.1f} s)", file=sys.stderr)


def cmd_score(args) -> int:
    if args.list and args.split != "tune":
        raise SystemExit("--list shows pairs one by one, for the tuning half only (--split tune): the test half is "
                         "reported as figures, never read pair by pair, so that it stays a test (docs/QUALITY.md)")
    if not os.path.exists(args.labels):
        raise SystemExit(f"no labels: {args.labels} is missing (label the packets, then `natural.py merge`)")
    if not os.path.exists(args.pairs):
        raise SystemExit(f"no pairs file: {args.pairs} (run `natural.py select`)")
    pairs, labels = read_jsonl(args.pairs), read_jsonl(args.labels)
    if not labels:
        raise SystemExit(f"{args.labels} holds no labels")
    if args.run:
        if args.config:
            if not os.path.isfile(args.config):
                raise SystemExit(f"--config: no such file: {args.config}")
            os.environ["NEWSDEDUP_CONFIG"] = os.path.abspath(args.config)
        refuse_repo(args.workdir, "--workdir", allow_target=True)
        articles = natural_order(args.corpus)
        os.makedirs(args.workdir, exist_ok=True)
        stream_path = os.path.join(args.workdir, "natural-stream.jsonl")
        write_jsonl(stream_path, articles)
        output = os.path.join(args.workdir, "natural-out.jsonl")
        index_dir = tempfile.mkdtemp(prefix="index-", dir=args.workdir)
        run_batch(args.bin, stream_path, output, index_dir)
    elif args.output:
        output = args.output
        if not os.path.exists(output):
            raise SystemExit(f"batch output not found: {output}")
    else:
        raise SystemExit("score needs --output BATCH_OUTPUT.jsonl or --run [--bin BIN]")
    report = score(pairs, labels, output, args.split, args.list)
    if args.run:
        report["config"] = os.environ.get("NEWSDEDUP_CONFIG") or "built-in defaults"
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(format_table(report))
        if args.list:
            print(f"\n{args.list} pairs of the {args.split} split ({len(report['listed']['pairs'])}):")
            print(format_listed(report["listed"]["pairs"]))
    if args.write_doc:
        write_doc_section(report, args)
    return 0


DOC = os.path.join(REPO, "docs", "QUALITY.md")
DOC_BEGIN, DOC_END = "<!-- natural:begin -->", "<!-- natural:end -->"


def machine() -> str:
    """This machine for the record: scripts/machine.sh (CPU model, family and model, CPUs, caches)."""
    try:
        out = subprocess.run(["bash", os.path.join(REPO, "scripts", "machine.sh")],
                             capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        out = ""
    return out or "unknown machine"


def doc_section(report: dict, agreement: dict | None, command: str) -> str:
    """The natural-pairs section of docs/QUALITY.md (between the markers)."""
    lines = [DOC_BEGIN, "## Natural pairs (read by editors)", "",
             "Corpus pairs that repeat each other in the wild, labelled blind by two independent readers "
             "(language-model reading passes that saw only the two texts and the guide below, never a score or "
             "each other's labels; scripts/eval/natural/: ids, labels and one-line reasons, no text), "
             "disagreements resolved by a third reading. The guide (below, and "
             "[scripts/eval/natural/GUIDE.md](../scripts/eval/natural/GUIDE.md)): one report (`copy`, `rewrite`, `excerpt`, `extension`) or different (`template`, `digest`, "
             "`series`, `other`). The pairs are split by a hash of the pair key into a tuning half and a test "
             "half, fixed before any tuning; this table is the **test half** only (`score --list` reads pairs "
             "one by one for the tuning half alone). A pair counts as linked when "
             "both ids end on one duplicate chain of a `batch` run over the whole corpus. 95% Wilson intervals. "
             "Sources: `silver` (silver pairs stratified by Jaccard band, containment band and direction), "
             "`engine` (pairs the engine links that the silver file lacks), `contained` (further silver pairs "
             "whose earlier text is whole in the later one and under 55% of its length: updates, digests, "
             "pages that merely carry the earlier one), `dissimilar` (every pair the engine links whose char "
             "5-gram Jaccard is under 0.5 and containment under 0.8, which the planted set's similarity judge "
             "cannot confirm; its precision there rests on these readings). Recall and the share of different "
             "pairs linked count only the pairs sampled without regard to the engine's links (not `engine` or "
             "`dissimilar`, whose pairs are all linked); precision counts every linked pair.",
             "", f"Command: `{command}` (machine: {machine()}).", ""]
    if agreement:
        lab, rel = agreement.get("label", {}), agreement.get("relation_when_both_same", {})
        lines += [f"Readers: {agreement.get('pairs_labelled_by_both', '?')} pairs; label agreement "
                  f"{lab.get('agree', '?')}/{lab.get('n', '?')}, Cohen's kappa {lab.get('kappa', '?')}; "
                  f"relation agreement (both same) {rel.get('agree', '?')}/{rel.get('n', '?')}, kappa "
                  f"{rel.get('kappa', '?')}; {agreement.get('disagreements', {}).get('total', '?')} disagreements resolved.", ""]
    h = report["headline"]
    lines += ["| measure | value | 95% interval | target |", "|---|---|---|---|"]
    for name in ("recall", "precision", "extension_recall", "digest_flagged", "different_flagged"):
        r, t = h[name], report["targets"].get(name)
        value = f"{r['rate']:.3f} ({r['k']}/{r['n']})" if r["n"] else "-"
        ci = f"{r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}" if r["n"] else ""
        target = f"{t['op']} {t['value']}" + {True: " (met)", False: " (not met)", None: ""}[t["met"]] if t else ""
        lines.append(f"| {name.replace('_', ' ')} | {value} | {ci} | {target} |")
    if not h["digest_flagged"]["n"]:
        lines += ["", "No pair of this half was read as a digest (an earlier item among other, unrelated items), "
                  "so the digest target is measured on the planted roundups ([above](#excerpt-reposts-and-roundups-"
                  "reported-separately))."]
    lines += ["", "| stratum | pairs | recall (same linked) | precision (linked same) | different linked |",
              "|---|---|---|---|---|"]

    def cell(r: dict) -> str:
        return f"{r['rate']:.2f} ({r['k']}/{r['n']})" if r["n"] else "-"

    lines.append(f"| all | {report['overall']['pairs']} | {cell(report['overall']['recall'])} | "
                 f"{cell(report['overall']['precision'])} | {cell(report['overall']['flagged'])} |")
    for field, groups in report["by"].items():
        for k, s in groups.items():
            lines.append(f"| {field} = {k} | {s['pairs']} | {cell(s['recall'])} | {cell(s['precision'])} | "
                         f"{cell(s['flagged'])} |")
    if "relation" in report:
        agreement = report["relation"]
        engines = relation_columns(agreement)
        lines += ["", "The relation the engine gives (`match.relation`, what auditors read) against the readers', "
                  "over the `same` pairs it links directly (the later's match names the earlier): "
                  f"{cell(agreement['agree'])}"
                  + (f", 95% interval {agreement['agree']['ci95'][0]:.2f}-{agreement['agree']['ci95'][1]:.2f}"
                     if agreement["agree"]["n"] else "") + ".",
                  "", "| reader / engine | " + " | ".join(engines) + " |",
                  "|---|" + "---|" * len(engines)]
        for reader, row in agreement["confusion"].items():
            lines.append(f"| {reader} | " + " | ".join(str(row.get(e, 0)) for e in engines) + " |")
    guide_path = os.path.join(HERE, "natural", "GUIDE.md")
    if os.path.exists(guide_path):
        with open(guide_path, encoding="utf-8") as fh:
            guide = fh.read().splitlines()
        # Two heading levels down, under this section.
        lines += [""] + ["##" + g if g.startswith("#") else g for g in guide]
    lines.append(DOC_END)
    return "\n".join(lines) + "\n"


def replace_doc_section(doc: str, section: str) -> str:
    """`doc` with its natural-pairs section replaced by `section` (appended if it has none)."""
    if DOC_BEGIN in doc and DOC_END in doc:
        start, end = doc.index(DOC_BEGIN), doc.index(DOC_END) + len(DOC_END)
        return doc[:start] + section.rstrip("\n") + doc[end:]
    return doc.rstrip("\n") + "\n\n" + section


def write_doc_section(report: dict, args) -> None:
    agreement_path = os.path.join(os.path.dirname(args.labels), "agreement.json")
    agreement = json.load(open(agreement_path, encoding="utf-8")) if os.path.exists(agreement_path) else None
    command = "python3 scripts/eval/natural.py score --run --split " + report["split"] + " --write-doc"
    if report.get("config", "built-in defaults") != "built-in defaults":
        command += " --config " + report["config"].replace(os.path.expanduser("~"), "~")
    doc = "# newsdedup quality report\n"
    if os.path.exists(DOC):
        with open(DOC, encoding="utf-8") as fh:
            doc = fh.read()
    with open(DOC, "w", encoding="utf-8") as fh:
        fh.write(replace_doc_section(doc, doc_section(report, agreement, command)))
    print(f"doc: {DOC}", file=sys.stderr)


# ----------------------------------------------------------------------------- CLI

def parse_args(argv: list[str]) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--corpus", default=CORPUS, help="dir of corpus *.jsonl (default: %(default)s)")
    common.add_argument("--pairs", default=PAIRS, help="pairs file (default: %(default)s)")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select", parents=[common], help="stratified silver pairs (+ engine pairs) -> pairs.jsonl")
    s.add_argument("--silver", default=SILVER)
    s.add_argument("--engine-output", help="a `newsdedup batch` output over the natural stream: add up to "
                                           f"{ENGINE_MAX} pairs it links that the silver file lacks")
    s.add_argument("--contained", type=int, default=0,
                   help="hold this many pairs (in all) whose earlier text is whole in the later one and "
                        "under 55%% of its length (updates and digests), stratified by that share")
    s.add_argument("--dissimilar-output", help="a `newsdedup batch` output over the natural stream: add every pair "
                                               "it links whose char 5-gram Jaccard < 0.5 and containment < 0.8 "
                                               "(what the planted set's judge cannot confirm)")
    s = sub.add_parser("stream", parents=[common], help="write the natural stream (plain corpus, stream order)")
    s.add_argument("--out", required=True)
    s = sub.add_parser("packets", parents=[common], help="blind reading packets + empty label files (outside the repo)")
    s.add_argument("--out", required=True)
    s.add_argument("--readers", type=int, default=2)
    s.add_argument("--size", type=int, default=PACKET_SIZE, help="pairs per packet (about)")
    s.add_argument("--new", action="store_true",
                   help="only pairs not yet in a packet under --out, numbered after the existing ones")
    s = sub.add_parser("merge", parents=[common], help="two readers' labels -> agreement, disagreements, labels.jsonl")
    s.add_argument("--a", default="/tmp/natural-packets/reader_a", help="reader A's label dir")
    s.add_argument("--b", default="/tmp/natural-packets/reader_b", help="reader B's label dir")
    s.add_argument("--resolved", default=RESOLVED)
    s.add_argument("--disagreements", default=DISAGREEMENTS)
    s.add_argument("--labels", default=LABELS)
    s.add_argument("--agreement", default=AGREEMENT)
    s = sub.add_parser("score", parents=[common],
                       help="recall/precision per stratum of a batch run over the natural stream")
    s.add_argument("--output", help="`newsdedup batch` output JSONL over the natural stream")
    s.add_argument("--run", action="store_true", help="write the stream, run --bin into a fresh index, score")
    s.add_argument("--bin", default=DEFAULT_BIN)
    s.add_argument("--config", help="--run: a newsdedup TOML configuration for the batch run (its "
                                    "NEWSDEDUP_CONFIG); default: the one in the environment, else built-in")
    s.add_argument("--workdir", default="/tmp/newsdedup-natural", help="--run: stream and output (outside git)")
    s.add_argument("--labels", default=LABELS)
    s.add_argument("--split", choices=("test", "tune", "all"), default="test")
    s.add_argument("--json", action="store_true")
    s.add_argument("--list", choices=LIST_KINDS,
                   help="--split tune only: also list the pairs one by one (missed: same, not linked; false: "
                        "different, linked; errors: both; all), with both articles' decisions and the reader's reason")
    s.add_argument("--write-doc", action="store_true",
                   help="replace the natural-pairs section of docs/QUALITY.md with this table")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if getattr(args, "readers", 1) < 1:
        raise SystemExit("--readers must be >= 1")
    return {"select": cmd_select, "stream": cmd_stream, "packets": cmd_packets, "merge": cmd_merge,
            "score": cmd_score}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
