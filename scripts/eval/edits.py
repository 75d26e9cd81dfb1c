"""Repost edit model: turns an original article into what a reposting site would publish.

Why these edits: aggregator and portal sites rarely copy an article byte for byte. They wrap it
in their own boilerplate, re-title it, pass it through a CMS that changes markup and punctuation
width, sometimes cut it to a teaser, and their editors drop or add a sentence. Each edit here is
kept small enough that a human reader would still call the result "the same article"; the
magnitudes are documented per function and in scripts/eval/README.md.

Everything is driven by a `random.Random` passed in, so a stream is reproducible from its seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Callable

from zh_trad import to_traditional

# Edit kinds drawn for ordinary reposts (1-3 of them per repost).
KINDS = ("boilerplate", "retitle", "typos", "markup", "punct", "drop", "insert", "truncate", "reorder")
# Stretch kinds: only generated on request and reported separately.
STRETCH_KINDS = ("traditional",)
# Excerpt reposts (`--excerpts`): a reposting site carries part of the story; reported separately.
EXCERPT_KINDS = ("excerpt",)
# The two forms of an extension (`make_extension`).
EXTENSION_KINDS = ("insert_paragraph", "append")
# Application order, independent of the order the kinds were drawn in: structural edits first,
# then character-level noise, then what the publishing CMS does (boilerplate, punctuation width,
# markup last so no later edit touches tags).
APPLY_ORDER = ("excerpt", "drop", "insert", "reorder", "truncate", "typos", "retitle", "boilerplate",
               "traditional", "punct", "markup")

SITES = ("网易新闻", "搜狐网", "今日头条", "腾讯新闻", "凤凰网", "澎湃新闻", "东方财富网", "中华网",
         "环球网", "新浪财经", "每日经济新闻", "央视新闻客户端", "人民网", "中国新闻网", "北青网",
         "界面新闻", "金融界", "大众网", "红网", "光明网")
ACCOUNTS = ("每日快讯", "财经早知道", "今日热点", "新闻夜航", "城市头条", "小编说事", "科技前沿")
SURNAMES = "王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕"
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏飞宇浩然晨"
# Plausible replacement characters for typos and re-worded titles (common news characters).
COMMON_CHARS = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工"
                "也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小"
                "物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相"
                "全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公")

TOP_TEMPLATES = ("来源：{site}", "原标题：{title}", "本文来自{site}", "【{site}讯】", "作者：{name}",
                 "转自：{site}")
BOTTOM_TEMPLATES = ("责任编辑：{name}", "（编辑：{name}）", "关注公众号“{acct}”，获取更多精彩内容",
                    "免责声明：本文转载自{site}，仅代表作者观点，与本站立场无关。如有侵权请联系删除。",
                    "本文来自{site}，转载请注明出处。", "更多精彩内容请下载{site}客户端",
                    "（来源：{site}）", "【版权声明】本文为{site}原创，未经授权不得转载。")
TITLE_PREFIXES = ("【独家】", "【图】", "【视频】", "转载|", "[转载]", "【重磅】", "突发！", "快讯：")
TITLE_SUFFIXES = ("_新浪新闻", " | 搜狐", "-网易新闻", "（图）", "——人民网", "_凤凰网", "【组图】")
# Headline rewrites editors make without changing the story (applied once, first match wins).
TITLE_REWORDS = (("表示", "称"), ("宣布", "公布"), ("举行", "召开"), ("召开", "举行"), ("发布", "公布"),
                 ("近日", "日前"), ("日前", "近日"), ("将", "拟"), ("开展", "进行"), ("出席", "参加"),
                 ("会见", "会晤"), ("强调", "指出"), ("重要", "关键"), ("推进", "推动"), ("推动", "促进"),
                 ("加强", "强化"), ("发展", "建设"), ("曝光", "揭秘"), ("网友", "网民"), ("男子", "一男子"),
                 ("女子", "一女子"), ("千万", "数千万"), ("回应", "回复"), ("！", "!"), ("：", " "))
# Source lines an excerpting site puts above or below the excerpt.
EXCERPT_SOURCE_LINES = ("来源：{site}", "本文摘自{site}", "（摘自{site}）", "据{site}报道", "转自{site}")
TRUNCATION_MARKERS = ("……阅读全文", "……点击查看原文", "...查看全文>>", "（未完，点击阅读全文）",
                      "……展开全文")
PARA_TEMPLATES = ('<p>{}</p>', '<p style="text-indent:2em;">{}</p>',
                  '<p class="MsoNormal" style="margin:0px;line-height:1.75em;">{}</p>',
                  '<div class="article-p">{}</div>', '{}<br/>', '<p>&nbsp;&nbsp;&nbsp;&nbsp;{}</p>')

_SENTENCE = re.compile(r'[^。！？!?…]*(?:[。！？!?…]+[”’"」』）)]*|$)', re.S)
_CJK = re.compile(r'[\u4e00-\u9fff]')
_HALF = str.maketrans({"，": ",", "。": ".", "？": "?", "！": "!", "：": ":", "；": ";",
                       "（": "(", "）": ")", "“": '"', "”": '"', "‘": "'", "’": "'"})
_FULL = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in
                       "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz,.?!:;()%"})


def split_sentences(text: str) -> list[str]:
    """Split at Chinese/Latin sentence ends, keeping terminators and closing quotes.

    ''.join(result) == text, so edits that work on sentences never lose characters by accident.
    """
    return [s for s in _SENTENCE.findall(text) if s]


@dataclass
class Doc:
    """An article being edited: body units plus lines a site adds around it.

    `paras` are the original paragraphs; when the source has no paragraph breaks (much of the
    Sina/iNews text is one block) they are groups of ~3 sentences joined with '' so that
    rendering an unedited Doc gives back the original content exactly.
    """
    title: str
    paras: list[str]
    sep: str
    head: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    @classmethod
    def from_article(cls, title: str, content: str) -> "Doc":
        """Split content the way it is laid out in the corpus (newlines, double spaces, or none)."""
        if "\n" in content:
            return cls(title, content.split("\n"), "\n")
        if re.search(r"[ \u3000\xa0]{2,}", content):
            return cls(title, re.split(r"[ \u3000\xa0]{2,}", content), "  ")
        sentences = split_sentences(content)
        groups = ["".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)]
        return cls(title, groups or [content], "")

    def body(self) -> str:
        return self.sep.join(self.paras)

    def body_len(self) -> int:
        return sum(len(p) for p in self.paras)

    def content(self) -> str:
        """Render: added lines go on their own lines above/below the body."""
        return "\n".join(part for part in (*self.head, self.body(), *self.tail) if part)

    def nonempty(self) -> list[int]:
        return [i for i, p in enumerate(self.paras) if p.strip()]


@dataclass
class Context:
    """What an edit may need besides the article: a source of unrelated text for `insert`."""
    donor: Callable[[random.Random], tuple[str, str]]  # rng -> (donor id, donor content)


def _name(rng: random.Random) -> str:
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice((1, 2))))


def _fill(template: str, rng: random.Random, doc: Doc) -> str:
    return template.format(site=rng.choice(SITES), name=_name(rng), acct=rng.choice(ACCOUNTS),
                           title=doc.title)


def edit_boilerplate(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Add 1-2 source/editor/ad/disclaimer lines at the top, the bottom, or both (10-80 chars)."""
    where = rng.choice(("top", "bottom", "both"))
    if where in ("top", "both"):
        doc.head = [_fill(t, rng, doc) for t in rng.sample(TOP_TEMPLATES, rng.choice((1, 2)))]
    if where in ("bottom", "both"):
        doc.tail = [_fill(t, rng, doc) for t in rng.sample(BOTTOM_TEMPLATES, rng.choice((1, 2)))]
    return {"where": where, "added_chars": sum(map(len, doc.head + doc.tail))}


def edit_retitle(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Re-title: site prefix/suffix, a few characters reworded, or a new title taken from the lede.

    The body is untouched, so a detector that fingerprints the body alone should find all of these.
    """
    variant = rng.choice(("prefix", "suffix", "reword", "new"))
    title = doc.title
    if variant == "reword" and len(title) >= 6:
        title = _reword(title, rng)
    elif variant in ("new", "reword"):
        variant = "new"
        title = _lede_title(doc) or doc.title + rng.choice(TITLE_SUFFIXES)
    elif variant == "prefix":
        title = rng.choice(TITLE_PREFIXES) + title
    else:
        title = title + rng.choice(TITLE_SUFFIXES)
    if title == doc.title:
        title = "【转载】" + title
    doc.title = title
    return {"variant": variant}


_DATELINE = re.compile(r"本报|记者|通讯员|电$|讯$|消息$|^据|日前|近日|\d+月\d+日")


def _lede_title(doc: Doc) -> str | None:
    """A headline made from the lede: its first clause of 8-24 chars that is not a dateline."""
    head = "".join(split_sentences(re.sub(r"\s+", "", doc.body()))[:2])
    for clause in re.split(r"[，。！？,!?；;：:]", head):
        clause = clause.replace("\\n", "").strip("“”\"'（）()")
        if 8 <= len(clause) <= 24 and not _DATELINE.search(clause):
            return clause
    return None


def _reword(title: str, rng: random.Random) -> str:
    """Apply one or two phrase rewrites; titles with none of the phrases get 1-2 characters changed."""
    options = [(a, b) for a, b in TITLE_REWORDS if a in title]
    if options:
        for a, b in rng.sample(options, min(len(options), rng.choice((1, 2)))):
            title = title.replace(a, b, 1)
        return title
    chars = list(title)
    for pos in rng.sample(range(len(chars)), min(2, len(chars) // 5 or 1)):
        chars[pos] = rng.choice(COMMON_CHARS)
    return "".join(chars)


def edit_typos(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Substitute or delete CJK characters at 0.2-0.8% of the body (at least 1, at most 20)."""
    positions = [(pi, ci) for pi, p in enumerate(doc.paras) for ci, ch in enumerate(p) if _CJK.match(ch)]
    if not positions:
        return None
    rate = rng.uniform(0.002, 0.008)
    count = min(20, max(1, round(len(positions) * rate)), len(positions))
    chosen = sorted(rng.sample(positions, count), reverse=True)  # right to left keeps indices valid
    deletions = 0
    for pi, ci in chosen:
        para = doc.paras[pi]
        if rng.random() < 0.3:
            doc.paras[pi] = para[:ci] + para[ci + 1:]
            deletions += 1
        else:
            doc.paras[pi] = para[:ci] + rng.choice(COMMON_CHARS) + para[ci + 1:]
    return {"typos": count, "deletions": deletions}


def _wrap_span(text: str, rng: random.Random) -> str:
    """Wrap a random stretch of a paragraph in a styled span (as WYSIWYG editors leave behind)."""
    if len(text) < 8:
        return text
    a = rng.randrange(0, len(text) // 2)
    b = rng.randrange(a + 2, len(text))
    style = rng.choice(('<span style="font-size:16px;">', '<span style="color:#333333;">',
                        '<strong>', '<span class="bjh-p">'))
    close = "</strong>" if style == "<strong>" else "</span>"
    return text[:a] + style + text[a:b] + close + text[b:]


def edit_markup(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Publish through an HTML CMS: one paragraph template per site, spans, <br>, &nbsp;."""
    template = rng.choice(PARA_TEMPLATES)
    span_rate = rng.choice((0.0, 0.2, 0.5))

    def mark(text: str) -> str:
        if not text.strip():
            return text
        if rng.random() < span_rate:
            text = _wrap_span(text, rng)
        return template.format(text.replace("\u3000", "&nbsp;").replace("\xa0", "&nbsp;"))

    if doc.sep == "" and len(doc.paras) > 1:
        # No paragraph breaks in the source: the CMS puts the block in one <p> with <br> breaks.
        doc.paras = ["<br/>".join(doc.paras)]
    doc.paras = [mark(p) for p in doc.paras]
    doc.head = [mark(h) for h in doc.head]
    doc.tail = [mark(t) for t in doc.tail]
    doc.sep = "\n"
    return {"template": template.split(">")[0] + ">", "span_rate": span_rate}


def edit_punct(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Convert punctuation width site-wide: full->half (common) or ASCII->full-width (older CMSes)."""
    direction = "to_half" if rng.random() < 0.75 else "to_full"
    table = _HALF if direction == "to_half" else _FULL
    before = doc.content()
    doc.title = doc.title.translate(table)
    doc.paras = [p.translate(table) for p in doc.paras]
    doc.head = [h.translate(table) for h in doc.head]
    doc.tail = [t.translate(table) for t in doc.tail]
    changed = sum(a != b for a, b in zip(before, doc.content()))
    return {"direction": direction, "changed_chars": changed} if changed else None


def _units(doc: Doc) -> list[tuple[int, int, str]]:
    """All sentences as (paragraph index, sentence index, text), for sentence-level edits."""
    return [(pi, si, s) for pi in doc.nonempty() for si, s in enumerate(split_sentences(doc.paras[pi]))]


def edit_drop(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Drop one paragraph or 1-2 sentences, never more than 20% of the body and never the first."""
    total = doc.body_len()
    budget = 0.2 * total
    paras = doc.nonempty()
    droppable_paras = [i for i in paras[1:] if len(doc.paras[i]) <= budget]
    if doc.sep and len(paras) >= 4 and droppable_paras and rng.random() < 0.5:
        victim = rng.choice(droppable_paras)
        dropped = len(doc.paras[victim])
        del doc.paras[victim]
        return {"unit": "paragraph", "dropped_frac": round(dropped / total, 3)}
    units = [u for u in _units(doc)[1:] if len(u[2]) <= budget]
    if not units:
        return None
    victims = rng.sample(units, min(len(units), rng.choice((1, 2))))
    while sum(len(v[2]) for v in victims) > budget:
        victims.pop()
    by_para: dict[int, set[int]] = {}
    for pi, si, _ in victims:
        by_para.setdefault(pi, set()).add(si)
    for pi, drop in by_para.items():
        doc.paras[pi] = "".join(s for si, s in enumerate(split_sentences(doc.paras[pi])) if si not in drop)
    dropped = sum(len(v[2]) for v in victims)
    return {"unit": "sentence", "sentences": len(victims), "dropped_frac": round(dropped / total, 3)}


def _donor_snippet(content: str, budget: int, rng: random.Random) -> str:
    """Consecutive donor sentences totalling <= budget chars, else one clause ended with '。'."""
    sentences = [s for s in split_sentences(re.sub(r"\s+", "", content)) if len(s) >= 4]
    fitting = [i for i, s in enumerate(sentences) if len(s) <= budget]
    if fitting:
        start = rng.choice(fitting)
        out = sentences[start]
        for s in sentences[start + 1:]:
            if len(out) + len(s) > budget:
                break
            out += s
        return out
    clauses = [c for s in sentences for c in re.split(r"[，,；;]", s) if 4 <= len(c) < budget]
    return rng.choice(clauses).rstrip("。！？") + "。" if clauses else ""


def edit_insert(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Insert text from an unrelated article: up to 10% of the body (>= 12 chars available).

    Models the related-news blurb or the editor's extra sentence that portals splice in.
    """
    total = doc.body_len()
    budget = max(12, int(0.1 * total))
    donor_id, donor_content = ctx.donor(rng)
    snippet = _donor_snippet(donor_content, budget, rng)
    if not snippet or len(snippet) > budget:
        return None
    paras = doc.nonempty()
    if doc.sep and len(paras) >= 3:
        doc.paras.insert(rng.choice(paras[1:]), snippet)
        unit = "paragraph"
    else:
        pi = rng.choice(paras)
        sentences = split_sentences(doc.paras[pi])
        at = rng.randrange(1, len(sentences) + 1) if len(sentences) > 1 else len(sentences)
        doc.paras[pi] = "".join(sentences[:at]) + snippet + "".join(sentences[at:])
        unit = "sentence"
    return {"unit": unit, "donor": donor_id, "inserted_frac": round(len(snippet) / total, 3)}


def edit_truncate(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Keep the first 50-80% of the body (snapped back to a sentence end within min(60 chars, 10%)
    of the cut, so 40-80% in the worst case) and append a "read more" marker."""
    total = doc.body_len()
    if total < 100:
        return None
    keep_frac = rng.uniform(0.5, 0.8)
    target = int(total * keep_frac)
    kept: list[str] = []
    used = 0
    for pi in range(len(doc.paras)):
        para = doc.paras[pi]
        if used + len(para) <= target:
            kept.append(para)
            used += len(para)
            continue
        cut = target - used
        ends = [m.end() for m in re.finditer(r"[。！？!?]", para[:cut + 1])]
        slack = min(60, int(0.1 * total))  # snap back to a sentence end only if it is close
        cut = ends[-1] if ends and ends[-1] >= cut - slack else cut
        kept.append(para[:cut])
        used += cut
        break
    doc.paras = kept
    doc.paras[-1] += rng.choice(TRUNCATION_MARKERS)
    return {"kept_frac": round(used / total, 3)}


def edit_reorder(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Swap two paragraphs (or sentence groups when the source has no paragraph breaks)."""
    paras = doc.nonempty()
    if len(paras) < 2:
        return None
    a, b = rng.sample(paras, 2)
    doc.paras[a], doc.paras[b] = doc.paras[b], doc.paras[a]
    moved = min(len(doc.paras[a]), len(doc.paras[b]))
    return {"swapped": sorted((a, b)), "moved_frac": round(moved / doc.body_len(), 3)}


def edit_excerpt(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Keep a contiguous 40-60% of the sentences (anywhere in the body), half the time with a
    source line above or below: what a site carrying part of a story publishes. Paragraph breaks
    inside the kept run stay; articles of fewer than 2 sentences are skipped."""
    units = _units(doc)
    if len(units) < 2:
        return None
    frac = rng.uniform(0.4, 0.6)
    n = min(len(units) - 1, max(1, round(frac * len(units))))
    start = rng.randrange(0, len(units) - n + 1)
    kept = units[start:start + n]
    total = doc.body_len()
    paras: list[str] = []
    last_para = None
    for pi, _, text in kept:
        if pi != last_para:
            paras.append("")
            last_para = pi
        paras[-1] += text
    doc.paras = paras
    where = rng.choice((None, "top", "bottom"))
    if where:
        line = rng.choice(EXCERPT_SOURCE_LINES).format(site=rng.choice(SITES))
        (doc.head if where == "top" else doc.tail).append(line)
    kept_chars = sum(len(t) for _, _, t in kept)
    return {"sentences": f"{start}-{start + n - 1} of {len(units)}",
            "kept_frac": round(kept_chars / total, 3) if total else 0.0, "source_line": where}


def make_roundup(item_title: str, item_content: str, rng: random.Random, ctx: Context,
                 item_id: str = "") -> tuple[str, str, dict]:
    """A roundup: the whole of an earlier short item plus 2-4 paragraphs taken from other
    articles (together 1-2x the item's length), the item at a random place among them. It says
    something new, so it must stay unique. Returns (title, content, details)."""
    item = re.sub(r"\s+", "", item_content)
    want = int(len(item) * rng.uniform(1.0, 2.0))
    n_paras = rng.randint(2, 4)
    added: list[str] = []
    donors: list[str] = []
    for _ in range(50):
        if len(added) >= n_paras and sum(map(len, added)) >= want:
            break
        donor_id, content = ctx.donor(rng)
        if donor_id == item_id:
            continue
        budget = max(40, (want - sum(map(len, added))) // max(1, n_paras - len(added)))
        snippet = _donor_snippet(content, budget, rng)
        if len(snippet) >= 20:
            added.append(snippet)
            donors.append(donor_id)
    at = rng.randrange(0, len(added) + 1)
    paras = added[:at] + [item_content.strip()] + added[at:]
    title = rng.choice(("今日要闻汇总", "新闻早知道", "一周要闻回顾", "晚间新闻速览", "热点快报")) + "｜" + item_title
    added_chars = sum(map(len, added))
    return title, "\n".join(paras), {"paragraphs_added": len(added), "donors": donors,
                                      "added_frac": round(added_chars / max(1, len(item)), 3),
                                      "item_at": at}


def make_extension(item_content: str, rng: random.Random, ctx: Context,
                   item_id: str = "") -> tuple[str, dict] | None:
    """An extension: the whole earlier article plus new text, one report (a duplicate). Half are
    `insert_paragraph`: one paragraph of two or more consecutive sentences from another article, 15-30% of
    the original's length, inserted between two paragraphs (never first), the planted form of the
    "insert one paragraph" repost; half are `append`: an update, the original followed by 20-60% of
    its length of new paragraphs. Returns (content, details), None when no donor text fits."""
    body = item_content.strip()
    total = len(re.sub(r"\s+", "", body))
    kind = rng.choice(EXTENSION_KINDS)
    lo, hi = (0.15, 0.30) if kind == "insert_paragraph" else (0.20, 0.60)
    want = int(total * rng.uniform(lo, hi))
    added: list[str] = []
    for _ in range(50):
        if sum(map(len, added)) >= int(total * lo):
            break
        donor_id, content = ctx.donor(rng)
        if donor_id == item_id:
            continue
        snippet = _donor_snippet(content, want - sum(map(len, added)), rng)
        if len(split_sentences(snippet)) >= 2 or (added and snippet):
            added.append(snippet)
    added_chars = sum(map(len, added))
    if not added or added_chars < int(total * lo) or added_chars > int(total * hi) + 1:
        return None
    paras = [p for p in body.split("\n") if p.strip()]
    if kind == "insert_paragraph":
        at = rng.randrange(1, len(paras)) if len(paras) > 1 else 1
        if len(paras) == 1:
            # One paragraph: the new one goes between two of its sentences.
            sentences = split_sentences(paras[0])
            cut = rng.randrange(1, len(sentences)) if len(sentences) > 1 else len(sentences)
            paras = ["".join(sentences[:cut])] + ["".join(added)] + ["".join(sentences[cut:])]
        else:
            paras = paras[:at] + ["".join(added)] + paras[at:]
    else:
        paras = paras + added
    return "\n".join(p for p in paras if p), {"kind": kind, "added_frac": round(added_chars / max(1, total), 3)}


def edit_traditional(doc: Doc, rng: random.Random, ctx: Context) -> dict | None:
    """Serve the article in Traditional Chinese (title, body and added lines)."""
    doc.title = to_traditional(doc.title)
    doc.paras = [to_traditional(p) for p in doc.paras]
    doc.head = [to_traditional(h) for h in doc.head]
    doc.tail = [to_traditional(t) for t in doc.tail]
    return {}


EDITS: dict[str, Callable[[Doc, random.Random, Context], dict | None]] = {
    "boilerplate": edit_boilerplate, "retitle": edit_retitle, "typos": edit_typos,
    "markup": edit_markup, "punct": edit_punct, "drop": edit_drop, "insert": edit_insert,
    "truncate": edit_truncate, "reorder": edit_reorder, "traditional": edit_traditional,
    "excerpt": edit_excerpt,
}


def make_repost(title: str, content: str, kinds: list[str], rng: random.Random,
                ctx: Context) -> tuple[str, str, list[str], dict]:
    """Apply `kinds` in APPLY_ORDER; returns (title, content, kinds actually applied, details).

    An edit that does not fit the article (e.g. reorder on a one-sentence brief) is skipped and
    not recorded, so the labels describe exactly what was done.
    """
    doc = Doc.from_article(title, content)
    applied: list[str] = []
    details: dict[str, dict] = {}
    for kind in APPLY_ORDER:
        if kind in kinds:
            info = EDITS[kind](doc, rng, ctx)
            if info is not None:
                applied.append(kind)
                details[kind] = info
    return doc.title, doc.content(), applied, details


def draw_kinds(rng: random.Random, n_edits: int, pool: tuple[str, ...] = KINDS) -> list[str]:
    """Draw n distinct edit kinds uniformly (a reposting site does one to three things at once)."""
    return rng.sample(pool, n_edits)
