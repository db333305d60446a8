"""shuffle_words.py - the same text with its words in random order (a control for perplexity).

    python3 tools/train/shuffle_words.py IN.txt OUT.txt [--seed S]

Owns: one thing. Every whitespace-separated word of IN is kept (same words, same counts) but
the order is a seeded random permutation over the whole text; each line keeps its number of
words, so line breaks stay where they were. A model that learned word order scores this text
far worse than the original; one that only learned word frequencies scores both alike.
"""
import random
import sys


def main():
    if len(sys.argv) not in (3, 5):
        sys.exit("usage: shuffle_words.py IN.txt OUT.txt [--seed S]")
    seed = int(sys.argv[4]) if len(sys.argv) == 5 else 1
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    words = [w for ln in lines for w in ln.split()]
    random.Random(seed).shuffle(words)
    out, i = [], 0
    for ln in lines:
        k = len(ln.split())
        out.append(" ".join(words[i:i + k]))
        i += k
    open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out))


if __name__ == "__main__":
    main()
