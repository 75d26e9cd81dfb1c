#!/usr/bin/env python3
"""Quality harness for newsdedup: generated reposts in the real corpus, judged independently.

Steps (default `all`):
  generate  corpus (fixed order) + reposts of sampled originals -> WORKDIR/stream.jsonl, labels.jsonl
  run       `newsdedup batch` on the stream with a fresh index -> WORKDIR/out-k<K>.jsonl
  judge     recall/precision/templated negatives/threshold sweep -> WORKDIR/report.json (+ SVGs),
            printed report; with --write-doc also docs/QUALITY.md and docs/quality_*.svg

Corpus text only ever goes to WORKDIR (default /tmp/newsdedup-eval), never into the repository.
Standard library only; deterministic for a given --seed and corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the repository tree
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import metrics  # noqa: E402
import report  # noqa: E402
import svgplot  # noqa: E402
import sweep  # noqa: E402
from judge import Judge, load_readings, parse_output  # noqa: E402
from stream import LONG_CHARS, StreamConfig, build_stream, load_corpus, read_jsonl, write_jsonl  # noqa: E402

SHARED = os.environ.get("NEWSDEDUP_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
DEFAULT_BIN = os.environ.get("NEWSDEDUP_BIN",
                             os.path.expanduser("~/.cache/newsdedup/target/release/newsdedup"))
QUICK_LIMIT, QUICK_ORIGINALS = 3000, 300


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", nargs="?", default="all", choices=("all", "generate", "run", "judge"))
    g = p.add_argument_group("stream")
    g.add_argument("--corpus", default=os.path.join(SHARED, "data", "corpus"), help="dir of corpus *.jsonl")
    g.add_argument("--silver", default=os.path.join(SHARED, "data", "labeled", "silver_char5_minhash_pairs.jsonl"),
                   help="silver near-duplicate pairs (natural-duplicate recall, histogram); '' to skip")
    g.add_argument("--seed", type=int, default=20240601)
    g.add_argument("--originals", type=int, default=2000, help="originals to repost, half long, half short")
    g.add_argument("--limit", type=int, default=None, help="use only the first N corpus articles")
    g.add_argument("--second-repost-rate", type=float, default=0.1, help="share of originals reposted twice")
    g.add_argument("--traditional", action="store_true", help="also make Traditional-Chinese reposts (stretch)")
    g.add_argument("--excerpts", action="store_true",
                   help="also make excerpt reposts and extensions (must be caught) and roundups (must stay unique), "
                        "reported separately")
    g.add_argument("--quick", action="store_true",
                   help=f"small run for tests: --limit {QUICK_LIMIT} --originals {QUICK_ORIGINALS}")
    r = p.add_argument_group("run")
    r.add_argument("--bin", default=DEFAULT_BIN, help="newsdedup binary (default: %(default)s)")
    r.add_argument("--config", help="a newsdedup TOML configuration for every run of the binary (its "
                                    "NEWSDEDUP_CONFIG); default: the one in the environment, else built-in")
    r.add_argument("--threshold", type=int, default=3, help="Hamming threshold for the batch run")
    r.add_argument("--workdir", default="/tmp/newsdedup-eval", help="outputs (corpus-derived, keep out of git)")
    j = p.add_argument_group("judge")
    j.add_argument("--sweep", choices=("auto", "model", "batch", "none"), default="auto",
                   help="threshold sweep: replay fingerprints (model), one batch run per k (batch), model "
                        "unless it disagrees with the real run (auto), or skip")
    j.add_argument("--sweep-candidates", choices=("block", "exhaustive"), default="block",
                   help="model index: only candidates sharing a 16-bit block (newsdedup) or all within k")
    j.add_argument("--min-agreement", type=float, default=0.995,
                   help="auto: decision agreement the model needs at the run threshold")
    j.add_argument("--sweep-max", type=int, default=10, help="largest threshold in the sweep")
    j.add_argument("--readings", default=os.path.join(HERE, "natural", "labels.jsonl"),
                   help="editors' labels of corpus pairs (natural.py): where a flagged pair was read, the "
                        "label decides whether it is right, not char 5-gram similarity; '' to judge by "
                        "similarity alone")
    j.add_argument("--check-fingerprint", action="store_true",
                   help="also run `newsdedup fingerprint` and compare with batch fingerprints")
    j.add_argument("--write-doc", action="store_true", help="write docs/QUALITY.md and docs/quality_*.svg")
    args = p.parse_args(argv)
    if args.quick:
        args.limit = args.limit or QUICK_LIMIT
        args.originals = min(args.originals, QUICK_ORIGINALS)
    args.argv = argv
    return args


def paths(args: argparse.Namespace) -> dict[str, str]:
    w = args.workdir
    return {"stream": os.path.join(w, "stream.jsonl"), "labels": os.path.join(w, "labels.jsonl"),
            "meta": os.path.join(w, "stream_meta.json"), "out": os.path.join(w, f"out-k{args.threshold}.jsonl"),
            "run": os.path.join(w, f"run-k{args.threshold}.json"), "report": os.path.join(w, "report.json")}


def step_generate(args: argparse.Namespace) -> None:
    """Write the stream and its labels; refuse to write inside the repository."""
    workdir = os.path.abspath(args.workdir)
    if (workdir + os.sep).startswith(REPO + os.sep) and not (workdir + os.sep).startswith(
            os.path.join(REPO, "target") + os.sep):
        raise SystemExit(f"--workdir {workdir} is inside the repository: corpus text must stay out of git "
                         "(use a dir outside it or under target/)")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    articles = load_corpus(args.corpus, args.limit)
    cfg = StreamConfig(seed=args.seed, originals=args.originals, second_repost_rate=args.second_repost_rate,
                       traditional=args.traditional, excerpts=args.excerpts)
    stream, labels = build_stream(articles, cfg)
    p = paths(args)
    write_jsonl(p["stream"], stream)
    write_jsonl(p["labels"], labels)
    meta = {"seed": args.seed, "originals": args.originals, "limit": args.limit, "traditional": args.traditional,
            "excerpts": args.excerpts,
            "second_repost_rate": args.second_repost_rate, "corpus": os.path.abspath(args.corpus),
            "n_corpus": len(articles), "n_stream": len(stream), "n_labels": len(labels),
            "command": command_line(args)}
    with open(p["meta"], "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=1)
    print(f"generate: {len(articles)} corpus articles + {len(labels)} reposts -> {p['stream']} "
          f"({time.time() - t0:.1f} s)", file=sys.stderr)


def run_batch(binary: str, stream_path: str, out_path: str, index_dir: str, threshold: int) -> dict:
    """One `newsdedup batch` run with a fresh index dir; returns timing and exit status."""
    if os.path.exists(index_dir):
        shutil.rmtree(index_dir)
    os.makedirs(os.path.dirname(index_dir), exist_ok=True)
    cmd = [binary, "batch", "--input", stream_path, "--output", out_path, "--index-dir", index_dir,
           "--threshold", str(threshold)]
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.time() - t0
    shutil.rmtree(index_dir, ignore_errors=True)
    with open(stream_path, encoding="utf-8") as fh:
        n = sum(1 for _ in fh)
    return {"command": shlex.join(cmd), "returncode": proc.returncode, "seconds": round(seconds, 2),
            "articles_per_second": round(n / seconds, 1) if seconds else None,
            "stderr_tail": proc.stderr[-2000:]}


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def check_fingerprints(binary: str, stream_path: str, outcomes) -> dict:
    """`newsdedup fingerprint` must agree with the fingerprints `batch` reported (same algorithm)."""
    proc = subprocess.run([binary, "fingerprint", "--input", stream_path], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": _last_line(proc.stderr) or f"exit {proc.returncode}"}
    fp_cmd = {}
    for line in proc.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            fp_cmd[row.get("id")] = row.get("fingerprint")
    compared = [(o.id, o.fingerprint) for o in outcomes if o.fingerprint is not None]
    differ = [i for i, fp in compared if fp_cmd.get(i) != f"{fp:016x}"]
    return {"compared": len(compared), "differ": len(differ), "differ_examples": differ[:5]}


def step_run(args: argparse.Namespace) -> None:
    if not os.access(args.bin, os.X_OK):
        raise SystemExit(f"binary not found or not executable: {args.bin} (build it or pass --bin)")
    p = paths(args)
    info = run_batch(args.bin, p["stream"], p["out"], os.path.join(args.workdir, "index", f"k{args.threshold}"),
                     args.threshold)
    with open(p["run"], "w", encoding="utf-8") as fh:
        json.dump(info, fh, indent=1)
    print(f"run: k={args.threshold} exit {info['returncode']} in {info['seconds']} s "
          f"({info['articles_per_second']} articles/s)", file=sys.stderr)
    if info["returncode"] != 0:
        raise SystemExit(f"batch failed:\n{info['stderr_tail']}")


def threshold_point(judge: Judge, outcomes, pair_d: list[int], tmpl: dict, k: int) -> dict:
    """Precision/recall at one threshold, from (real or modelled) outcomes."""
    rec = metrics.repost_recall(judge, outcomes)
    prec = metrics.precision(judge, outcomes)
    return {"precision": prec["overall"]["rate"] if prec["overall"] else None,
            "recall": rec["overall"]["rate"],
            "recall_long": rec["by_length"].get("long", {}).get("rate"),
            "recall_short": rec["by_length"].get("short", {}).get("rate"),
            "pair_recall": round(sum(d <= k for d in pair_d) / len(pair_d), 4) if pair_d else None,
            "flagged": prec["overall"]["n"] if prec["overall"] else 0,
            "false_positives": prec["false_positives"],
            "templated_rate": tmpl["rate_by_threshold"].get(str(k))}


def repost_distances(judge: Judge, outcomes) -> list[int]:
    fp = {o.id: o.fingerprint for o in outcomes}
    ds = [metrics.hamming(fp.get(lab["id"]), fp.get(lab["original"]))
          for lab in judge.labels.values() if metrics.label_class(lab) == "standard"]
    return [d for d in ds if d is not None]


def run_sweep(args, judge: Judge, stream: list[dict], outcomes, tmpl: dict) -> dict:
    """Per-threshold precision/recall by the chosen mode (see sweep.py for the model)."""
    if args.sweep == "none":
        return {"mode": "none", "by_threshold": {}}
    pair_d = repost_distances(judge, outcomes)
    model = None
    if args.sweep in ("model", "auto"):
        model = model_sweep(args, judge, outcomes, pair_d, tmpl)
        if args.sweep == "model" or model["agreement"]["decision_agreement"] >= args.min_agreement:
            return model
        print(f"sweep: model agrees on only {model['agreement']['decision_agreement']:.2%} of decisions; "
              "running batch per threshold", file=sys.stderr)
    result = batch_sweep(args, judge, stream, pair_d, tmpl)
    if model is not None:
        result["rejected_model"] = {key: model[key] for key in ("policy", "candidates", "agreement_by_policy")}
    return result


def model_sweep(args, judge: Judge, outcomes, pair_d: list[int], tmpl: dict) -> dict:
    """Replay fingerprints under both index policies; keep the one that reproduces the run best."""
    ids = [o.id for o in outcomes]
    fps = [o.fingerprint for o in outcomes]
    exhaustive = args.sweep_candidates == "exhaustive"
    models = {"index-all": sweep.Model(ids, fps, True, args.sweep_max, exhaustive),
              "uniques-only": sweep.Model(ids, fps, False, args.sweep_max, exhaustive)}
    agreements = {name: sweep.agreement(m.outcomes(args.threshold), outcomes) for name, m in models.items()}
    policy = max(agreements, key=lambda n: (agreements[n]["decision_agreement"] or 0,
                                            agreements[n]["match_agreement"] or 0, n == "uniques-only"))
    points = {str(k): threshold_point(judge, models[policy].outcomes(k), pair_d, tmpl, k)
              for k in range(0, args.sweep_max + 1)}
    return {"mode": "model", "policy": policy, "candidates": args.sweep_candidates,
            "agreement": agreements[policy], "agreement_by_policy": agreements, "by_threshold": points}


def batch_sweep(args, judge: Judge, stream: list[dict], pair_d: list[int], tmpl: dict) -> dict:
    """One real batch run per threshold (fresh index each); exact but 11x the batch time."""
    points = {}
    for k in range(0, args.sweep_max + 1):
        out = os.path.join(args.workdir, f"sweep-k{k}.jsonl")
        info = run_batch(args.bin, paths(args)["stream"], out, os.path.join(args.workdir, "index", f"sweep{k}"), k)
        if info["returncode"] != 0:
            points[str(k)] = {"error": _last_line(info["stderr_tail"]) or f"exit {info['returncode']}"}
            continue
        outs, _ = parse_output(out, stream)
        points[str(k)] = threshold_point(judge, outs, pair_d, tmpl, k)
        print(f"sweep: k={k} {info['seconds']} s", file=sys.stderr)
    return {"mode": "batch", "by_threshold": points}


def step_judge(args: argparse.Namespace) -> dict:
    p = paths(args)
    t0 = time.time()
    stream, labels = read_jsonl(p["stream"]), read_jsonl(p["labels"])
    with open(p["meta"], encoding="utf-8") as fh:
        meta = json.load(fh)
    run_info = {}
    if os.path.exists(p["run"]):
        with open(p["run"], encoding="utf-8") as fh:
            run_info = json.load(fh)
    judge = Judge(stream, labels, readings=load_readings(args.readings) if args.readings else None)
    outcomes, problems = parse_output(p["out"], stream)
    run_info["problems"] = problems
    run_info["decisions"] = {d: sum(o.decision == d for o in outcomes)
                             for d in ("unique", "duplicate", "invalid", "missing")}
    if args.check_fingerprint:
        run_info["fingerprint_check"] = check_fingerprints(args.bin, p["stream"], outcomes)
    silver = args.silver if args.silver and os.path.exists(args.silver) else None
    negatives = metrics.templated_negatives(judge, seed=args.seed)
    tmpl = metrics.templated_rates(judge, negatives, outcomes, range(0, args.sweep_max + 1))
    rep = {"command": command_line(args), "generate_command": meta.get("command"),
           "config": config_summary(args, meta, labels), "run": run_info,
           "recall": metrics.repost_recall(judge, outcomes),
           "precision": metrics.precision(judge, outcomes),
           "stretch_recall": metrics.repost_recall(judge, outcomes, stretch=True) if meta["traditional"] else None,
           "excerpt_recall": metrics.excerpt_recall(judge, outcomes) if meta.get("excerpts") else None,
           "roundups": metrics.roundups(judge, outcomes) if meta.get("excerpts") else None,
           "extension_recall": metrics.repost_recall(judge, outcomes, cls="extension") if meta.get("excerpts") else None,
           "silver_recall": metrics.silver_recall(judge, outcomes, silver),
           "templated": tmpl,
           "histograms": metrics.distance_histograms(judge, outcomes, silver, args.seed)}
    rep["sweep"] = run_sweep(args, judge, stream, outcomes, tmpl)
    rep["judge_seconds"] = round(time.time() - t0, 1)
    write_outputs(args, rep)
    return rep


def command_line(args: argparse.Namespace) -> str:
    """The command as a reader should re-type it (from the repository root)."""
    return shlex.join(["python3", "scripts/eval/quality.py", *args.argv])


def apply_config(args) -> None:
    """--config becomes NEWSDEDUP_CONFIG for every run of the binary (batch, sweep, fingerprint
    check); args.config then names the configuration in effect, so the report can say which."""
    if getattr(args, "config", None):
        if not os.path.isfile(args.config):
            raise SystemExit(f"--config: no such file: {args.config}")
        os.environ["NEWSDEDUP_CONFIG"] = os.path.abspath(args.config)
    args.config = os.environ.get("NEWSDEDUP_CONFIG") or None


def config_summary(args, meta: dict, labels: list[dict]) -> dict:
    """Stream facts + run settings for the report (home dir shortened: the doc is committed)."""
    std = [lab for lab in labels if metrics.label_class(lab) == "standard"]
    originals = {lab["original"]: lab["length_class"] for lab in std}
    n_class = {c: sum(metrics.label_class(lab) == c for lab in labels)
               for c in ("traditional", "excerpt", "roundup", "extension")}
    stream_facts = {k: v for k, v in meta.items() if k != "command"}
    return {**stream_facts, "threshold": args.threshold, "long_chars": LONG_CHARS,
            "bin": args.bin.replace(os.path.expanduser("~"), "~"),
            "config": (args.config or "built-in defaults").replace(os.path.expanduser("~"), "~"),
            "n_reposts": len(std), "n_stretch": n_class["traditional"], "n_excerpts": n_class["excerpt"],
            "n_roundups": n_class["roundup"], "n_extensions": n_class["extension"],
            "originals_long": sum(c == "long" for c in originals.values()),
            "originals_short": sum(c == "short" for c in originals.values()), "sweep": args.sweep}


def charts(rep: dict) -> dict[str, str]:
    """Both SVGs as text: precision/recall vs threshold and distance histograms."""
    pts = rep["sweep"].get("by_threshold", {})
    ks = [int(k) for k, v in pts.items() if not v.get("error")]
    series = [svgplot.Series(name, ks, [pts[str(k)][key] for k in ks], dashed=dashed)
              for name, key, dashed in (("precision", "precision", False), ("recall", "recall", False),
                                        ("recall long", "recall_long", True), ("recall short", "recall_short", True),
                                        ("d(repost,orig)<=k", "pair_recall", True),
                                        ("templated FP rate", "templated_rate", True))]
    k_max = max(ks, default=10)
    thr = svgplot.line_chart("newsdedup: precision / recall vs Hamming threshold", "threshold k (bits)",
                             "rate", series, (0, k_max), (0, 1), list(range(0, k_max + 1)),
                             [i / 10 for i in range(11)],
                             note=f"sweep: {rep['sweep'].get('mode')}; run threshold {rep['config']['threshold']}")
    hist = rep["histograms"]
    hseries = []
    for name, key in (("repost vs original", "repost_vs_original"), ("natural near-dups", "natural_near_dups"),
                      ("templated negatives", None), ("random pairs", "random_pairs")):
        counts = rep["templated"]["distance_histogram"] if key is None else hist[key]
        total = sum(counts)
        if total:
            hseries.append(svgplot.Series(f"{name} (n={total})", list(range(65)),
                                          [c / total for c in counts], markers=False))
    top = max((max(s.ys) for s in hseries), default=1.0)
    top = min(1.0, (int(top * 10) + 1) / 10)
    dist = svgplot.line_chart("Hamming distance between fingerprints", "distance (bits)", "share of pairs",
                              hseries, (0, 64), (0, top), list(range(0, 65, 8)),
                              [round(top * i / 5, 3) for i in range(6)], y_tick_fmt="{:.2f}")
    return {"threshold": thr, "distance": dist}


def write_outputs(args, rep: dict) -> None:
    """report.json + SVGs in the workdir; the doc and docs/ SVGs only with --write-doc."""
    p = paths(args)
    with open(p["report"], "w", encoding="utf-8") as fh:
        json.dump(rep, fh, ensure_ascii=False, indent=1)
    svgs = charts(rep)
    for name, text in svgs.items():
        with open(os.path.join(args.workdir, f"quality_{name}.svg"), "w", encoding="utf-8") as fh:
            fh.write(text)
    print(report.render(rep))
    print(f"report: {p['report']}", file=sys.stderr)
    if args.write_doc:
        docs = os.path.join(REPO, "docs")
        os.makedirs(docs, exist_ok=True)
        for name, text in svgs.items():
            with open(os.path.join(docs, f"quality_{name}.svg"), "w", encoding="utf-8") as fh:
                fh.write(text)
        path = os.path.join(docs, "QUALITY.md")
        text = report.render(rep, {"threshold": "quality_threshold.svg", "distance": "quality_distance.svg"})
        # The natural-pairs section (written by natural.py) and the sections after it (written by
        # hand, e.g. the lexical ceiling) are kept.
        if os.path.exists(path):
            import natural
            with open(path, encoding="utf-8") as fh:
                old = fh.read()
            if natural.DOC_BEGIN in old and natural.DOC_END in old:
                text = text.rstrip("\n") + "\n\n" + old[old.index(natural.DOC_BEGIN):]
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"doc: {os.path.join(docs, 'QUALITY.md')}", file=sys.stderr)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    apply_config(args)
    if args.step in ("all", "generate"):
        step_generate(args)
    if args.step in ("all", "run"):
        step_run(args)
    if args.step in ("all", "judge"):
        step_judge(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
