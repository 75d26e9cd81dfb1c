"""Judge `newsdedup batch` output against the generated labels and an independent similarity.

Why an independent measure: the corpus already contains natural near-duplicates (People's Daily
continuation pages, Sina channel copies), so "flagged but not a generated repost" is not
automatically a false positive. A flagged pair counts as correct when it is a generated repost
pair (same family) or when character 5-gram Jaccard >= 0.5 or containment >= 0.8 on the
whitespace-stripped contents, a measure that shares nothing with jieba/TF-IDF/simhash. Where the
natural benchmark's readers have read the pair (scripts/eval/natural/labels.jsonl), their label
decides instead: a rewrite under both bars can be one report, a template sibling over them is not.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from difflib import SequenceMatcher
from dataclasses import dataclass

from stream import length_class

JACCARD_MIN = 0.5
CONTAINMENT_MIN = 0.8
# Verdicts that count a flagged pair (or a found repost) as right.
CORRECT = ("family", "read-same", "near-identical")
_WS = re.compile(r"\s+")


@dataclass
class Outcome:
    """One stream line as the detector decided it."""
    id: str
    decision: str            # unique | duplicate | invalid | missing
    fingerprint: int | None
    match_id: str | None
    distance: int | None


def parse_output(out_path: str, stream: list[dict]) -> tuple[list[Outcome], list[str]]:
    """Align output lines with input lines; returns outcomes and contract violations found.

    The contract says exactly one output line per input line, in order, so a count mismatch or
    an id out of place is reported rather than silently re-aligned.
    """
    problems: list[str] = []
    with open(out_path, encoding="utf-8") as fh:
        lines = [line for line in fh if line.strip()]
    if len(lines) != len(stream):
        problems.append(f"output has {len(lines)} lines for {len(stream)} input lines")
    outcomes = []
    for n, art in enumerate(stream):
        if n >= len(lines):
            outcomes.append(Outcome(art["id"], "missing", None, None, None))
            continue
        obj = json.loads(lines[n])
        dedup = obj.get("dedup") or {}
        decision = dedup.get("decision", "missing")
        if decision != "invalid" and obj.get("id") != art["id"]:
            problems.append(f"line {n + 1}: id {obj.get('id')!r} where {art['id']!r} was expected")
        elif decision != "invalid" and any(obj.get(key) != value for key, value in art.items()):
            problems.append(f"line {n + 1}: input fields not passed through unchanged")
        fp = dedup.get("fingerprint")
        if decision in ("unique", "duplicate") and not re.fullmatch(r"[0-9a-f]{16}", fp or ""):
            problems.append(f"line {n + 1}: fingerprint {fp!r} is not 16 lowercase hex digits")
            fp = None
        match = dedup.get("match") or {}
        if decision == "duplicate" and not match.get("id"):
            problems.append(f"line {n + 1}: duplicate without match.id")
        outcomes.append(Outcome(art["id"], decision, int(fp, 16) if fp else None,
                                match.get("id"), match.get("distance")))
    return outcomes, problems[:50]


def shingles(text: str) -> frozenset[str]:
    """Character 5-grams of the text with all whitespace removed (the whole text if shorter)."""
    s = _WS.sub("", text)
    return frozenset(s[i:i + 5] for i in range(len(s) - 4)) or frozenset([s])


def char5(a: frozenset[str], b: frozenset[str]) -> tuple[float, float]:
    """(Jaccard, containment = |A&B| / min(|A|,|B|)), the same definitions as the silver pairs."""
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter), inter / min(len(a), len(b))


_NUMBERISH = re.compile(r"[0-9０-９〇零一二三四五六七八九十百千万亿两第]+")
_TITLE_NOISE = re.compile(r"[\s\W_]+", re.U)
_COLUMN_TAG = re.compile(r"（[^）]*）|\([^)]*\)|【[^】]*】|\[[^\]]*\]")
SLOT_MAX = 5


def title_skeleton(title: str) -> str:
    """Title with numbers/numerals/第 collapsed to '#' and punctuation dropped."""
    return _NUMBERISH.sub("#", _TITLE_NOISE.sub("", title))


def is_templated(t1: str, t2: str) -> str | None:
    """Why two different titles look like one template filled twice, or None.

    'numbers': equal once numbers/dates are collapsed (…第一次会议 vs …第二次会议).
    'slot': the characters they share in order cover >= 60% of the longer title and the rest is
    one or two substituted runs of 1-5 characters on each side (other names or places in the
    same sentence frame). Pure additions (a site suffix like （图）) are re-titles, not templates.
    Bracketed column tags (（为了民族复兴·英雄烈士谱）) are removed first: articles of one column
    share them but are otherwise unrelated, which is not what "templated" means here.
    """
    a, b = (_TITLE_NOISE.sub("", _COLUMN_TAG.sub("", t)) for t in (t1, t2))
    if a == b or min(len(a), len(b)) < 4:
        return None
    if title_skeleton(a) == title_skeleton(b) and len(title_skeleton(a)) >= 4:
        return "numbers"
    if a[:2] != b[:2] and a[-2:] != b[-2:]:
        return None  # cheap reject: a template keeps its frame at one end at least
    sm = SequenceMatcher(None, a, b, autojunk=False)
    matched = sum(block.size for block in sm.get_matching_blocks())
    runs = [op for op in sm.get_opcodes() if op[0] != "equal"]
    if (matched >= max(4, 0.6 * max(len(a), len(b))) and 1 <= len(runs) <= 2
            and all(tag == "replace" and i2 - i1 <= SLOT_MAX and j2 - j1 <= SLOT_MAX for tag, i1, i2, j1, j2 in runs)):
        return "slot"
    return None


class Judge:
    """Knows the stream, the families and how to decide whether a flagged pair is correct."""

    def __init__(self, stream: list[dict], labels: list[dict], cache_size: int = 4096,
                 readings: dict[frozenset, str] | None = None):
        self.articles = {a["id"]: a for a in stream}
        self.readings = readings or {}
        self.position = {a["id"]: i for i, a in enumerate(stream)}
        self.labels = {lab["id"]: lab for lab in labels}
        self._shingles: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._cache_size = cache_size
        self._pairs: dict[tuple[str, str], tuple[float, float]] = {}

    def root(self, art_id: str) -> str:
        """The original a repost was made from; corpus articles are their own root."""
        lab = self.labels.get(art_id)
        return lab["original"] if lab else art_id

    def length_class(self, art_id: str) -> str:
        return length_class(self.articles[self.root(art_id)]["content"])

    def _sh(self, art_id: str) -> frozenset[str]:
        """LRU-cached shingle sets: the full corpus's sets would not fit in memory at once."""
        got = self._shingles.get(art_id)
        if got is None:
            got = shingles(self.articles[art_id]["content"])
            self._shingles[art_id] = got
            if len(self._shingles) > self._cache_size:
                self._shingles.popitem(last=False)
        else:
            self._shingles.move_to_end(art_id)
        return got

    def similarity(self, x: str, y: str) -> tuple[float, float]:
        """char5 (Jaccard, containment) of two stream articles, memoised per unordered pair."""
        key = (x, y) if x < y else (y, x)
        if key not in self._pairs:
            self._pairs[key] = char5(self._sh(x), self._sh(y))
        return self._pairs[key]

    def near_identical(self, x: str, y: str) -> bool:
        """Independent near-duplicate test on the contents, and on the roots for reposts.

        The root comparison keeps a repost whose markup/truncation lowers its own overlap from
        being held against a detector that matched it to a natural copy of its original.
        """
        for a, b in {(x, y), (self.root(x), self.root(y))}:
            if a == b:
                return True
            jac, cont = self.similarity(a, b)
            if jac >= JACCARD_MIN or cont >= CONTAINMENT_MIN:
                return True
        return False

    def reading(self, x: str, y: str) -> str | None:
        """The readers' label ('same' / 'different') of the pair, or of the reposts' originals."""
        for a, b in ((x, y), (self.root(x), self.root(y))):
            label = self.readings.get(frozenset((a, b)))
            if label:
                return label
        return None

    def pair_verdict(self, x: str, y: str | None) -> str:
        """'family', 'read-same', 'read-different', 'near-identical', 'unknown-match' or 'wrong' for
        X flagged as duplicate of Y."""
        if y is None or y not in self.articles:
            return "unknown-match"
        if self.root(x) == self.root(y):
            return "family"
        read = self.reading(x, y)
        if read:
            return "read-same" if read == "same" else "read-different"
        return "near-identical" if self.near_identical(x, y) else "wrong"


def load_readings(path: str) -> dict[frozenset, str]:
    """The natural benchmark's labels as {frozenset(earlier, later): 'same' | 'different'} (none
    when the file is absent)."""
    readings: dict[frozenset, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    readings[frozenset(rec["pair"].split("|", 1))] = rec["label"]
    except FileNotFoundError:
        pass
    return readings
