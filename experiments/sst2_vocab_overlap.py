"""How much of SST-2's vocabulary do the Gutenberg books teach? For each threshold k, the share of SST-2 dev
words (tokens and distinct types, lower-cased runs of letters) that occur fewer than k times in the books.

    python experiments/sst2_vocab_overlap.py
"""

from __future__ import annotations

import collections
import re

from litebert.data.tasks import get_task, read_examples
from litebert.lab.shared_data import shared_data_dir

WORD = re.compile(r"[a-z]+")


def main() -> None:
    data = shared_data_dir()
    books: collections.Counter = collections.Counter()
    for path in sorted((data / "gutenberg").glob("*.txt")):
        books.update(WORD.findall(path.read_text(encoding="utf-8").lower()))
    dev = read_examples(get_task("sst-2"), data / "glue" / "SST-2", "dev")
    words = [w for e in dev for w in WORD.findall(e.text_a.lower())]
    types = set(words)
    print(f"books: {sum(books.values()):,} words; SST-2 dev: {len(words):,} words, {len(types):,} types")
    for k in (1, 5, 20):
        seen = "never seen" if k == 1 else f"seen fewer than {k} times"
        print(f"{seen} in the books: {sum(books[w] < k for w in words) / len(words):.1%} of "
              f"SST-2 dev words, {sum(books[w] < k for w in types) / len(types):.1%} of its types")
    print("counts in the books: " + ", ".join(f"{w} {books[w]}" for w in
                                               ("movie", "film", "director", "boring", "funny", "dull", "good")))


if __name__ == "__main__":
    main()
