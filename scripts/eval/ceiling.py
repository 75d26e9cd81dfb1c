#!/usr/bin/env python3
"""How far lexical similarity can go on the natural pairs: a supervised ceiling for the engine.

The engine decides from a 64-bit simhash and a 32-bin sketch of the earlier article. This script
asks what *any* lexical rule could reach on the readers' labels (scripts/eval/natural/): it
measures each pair exactly on both full texts (no sketch, no index), trains classifiers on the
tuning half with those measures, and reports the test half (without the pairs chosen from the
engine's links, natural.LINKED_SOURCES). If a classifier that has seen the
labels and both whole texts cannot reach a target, no rule over a fingerprint of the earlier text
can either.

Measures per pair (earlier E, later L; texts without whitespace and punctuation):

  jac, l_in_e, e_in_l   character 4-gram Jaccard and both containments
  lenr                  log(len L / len E), the direction and size of the change
  cos                   cosine of the two TF-IDF word vectors (jieba words of 2+ characters,
                        IDF from every 7th corpus article)
  heavy_e, heavy_l      share of E's (L's) 8 heaviest words found anywhere in the other
  sent_e, sent_l        share of E's (L's) sentences (8+ characters) found verbatim in the other
  num_j, num_diff       Jaccard of the figures (numbers of 2+ digits) and how many differ
  title_j               character bigram Jaccard of the titles

The shorter text's length is left out unless --with-length: the sampled strata make it a proxy
for the label (many `different` pairs are pages of chrome a few dozen characters long), which a
rule for live traffic must not learn.

Models (fixed seeds): logistic regression, a random forest, gradient-boosted trees. For each, the
test half is scored (a) at the threshold that five-fold cross-validation on the tuning half picks
for precision >= 0.97, and, as upper bounds that choose the threshold on the test half itself,
(b) the best recall at precision >= 0.97 and (c) the best precision at recall >= 0.95; (e) the
same two from ten-fold cross-validation over both halves (twice the training pairs, thresholds
picked on the pooled out-of-fold scores: what more labels might buy). With
--output (a `newsdedup batch` output over the natural stream, `natural.py score --run` writes
one) the engine's own test-half point is printed beside them, with each model's best recall at
the engine's precision.

Needs scikit-learn and jieba: run under a Python that has them, or let the script create
~/.cache/newsdedup/eval-venv (pinned versions, from PyPI) and re-run itself there.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import math
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import natural  # noqa: E402

VENV = os.path.expanduser("~/.cache/newsdedup/eval-venv")
REQUIREMENTS = ["scikit-learn==1.9.1", "numpy==2.4.6", "scipy==1.17.1", "jieba==0.42.1"]
TARGET_PRECISION, TARGET_RECALL = 0.97, 0.95
SEED = 20240622
NOT_TEXT = re.compile(r"[\s\W_]+", re.U)
SENTENCE_END = re.compile(r"[。！？!?\n；;]")
FIGURE = re.compile(r"\d{2,}")


# ----------------------------------------------------------------------------- thresholds (stdlib)

def counts(scores: list[float], labels: list[int], threshold: float) -> tuple[int, int, int]:
    """(true positives, false positives, positives) when every score >= threshold is linked."""
    tp = sum(1 for s, y in zip(scores, labels) if s >= threshold and y == 1)
    fp = sum(1 for s, y in zip(scores, labels) if s >= threshold and y == 0)
    return tp, fp, sum(labels)


def operating_points(scores: list[float], labels: list[int]) -> list[tuple[float, float, float]]:
    """(precision, recall, threshold) of every threshold that links something."""
    points = []
    for t in sorted(set(scores)):
        tp, fp, pos = counts(scores, labels, t)
        if tp + fp and pos:
            points.append((tp / (tp + fp), tp / pos, t))
    return points


def best_recall(scores: list[float], labels: list[int], min_precision: float) -> tuple[float, float, float] | None:
    """The threshold with the highest recall whose precision is >= min_precision:
    (recall, precision, threshold), or None when no threshold reaches that precision."""
    best = None
    for precision, recall, t in operating_points(scores, labels):
        if precision >= min_precision and (best is None or recall > best[0]):
            best = (recall, precision, t)
    return best


def best_precision(scores: list[float], labels: list[int], min_recall: float) -> tuple[float, float, float] | None:
    """The threshold with the highest precision whose recall is >= min_recall:
    (precision, recall, threshold), or None."""
    best = None
    for precision, recall, t in operating_points(scores, labels):
        if recall >= min_recall and (best is None or precision > best[0]):
            best = (precision, recall, t)
    return best


# ----------------------------------------------------------------------------- measures

def plain(text: str) -> str:
    return NOT_TEXT.sub("", text)


def grams(text: str, k: int) -> set[str]:
    return {text[i:i + k] for i in range(max(0, len(text) - k + 1))}


def sentences(text: str) -> set[str]:
    return {s for s in (plain(p) for p in SENTENCE_END.split(text)) if len(s) >= 8}


def share(part: set, whole: set) -> float:
    return len(part & whole) / len(part) if part else 0.0


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


class Measures:
    """Exact pair measures over whole texts; word weights from jieba and a corpus IDF."""

    def __init__(self, corpus_dir: str):
        import jieba
        jieba.setLogLevel(60)
        self.cut = jieba.lcut
        df: collections.Counter = collections.Counter()
        n = 0
        for path in sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl"))):
            with open(path, encoding="utf-8") as fh:
                for i, line in enumerate(fh):
                    if i % 7 or not line.strip():
                        continue
                    article = json.loads(line)
                    df.update(set(self.words(article.get("title", "") + "\n" + article.get("content", "")[:3000])))
                    n += 1
        self.df, self.n = df, n

    def words(self, text: str) -> list[str]:
        return [w for w in self.cut(text) if len(w) > 1 and not NOT_TEXT.fullmatch(w)]

    def weights(self, text: str) -> dict[str, float]:
        tf = collections.Counter(self.words(text))
        return {w: (1 + math.log(c)) * (math.log((self.n + 1) / (self.df[w] + 1)) + 1) for w, c in tf.items()}

    def pair(self, earlier: dict, later: dict) -> dict[str, float]:
        te, tl = plain(earlier.get("content", "")), plain(later.get("content", ""))
        ge, gl = grams(te, 4), grams(tl, 4)
        we, wl = self.weights(earlier.get("content", "")), self.weights(later.get("content", ""))
        se, sl = sentences(earlier.get("content", "")), sentences(later.get("content", ""))
        fe, fl = set(FIGURE.findall(earlier.get("content", ""))), set(FIGURE.findall(later.get("content", "")))
        return {
            "jac": jaccard(ge, gl), "l_in_e": share(gl, ge), "e_in_l": share(ge, gl),
            "lenr": math.log((len(tl) + 1) / (len(te) + 1)),
            "shorter_len": math.log(1 + min(len(te), len(tl))),
            "cos": cosine(we, wl), "heavy_e": heavy_share(we, wl), "heavy_l": heavy_share(wl, we),
            "sent_e": share(se, sl), "sent_l": share(sl, se),
            "num_j": jaccard(fe, fl), "num_diff": float(len(fe ^ fl)),
            "title_j": jaccard(grams(plain(earlier.get("title", "")), 2), grams(plain(later.get("title", "")), 2)),
        }


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    dot = sum(a[w] * b[w] for w in a.keys() & b.keys())
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def heavy_share(a: dict[str, float], b: dict[str, float], k: int = 8) -> float:
    top = sorted(a, key=lambda w: (-a[w], w))[:k]
    return sum(1 for w in top if w in b) / len(top) if top else 0.0


# ----------------------------------------------------------------------------- run

def ensure_libraries() -> None:
    """Re-run under the eval venv when scikit-learn or jieba is missing (created on first use)."""
    try:
        import jieba  # noqa: F401
        import sklearn  # noqa: F401
        return
    except ImportError:
        pass
    python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        raise SystemExit(f"{VENV} lacks scikit-learn or jieba: remove it and run again")
    if not os.path.exists(python):
        print(f"creating {VENV} ({', '.join(REQUIREMENTS)})", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *REQUIREMENTS], check=True)
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


def load_articles(corpus_dir: str, ids: set[str]) -> dict[str, dict]:
    found = {}
    for path in sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    article = json.loads(line)
                    if article.get("id") in ids:
                        found[article["id"]] = article
    return found


def models():
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    return {
        "logistic regression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
        "random forest": RandomForestClassifier(n_estimators=500, min_samples_leaf=2, random_state=SEED),
        "gradient-boosted trees": GradientBoostingClassifier(max_depth=2, n_estimators=200, random_state=SEED),
    }


def cross_validated(model, x, y, folds: int = 5) -> list[float]:
    """Out-of-fold probabilities, averaged over five shuffles of `folds` folds."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    total = np.zeros(len(y))
    for shuffle in range(5):
        split = StratifiedKFold(folds, shuffle=True, random_state=SEED + shuffle)
        total += cross_val_predict(model, x, y, cv=split, method="predict_proba")[:, 1]
    return list(total / 5)


def engine_point(output: str, pairs: list[dict], labels: dict[str, dict]) -> tuple[int, int, int]:
    """(same pairs linked, different pairs linked, same pairs) of a batch output on the test half."""
    uf, _ = natural.chains(output)
    tp = fp = pos = 0
    for p in pairs:
        same = labels[p["pair"]]["label"] == "same"
        linked = uf.find(p["earlier"]) == uf.find(p["later"])
        pos += same
        tp += same and linked
        fp += (not same) and linked
    return tp, fp, pos


def fmt(value: tuple | None, names: tuple[str, str]) -> str:
    if value is None:
        return "unreachable"
    return f"{names[0]} {value[0]:.3f}, {names[1]} {value[1]:.3f}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=natural.CORPUS)
    ap.add_argument("--pairs", default=natural.PAIRS)
    ap.add_argument("--labels", default=natural.LABELS)
    ap.add_argument("--output", help="a `newsdedup batch` output over the natural stream: print the engine's point")
    ap.add_argument("--with-length", action="store_true",
                    help="also give the models the shorter text's length (a proxy for the label in these strata)")
    args = ap.parse_args(argv)
    if not glob.glob(os.path.join(args.corpus, "*.jsonl")):
        raise SystemExit(f"no corpus under {args.corpus}: the ceiling needs the texts (NEWSDEDUP_SHARED)")
    ensure_libraries()
    import numpy as np

    pairs = natural.read_jsonl(args.pairs)
    labels = {rec["pair"]: rec for rec in natural.read_jsonl(args.labels)}
    # Pairs chosen from the engine's own links are left out, as from natural.py's recall.
    pairs = [p for p in pairs if p["pair"] in labels and p["source"] not in natural.LINKED_SOURCES]
    articles = load_articles(args.corpus, {p["earlier"] for p in pairs} | {p["later"] for p in pairs})
    pairs = [p for p in pairs if p["earlier"] in articles and p["later"] in articles]
    print(f"measuring {len(pairs)} pairs on their whole texts ...", file=sys.stderr)
    measures = Measures(args.corpus)
    rows = [measures.pair(articles[p["earlier"]], articles[p["later"]]) for p in pairs]
    names = sorted(k for k in rows[0] if args.with_length or k != "shorter_len")

    def half(split: str):
        keep = [i for i, p in enumerate(pairs) if p["split"] == split]
        x = np.array([[rows[i][k] for k in names] for i in keep])
        y = np.array([int(labels[pairs[i]["pair"]]["label"] == "same") for i in keep])
        return x, y, [pairs[i] for i in keep]

    x_tune, y_tune, _ = half("tune")
    x_test, y_test, test_pairs = half("test")
    print(f"tuning half {len(y_tune)} pairs ({int(y_tune.sum())} same), test half {len(y_test)} "
          f"({int(y_test.sum())} same); measures: {', '.join(names)}")
    engine = engine_point(args.output, test_pairs, labels) if args.output else None
    if engine:
        tp, fp, pos = engine
        print(f"engine (test half): recall {tp / pos:.3f} ({tp}/{pos}), precision {tp / max(1, tp + fp):.3f} "
              f"({tp}/{tp + fp})")
    for name, model in models().items():
        tuned = best_recall(cross_validated(model, x_tune, y_tune), list(y_tune), TARGET_PRECISION)
        model.fit(x_tune, y_tune)
        scores, truth = list(model.predict_proba(x_test)[:, 1]), list(y_test)
        print(f"\n{name}")
        if tuned is None:
            print(f"  (a) tuning half: no threshold reaches precision {TARGET_PRECISION} in cross-validation")
        else:
            tp, fp, pos = counts(scores, truth, tuned[2])
            print(f"  (a) threshold from the tuning half (CV recall {tuned[0]:.3f} at precision >= "
                  f"{TARGET_PRECISION}): test recall {tp / pos:.3f}, precision {tp / max(1, tp + fp):.3f}")
        print(f"  (b) best test recall at precision >= {TARGET_PRECISION}: "
              + fmt(best_recall(scores, truth, TARGET_PRECISION), ("recall", "precision")))
        print(f"  (c) best test precision at recall >= {TARGET_RECALL}: "
              + fmt(best_precision(scores, truth, TARGET_RECALL), ("precision", "recall")))
        if engine:
            tp, fp, _ = engine
            print("  (d) best test recall at the engine's precision: "
                  + fmt(best_recall(scores, truth, tp / max(1, tp + fp)), ("recall", "precision")))
        pooled = cross_validated(model, np.vstack([x_tune, x_test]), np.concatenate([y_tune, y_test]), folds=10)
        pooled_truth = list(np.concatenate([y_tune, y_test]))
        print(f"  (e) both halves, 10-fold cross-validation: best recall at precision >= {TARGET_PRECISION}: "
              + fmt(best_recall(pooled, pooled_truth, TARGET_PRECISION), ("recall", "precision"))
              + f"; best precision at recall >= {TARGET_RECALL}: "
              + fmt(best_precision(pooled, pooled_truth, TARGET_RECALL), ("precision", "recall")))
        importance = getattr(model, "feature_importances_", None)
        if importance is not None:
            ranked = sorted(zip(importance, names), reverse=True)[:5]
            print("  most used: " + ", ".join(f"{n} {v:.2f}" for v, n in ranked))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
