#!/usr/bin/env python3
"""Points the guides' links to each other at their pages in the built DocC site.

The guides live once, in Docs/, and read on GitHub with relative links (`[Mixing](Mixing.md)`);
the DocC catalogs hold them as articles through symbolic links. In the site a link to `Mixing.md`
would lead nowhere, so this rewrites, in the site's render data, each link to a guide into the
path of the article that guide became (`/documentation/bufferqueue/mixing`), keeping its anchor.

Usage: docs-guide-links.py SITE_DIR   (prints how many links it rewrote; exit 1 if a link to a
Markdown file is left that is not a guide)
"""
import glob, json, os, re, sys


def main():
    site = sys.argv[1]
    pages = {}
    for link in glob.glob("Sources/*/*.docc/*.md"):
        if os.path.islink(link):
            module = link.split("/")[1]
            article = os.path.basename(link)[:-3]
            pages[os.path.basename(os.path.realpath(link))] = f"/documentation/{module.lower()}/{article.lower()}"
    # The reference's url, not its identifier (the page's content names the reference by that).
    pattern = re.compile(r'"(url)":"([A-Za-z]+\.md)(#[^"]*)?"')
    rewritten, unknown = 0, set()
    for path in glob.glob(os.path.join(site, "data", "documentation", "**", "*.json"), recursive=True):
        text = open(path, encoding="utf-8").read()

        def point(match):
            nonlocal rewritten
            key, name, anchor = match.group(1), match.group(2), match.group(3) or ""
            if name not in pages:
                unknown.add(name)
                return match.group(0)
            rewritten += 1
            return f'"{key}":"{pages[name]}{anchor}"'

        new = pattern.sub(point, text)
        if new != text:
            json.loads(new)  # still valid
            open(path, "w", encoding="utf-8").write(new)
    print(f"{rewritten} links between guides now point at their articles")
    for name in sorted(unknown):
        print(f"a link to {name}, which is not a guide in a documentation catalog")
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
