#!/usr/bin/env python3
"""Opens the built DocC site in a headless Chromium and checks what it renders.

The DocC site is a JavaScript app: its HTML files are all the same shell, and the page appears only
once the app has run. So this serves `.build/docs` on a loopback port, has Chromium load each page
and dump the DOM it rendered, and checks that every product's landing page and every article show
their title (the page's h1) and their first paragraph (the abstract under it), as the catalogs'
Markdown says, and that no link on them leads to a Markdown file (a guide's link to another guide
must lead to its article).

Usage: check-docs-site.py SITE_DIR MODULE...   (exit 1 when a page does not render as written)
"""
import functools, html.parser, http.server, os, re, shutil, subprocess, sys, threading

CHROMIUM = next((b for b in ("chromium-headless-shell", "chromium") if shutil.which(b)), None)


class Rendered(html.parser.HTMLParser):
    """The text of the page's h1.title and of the first .abstract after it."""

    def __init__(self):
        super().__init__()
        self.title, self.abstract = "", ""
        self.links = []
        self._in, self._depth = None, 0

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "a" and dict(attrs).get("href"):
            self.links.append(dict(attrs)["href"])
        if self._in:
            self._depth += 1
        elif tag == "h1" and "title" in classes and not self.title:
            self._in, self._depth = "title", 1
        elif "abstract" in classes and self.title and not self.abstract:
            self._in, self._depth = "abstract", 1

    def handle_endtag(self, tag):
        if self._in:
            self._depth -= 1
            if self._depth == 0:
                self._in = None

    def handle_data(self, data):
        if self._in == "title":
            self.title += data
        elif self._in == "abstract":
            self.abstract += data


def words(text):
    """Letters and digits only, so that Markdown marks, smart quotes and spacing do not count."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)           # [text](link) -> text
    text = re.sub(r"``(?:/?\w+/)*([^`]*?)``", r"\1", text)          # ``Module/Symbol`` -> Symbol
    text = re.sub(r"<doc:[^>]*>", "", text)
    return re.sub(r"[^0-9A-Za-z]", "", text).lower()


def expected(markdown_path):
    """The page's title and first paragraph, from its Markdown."""
    lines = open(markdown_path, encoding="utf-8").read().split("\n")
    title = lines[0].lstrip("# ").strip()
    paragraph, started = [], False
    for line in lines[1:]:
        if not line.strip():
            if started:
                break
            continue
        if line.startswith(("#", "```", "@", "|", "- ")):
            if started:
                break
            continue
        started = True
        paragraph.append(line)
    return title, " ".join(paragraph)


def render(url):
    result = subprocess.run([CHROMIUM, "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
                             "--dump-dom", url], capture_output=True, text=True, timeout=120)
    parser = Rendered()
    parser.feed(result.stdout)
    return parser.title.strip(), parser.abstract.strip(), parser.links


def main():
    site, modules = sys.argv[1], sys.argv[2:]
    if CHROMIUM is None:
        print("no headless Chromium: install chromium-headless-shell (make docs does)")
        return 1
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    failures, pages = [], 0
    for module in modules:
        catalog = f"Sources/{module}/{module}.docc"
        if not os.path.isdir(catalog):
            failures.append(f"{module}: no documentation catalog ({catalog})")
            continue
        for name in sorted(os.listdir(catalog)):
            if not name.endswith(".md"):
                continue
            article = name[:-3]
            path = f"/documentation/{module.lower()}" + ("" if article == module else f"/{article.lower()}")
            want_title, want_paragraph = expected(os.path.join(catalog, name))
            if article == module:
                want_title = module
            title, abstract, links = render(base + path)
            pages += 1
            # A guide's link to another guide (`Mixing.md`) must lead to that guide's article.
            broken = [link for link in links if re.search(r"\.md($|#)", link)]
            if broken:
                failures.append(f"{path}: links to Markdown files the site does not have: {broken}")
                continue
            if words(title) != words(want_title):
                failures.append(f"{path}: the title rendered is {title!r}, not {want_title!r}")
            elif not words(want_paragraph) or words(abstract)[:80] != words(want_paragraph)[:80]:
                failures.append(f"{path}: the first paragraph rendered is {abstract[:100]!r}, not {want_paragraph[:100]!r}")
            else:
                print(f"ok {path}: {title} — {abstract[:70]}")
    server.shutdown()
    for failure in failures:
        print("FAILED", failure)
    print(f"{pages} pages rendered in {os.path.basename(CHROMIUM)}, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
