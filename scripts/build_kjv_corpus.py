"""Build sinkexp/data/kjv.txt.xz, the built-in corpus of task=lm, from Debian's bible-kjv packages.

    apt-get download bible-kjv bible-kjv-text
    dpkg-deb -x bible-kjv_4.38_amd64.deb x && dpkg-deb -x bible-kjv-text_4.38_all.deb x
    x/usr/bin/bible -p x/usr/lib "gen1:1-rev22:21" > kjv_raw.txt
    python scripts/build_kjv_corpus.py kjv_raw.txt sinkexp/data/kjv.txt.xz

The King James Version (1611) is in the public domain (the package's copyright file says so).
Output: one document per chapter, "Genesis 1" then one verse per line (verse numbers and the
program's line wrapping removed), documents separated by one blank line; UTF-8 (ASCII in fact).
Nothing in sinkexp runs this script: the built file is in the repository.
"""

import lzma
import re
import sys

HEADER = re.compile(r"^(\S.*\S) (\d+)$")  # "Genesis 1", "1 Kings 3", "Song of Solomon 2"
VERSE = re.compile(r"^\s+\d+ (.*)$")


def chapters(lines):
    title, verses = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if HEADER.match(line) and not line.startswith(" "):
            if title:
                yield title, verses
            title, verses = line, []
        elif VERSE.match(line):
            verses.append(VERSE.match(line).group(1))
        else:  # a wrapped verse goes on
            verses[-1] += " " + line.strip()
    yield title, verses


def main(raw: str, out: str) -> None:
    with open(raw, encoding="utf-8") as f:
        docs = ["\n".join([title, *verses]) for title, verses in chapters(f)]
    text = "\n\n".join(docs) + "\n"
    with lzma.open(out, "wt", encoding="utf-8", preset=9) as f:
        f.write(text)
    print(f"{len(docs)} chapters, {len(text.encode())} bytes -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
