"""Tests for the quality harness (standard library unittest; synthetic text only, no corpus needed).

Run: python3 -m unittest discover -s scripts/eval -p 'test_*.py'
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep __pycache__ out of the repository tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import edits  # noqa: E402
import judge  # noqa: E402
import stream  # noqa: E402
import sweep  # noqa: E402


def fake_sentence(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(edits.COMMON_CHARS) for _ in range(n)) + rng.choice("。！？")


def fake_article(rng: random.Random, idx: int, n_chars: int, layout: str) -> dict:
    """Synthetic article: random common characters in sentences, laid out like one of the corpora."""
    sentences = []
    while sum(map(len, sentences)) < n_chars:
        sentences.append(fake_sentence(rng, rng.randint(8, 40)))
    paras = ["".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)]
    sep = {"newline": "\n", "spaces": "  ", "block": ""}[layout]
    return {"id": f"syn:{idx}", "title": fake_sentence(rng, 12)[:-1], "content": sep.join(paras),
            "source": "synthetic", "category": "test"}


def ctx_with(articles):
    return edits.Context(donor=lambda r: (lambda a: (a["id"], a["content"]))(r.choice(articles)))


class SentenceAndDocTest(unittest.TestCase):
    def test_split_sentences_round_trip(self):
        for text in ("一二三。四五六！七八“九”？十", "没有句号", "", "甲。\n乙。", "“引号。”后面"):
            self.assertEqual("".join(edits.split_sentences(text)), text)

    def test_unedited_doc_renders_original(self):
        rng = random.Random(1)
        for layout in ("newline", "spaces", "block"):
            art = fake_article(rng, 0, 600, layout)
            doc = edits.Doc.from_article(art["title"], art["content"])
            self.assertEqual(doc.content(), art["content"])


class EditTest(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random(7)
        self.pool = [fake_article(self.rng, i, 800, "newline") for i in range(20)]
        self.ctx = ctx_with(self.pool)

    def apply(self, kind, art):
        return edits.make_repost(art["title"], art["content"], [kind], self.rng, self.ctx)

    def test_every_kind_changes_the_article(self):
        for kind in edits.KINDS + edits.STRETCH_KINDS:
            art = fake_article(self.rng, 99, 900, "newline")
            if kind == "traditional":
                art["content"] = "这是国家发展的时间。" * 30
            title, content, applied, _ = self.apply(kind, art)
            self.assertEqual(applied, [kind], kind)
            self.assertNotEqual((title, content), (art["title"], art["content"]), kind)

    def test_magnitudes_stay_small(self):
        for _ in range(50):
            art = fake_article(self.rng, 1, self.rng.randint(150, 3000), self.rng.choice(("newline", "block")))
            n = len(art["content"].replace("\n", ""))
            _, _, applied, det = self.apply("drop", art)
            if applied:
                self.assertLessEqual(det["drop"]["dropped_frac"], 0.2)
            _, _, applied, det = self.apply("insert", art)
            if applied:
                self.assertLessEqual(det["insert"]["inserted_frac"] * n, max(12, 0.1 * n) + 1)
            _, _, applied, det = self.apply("truncate", art)
            if applied:
                self.assertTrue(0.4 <= det["truncate"]["kept_frac"] <= 0.81, det)

    def test_excerpt_is_a_contiguous_40_to_60_percent_of_the_sentences(self):
        for i in range(40):
            art = fake_article(self.rng, i, self.rng.randint(150, 2000), self.rng.choice(("newline", "block")))
            _, content, applied, det = edits.make_repost(art["title"], art["content"], ["excerpt"], self.rng,
                                                         self.ctx)
            self.assertEqual(applied, ["excerpt"])
            orig = edits.split_sentences(art["content"].replace("\n", ""))
            body = content.split("\n")
            info = det["excerpt"]
            if info["source_line"] == "top":
                body = body[1:]
            elif info["source_line"] == "bottom":
                body = body[:-1]
            kept = "".join(body)
            first, last = (int(x) for x in info["sentences"].split(" of ")[0].split("-"))
            self.assertEqual(kept, "".join(orig[first:last + 1]))  # contiguous, in order
            self.assertGreaterEqual((last - first + 1) / len(orig), 0.4 - 1 / len(orig))
            self.assertLessEqual((last - first + 1) / len(orig), 0.6 + 1 / len(orig))
            self.assertLess(len(kept), len(art["content"].replace("\n", "")))
        one = {"title": "t", "content": "只有一句话没有句号"}
        self.assertEqual(edits.make_repost(one["title"], one["content"], ["excerpt"], self.rng, self.ctx)[2], [])

    def test_roundup_holds_the_whole_item_and_more(self):
        for i in range(20):
            item = fake_article(self.rng, 100 + i, self.rng.randint(100, 400), "newline")
            title, content, det = edits.make_roundup(item["title"], item["content"], self.rng, self.ctx,
                                                     item["id"])
            self.assertIn(item["content"], content)
            self.assertIn(item["title"], title)
            self.assertGreaterEqual(det["paragraphs_added"], 2)
            self.assertGreaterEqual(det["added_frac"], 0.9)
            self.assertNotIn(item["id"], det["donors"])

    def test_retitle_leaves_body_alone(self):
        art = fake_article(self.rng, 2, 500, "newline")
        title, content, _, _ = self.apply("retitle", art)
        self.assertEqual(content, art["content"])
        self.assertNotEqual(title, art["title"])


class StreamTest(unittest.TestCase):
    def corpus(self):
        rng = random.Random(3)
        return [fake_article(rng, i, rng.choice((200, 900)), rng.choice(("newline", "spaces", "block")))
                for i in range(400)]

    def test_deterministic_and_reposts_after_originals(self):
        cfg = stream.StreamConfig(seed=5, originals=60, traditional=True)
        s1, l1 = stream.build_stream(self.corpus(), cfg)
        s2, l2 = stream.build_stream(self.corpus(), cfg)
        self.assertEqual(json.dumps([s1, l1]), json.dumps([s2, l2]))
        pos = {a["id"]: i for i, a in enumerate(s1)}
        self.assertTrue(l1)
        for lab in l1:
            self.assertGreater(pos[lab["id"]], pos[lab["original"]])
            self.assertTrue(lab["edits"])
        classes = {lab["length_class"] for lab in l1}
        self.assertEqual(classes, {"long", "short"})
        gaps = [pos[lab["id"]] - pos[lab["original"]] for lab in l1]
        self.assertGreater(max(gaps), 20, "reposts should not all sit right after their original")

    def test_excerpts_and_roundups_leave_the_standard_reposts_alone(self):
        base = stream.StreamConfig(seed=5, originals=60)
        s1, l1 = stream.build_stream(self.corpus(), base)
        s2, l2 = stream.build_stream(self.corpus(), stream.StreamConfig(seed=5, originals=60, excerpts=True))
        std = [lab for lab in l2 if lab["class"] == "standard"]
        self.assertEqual([lab["id"] for lab in l1], [lab["id"] for lab in std])
        self.assertEqual([lab["details"] for lab in l1], [lab["details"] for lab in std])
        by_class = {c: [lab for lab in l2 if lab["class"] == c] for c in ("excerpt", "roundup", "extension")}
        self.assertTrue(by_class["excerpt"] and by_class["roundup"] and by_class["extension"])
        pos = {a["id"]: i for i, a in enumerate(s2)}
        for lab in by_class["excerpt"] + by_class["roundup"] + by_class["extension"]:
            self.assertTrue(lab["stretch"])
            self.assertGreater(pos[lab["id"]], pos[lab["original"]])
        self.assertEqual({lab["length_class"] for lab in by_class["roundup"]}, {"short"})
        self.assertEqual(len(s2), len(s1) + sum(len(v) for v in by_class.values()))
        # An extension holds its original whole, plus 15-60% of its length of new text.
        text = {a["id"]: a["content"] for a in s2}
        for lab in by_class["extension"]:
            orig, ext = text[lab["original"]], text[lab["id"]]
            for sentence in edits.split_sentences(re.sub(r"\s+", "", orig)):
                self.assertIn(sentence, re.sub(r"\s+", "", ext))
            self.assertTrue(0.15 <= lab["details"]["extension"]["added_frac"] <= 0.61, lab)

    def test_labels_never_in_articles(self):
        s, labels = stream.build_stream(self.corpus(), stream.StreamConfig(seed=9, originals=40))
        reposts = {lab["id"] for lab in labels}
        for art in s:
            if art["id"] in reposts:
                self.assertEqual(set(art), {"id", "title", "content", "source", "url", "category"})


class JudgeTest(unittest.TestCase):
    def test_char5(self):
        a = judge.shingles("一二三四五六七八九十")
        self.assertEqual(judge.char5(a, a), (1.0, 1.0))
        j, c = judge.char5(a, judge.shingles("一二三四五六"))
        self.assertEqual(c, 1.0)
        self.assertLess(j, 0.5)

    def test_templated_titles(self):
        self.assertEqual(judge.is_templated("十三届全国人大二次会议主席团常务主席第一次会议",
                                            "十三届全国人大二次会议主席团常务主席第二次会议"), "numbers")
        self.assertEqual(judge.is_templated("李克强会见越南政府总理阮春福", "李克强会见老挝政府总理通伦"), "slot")
        self.assertIsNone(judge.is_templated("同一个标题", "同一个标题"))
        self.assertIsNone(judge.is_templated("火箭客场惨败雷霆", "深圳拟将电子烟纳入控烟范围"))

    def test_verdicts(self):
        rng = random.Random(4)
        orig = fake_article(rng, 0, 600, "block")
        other = fake_article(rng, 1, 600, "block")
        copy = dict(orig, id="syn:copy")
        rep = dict(orig, id="repost:syn:0:0", content="<p>" + orig["content"] + "</p>")
        jd = judge.Judge([orig, other, copy, rep],
                         [{"id": rep["id"], "original": orig["id"], "stretch": False}])
        self.assertEqual(jd.pair_verdict(rep["id"], orig["id"]), "family")
        self.assertEqual(jd.pair_verdict(rep["id"], copy["id"]), "near-identical")
        self.assertEqual(jd.pair_verdict(other["id"], orig["id"]), "wrong")
        self.assertEqual(jd.pair_verdict(other["id"], "nope"), "unknown-match")

    def test_readers_labels_decide_where_they_exist(self):
        rng = random.Random(4)
        orig = fake_article(rng, 0, 600, "block")
        other = fake_article(rng, 1, 600, "block")
        copy = dict(orig, id="syn:copy")
        rep = dict(orig, id="repost:syn:0:0")
        readings = {frozenset((other["id"], orig["id"])): "same", frozenset((copy["id"], orig["id"])): "different"}
        jd = judge.Judge([orig, other, copy, rep], [{"id": rep["id"], "original": orig["id"], "stretch": False}],
                         readings=readings)
        self.assertEqual(jd.pair_verdict(other["id"], orig["id"]), "read-same")
        self.assertEqual(jd.pair_verdict(copy["id"], orig["id"]), "read-different")
        # a repost is judged by its original's reading
        self.assertEqual(jd.pair_verdict(rep["id"], copy["id"]), "read-different")
        self.assertEqual(jd.pair_verdict(rep["id"], orig["id"]), "family")
        self.assertIn("read-same", judge.CORRECT)
        self.assertNotIn("read-different", judge.CORRECT)

    def test_readings_load_from_the_natural_labels_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "labels.jsonl")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(json.dumps({"pair": "a:1|b:2", "label": "same", "relation": "copy"}) + "\n")
            self.assertEqual(judge.load_readings(path), {frozenset(("a:1", "b:2")): "same"})
            self.assertEqual(judge.load_readings(os.path.join(tmp, "absent.jsonl")), {})


class SweepTest(unittest.TestCase):
    def test_multi_index_matches_brute_force(self):
        rng = random.Random(11)
        fps = []
        for _ in range(600):
            if fps and rng.random() < 0.5:
                base = rng.choice(fps)
                for _ in range(rng.randint(0, 12)):
                    base ^= 1 << rng.randrange(64)
                fps.append(base)
            else:
                fps.append(rng.getrandbits(64))
        got = sweep.nearest_all(fps, 10)
        for i, fp in enumerate(fps):
            cands = [((fp ^ fps[j]).bit_count(), j) for j in range(i)]
            best = min((c for c in cands if c[0] <= 10), default=None)
            self.assertEqual(got[i], best, i)


class EndToEndTest(unittest.TestCase):
    def test_quality_with_stand_in_binary(self):
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus")
            os.makedirs(corpus)
            rng = random.Random(2)
            for name in ("a", "b"):
                with open(os.path.join(corpus, f"{name}.jsonl"), "w", encoding="utf-8") as fh:
                    for i in range(150):
                        art = fake_article(rng, i, rng.choice((200, 800)), "newline")
                        art["id"] = f"{name}:{i}"
                        fh.write(json.dumps(art, ensure_ascii=False) + "\n")
            work = os.path.join(tmp, "work")
            config = os.path.join(tmp, "rules.toml")
            with open(config, "w", encoding="utf-8") as fh:
                fh.write("[dedup]\nthreshold = 3\n")
            cmd = [sys.executable, os.path.join(HERE, "quality.py"), "--corpus", corpus, "--silver", "",
                   "--originals", "40", "--workdir", work, "--bin", os.path.join(HERE, "fake_newsdedup.py"),
                   "--config", config]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(os.path.join(work, "report.json"), encoding="utf-8") as fh:
                rep = json.load(fh)
            self.assertEqual(rep["run"]["problems"], [])
            self.assertEqual(rep["config"]["config"], config)  # the report names the configuration
            self.assertEqual(rep["config"]["n_stream"], 300 + rep["config"]["n_labels"])
            self.assertGreater(rep["recall"]["overall"]["rate"], 0.0)
            self.assertEqual(set(rep["sweep"]["by_threshold"]), {str(k) for k in range(11)})
            self.assertEqual(rep["sweep"]["agreement"]["decision_agreement"], 1.0)
            self.assertTrue(os.path.exists(os.path.join(work, "quality_threshold.svg")))


if __name__ == "__main__":
    unittest.main()
