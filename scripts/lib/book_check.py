#!/usr/bin/env python3
"""Checks the tour as a book (docs/ with docs/SUMMARY.md), for scripts/book.sh.

Two checks, each usable alone:

  sources  (no mdBook needed; scripts/test.sh runs this one)
    - every chapter SUMMARY.md lists exists, and every page in docs/ is
      listed (an unlisted page is not rendered, so links to it break);
    - every {{#include FILE[:ANCHOR]}} names a file that exists, and the
      anchor's `ANCHOR: name` and `ANCHOR_END: name` lines are in it;
    - every relative link and image in every page resolves: to a page or
      file inside docs/, or to a file or directory of the repository.

  built OUT  (after `mdbook build`; OUT is the book, target/book/docs)
    - no {{#include}} is left unexpanded in any page;
    - every relative href/src in the HTML resolves inside the book, with
      its #fragment naming an id of the target page; links that leave the
      book to a repository file get a copy of that file beside the book
      (target/book/PATH, mirroring the repository; Markdown files as a
      plain-text HTML page), so the built book is browsable offline.

Prints one line per problem and exits 1 if there was any.
"""

import html
import html.parser
import os
import re
import shutil
import sys
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = os.path.join(ROOT, "docs")

INCLUDE = re.compile(r"\{\{#include\s+([^}\s:]+)(?::([A-Za-z0-9_-]+))?\s*\}\}")
# [text](target) and ![alt](target); the target ends at whitespace or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")

problems = []


def problem(msg):
    problems.append(msg)
    print(f"book: {msg}")


def rel(path):
    return os.path.relpath(path, ROOT)


def summary_chapters():
    chapters = []
    with open(os.path.join(DOCS, "SUMMARY.md"), encoding="utf-8") as f:
        for line in f:
            for target in LINK.findall(line):
                chapters.append(os.path.normpath(os.path.join(DOCS, target)))
    return chapters


def is_external(target):
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) is not None


def page_lines_outside_code(text):
    """The lines of a page that are not inside a fenced code block."""
    inside = False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield line


def check_include(page, path, anchor):
    target = os.path.normpath(os.path.join(os.path.dirname(page), path))
    if not os.path.isfile(target):
        problem(f"{rel(page)}: {{{{#include {path}}}}}: no such file")
        return
    if anchor is None:
        return
    with open(target, encoding="utf-8") as f:
        body = f.read()
    if not re.search(rf"ANCHOR:\s*{re.escape(anchor)}\b", body):
        problem(f"{rel(page)}: {{{{#include {path}:{anchor}}}}}: no 'ANCHOR: {anchor}' in {rel(target)}")
    if not re.search(rf"ANCHOR_END:\s*{re.escape(anchor)}\b", body):
        problem(f"{rel(page)}: {{{{#include {path}:{anchor}}}}}: no 'ANCHOR_END: {anchor}' in {rel(target)}")


def check_sources():
    chapters = summary_chapters()
    listed = set(chapters)
    for c in chapters:
        if not os.path.isfile(c):
            problem(f"docs/SUMMARY.md lists {rel(c)}, which does not exist")
    pages = []
    for d, _, files in os.walk(DOCS):
        for name in files:
            if name.endswith(".md"):
                pages.append(os.path.join(d, name))
    for page in sorted(pages):
        if os.path.basename(page) == "SUMMARY.md":
            continue
        if page not in listed:
            problem(f"{rel(page)} is not in docs/SUMMARY.md: the book would not render it")
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for path, anchor in INCLUDE.findall(text):
            check_include(page, path, anchor or None)
        for line in page_lines_outside_code(text):
            for target in LINK.findall(line):
                if is_external(target) or target.startswith("#"):
                    continue
                path = urllib.parse.unquote(target.split("#", 1)[0])
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
                if not resolved.startswith(ROOT + os.sep):
                    problem(f"{rel(page)}: link {target} leaves the repository")
                elif not os.path.exists(resolved):
                    problem(f"{rel(page)}: link {target}: no such file")
    return len(pages)


class Refs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("href", "src") and v:
                self.refs.append(v)


def parse(path):
    p = Refs()
    with open(path, encoding="utf-8", errors="replace") as f:
        p.feed(f.read())
    return p


def copy_out_of_book(book_root, target):
    """Puts the repository file that `target` (under book_root) stands for
    beside the book. Returns False if the repository has no such file."""
    repo_path = os.path.join(ROOT, os.path.relpath(target, book_root))
    if os.path.isdir(repo_path):
        return True
    if os.path.isfile(repo_path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(repo_path, target)
        return True
    # mdBook turned a link to a Markdown file into one to .html.
    md = repo_path[: -len(".html")] + ".md" if repo_path.endswith(".html") else None
    if md and os.path.isfile(md):
        with open(md, encoding="utf-8") as f:
            body = f.read()
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            name = html.escape(os.path.relpath(md, ROOT))
            f.write(f"<!doctype html><meta charset=utf-8><title>{name}</title>"
                    f"<p>{name}, as it is in the repository:</p><pre>{html.escape(body)}</pre>\n")
        return True
    return False


def check_built(out):
    out = os.path.abspath(out)
    book_root = os.path.dirname(out)  # target/book: mirrors the repository
    parsed = {}
    pages = []
    for d, _, files in os.walk(out):
        for name in files:
            if name.endswith(".html"):
                pages.append(os.path.join(d, name))
    for page in pages:
        parsed[page] = parse(page)
        with open(page, encoding="utf-8", errors="replace") as f:
            if INCLUDE.search(f.read()):
                problem(f"{os.path.relpath(page, out)}: an {{{{#include}}}} was left unexpanded")
    links = 0
    for page in sorted(pages):
        for ref in parsed[page].refs:
            if os.path.basename(page) == "404.html" and ref == "/":
                continue  # mdBook's 404 page links the site's root
            if is_external(ref) or ref.startswith("#") or ref.startswith("//"):
                if ref.startswith("#"):
                    frag = urllib.parse.unquote(ref[1:])
                    if frag and frag not in parsed[page].ids:
                        problem(f"{os.path.relpath(page, out)}: #{frag}: no such id on the page")
                continue
            links += 1
            path, _, frag = ref.partition("#")
            path = urllib.parse.unquote(path.split("?", 1)[0])
            target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if target.startswith(out + os.sep) or target == out:
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
                if not os.path.exists(target):
                    problem(f"{os.path.relpath(page, out)}: {ref}: not in the book")
                elif frag and target.endswith(".html"):
                    ids = parsed.get(target) or parse(target)
                    if urllib.parse.unquote(frag) not in ids.ids:
                        problem(f"{os.path.relpath(page, out)}: {ref}: no such id in {os.path.relpath(target, out)}")
            elif target.startswith(book_root + os.sep):
                if not copy_out_of_book(book_root, target):
                    problem(f"{os.path.relpath(page, out)}: {ref}: no such file in the repository")
            else:
                problem(f"{os.path.relpath(page, out)}: {ref}: leaves the repository")
    return len(pages), links


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "sources":
        n = check_sources()
        if not problems:
            print(f"book: sources ok ({n} pages, every include and link resolves)")
    elif len(sys.argv) == 3 and sys.argv[1] == "built":
        n, links = check_built(sys.argv[2])
        if not problems:
            print(f"book: built book ok ({n} pages, {links} relative links and images resolve)")
    else:
        print("usage: book_check.py sources | built OUT", file=sys.stderr)
        sys.exit(2)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
