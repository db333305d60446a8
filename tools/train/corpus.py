"""corpus.py - the training corpus: the King James Bible from Debian's bible-kjv package.

    python3 tools/train/corpus.py OUT_DIR

Owns: extracting the text and splitting it. Runs the package's `bible` program over the whole
book (Genesis 1:1 to Revelation 22:21, one verse per line), drops the verse numbers and writes
each chapter as its heading line ("Genesis 1"), its verses one per line, and a blank line.
Chapters are split deterministically by their index in the book (1189 chapters):
index % 50 == 24 -> validation, index % 50 == 49 -> test, the rest -> training (about 96 / 2 /
2 %). The test split is never trained on. Writes OUT_DIR/{train,val,test}.txt (UTF-8).
Licence of the text: the KJV translation (1611) is in the public domain; the bible-kjv-text
package's copyright file says so ("The copyright for the King James Version text of the Bible
is expired").
"""
import os
import re
import subprocess
import sys


def chapters():
    out = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True,
                         stdout=subprocess.PIPE).stdout.decode("utf-8")
    chap, head = [], None
    for line in out.split("\n"):
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            chap.append(m.group(1).strip())
        elif line.strip():
            if head is not None:
                yield head, chap
            head, chap = line.strip(), []
    if head is not None:
        yield head, chap


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: corpus.py OUT_DIR")
    od = sys.argv[1]
    os.makedirs(od, exist_ok=True)
    parts = {"train": [], "val": [], "test": []}
    n = 0
    for i, (head, verses) in enumerate(chapters()):
        split = "val" if i % 50 == 24 else "test" if i % 50 == 49 else "train"
        parts[split].append(head + "\n" + "\n".join(verses) + "\n\n")
        n += 1
    if n != 1189:
        sys.exit("corpus.py: expected 1189 chapters from `bible`, got %d" % n)
    for k, v in parts.items():
        with open(os.path.join(od, k + ".txt"), "w", encoding="utf-8") as f:
            f.write("".join(v))
        print("corpus: %s: %d chapters, %d bytes" % (k, len(v), sum(len(x) for x in v)))


if __name__ == "__main__":
    main()
