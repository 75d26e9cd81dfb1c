"""Tests for the natural pair benchmark (natural.py): synthetic data only, no corpus needed.

Run: python3 -m unittest discover -s scripts/eval -p 'test_*.py'
"""

import json
import os
import random
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep __pycache__ out of the repository tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import natural  # noqa: E402

CHARS = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下"
         "过子说产种面而方后多定行学法所民得经")


def text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(CHARS) for _ in range(n))


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def synthetic_corpus(tmp: str) -> tuple[str, str, list[dict]]:
    """Two corpus files with planted pairs of every band, and a silver file naming them."""
    rng = random.Random(5)
    base = [text(rng, 400) for _ in range(12)]
    a_rows, b_rows, silver = [], [], []
    for i, body in enumerate(base):
        a_rows.append({"id": f"a:{i}", "title": f"t{i}", "content": body})
        variants = [body,                                   # exact
                    body[:380] + text(rng, 20),             # J ~0.9
                    body[:250] + text(rng, 150),            # J ~0.5
                    body + text(rng, 400),                  # later longer, containment 1
                    body[:200]]                             # later shorter
        b_rows.append({"id": f"b:{i}", "title": f"u{i}", "content": variants[i % len(variants)]})
        silver.append({"a": f"a:{i}", "b": f"b:{i}"})
    corpus = os.path.join(tmp, "corpus")
    os.makedirs(corpus)
    write_jsonl(os.path.join(corpus, "1.jsonl"), a_rows)
    write_jsonl(os.path.join(corpus, "2.jsonl"), b_rows)
    silver_path = os.path.join(tmp, "silver.jsonl")
    write_jsonl(silver_path, silver)
    return corpus, silver_path, a_rows + b_rows


def rec(pair: str, band: str = "0.5-0.8", cont: str = ">=0.95", direction: str = "same_length",
        source: str = "silver", split: str | None = None) -> dict:
    earlier, later = pair.split("|")
    r = {"pair": pair, "earlier": earlier, "later": later, "source": source,
         "stratum": {"jaccard_band": band, "containment_band": cont, "direction": direction}}
    if split:
        r["split"] = split
    return r


class SplitTest(unittest.TestCase):
    def records(self):
        return [rec(f"x:{i}|y:{i}", band=("0.5-0.8", "0.3-0.5")[i % 2], direction=("later_longer", "same_length",
                    "later_shorter")[i % 3]) for i in range(120)]

    def test_split_is_deterministic_and_balanced(self):
        one, two = self.records(), list(reversed(self.records()))
        natural.assign_splits(one)
        natural.assign_splits(two)
        self.assertEqual({r["pair"]: r["split"] for r in one}, {r["pair"]: r["split"] for r in two})
        cells = {}
        for r in one:
            cells.setdefault(natural.split_cell(r), []).append(r["split"])
        for splits in cells.values():
            self.assertLessEqual(abs(splits.count("tune") - splits.count("test")), 1)

    def test_existing_split_is_kept(self):
        records = self.records()
        records[0]["split"] = "test"
        records[1]["split"] = "tune"
        natural.assign_splits(records)
        self.assertEqual((records[0]["split"], records[1]["split"]), ("test", "tune"))

    def test_allocate_water_fills(self):
        alloc = natural.allocate({("a",): 2, ("b",): 50, ("c",): 50}, 40)
        self.assertEqual(alloc, {("a",): 2, ("b",): 19, ("c",): 19})
        self.assertEqual(sum(natural.allocate({("a",): 3, ("b",): 4}, 100).values()), 7)

    def test_direction_and_bands(self):
        self.assertEqual(natural.direction(100, 104), "same_length")
        self.assertEqual(natural.direction(100, 120), "later_longer")
        self.assertEqual(natural.direction(120, 100), "later_shorter")
        self.assertEqual(natural.jaccard_band(1.0, True), "exact")
        self.assertEqual(natural.jaccard_band(0.85, False), "0.8-0.9")
        self.assertEqual(natural.jaccard_band(0.1, False), "0-0.3")
        self.assertEqual(natural.containment_band(0.97), ">=0.95")


class SelectTest(unittest.TestCase):
    def synthetic(self, tmp: str) -> tuple[list[dict], str]:
        """The synthetic corpus in stream order, and its silver file."""
        corpus, silver, _ = synthetic_corpus(tmp)
        return natural.natural_order(corpus), silver

    def test_select_is_deterministic_and_keeps_existing_pairs(self):
        with tempfile.TemporaryDirectory() as tmp:
            articles, silver = self.synthetic(tmp)
            quotas = {b: 3 for b in natural.BANDS}
            one = natural.build_pairs(articles, silver, [], None, quotas)
            two = natural.build_pairs(articles, silver, [], None, quotas)
            self.assertEqual(one, two)
            self.assertTrue(one)
            order = {a["id"]: i for i, a in enumerate(articles)}
            for r in one:
                self.assertLess(order[r["earlier"]], order[r["later"]])
                self.assertEqual(r["pair"], f"{r['earlier']}|{r['later']}")
                self.assertIn(r["split"], ("tune", "test"))
            bands = {r["stratum"]["jaccard_band"] for r in one}
            self.assertIn("exact", bands)
            longer = [r for r in one if r["stratum"]["direction"] == "later_longer"]
            self.assertTrue(longer and all(r["b_in_a"] == 1.0 and r["a_in_b"] < 0.6 for r in longer))
            # engine pairs: added, silver pairs untouched; a changed silver selection is refused
            out = os.path.join(tmp, "out.jsonl")
            write_jsonl(out, [{"id": "a:1", "dedup": {"decision": "unique"}},
                              {"id": "a:2", "dedup": {"decision": "duplicate", "match": {"id": "a:1"}}},
                              {"id": "b:1", "dedup": {"decision": "duplicate", "match": {"id": "a:1"}}}])
            with_engine = natural.build_pairs(articles, silver, one, out, quotas)
            engine = [r for r in with_engine if r["source"] == "engine"]
            self.assertEqual([r["pair"] for r in engine], ["a:1|a:2"])  # a:1|b:1 is a silver pair
            self.assertEqual([r for r in with_engine if r["source"] == "silver"], one)
            with self.assertRaises(SystemExit):
                natural.build_pairs(articles, silver, one, None, {b: 2 for b in natural.BANDS})

    def test_dissimilar_pairs_are_every_link_char_5grams_cannot_confirm(self):
        with tempfile.TemporaryDirectory() as tmp:
            articles, silver = self.synthetic(tmp)
            quotas = {b: 1 for b in natural.BANDS}
            plain = natural.build_pairs(articles, silver, [], None, quotas)
            out = os.path.join(tmp, "out.jsonl")
            # a:3 -> a:1: two unrelated random texts; b:0 -> a:0: an exact copy (confirmed).
            write_jsonl(out, [{"id": "a:3", "dedup": {"decision": "duplicate", "match": {"id": "a:1"}}},
                              {"id": "b:0", "dedup": {"decision": "duplicate", "match": {"id": "a:0"}}}])
            held = natural.build_pairs(articles, silver, plain, None, quotas, dissimilar_output=out)
            added = [r for r in held if r["source"] == "dissimilar"]
            self.assertEqual([r["pair"] for r in added], ["a:1|a:3"])
            self.assertLess(added[0]["jaccard"], 0.5)
            self.assertIn(added[0]["split"], ("tune", "test"))
            self.assertEqual([r for r in held if r["source"] != "dissimilar"], plain)
            # Kept as they are when asked again.
            self.assertEqual(natural.build_pairs(articles, silver, held, None, quotas, dissimilar_output=out), held)

    def test_contained_pairs_hold_the_earlier_text_as_a_small_part_and_stay_put(self):
        with tempfile.TemporaryDirectory() as tmp:
            articles, silver = self.synthetic(tmp)
            quotas = {b: 1 for b in natural.BANDS}
            plain = natural.build_pairs(articles, silver, [], None, quotas)
            held = natural.build_pairs(articles, silver, plain, None, quotas, contained=5)
            added = [r for r in held if r["source"] == "contained"]
            self.assertTrue(added)
            self.assertLessEqual(len(added), 5)
            taken = {r["pair"] for r in plain}
            for r in added:
                self.assertNotIn(r["pair"], taken)
                self.assertGreaterEqual(r["b_in_a"], natural.CONTAINED_MIN)
                self.assertLess(r["len_earlier"], natural.CONTAINED_MAX_SHARE * r["len_later"])
                self.assertIn(r["split"], ("tune", "test"))
            self.assertEqual([r for r in held if r["source"] != "contained"], plain)
            # Held pairs stay as they are: asking again (or for fewer) adds and drops nothing.
            self.assertEqual(natural.build_pairs(articles, silver, held, None, quotas, contained=5), held)
            self.assertEqual(natural.build_pairs(articles, silver, held, None, quotas), held)

    def test_corpus_absent_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(SystemExit) as cm:
                natural.natural_order(os.path.join(tmp, "nothing"))
            self.assertIn("corpus not found", str(cm.exception))


class LinkTest(unittest.TestCase):
    def test_union_find_chains(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.jsonl")
            write_jsonl(out, [{"id": "a", "dedup": {"decision": "unique"}},
                              {"id": "b", "dedup": {"decision": "duplicate", "match": {"id": "a"}}},
                              {"id": "c", "dedup": {"decision": "duplicate", "match": {"id": "b"}}},
                              {"id": "d", "dedup": {"decision": "unique"}},
                              {"id": "e", "dedup": {"decision": "duplicate", "match": {"id": "d"}}},
                              {"dedup": {"decision": "invalid"}}])
            uf, seen = natural.chains(out)
            self.assertEqual(seen, {"a", "b", "c", "d", "e"})
            self.assertEqual(uf.find("c"), uf.find("a"))
            self.assertEqual(uf.find("e"), uf.find("d"))
            self.assertNotEqual(uf.find("a"), uf.find("d"))
            self.assertEqual(uf.find("zzz"), "zzz")


class StatsTest(unittest.TestCase):
    def test_wilson(self):
        self.assertIsNone(natural.wilson(0, 0))
        lo, hi = natural.wilson(5, 10)
        self.assertAlmostEqual(lo, 0.2366, places=3)
        self.assertAlmostEqual(hi, 0.7634, places=3)
        lo, hi = natural.wilson(20, 20)
        self.assertEqual(hi, 1.0)
        self.assertAlmostEqual(lo, 0.8389, places=3)
        self.assertEqual(natural.wilson(0, 7)[0], 0.0)

    def test_cohen_kappa(self):
        pairs = ([("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15)
        self.assertAlmostEqual(natural.cohen_kappa(pairs), 0.4)
        self.assertEqual(natural.cohen_kappa([("y", "y"), ("n", "n")]), 1.0)
        self.assertIsNone(natural.cohen_kappa([("y", "y")] * 3))  # chance agreement 1: undefined
        self.assertIsNone(natural.cohen_kappa([]))


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.pairs = [rec("e:1|l:1", split="test"), rec("e:2|l:2", split="tune"), rec("e:3|l:3", split="test")]
        self.a = {"e:1|l:1": {"label": "same", "relation": "copy", "reason": "r1"},
                  "e:2|l:2": {"label": "same", "relation": "rewrite", "reason": "r2"},
                  "e:3|l:3": {"label": "different", "relation": "template", "reason": "r3"}}
        self.b = {"e:1|l:1": {"label": "same", "relation": "copy", "reason": "q1"},
                  "e:2|l:2": {"label": "same", "relation": "extension", "reason": "q2"},
                  "e:3|l:3": {"label": "same", "relation": "copy", "reason": "q3"}}

    def test_disagreements_wait_for_resolution(self):
        final, dis, problems = natural.merge_labels(self.pairs, self.a, self.b, None)
        self.assertEqual(final, [])
        self.assertEqual(problems, [])
        self.assertEqual({d["pair"]: d["on"] for d in dis}, {"e:2|l:2": "relation", "e:3|l:3": "label"})
        resolved = {"e:2|l:2": {"pair": "e:2|l:2", "label": "same", "relation": "extension", "reason": "adds"},
                    "e:3|l:3": {"pair": "e:3|l:3", "label": "different", "relation": "template", "reason": "x"}}
        final, _, problems = natural.merge_labels(self.pairs, self.a, self.b, resolved)
        self.assertEqual(problems, [])
        got = {f["pair"]: (f["label"], f["relation"], f["readers_agreed"]) for f in final}
        self.assertEqual(got, {"e:1|l:1": ("same", "copy", True), "e:2|l:2": ("same", "extension", False),
                               "e:3|l:3": ("different", "template", False)})
        _, _, problems = natural.merge_labels(self.pairs, self.a, self.b, {"e:2|l:2": resolved["e:2|l:2"]})
        self.assertTrue(any("not in resolved" in p for p in problems))

    def test_agreement_figures(self):
        agr = natural.agreement(self.a, self.b)
        self.assertEqual(agr["label"]["agree"], 2)
        self.assertEqual(agr["label"]["n"], 3)
        self.assertEqual(agr["relation_when_both_same"]["n"], 2)
        self.assertEqual(agr["relation_when_both_same"]["agree"], 1)
        self.assertEqual(agr["confusion_label"], {"different|same": 1, "same|same": 2})

    def test_reader_files_are_validated(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_jsonl(os.path.join(tmp, "packet_01.jsonl"), [
                {"pair": "e:1|l:1", "label": "same", "relation": "template", "reason": ""},
                {"pair": "e:2|l:2", "label": "Different", "relation": "digest", "reason": " a \n b "},
                {"pair": "e:3|l:3", "label": "", "relation": "", "reason": ""},
                {"pair": "nope", "label": "same", "relation": "copy", "reason": ""}])
            labels, problems = natural.load_reader(tmp, {r["pair"] for r in self.pairs})
            self.assertEqual(labels, {"e:2|l:2": {"label": "different", "relation": "digest", "reason": "a b"}})
            self.assertEqual(len(problems), 2)

    def test_reason_quotes(self):
        body = "这是一段很长的新闻正文内容用来测试引用检查是否有效"
        self.assertTrue(natural.reason_quotes("读者写道：很长的新闻正文内容用来测试", [body]))
        self.assertFalse(natural.reason_quotes("same story, later adds a paragraph", [body]))
        self.assertFalse(natural.reason_quotes("新闻正文", [body]))


class ScoreTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out.jsonl")
        write_jsonl(self.out, [{"id": "e1", "dedup": {"decision": "unique"}},
                               {"id": "l1", "dedup": {"decision": "duplicate", "match": {"id": "e1"}}},
                               {"id": "e2", "dedup": {"decision": "unique"}},
                               {"id": "l2", "dedup": {"decision": "unique"}},
                               {"id": "e3", "dedup": {"decision": "unique"}},
                               {"id": "l3", "dedup": {"decision": "duplicate", "match": {"id": "e3"}}},
                               {"id": "e4", "dedup": {"decision": "unique"}},
                               {"id": "l4", "dedup": {"decision": "duplicate", "match": {"id": "x"}}},
                               {"id": "x", "dedup": {"decision": "duplicate", "match": {"id": "e4"}}}])
        self.pairs = [rec("e1|l1", band="0.9-1", split="test"), rec("e2|l2", split="test", direction="later_longer"),
                      rec("e3|l3", band="0-0.3", split="test"), rec("e4|l4", split="test"),
                      rec("e5|l5", split="test"), rec("e6|l6", split="tune")]
        self.labels = [
            {"pair": "e1|l1", "label": "same", "relation": "copy", "reason": "", "readers_agreed": True},
            {"pair": "e2|l2", "label": "same", "relation": "extension", "reason": "", "readers_agreed": True},
            {"pair": "e3|l3", "label": "different", "relation": "digest", "reason": "", "readers_agreed": False},
            {"pair": "e4|l4", "label": "same", "relation": "extension", "reason": "", "readers_agreed": True},
            {"pair": "e5|l5", "label": "same", "relation": "copy", "reason": "", "readers_agreed": True},
            {"pair": "e6|l6", "label": "same", "relation": "copy", "reason": "", "readers_agreed": True}]

    def tearDown(self):
        self.tmp.cleanup()

    def test_score_counts_and_table(self):
        rep = natural.score(self.pairs, self.labels, self.out, "test")
        self.assertEqual(rep["labelled"], 5)
        self.assertEqual(rep["absent_from_output"], 1)  # e5/l5 not in the output
        self.assertEqual(rep["overall"]["recall"]["k"], 2)   # e1-l1 directly, e4-l4 through x
        self.assertEqual(rep["overall"]["recall"]["n"], 3)
        self.assertEqual(rep["overall"]["precision"]["k"], 2)
        self.assertEqual(rep["overall"]["precision"]["n"], 3)
        self.assertEqual(rep["headline"]["extension_recall"]["k"], 1)
        self.assertEqual(rep["headline"]["extension_recall"]["n"], 2)
        self.assertEqual(rep["headline"]["digest_flagged"]["rate"], 1.0)
        self.assertIs(rep["targets"]["digest_flagged"]["met"], False)
        self.assertEqual(list(rep["by"]["jaccard_band"]), ["0.9-1", "0.5-0.8", "0-0.3"])
        self.assertEqual(rep["by"]["direction"]["later_longer"]["recall"]["k"], 0)
        table = natural.format_table(rep)
        for needle in ("recall", "jaccard_band=0.9-1", "relation=same/extension", "direction=later_longer",
                       "2/3", "NOT met"):
            self.assertIn(needle, table)
        json.dumps(rep)
        self.assertEqual(natural.score(self.pairs, self.labels, self.out, "all")["labelled"], 6)
        with self.assertRaises(SystemExit):  # the only tune pair is absent from the output
            natural.score(self.pairs, self.labels, self.out, "tune")

    def test_pairs_chosen_from_the_engines_links_count_for_precision_only(self):
        # The same labels, but e1|l1 (same) and e3|l3 (different) chosen because the engine links them.
        pairs = [dict(p, source="dissimilar") if p["pair"] in ("e1|l1", "e3|l3") else p for p in self.pairs]
        rep = natural.score(pairs, self.labels, self.out, "test")
        self.assertEqual((rep["overall"]["recall"]["k"], rep["overall"]["recall"]["n"]), (1, 2))
        self.assertEqual((rep["overall"]["precision"]["k"], rep["overall"]["precision"]["n"]), (2, 3))
        self.assertEqual(rep["overall"]["flagged"]["n"], 0)

    def test_relation_agreement_counts_direct_links_only(self):
        # e1-l1 is linked directly with another relation than the readers'; e4-l4 only through x
        # (no relation of its own for the pair); a `via` match counts as direct.
        out = os.path.join(self.tmp.name, "rel.jsonl")
        write_jsonl(out, [{"id": "e1", "dedup": {"decision": "unique"}},
                          {"id": "l1", "dedup": {"decision": "duplicate",
                                                 "match": {"id": "e1", "relation": "excerpt"}}},
                          {"id": "o", "dedup": {"decision": "unique"}},
                          {"id": "e2", "dedup": {"decision": "duplicate",
                                                 "match": {"id": "o", "relation": "extension"}}},
                          {"id": "l2", "dedup": {"decision": "duplicate",
                                                 "match": {"id": "o", "via": "e2", "relation": "extension"}}},
                          {"id": "e3", "dedup": {"decision": "unique"}},
                          {"id": "l3", "dedup": {"decision": "unique"}},
                          {"id": "e4", "dedup": {"decision": "unique"}},
                          {"id": "l4", "dedup": {"decision": "duplicate", "match": {"id": "x", "relation": "copy"}}},
                          {"id": "x", "dedup": {"decision": "duplicate", "match": {"id": "e4", "relation": "copy"}}}])
        rep = natural.score(self.pairs, self.labels, out, "test")
        agreement = rep["relation"]
        self.assertEqual((agreement["agree"]["k"], agreement["agree"]["n"]), (1, 2))
        self.assertEqual(agreement["confusion"]["copy"], {"excerpt": 1})
        self.assertEqual(agreement["confusion"]["extension"], {"extension": 1})
        table = natural.format_table(rep)
        self.assertIn("same pairs linked directly", table)
        self.assertIn("1/2", table)
        section = natural.doc_section(rep, None, "cmd")
        self.assertIn("| reader / engine | copy | rewrite | excerpt | extension |", section)
        self.assertIn("| copy | 0 | 0 | 1 | 0 |", section)

    def test_listing_names_the_wrong_pairs_with_their_decisions(self):
        rep = natural.score(self.pairs, self.labels, self.out, "test", "errors")
        listed = {r["pair"]: r for r in rep["listed"]["pairs"]}
        self.assertEqual(set(listed), {"e2|l2", "e3|l3"})  # missed extension, linked digest
        self.assertEqual(listed["e2|l2"]["later_decision"], "unique")
        self.assertTrue(listed["e3|l3"]["later_decision"].startswith("duplicate of e3"))
        self.assertEqual([r["pair"] for r in natural.score(self.pairs, self.labels, self.out, "test",
                                                           "missed")["listed"]["pairs"]], ["e2|l2"])
        self.assertEqual(len(natural.score(self.pairs, self.labels, self.out, "test", "all")["listed"]["pairs"]), 4)
        self.assertNotIn("listed", natural.score(self.pairs, self.labels, self.out, "test"))
        self.assertIn("later: duplicate of e3", natural.format_listed(rep["listed"]["pairs"]))

    def test_listing_is_refused_outside_the_tuning_half(self):
        labels = os.path.join(self.tmp.name, "labels.jsonl")
        pairs = os.path.join(self.tmp.name, "pairs.jsonl")
        write_jsonl(labels, self.labels)
        write_jsonl(pairs, self.pairs)
        for split in ("test", "all"):
            with self.assertRaises(SystemExit) as cm:
                natural.main(["score", "--output", self.out, "--labels", labels, "--pairs", pairs,
                              "--split", split, "--list", "missed"])
            self.assertIn("tuning half only", str(cm.exception))

    def test_config_is_passed_to_the_run_and_named_in_the_report(self):
        labels = os.path.join(self.tmp.name, "labels.jsonl")
        pairs = os.path.join(self.tmp.name, "pairs.jsonl")
        write_jsonl(labels, self.labels)
        write_jsonl(pairs, self.pairs)
        with self.assertRaises(SystemExit) as cm:
            natural.main(["score", "--run", "--config", os.path.join(self.tmp.name, "none.toml"),
                          "--labels", labels, "--pairs", pairs])
        self.assertIn("--config: no such file", str(cm.exception))
        rep = natural.score(self.pairs, self.labels, self.out, "test")
        rep["config"] = "/etc/newsdedup.toml"
        self.assertIn("configuration: /etc/newsdedup.toml", natural.format_table(rep).splitlines()[0])

    def test_missing_labels_exit_non_zero(self):
        with self.assertRaises(SystemExit) as cm:
            natural.main(["score", "--output", self.out, "--labels", os.path.join(self.tmp.name, "none.jsonl")])
        self.assertIn("no labels", str(cm.exception))
        with self.assertRaises(SystemExit):
            natural.score(self.pairs, [{"pair": "zz|yy", "label": "same", "relation": "copy"}], self.out, "test")


class PacketTest(unittest.TestCase):
    def test_refuses_a_path_inside_the_repository(self):
        inside = os.path.join(natural.REPO, "scripts", "eval", "natural", "packets-test-should-not-exist")
        for path in (inside, os.path.join(natural.REPO, "target", "packets")):
            with self.assertRaises(SystemExit):
                natural.write_packets([], {}, path, 2)
            with self.assertRaises(SystemExit):
                natural.main(["packets", "--out", path, "--readers", "2"])
            self.assertFalse(os.path.exists(path))

    def test_packets_are_blind_and_complete(self):
        with tempfile.TemporaryDirectory() as tmp:
            corpus, silver, rows = synthetic_corpus(tmp)
            articles = natural.natural_order(corpus)
            pairs = natural.build_pairs(articles, silver, [], None, {b: 3 for b in natural.BANDS})
            rows[0]["content"] = "长" * 5000
            by_id = {a["id"]: a for a in rows}
            out = os.path.join(tmp, "packets")
            n = natural.write_packets(pairs, by_id, out, 2, size=4)
            self.assertEqual(n, -(-len(pairs) // 4))
            texts = ""
            for i in range(1, n + 1):
                with open(os.path.join(out, f"packet_{i:02d}.txt"), encoding="utf-8") as fh:
                    texts += fh.read()
            for word in ("jaccard", "containment", "a_in_b", "duplicate", "tune", "test", "stratum"):
                self.assertNotIn(word, texts.lower())
            self.assertEqual(texts.count("PAIR "), len(pairs))
            for reader in ("reader_a", "reader_b"):
                got = []
                for i in range(1, n + 1):
                    got += natural.read_jsonl(os.path.join(out, reader, f"packet_{i:02d}.jsonl"))
                self.assertEqual(sorted(r["pair"] for r in got), sorted(r["pair"] for r in pairs))
                self.assertTrue(all(r["label"] == r["relation"] == r["reason"] == "" for r in got))
            # a reader's filled file is never overwritten; --new adds only unseen pairs
            path = os.path.join(out, "reader_a", "packet_01.jsonl")
            filled = natural.read_jsonl(path)
            filled[0]["label"] = "same"
            write_jsonl(path, filled)
            with self.assertRaises(SystemExit):
                natural.write_packets(pairs, by_id, out, 2, size=4)
            extra = [rec("a:0|a:1", split="test")]
            self.assertEqual(natural.write_packets(pairs + extra, by_id, out, 2, size=4, new_only=True), 1)
            self.assertEqual(natural.read_jsonl(os.path.join(out, "reader_b", f"packet_{n + 1:02d}.jsonl"))[0]["pair"],
                             "a:0|a:1")

    def test_clip_keeps_head_and_tail(self):
        body = "头" * 2500 + "中" * 1000 + "尾" * 600
        clipped = natural.clip(body)
        self.assertTrue(clipped.startswith("头" * 2400))
        self.assertTrue(clipped.endswith("尾" * 600))
        self.assertIn("1100 characters cut", clipped)
        self.assertEqual(natural.clip("短"), "短")
        self.assertEqual(natural.normalise(" 一  二\n\n\u3000三 "), "一 二\n三")


if __name__ == "__main__":
    unittest.main()
