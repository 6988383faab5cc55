"""SST-2's training set is mostly sub-phrases of its sentences (the parse trees' nodes). Keep only the lines that are
not, as whole words, inside a longer line: the maximal phrases, in their original order.

    python experiments/sst2_maximal_phrases.py runs/tapt/sst2-train.txt runs/tapt/sst2-maximal.txt

On the 67,349 lines: 6,885 kept (133k words of 633k). One pass, longest first, each line looked up in the text
kept so far: a few minutes at one thread.
"""

from __future__ import annotations

import argparse


def maximal_phrases(lines: list[str]) -> list[int]:
    """Indices of the lines not contained (on word boundaries) in a longer or earlier-kept equal line, ascending."""
    padded = [" " + " ".join(line.split()) + " " for line in lines]  # spaces on both sides: whole words only
    kept, text = [], ""
    for i in sorted(range(len(padded)), key=lambda i: -len(padded[i])):
        if padded[i] not in text:
            kept.append(i)
            text += padded[i] + "\n"
    return sorted(kept)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("input", help="one phrase per line (SST-2's train.tsv, first column)")
    ap.add_argument("output")
    args = ap.parse_args()
    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    kept = maximal_phrases(lines)
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(lines[i] + "\n" for i in kept)
    print(f"{args.input}: {len(lines):,} lines, {len(kept):,} maximal -> {args.output}")


if __name__ == "__main__":
    main()
