import unittest

from memhost_plugin import text


class TermsTest(unittest.TestCase):
    def test_terms(self):
        cases = [
            ("Crème BRÛLÉE", ["creme", "brulee"]),
            ("Заметка о ПАМЯТИ", ["заметка", "о", "памяти"]),
            ("東京の会議メモ", ["東京", "京の", "の会", "会議", "議メ", "メモ"]),
            ("a 東 b", ["a", "東", "b"]),
            ("deploy-window, v2.1", ["deploy", "window", "v2", "1"]),
        ]
        for s, want in cases:
            with self.subTest(s):
                self.assertEqual(text.terms(s), want)


class TagTextTest(unittest.TestCase):
    def test_system_tags_are_not_text(self):
        cases = [
            ([], ""),
            (["red", "blue"], "red blue"),
            (["red", "memhost:user", "blue"], "red blue"),
            # Case-folded as tags compare, U+017F (long s) included.
            (["MEMHOST:Assistant", "Memho\u017ft:user", "red"], "red"),
            # Only the namespace: tags that merely hold the word stay text.
            (["memhost", "memhost-user", "team:memhost:user"], "memhost memhost-user team:memhost:user"),
            # A ligature is one letter, not "st", as in Go.
            (["memho\ufb06:", "memho\ufb06:user"], "memho\ufb06: memho\ufb06:user"),
        ]
        for tags, want in cases:
            self.assertEqual(text.tag_text(tags), want, tags)


class FoldTagTest(unittest.TestCase):
    def test_letter_by_letter_as_go(self):
        same = [("RED", "red"), ("Stra\u1e9ee", "straße"), ("\u017fun", "SUN"), ("\u212aey", "key"), ("\u03a3\u03c2", "σσ")]
        differ = [("Straße", "STRASSE"), ("\ufb06op", "stop"), ("\u0131d", "id"), ("\u0130d", "id")]
        for a, b in same:
            self.assertEqual(text.fold_tag(a), text.fold_tag(b), (a, b))
        for a, b in differ:
            self.assertNotEqual(text.fold_tag(a), text.fold_tag(b), (a, b))


class FoldOrbitsTest(unittest.TestCase):
    # Tags fold by Go's case orbits, not by Python's Unicode tables.
    def test_host_orbits(self):
        self.assertNotEqual(text.fold_tag("\u019b"), text.fold_tag("\ua7dc"))
        self.assertEqual(text.fold_tag("MEMHOST:User"), "memhost:user")
        self.assertEqual(text.fold_tag("\u212a"), "k")
        self.assertEqual(text.fold_tag("\u017f"), "s")
        self.assertNotEqual(text.fold_tag("\u0131"), "i")


class IndexTest(unittest.TestCase):
    def test_title_outranks_body_and_both_terms_outrank_one(self):
        ix = text.Index()
        ix.put("title", ["", "The zyx incident", "", "What went wrong."])
        ix.put("body", ["", "Unrelated", "", "A long body that mentions zyx once among many other words."])
        ix.put("both", ["", "Note alpha beta", "", "Both."])
        ix.put("alpha", ["", "Note alpha", "", "One."])
        q = text.terms("zyx")
        self.assertGreater(ix.score("title", q), ix.score("body", q))
        q = text.terms("alpha beta")
        self.assertGreater(ix.score("both", q), ix.score("alpha", q))
        self.assertEqual(ix.score("body", q), 0)

    def test_delete_forgets_document_frequencies(self):
        ix = text.Index()
        ix.put("a", ["", "alpha", "", ""])
        ix.put("a", ["", "beta", "", ""])
        self.assertNotIn("alpha", ix.df)
        ix.delete("a")
        self.assertEqual((ix.df, ix.total, ix.docs), ({}, 0, {}))


if __name__ == "__main__":
    unittest.main()
