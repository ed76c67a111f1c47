"""Recall ranking for Python providers: BM25 over simple terms.

Terms are Unicode words, case-folded and stripped of accents; a run of
CJK characters, written without spaces, becomes its bigrams (a lone
character stays itself). This is not the Go SDK's sdk/tokenize: there is
no stemming and no thread context, so scores differ from the Go
providers' (docs/protocol.md, "Ranking").
"""

import math
import re
import unicodedata

from .foldorbits import ORBITS

_WORD = re.compile(r"\w+", re.UNICODE)


def _cjk(c):
    o = ord(c)
    return (0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x4DBF or 0x4E00 <= o <= 0x9FFF
            or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FA1F)


def _fold(s):
    s = unicodedata.normalize("NFKD", s.casefold())
    return "".join(c for c in s if not unicodedata.combining(c))


def terms(text):
    out = []
    for w in _WORD.findall(_fold(text)):
        run = []
        for c in w + " ":
            if c != " " and _cjk(c):
                run.append(c)
                continue
            if run:
                out.extend(run if len(run) == 1 else [run[i] + run[i + 1] for i in range(len(run) - 1)])
                run = []
        rest = "".join(c for c in w if not _cjk(c))
        if rest:
            out.append(rest)
    return out


# SYSTEM_TAG_PREFIX opens the tags memhost gives records itself (a
# turn's speaker, memhost:user or memhost:assistant; a proposal). They
# filter as any tag does but are markers, not text: were "memhost:user"
# text, a query's "user" would lift every turn the user spoke. Compared
# case-folded, as tags are.
SYSTEM_TAG_PREFIX = "memhost:"


# _ORBIT_OF maps each letter of a case-fold orbit to the orbit's first
# letter (its lower case): the Go SDK compares tags by these orbits (strings.EqualFold), and
# Python's own case mappings follow its Unicode version, not Go's.
_ORBIT_OF = {c: orbit[0] for orbit in ORBITS for c in orbit}


def _fold_letter(c):
    return _ORBIT_OF.get(c, c)


def fold_tag(tag):
    """A key two tags share when they are equal case-folded, letter by
    letter, as the Go SDK compares tags (its simple case folding): "ſ" is
    "s" and "ẞ" is "ß", but "ß" is not "ss", nor the ligature "ﬆ" "st"."""
    return "".join(_fold_letter(c) for c in tag)


def is_system_tag(tag):
    return fold_tag(tag[:len(SYSTEM_TAG_PREFIX)]) == SYSTEM_TAG_PREFIX


def tag_text(tags):
    """The text of a record's tags field: its tags but the system tags."""
    return " ".join(t for t in tags if not is_system_tag(t))


class Index:
    """Per-field term counts of each document, and BM25 over them with
    field weights (the Go providers': tags 5, title 4, description 2,
    body 1)."""

    K1, B = 1.2, 0.75

    def __init__(self, weights=(5, 4, 2, 1)):
        self.weights = weights
        self.docs = {}  # key -> list of {term: count} per field
        self.lengths = {}  # key -> weighted length
        self.total = 0
        self.df = {}

    def put(self, key, fields):
        self.delete(key)
        counts = []
        for f in fields:
            c = {}
            for t in terms(f):
                c[t] = c.get(t, 0) + 1
            counts.append(c)
        self.docs[key] = counts
        self.lengths[key] = sum(w * sum(c.values()) for w, c in zip(self.weights, counts))
        self.total += self.lengths[key]
        for t in set().union(*counts):
            self.df[t] = self.df.get(t, 0) + 1

    def delete(self, key):
        old = self.docs.pop(key, None)
        if old:
            self.total -= self.lengths.pop(key)
            for t in set().union(*old):
                self.df[t] -= 1
                if not self.df[t]:
                    del self.df[t]

    def score(self, key, query_terms):
        """BM25 of one document for the query; 0 when no term matches."""
        fields = self.docs.get(key)
        if not fields:
            return 0.0
        n = len(self.docs)
        length = self.lengths[key]
        avg = max(1.0, self.total / n)
        total = 0.0
        for t in set(query_terms):
            tf = sum(w * c.get(t, 0) for w, c in zip(self.weights, fields))
            if tf:
                idf = math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                total += idf * tf * (self.K1 + 1) / (tf + self.K1 * (1 - self.B + self.B * length / avg))
        return total
