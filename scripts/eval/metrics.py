"""Precision/recall tables from judged outcomes, plus the two side measures.

Why the breakdowns: a single recall number hides which repost behaviour the fingerprint cannot
absorb (truncation and markup behave very differently from a retitle), and precision on short
articles is where simhash usually fails first. Side measures: recall on the corpus's own natural
near-duplicates (silver pairs) and the false-positive rate on templated hard negatives.
"""

from __future__ import annotations

import json
import random
import statistics
from collections import defaultdict

from edits import EXCERPT_KINDS, EXTENSION_KINDS, KINDS, STRETCH_KINDS
from judge import CONTAINMENT_MIN, CORRECT, JACCARD_MIN, Judge, Outcome, is_templated, title_skeleton

MAX_EXAMPLES = 8


class Tally:
    """hits/total per group name, rendered as {"n", "hits", "rate"}."""

    def __init__(self):
        self.hits: dict[str, int] = defaultdict(int)
        self.total: dict[str, int] = defaultdict(int)

    def add(self, group: str, hit: bool) -> None:
        self.total[group] += 1
        self.hits[group] += int(hit)

    def table(self, order: list[str] | None = None) -> dict[str, dict]:
        keys = order if order is not None else sorted(self.total)
        return {k: {"n": self.total[k], "hits": self.hits[k],
                    "rate": round(self.hits[k] / self.total[k], 4) if self.total[k] else None}
                for k in keys if self.total.get(k)}


def hamming(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else (a ^ b).bit_count()


def _median(values: list[int]) -> float | None:
    return statistics.median(values) if values else None


def label_class(label: dict) -> str:
    """standard | traditional | excerpt | roundup | extension (labels without a class predate the
    last three)."""
    return label.get("class") or ("traditional" if label["stretch"] else "standard")


def repost_recall(judge: Judge, outcomes: list[Outcome], stretch: bool = False, cls: str | None = None) -> dict:
    """Recall of generated reposts: flagged duplicate of something in the right family.

    "Right family" = the original, another repost of it, or an article near-identical to it.
    A repost with several edits counts under each of its kinds; `single` isolates kinds that
    were the only edit, which is the cleanest per-kind signal. `cls` picks a label class
    (`label_class`); without it, `stretch` picks standard (False) or traditional (True).
    """
    cls = cls or ("traditional" if stretch else "standard")
    by_id = {o.id: o for o in outcomes}
    fp_of = {o.id: o.fingerprint for o in outcomes}
    overall, by_len, by_kind, single, by_n = Tally(), Tally(), Tally(), Tally(), Tally()
    dist_by_kind: dict[str, list[int]] = defaultdict(list)
    wrong_match = 0
    misses = []
    for lab in judge.labels.values():
        if label_class(lab) != cls:
            continue
        out = by_id.get(lab["id"])
        verdict = judge.pair_verdict(lab["id"], out.match_id) if out and out.decision == "duplicate" else None
        hit = verdict in CORRECT
        wrong_match += int(verdict is not None and verdict not in CORRECT)
        d = hamming(fp_of.get(lab["id"]), fp_of.get(lab["original"]))
        kinds = lab["edits"]
        overall.add("all", hit)
        by_len.add(lab["length_class"], hit)
        by_n.add(str(lab["n_edits"]), hit)
        for kind in kinds:
            by_kind.add(kind, hit)
            if d is not None:
                dist_by_kind[kind].append(d)
        if len(kinds) == 1:
            single.add(kinds[0], hit)
        if not hit and len(misses) < 2000:
            misses.append({"id": lab["id"], "original": lab["original"], "edits": kinds,
                           "length_class": lab["length_class"], "distance_to_original": d,
                           "decision": out.decision if out else "missing"})
    kind_order = list(KINDS) + list(STRETCH_KINDS) + list(EXCERPT_KINDS) + list(EXTENSION_KINDS)
    return {"overall": overall.table()["all"] if overall.total else None,
            "by_length": by_len.table(["long", "short"]),
            "by_kind": by_kind.table(kind_order), "by_kind_single": single.table(kind_order),
            "by_n_edits": by_n.table(),
            "median_distance_by_kind": {k: _median(dist_by_kind[k]) for k in kind_order if dist_by_kind[k]},
            "wrong_match": wrong_match,
            "misses_examples": _spread(misses)}


def excerpt_recall(judge: Judge, outcomes: list[Outcome]) -> dict:
    """Recall of excerpt reposts, plus by source line and by the share of the original kept."""
    rec = repost_recall(judge, outcomes, cls="excerpt")
    by_id = {o.id: o for o in outcomes}
    by_source, by_kept = Tally(), Tally()
    for lab in judge.labels.values():
        if label_class(lab) != "excerpt":
            continue
        out = by_id.get(lab["id"])
        hit = bool(out and out.decision == "duplicate"
                   and judge.pair_verdict(lab["id"], out.match_id) in CORRECT)
        det = lab["details"].get("excerpt", {})
        by_source.add("with source line" if det.get("source_line") else "without source line", hit)
        kept = det.get("kept_frac", 0.0)
        by_kept.add("kept < 40% of the characters" if kept < 0.4 else
                    "kept 40-60%" if kept <= 0.6 else "kept > 60%", hit)
    rec["by_source_line"] = by_source.table(["without source line", "with source line"])
    rec["by_kept"] = by_kept.table(["kept < 40% of the characters", "kept 40-60%", "kept > 60%"])
    return rec


def roundups(judge: Judge, outcomes: list[Outcome]) -> dict:
    """Roundups (an earlier short item + other articles' paragraphs) flagged as duplicates: each
    one is a mistake, whatever it was matched to."""
    by_id = {o.id: o for o in outcomes}
    overall, by_len = Tally(), Tally()
    flagged = []
    for lab in judge.labels.values():
        if label_class(lab) != "roundup":
            continue
        out = by_id.get(lab["id"])
        hit = bool(out and out.decision == "duplicate")
        overall.add("all", hit)
        by_len.add(lab["length_class"], hit)
        if hit:
            flagged.append({"id": lab["id"], "match": out.match_id, "distance": out.distance,
                            "item_matched": judge.root(out.match_id or "") == lab["original"],
                            "added_frac": lab["details"]["roundup"]["added_frac"]})
    return {"overall": overall.table().get("all"), "flagged_examples": _spread(flagged)}


def _spread(rows: list[dict], n: int = MAX_EXAMPLES) -> list[dict]:
    """A deterministic, evenly spaced handful of examples (not just the first few)."""
    if len(rows) <= n:
        return rows
    step = len(rows) / n
    return [rows[int(i * step)] for i in range(n)]


def precision(judge: Judge, outcomes: list[Outcome]) -> dict:
    """Precision over every flagged duplicate (stretch reposts excluded), with FP examples."""
    overall, by_len, by_type = Tally(), Tally(), Tally()
    verdicts = defaultdict(int)
    fps = []
    for o in outcomes:
        if o.decision != "duplicate" or judge.labels.get(o.id, {}).get("stretch"):
            continue
        verdict = judge.pair_verdict(o.id, o.match_id)
        verdicts[verdict] += 1
        ok = verdict in CORRECT
        overall.add("all", ok)
        by_len.add(judge.length_class(o.id), ok)
        by_type.add("repost" if o.id in judge.labels else "corpus", ok)
        if not ok:
            fps.append(_fp_row(judge, o))
    return {"overall": overall.table().get("all"), "by_length": by_len.table(["long", "short"]),
            "by_flagged_type": by_type.table(["repost", "corpus"]), "verdicts": dict(sorted(verdicts.items())),
            "false_positives": len(fps), "fp_examples": _spread(fps),
            "templated_fp": sum(1 for r in fps if r["templated"]),
            "templated_fp_examples": _spread([r for r in fps if r["templated"]])}


def _fp_row(judge: Judge, o: Outcome) -> dict:
    """Ids, titles, overlap and distance of a wrong flag (titles only: no article text)."""
    x, y = o.id, o.match_id
    row = {"id": x, "match": y, "distance": o.distance,
           "title": judge.articles[x].get("title", ""), "match_title": None,
           "jaccard": None, "containment": None, "templated": None}
    if y in judge.articles:
        jac, cont = judge.similarity(x, y)
        row.update(match_title=judge.articles[y].get("title", ""), jaccard=round(jac, 3),
                   containment=round(cont, 3),
                   templated=is_templated(row["title"], judge.articles[y].get("title", "")))
    return row


def silver_recall(judge: Judge, outcomes: list[Outcome], silver_path: str | None) -> dict | None:
    """Share of natural near-duplicate pairs (silver file) whose later member got flagged correctly."""
    if not silver_path:
        return None
    by_id = {o.id: o for o in outcomes}
    bands = Tally()
    with open(silver_path, encoding="utf-8") as fh:
        for line in fh:
            pair = json.loads(line)
            a, b = pair["a"], pair["b"]
            if a not in judge.position or b not in judge.position:
                continue
            later = by_id[a if judge.position[a] > judge.position[b] else b]
            ok = (later.decision == "duplicate"
                  and judge.pair_verdict(later.id, later.match_id) in CORRECT)
            bands.add(_silver_band(pair), ok)
    order = ["exact", "J>=0.9", "0.5<=J<0.9", "containment>=0.8 (J<0.5)", "0.3<=J<0.5 (mixed)",
             "J<0.3 (mostly different)"]
    return bands.table(order)


def _silver_band(pair: dict) -> str:
    jac, cont = pair["jaccard_char5"], pair["containment_char5"]
    if pair.get("exact_same_content"):
        return "exact"
    if jac >= 0.9:
        return "J>=0.9"
    if jac >= JACCARD_MIN:
        return "0.5<=J<0.9"
    if cont >= CONTAINMENT_MIN:
        return "containment>=0.8 (J<0.5)"
    return "0.3<=J<0.5 (mixed)" if jac >= 0.3 else "J<0.3 (mostly different)"


def templated_negatives(judge: Judge, max_pairs: int = 20000, seed: int = 0) -> list[tuple[str, str, str]]:
    """Corpus article pairs with templated titles and low char5 overlap: hard negatives.

    Candidates come from blocking on the title skeleton and on 3-char title prefix/suffix (so the
    scan is near-linear), then `is_templated` and the char5 test decide. Returns (a, b, why).
    """
    ids = [i for i in judge.articles if i not in judge.labels]
    blocks: dict[tuple[str, str], list[str]] = defaultdict(list)
    for art_id in ids:
        title = judge.articles[art_id].get("title") or ""
        if len(title) < 4:
            continue
        for key in (("s", title_skeleton(title)), ("p", title[:3]), ("x", title[-3:])):
            blocks[key].append(art_id)
    cands: dict[tuple[str, str], str] = {}
    for members in blocks.values():
        members = members[:1500]
        for i, a in enumerate(members):
            ta = judge.articles[a]["title"]
            for b in members[i + 1:]:
                why = is_templated(ta, judge.articles[b]["title"])
                if why:
                    cands[(a, b) if judge.position[a] < judge.position[b] else (b, a)] = why
    pairs = sorted(cands.items(), key=lambda kv: (judge.position[kv[0][0]], judge.position[kv[0][1]]))
    if len(pairs) > max_pairs:
        pairs = sorted(random.Random(seed).sample(pairs, max_pairs),
                       key=lambda kv: (judge.position[kv[0][0]], judge.position[kv[0][1]]))
    out = []
    for (a, b), why in pairs:
        jac, cont = judge.similarity(a, b)
        if jac < JACCARD_MIN and cont < CONTAINMENT_MIN:
            out.append((a, b, why))
    return out


def templated_rates(judge: Judge, negatives: list[tuple[str, str, str]], outcomes: list[Outcome],
                    thresholds: range) -> dict:
    """FP rate on templated negatives: share of pairs within Hamming k, and direct flags in the run."""
    fp = {o.id: o.fingerprint for o in outcomes}
    by_id = {o.id: o for o in outcomes}
    measured = [(hamming(fp.get(a), fp.get(b)), a, b, why) for a, b, why in negatives]
    measured = [m for m in measured if m[0] is not None]
    dists = [m[0] for m in measured]
    closest = sorted(measured, key=lambda m: (m[0], judge.position[m[2]]))[:MAX_EXAMPLES]
    flagged = [(a, b, why) for a, b, why in negatives
               if by_id[b].decision == "duplicate" and by_id[b].match_id == a]
    examples = [{"id": b, "match": a, "why": why, "title": judge.articles[b].get("title", ""),
                 "match_title": judge.articles[a].get("title", ""),
                 "jaccard": round(judge.similarity(a, b)[0], 3)} for a, b, why in flagged]
    return {"pairs": len(negatives), "with_fingerprints": len(dists),
            "rate_by_threshold": {str(k): round(sum(d <= k for d in dists) / len(dists), 5) if dists else None
                                  for k in thresholds},
            "flagged_in_run": len(flagged), "flagged_examples": _spread(examples),
            "closest_examples": [{"id": b, "match": a, "why": why, "distance": d,
                                  "title": judge.articles[b].get("title", ""),
                                  "match_title": judge.articles[a].get("title", ""),
                                  "jaccard": round(judge.similarity(a, b)[0], 3)} for d, a, b, why in closest],
            "distance_histogram": _histogram(dists)}


def _histogram(dists: list[int]) -> list[int]:
    hist = [0] * 65
    for d in dists:
        hist[d] += 1
    return hist


def distance_histograms(judge: Judge, outcomes: list[Outcome], silver_path: str | None,
                        seed: int, n_random: int = 20000) -> dict[str, list[int]]:
    """Hamming-distance histograms: repost vs original, natural near-dups, random pairs."""
    fp = {o.id: o.fingerprint for o in outcomes}
    reposts = [hamming(fp.get(lab["id"]), fp.get(lab["original"]))
               for lab in judge.labels.values() if label_class(lab) == "standard"]
    natural = []
    if silver_path:
        with open(silver_path, encoding="utf-8") as fh:
            for line in fh:
                pair = json.loads(line)
                if pair["jaccard_char5"] >= JACCARD_MIN:
                    natural.append(hamming(fp.get(pair["a"]), fp.get(pair["b"])))
    corpus = [o.id for o in outcomes if o.id not in judge.labels and o.fingerprint is not None]
    rng = random.Random(seed)
    rand = []
    for _ in range(n_random if len(corpus) > 1 else 0):
        a, b = rng.sample(corpus, 2)
        rand.append(hamming(fp[a], fp[b]))
    return {"repost_vs_original": _histogram([d for d in reposts if d is not None]),
            "natural_near_dups": _histogram([d for d in natural if d is not None]),
            "random_pairs": _histogram(rand)}
