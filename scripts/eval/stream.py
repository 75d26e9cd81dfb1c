"""Build the labelled evaluation stream: the corpus in a fixed order with generated reposts.

Why this shape: the detector runs on a live feed, where a repost arrives some time after its
original, mixed with unrelated news. So reposts are inserted a log-uniform distance after their
original (sometimes right after, usually tens to thousands of articles later), and the labels
(original id, length class, edits) live in a separate file so the detector never sees them.
Corpus text is only read here and written to the workdir (outside the repository).
"""

from __future__ import annotations

import glob
import json
import math
import os
import random
import re
from dataclasses import dataclass

from edits import KINDS, STRETCH_KINDS, Context, SITES, draw_kinds, make_extension, make_repost, make_roundup

LONG_CHARS = 500  # content length (whitespace removed) separating "long" from "short"
MAX_GAP = 5000    # largest original -> repost distance, in corpus articles


def content_len(content: str) -> int:
    """Length used for the long/short split: characters without any whitespace."""
    return len(re.sub(r"\s+", "", content))


def length_class(content: str) -> str:
    return "long" if content_len(content) >= LONG_CHARS else "short"


def load_corpus(corpus_dir: str, limit: int | None = None) -> list[dict]:
    """All corpus files interleaved proportionally, in a fixed order.

    Interleaving (article i of a file of n goes at position i/n) makes any prefix a mix of all
    sources, so `--limit` quick runs still see People's Daily templates, Sina channel copies and
    iNews noise. Order inside a file is kept: natural duplicates stay in their original order.
    """
    keyed = []
    for file_no, path in enumerate(sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl")))):
        with open(path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        keyed.extend(((i + 0.5) / len(rows), file_no, i, row) for i, row in enumerate(rows))
    if not keyed:
        raise SystemExit(f"no *.jsonl corpus files under {corpus_dir}")
    keyed.sort(key=lambda k: k[:3])
    articles = [k[3] for k in keyed]
    return articles[:limit] if limit else articles


@dataclass
class StreamConfig:
    seed: int = 20240601
    originals: int = 2000          # total; half long, half short
    second_repost_rate: float = 0.1
    traditional: bool = False
    traditional_rate: float = 0.2  # share of originals that also get a traditional repost
    excerpts: bool = False
    excerpt_rate: float = 0.3      # share of originals that also get an excerpt repost
    roundup_rate: float = 0.4      # share of short originals that also appear in a later roundup
    extension_rate: float = 0.3    # share of originals that also get an extension (original + new text)


def sample_originals(articles: list[dict], n_total: int, rng: random.Random) -> list[int]:
    """Indices of n_total/2 long and n_total/2 short originals (fewer if the corpus lacks them)."""
    by_class: dict[str, list[int]] = {"long": [], "short": []}
    for i, art in enumerate(articles):
        by_class[length_class(art["content"])].append(i)
    picked: list[int] = []
    for cls in ("long", "short"):
        pool = by_class[cls]
        picked.extend(rng.sample(pool, min(len(pool), n_total // 2)))
    return sorted(picked)


def draw_gap(rng: random.Random) -> int:
    """Log-uniform in [1, MAX_GAP]: median ~70 articles, ~10% within 2 articles of the original."""
    return int(math.exp(rng.uniform(0.0, math.log(MAX_GAP))))


def _repost_article(orig: dict, new_id: str, title: str, content: str, rng: random.Random) -> dict:
    """A repost as the reposting site would publish it: new id, url and source, same category."""
    site = rng.choice(SITES)
    return {"id": new_id, "title": title, "content": content, "source": site,
            "url": f"https://repost{SITES.index(site)}.example.com/a/{rng.randrange(10**9):09d}.html",
            "category": orig.get("category", "")}


def _generate_one(orig: dict, kinds: list[str], rng: random.Random, ctx: Context,
                  pool: tuple[str, ...]) -> tuple[str, str, list[str], dict]:
    """Apply the drawn kinds; redraw (up to 5 times) if none fitted so a repost is never a pure copy."""
    for _ in range(5):
        title, content, applied, details = make_repost(orig.get("title", ""), orig["content"],
                                                       kinds, rng, ctx)
        if applied:
            return title, content, applied, details
        kinds = draw_kinds(rng, len(kinds), pool)
    return title, content, applied, details


def build_stream(articles: list[dict], cfg: StreamConfig) -> tuple[list[dict], list[dict]]:
    """Return (stream articles, labels). Deterministic for a given corpus order and cfg.seed."""
    rng = random.Random(cfg.seed)
    donors = list(range(len(articles)))

    def donor(r: random.Random) -> tuple[str, str]:
        art = articles[r.choice(donors)]
        return art["id"], art["content"]

    ctx = Context(donor=donor)
    originals = sample_originals(articles, cfg.originals, rng)
    pending: list[tuple[int, int, dict, dict]] = []  # (insert after index, seq, article, label)
    for seq_base, oi in enumerate(originals):
        orig = articles[oi]
        plans = [("std", 0)]
        if rng.random() < cfg.second_repost_rate:
            plans.append(("std", 1))
        if cfg.traditional and rng.random() < cfg.traditional_rate:
            plans.append(("trad", len(plans)))
        for plan, k in plans:
            if plan == "std":
                pool, kinds = KINDS, draw_kinds(rng, rng.choice((1, 2, 3)))
            else:
                pool = KINDS
                kinds = list(STRETCH_KINDS) + draw_kinds(rng, rng.choice((0, 1)))
            title, content, applied, details = _generate_one(orig, kinds, rng, ctx, pool)
            new_id = f"repost:{orig['id']}:{k}"
            gap = draw_gap(rng)
            label = {"id": new_id, "original": orig["id"], "length_class": length_class(orig["content"]),
                     "edits": applied, "n_edits": len([a for a in applied if a not in STRETCH_KINDS]),
                     "stretch": plan == "trad", "class": "traditional" if plan == "trad" else "standard",
                     "gap": gap, "details": details}
            pending.append((min(oi + gap, len(articles) - 1), seq_base * 10 + k,
                            _repost_article(orig, new_id, title, content, rng), label))
    if cfg.excerpts:
        pending.extend(_excerpts_and_roundups(articles, originals, cfg, ctx))
        pending.extend(_extensions(articles, originals, cfg, ctx))
    return _interleave(articles, pending)


def _extensions(articles: list[dict], originals: list[int], cfg: StreamConfig,
                ctx: Context) -> list[tuple[int, int, dict, dict]]:
    """Extensions (the original whole plus a paragraph inserted, or an update appended: one report,
    a duplicate), placed like reposts. Their own random stream, so every other class is the same
    with or without them."""
    rng = random.Random(cfg.seed * 7 + 15)
    pending = []
    for seq_base, oi in enumerate(originals):
        orig = articles[oi]
        if rng.random() >= cfg.extension_rate:
            continue
        made = make_extension(orig["content"], rng, ctx, orig["id"])
        if made is None:
            continue
        content, details = made
        new_id = f"extension:{orig['id']}"
        gap = draw_gap(rng)
        label = {"id": new_id, "original": orig["id"], "length_class": length_class(orig["content"]),
                 "edits": [details["kind"]], "n_edits": 1, "stretch": True, "class": "extension",
                 "gap": gap, "details": {"extension": details}}
        pending.append((min(oi + gap, len(articles) - 1), seq_base * 10 + 9,
                        _repost_article(orig, new_id, orig.get("title", ""), content, rng), label))
    return pending


def _excerpts_and_roundups(articles: list[dict], originals: list[int], cfg: StreamConfig,
                           ctx: Context) -> list[tuple[int, int, dict, dict]]:
    """Excerpt reposts (a duplicate: nothing new) and roundups (an earlier short item plus other
    articles' paragraphs: something new, must stay unique), placed like reposts. Their own random
    stream, so the standard reposts are the same with or without them."""
    rng = random.Random(cfg.seed * 7 + 14)
    pending = []
    for seq_base, oi in enumerate(originals):
        orig = articles[oi]
        cls = length_class(orig["content"])
        if rng.random() < cfg.excerpt_rate:
            title, content, applied, details = make_repost(orig.get("title", ""), orig["content"],
                                                           ["excerpt"], rng, ctx)
            if applied:
                new_id = f"excerpt:{orig['id']}"
                gap = draw_gap(rng)
                label = {"id": new_id, "original": orig["id"], "length_class": cls, "edits": applied,
                         "n_edits": 1, "stretch": True, "class": "excerpt", "gap": gap, "details": details}
                pending.append((min(oi + gap, len(articles) - 1), seq_base * 10 + 7,
                                _repost_article(orig, new_id, title, content, rng), label))
        if cls == "short" and rng.random() < cfg.roundup_rate:
            title, content, details = make_roundup(orig.get("title", ""), orig["content"], rng, ctx,
                                                   orig["id"])
            new_id = f"roundup:{orig['id']}"
            gap = draw_gap(rng)
            label = {"id": new_id, "original": orig["id"], "length_class": cls, "edits": ["roundup"],
                     "n_edits": 1, "stretch": True, "class": "roundup", "gap": gap,
                     "details": {"roundup": details}}
            pending.append((min(oi + gap, len(articles) - 1), seq_base * 10 + 8,
                            _repost_article(orig, new_id, title, content, rng), label))
    return pending


def _interleave(articles: list[dict], pending: list[tuple[int, int, dict, dict]]) -> tuple[list[dict], list[dict]]:
    """Merge reposts into the corpus order: each goes right after corpus article `insert after`."""
    pending.sort(key=lambda p: (p[0], p[1]))
    stream: list[dict] = []
    labels: list[dict] = []
    j = 0
    for i, art in enumerate(articles):
        stream.append(art)
        while j < len(pending) and pending[j][0] == i:
            _, _, rep, label = pending[j]
            label["position"] = len(stream)
            stream.append(rep)
            labels.append(label)
            j += 1
    return stream, labels


def write_jsonl(path: str, rows: list[dict]) -> None:
    """Compact, key-order-preserving JSONL (byte-identical for identical input)."""
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
