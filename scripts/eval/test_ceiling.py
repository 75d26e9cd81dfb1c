"""Unit tests of the ceiling's threshold search (standard library only; no model is trained)."""

import sys
import unittest

sys.dont_write_bytecode = True

import ceiling  # noqa: E402


class ThresholdTest(unittest.TestCase):
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    labels = [1, 1, 0, 1, 1, 0]

    def test_counts_link_every_score_at_or_over_the_threshold(self):
        self.assertEqual(ceiling.counts(self.scores, self.labels, 0.6), (3, 1, 4))

    def test_best_recall_keeps_the_precision_bar(self):
        # 0.8 links two of four with no mistake; every lower threshold links the 0.7 negative.
        self.assertEqual(ceiling.best_recall(self.scores, self.labels, 1.0), (0.5, 1.0, 0.8))
        recall, precision, threshold = ceiling.best_recall(self.scores, self.labels, 0.75)
        self.assertEqual((recall, threshold), (1.0, 0.5))
        self.assertAlmostEqual(precision, 0.8)

    def test_best_recall_is_none_when_the_bar_cannot_be_met(self):
        self.assertIsNone(ceiling.best_recall([0.9, 0.1], [0, 1], 0.6))

    def test_best_precision_keeps_the_recall_bar(self):
        precision, recall, threshold = ceiling.best_precision(self.scores, self.labels, 1.0)
        self.assertEqual((recall, threshold), (1.0, 0.5))
        self.assertAlmostEqual(precision, 0.8)
        self.assertEqual(ceiling.best_precision(self.scores, self.labels, 0.5), (1.0, 0.5, 0.8))

    def test_sentence_and_gram_measures(self):
        self.assertEqual(ceiling.plain("今天，下雨 了！"), "今天下雨了")
        self.assertEqual(ceiling.grams("abcde", 4), {"abcd", "bcde"})
        self.assertEqual(ceiling.sentences("短句。这是一个足够长的句子啊！"), {"这是一个足够长的句子啊"})


if __name__ == "__main__":
    unittest.main()
