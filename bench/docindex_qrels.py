#!/usr/bin/env python3
"""Build known-item judgments from a documentation site's own index.

Each entry of a back-of-the-book index is a term a reader looks up, written
by the documentation's authors, and the pages it links to are where the term
is explained. The entry's text is the query; the linked pages (anchor
dropped) are the relevant answers.

usage:
  docindex_qrels.py python     [--n N] [--root DIR]  # python-docs.test: genindex-all.html
  docindex_qrels.py postgresql [--n N] [--root DIR]  # postgresql-docs.test: bookindex.html

Output, one query a line, tab-separated (the format of sou/eval):
  QID  QUERY  URL[,URL...]
QIDs are 'py-' or 'pg-' and 8 hex digits of the SHA-1 of the query, so a
query keeps its QID when the index or --n changes. The N queries printed are
those with the smallest QIDs: a fixed sample that a rerun reproduces.

What a query is (decisions):
- Sphinx qualifiers: "a2b_hex() (in module binascii)" and "abort()
  (asyncio.Barrier method)" name where the entry lives; the query keeps that
  scope, as a reader would type it: "binascii a2b_hex", "asyncio.Barrier
  abort". Qualifiers that only say what kind of thing the entry is ("C
  function", "opcode", "built-in function", "2to3 fixer") are dropped: a
  reader searches for PyList_New, not for "PyList_New C function". The
  trailing "()" of a callable is dropped.
- Sub-entries are read with their parent: "abc" / "module" is "abc module";
  a sub-entry that is only a qualifier applies it, instead of the parent's
  own, to the parent's name ("find_module() (imp.NullImporter method)" /
  "(in module imp)" is "imp find_module").
- Skipped: entries (and sub-entries) whose name has fewer than two letters
  or digits ("A", "%", "**", "operator" / "/", "command line option" / "-P"); entries pointing at more than MAX_RELEVANT pages
  (a reader would not call that a known item); links to pages that are not
  in the docroot (the corpus could never answer them).
- Duplicates: entries whose queries have the same words (any order, any
  case) are one query, relevant to all their pages.
"""
import argparse
import collections
import hashlib
import html
import html.parser
import os
import re
import sys
import urllib.parse

SITES = {
    'python': ('python-docs.test', '/usr/share/doc/python3.11/html', 'py'),
    'postgresql': ('postgresql-docs.test', '/usr/share/doc/postgresql-doc-15/html', 'pg'),
}
MAX_RELEVANT = 5

# Sphinx qualifiers that name the entry's scope: the captured group is kept.
SCOPE = [
    re.compile(r'^(?:in module|class in|exception in|function in|data in|attribute in) (\S+)$'),
    re.compile(r'^(\S+) (?:method|attribute|class method|static method|property|'
               r'abstract method|data|exception|function|member)$'),
]
# Qualifiers that only name a kind (or a scope too generic to help).
KIND_SCOPES = {'C', 'built-in', 'object', 'instance', 'class', 'sequence', 'mapping', 'iterator',
               'generator', 'coroutine', 'agen', 'method', 'function', 'module', 'exception',
               'frame', 'code', 'slice', 'standard', 'contextmanager'}


def words_of(text):
    return [w for w in text.split() if w]


def name_and_scope(text):
    """Split "name() (qualifier)" into the name and the scope words to keep."""
    # A cross-reference ("PyPI (see Python Package Index (PyPI))") adds no
    # words of its own.
    text = re.sub(r'\s*\(see .*\)$', '', ' '.join(text.split()))
    scope = []
    m = re.match(r'^(.*?)\s*\(([^()]*)\)$', text)
    if m and m.group(1):
        text, qual = m.group(1), m.group(2).strip()
        for pat in SCOPE:
            q = pat.match(qual)
            if q and q.group(1) not in KIND_SCOPES:
                scope = [q.group(1)]
                break
    text = re.sub(r'\(\)$', '', text).strip()
    return text, scope


def qualifier_only(text):
    return re.fullmatch(r'\s*\(.*\)\s*', text) is not None


def has_name(text):
    return len(re.sub(r'[\W_]', '', text)) >= 2


class PythonIndex(html.parser.HTMLParser):
    """Reads Sphinx's genindex: <li> entries, nested <ul> sub-entries; an
    entry's text is its first link's text, or bare text before a <ul>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []      # open <li> entries: dict(text, links, in_a, sub)
        self.entries = []    # (parent text or None, text, [hrefs])
        self.href = None
        self.in_table = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'table' and 'indextable' in (a.get('class') or ''):
            self.in_table = True
        if not self.in_table:
            return
        if tag == 'li':
            self.stack.append({'text': '', 'links': [], 'first_done': False, 'link_text': ''})
        elif tag == 'a' and self.stack:
            self.href = a.get('href')
        elif tag == 'ul' and self.stack:
            self.stack[-1]['first_done'] = True

    def handle_endtag(self, tag):
        if tag == 'table':
            self.in_table = False
        if not self.in_table:
            return
        if tag == 'a' and self.stack and self.href is not None:
            e = self.stack[-1]
            e['links'].append(self.href)
            if not e['first_done'] and not e['text'].strip():
                e['text'] = e['link_text']
            e['first_done'] = True
            e['link_text'] = ''
            self.href = None
        elif tag == 'li' and self.stack:
            e = self.stack.pop()
            parent = self.stack[-1]['text'].strip() if self.stack else None
            self.entries.append((parent, e['text'].strip(), e['links']))

    def handle_data(self, data):
        if not self.in_table or not self.stack:
            return
        e = self.stack[-1]
        if self.href is not None:
            e['link_text'] += data
        elif not e['first_done']:
            e['text'] += data


class PostgresIndex(html.parser.HTMLParser):
    """Reads DocBook's bookindex: <dt>TERM, <a>..</a>, <a>..</a></dt>, and
    sub-terms in a <dd><dl> after it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.terms = []      # the open <dt> terms by nesting level
        self.depth = 0       # <dl> nesting
        self.current = None  # the open <dt>: dict(text, links)
        self.in_a = False
        self.entries = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'dl':
            self.depth += 1
        elif tag == 'dt':
            self.current = {'text': '', 'links': [], 'in_text': True}
        elif tag == 'a' and self.current is not None and 'indexterm' in (a.get('class') or ''):
            self.current['links'].append(a.get('href'))
            self.current['in_text'] = False
            self.in_a = True

    def handle_endtag(self, tag):
        if tag == 'dl':
            self.depth -= 1
        elif tag == 'a':
            self.in_a = False
        elif tag == 'dt' and self.current is not None:
            text = self.current['text'].strip().rstrip(',').strip()
            del self.terms[self.depth - 1:]
            while len(self.terms) < self.depth - 1:
                self.terms.append('')
            parent = ' '.join(t for t in self.terms if t) or None
            self.terms.append(text)
            self.entries.append((parent, text, self.current['links']))
            self.current = None

    def handle_data(self, data):
        if self.current is not None and self.current['in_text'] and not self.in_a:
            self.current['text'] += data


def build(site):
    host, root, tag = SITES[site]
    if site == 'python':
        p = PythonIndex()
        path = os.path.join(root, 'genindex-all.html')
    else:
        p = PostgresIndex()
        path = os.path.join(root, 'bookindex.html')
    with open(path, encoding='utf-8') as f:
        p.feed(f.read())
    index_page = os.path.basename(path)
    queries = {}   # word key -> [query text, set of URLs]
    for parent, text, links in p.entries:
        if not links:
            continue
        if parent is None:
            base, scope = name_and_scope(text)
            query_words = scope + words_of(base)
        elif qualifier_only(text):
            # The sub-entry's qualifier replaces the parent's.
            base, _ = name_and_scope(parent)
            _, scope = name_and_scope('x ' + text)
            query_words = scope + words_of(base)
        else:
            base, pscope = name_and_scope(parent)
            sname, sscope = name_and_scope(text)
            if not has_name(sname):
                continue
            query_words = pscope + sscope + words_of(base) + words_of(sname)
        if not has_name(base):
            continue
        seen, words = set(), []
        for w in query_words:
            if w.lower() not in seen:
                seen.add(w.lower())
                words.append(w)
        query = ' '.join(words)
        if not query or '\t' in query:
            continue
        urls = set()
        for href in links:
            if not href:
                continue
            rel = urllib.parse.urldefrag(href)[0]
            rel = urllib.parse.unquote(rel)
            if not rel or rel.startswith(('http:', 'https:', '/', '..')) or rel == index_page:
                continue
            if not os.path.isfile(os.path.join(root, rel)):
                continue
            urls.add('http://%s/%s' % (host, urllib.parse.quote(rel)))
        if not urls:
            continue
        key = ' '.join(sorted(seen))
        if key in queries:
            queries[key][1] |= urls
        else:
            queries[key] = [query, urls]
    out = {}
    for query, urls in queries.values():
        if len(urls) > MAX_RELEVANT:
            continue
        qid = '%s-%s' % (tag, hashlib.sha1(query.encode('utf-8')).hexdigest()[:8])
        out[qid] = (query, sorted(urls))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('site', choices=sorted(SITES))
    ap.add_argument('--n', type=int, default=300, help='queries to print (0 = all)')
    ap.add_argument('--root', help='docroot of the site (default: where Debian installs it)')
    a = ap.parse_args()
    if a.n < 0:
        sys.exit('--n must not be negative')
    if a.root:
        host, _, tag = SITES[a.site]
        SITES[a.site] = (host, a.root, tag)
    try:
        qs = build(a.site)
    except OSError as e:
        sys.exit('%s: %s (is the corpus installed? ../shared/corpus/install.sh)' % (a.site, e))
    qids = sorted(qs)
    if a.n:
        qids = qids[:a.n]
    for qid in qids:
        query, urls = qs[qid]
        print('%s\t%s\t%s' % (qid, query, ','.join(urls)))
    print('%s: %d candidate queries, %d printed' % (a.site, len(qs), len(qids)), file=sys.stderr)


if __name__ == '__main__':
    main()
