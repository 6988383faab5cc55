"""Parameter counts of our configs next to the paper's tables (Lan et al. 2020, Tables 1, 3 and 4).

Convention: the encoder as `AlbertModel` builds it (embeddings, E->H projection when E != H, the shared layers,
the pooler), without any pretraining or task head. Under it the released configs give exactly 11,683,584 /
17,683,968 / 58,724,864 / 222,595,584, the figures behind the paper's rounded 12M / 18M / 60M / 235M (the paper's
235M for xxlarge counts more than this convention does; the exact released count is 222,595,584).
"""

from __future__ import annotations

from litebert.config import AlbertConfig
from litebert.model import encoder_parameters

# (label, preset, overrides, the paper's rounded figure)
TABLE_1 = [
    ("BERT-base", "bert-base", {}, "108M"),
    ("BERT-large", "bert-large", {}, "334M"),
    ("ALBERT-base", "albert-base", {}, "12M"),
    ("ALBERT-large", "albert-large", {}, "18M"),
    ("ALBERT-xlarge", "albert-xlarge", {}, "60M"),
    ("ALBERT-xxlarge", "albert-xxlarge", {}, "235M"),
]
_NOT_SHARED = {64: "87M", 128: "89M", 256: "93M", 768: "108M"}
_ALL_SHARED = {64: "10M", 128: "12M", 256: "16M", 768: "31M"}
TABLE_3 = ([(f"not-shared E={e}", "albert-base", {"embedding_size": e, "sharing": "none"}, p)
            for e, p in _NOT_SHARED.items()]
           + [(f"all-shared E={e}", "albert-base", {"embedding_size": e}, p) for e, p in _ALL_SHARED.items()])
_SHARING = {768: {"all": "31M", "attention": "83M", "ffn": "57M", "none": "108M"},
            128: {"all": "12M", "attention": "64M", "ffn": "38M", "none": "89M"}}
TABLE_4 = [(f"E={e} {mode}", "albert-base", {"embedding_size": e, "sharing": mode}, p)
           for e, modes in _SHARING.items() for mode, p in modes.items()]


count_parameters = encoder_parameters  # config -> encoder + pooler parameters (the model's own count)


def table_rows(table) -> list[tuple[str, int, str, AlbertConfig]]:
    rows = []
    for label, preset, overrides, paper in table:
        config = AlbertConfig.from_preset(preset, **overrides)
        rows.append((label, count_parameters(config), paper, config))
    return rows


def format_tables() -> str:
    lines = []
    for title, table in (("Table 1: released configurations", TABLE_1),
                         ("Table 3: embedding size E (ALBERT-base)", TABLE_3),
                         ("Table 4: cross-layer sharing (ALBERT-base)", TABLE_4)):
        lines += [title, f"  {'model':<22} {'L':>3} {'H':>5} {'E':>4} {'sharing':>9} {'parameters':>13} {'paper':>6}"]
        for label, n, paper, c in table_rows(table):
            lines.append(f"  {label:<22} {c.num_hidden_layers:>3} {c.hidden_size:>5} {c.embedding_size:>4} "
                         f"{c.sharing:>9} {n:>13,} {paper:>6}")
        lines.append("")
    return "\n".join(lines)
