// Recall ranking for TypeScript providers: BM25 over simple terms, the
// Python SDK's text.py in TypeScript. Terms are Unicode words, case-folded
// and stripped of accents; a run of CJK characters, written without
// spaces, becomes its bigrams (a lone character stays itself). This is not
// the Go SDK's sdk/tokenize: there is no stemming and no thread context,
// so scores differ from the Go providers' (docs/protocol.md, "Ranking").

import { ORBITS } from "./foldorbits.js";

const WORD = /[\p{L}\p{N}_]+/gu;

function cjk(c: string): boolean {
  const o = c.codePointAt(0) ?? 0;
  return (
    (o >= 0x3040 && o <= 0x30ff) || (o >= 0x3400 && o <= 0x4dbf) || (o >= 0x4e00 && o <= 0x9fff) ||
    (o >= 0xac00 && o <= 0xd7af) || (o >= 0xf900 && o <= 0xfaff) || (o >= 0x20000 && o <= 0x2fa1f)
  );
}

// Python's casefold: lower case, with the full case foldings lower case
// leaves apart (ß, ẞ and ss; final ς and σ; long ſ and s). NFKD then
// splits accents and compatibility forms (ﬁ, full-width letters) off.
const FOLDS: { [c: string]: string } = { "ß": "ss", "ẞ": "ss", "ς": "σ", "ſ": "s" };

function fold(s: string): string {
  return s.toLowerCase().replace(/[ßẞςſ]/g, (c) => FOLDS[c]!).normalize("NFKD").replace(/\p{M}/gu, "");
}

export function terms(text: string): string[] {
  const out: string[] = [];
  for (const w of fold(text).match(WORD) ?? []) {
    let run: string[] = [];
    let rest = "";
    for (const c of [...w, " "]) {
      if (c !== " " && cjk(c)) {
        run.push(c);
        continue;
      }
      if (run.length === 1) out.push(run[0]!);
      for (let i = 0; i + 1 < run.length; i++) out.push(run[i]! + run[i + 1]!);
      run = [];
      if (c !== " ") rest += c;
    }
    if (rest) out.push(rest);
  }
  return out;
}

type Counts = Map<string, number>;

// SYSTEM_TAG_PREFIX opens the tags memhost gives records itself (a turn's
// speaker, memhost:user or memhost:assistant; a proposal). They filter as
// any tag does but are markers, not text: were "memhost:user" text, a
// query's "user" would lift every turn the user spoke. Compared
// case-folded, as tags are.
export const SYSTEM_TAG_PREFIX = "memhost:";

// ORBIT_OF maps each letter of a case-fold orbit to the orbit's first
// letter (its lower case): the Go SDK compares tags by these orbits (strings.EqualFold:
// final ς and σ, long ſ and s meet; ß is not ss, and dotless ı is not
// i), and JavaScript's own case mappings follow Node's Unicode version,
// not Go's.
const ORBIT_OF = new Map<string, string>();
for (const orbit of ORBITS) {
  const letters = [...orbit];
  for (const c of letters) ORBIT_OF.set(c, letters[0]!);
}

function foldLetter(c: string): string {
  return ORBIT_OF.get(c) ?? c;
}

// foldTag is a key two tags share when they are equal case-folded, letter
// by letter, as the Go SDK compares tags.
export function foldTag(tag: string): string {
  let out = "";
  for (const c of tag) out += foldLetter(c);
  return out;
}

export function isSystemTag(tag: string): boolean {
  return foldTag([...tag].slice(0, SYSTEM_TAG_PREFIX.length).join("")) === SYSTEM_TAG_PREFIX;
}

// tagText is the text of a record's tags field: its tags but the system
// tags.
export function tagText(tags: readonly string[]): string {
  return tags.filter((t) => !isSystemTag(t)).join(" ");
}

/** Per-field term counts of each document, and BM25 over them with field
 * weights (the Go providers': tags 5, title 4, description 2, body 1). */
export class Index {
  static readonly K1 = 1.2;
  static readonly B = 0.75;
  private readonly docs = new Map<string, Counts[]>();
  private readonly lengths = new Map<string, number>();
  private readonly df = new Map<string, number>();
  private total = 0;

  constructor(private readonly weights = [5, 4, 2, 1]) {}

  put(key: string, fields: string[]): void {
    this.delete(key);
    const counts = fields.map((f) => {
      const c: Counts = new Map();
      for (const t of terms(f)) c.set(t, (c.get(t) ?? 0) + 1);
      return c;
    });
    this.docs.set(key, counts);
    const length = counts.reduce((n, c, i) => n + (this.weights[i] ?? 0) * sum(c.values()), 0);
    this.lengths.set(key, length);
    this.total += length;
    for (const t of distinct(counts)) this.df.set(t, (this.df.get(t) ?? 0) + 1);
  }

  delete(key: string): void {
    const old = this.docs.get(key);
    if (!old) return;
    this.docs.delete(key);
    this.total -= this.lengths.get(key) ?? 0;
    this.lengths.delete(key);
    for (const t of distinct(old)) {
      const n = (this.df.get(t) ?? 1) - 1;
      if (n) this.df.set(t, n);
      else this.df.delete(t);
    }
  }

  /** BM25 of one document for the query; 0 when no term matches. */
  score(key: string, queryTerms: string[]): number {
    const fields = this.docs.get(key);
    if (!fields) return 0;
    const n = this.docs.size;
    const length = this.lengths.get(key) ?? 0;
    const avg = Math.max(1, this.total / n);
    let total = 0;
    for (const t of new Set(queryTerms)) {
      const tf = fields.reduce((s, c, i) => s + (this.weights[i] ?? 0) * (c.get(t) ?? 0), 0);
      if (!tf) continue;
      const df = this.df.get(t) ?? 0;
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      total += (idf * tf * (Index.K1 + 1)) / (tf + Index.K1 * (1 - Index.B + (Index.B * length) / avg));
    }
    return total;
  }
}

function sum(xs: Iterable<number>): number {
  let n = 0;
  for (const x of xs) n += x;
  return n;
}

function distinct(counts: Counts[]): Set<string> {
  const out = new Set<string>();
  for (const c of counts) for (const t of c.keys()) out.add(t);
  return out;
}
