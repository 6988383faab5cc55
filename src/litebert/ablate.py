"""Moved to `litebert.lab.ablate`. This re-export stays only while experiments/sst2_transfer.py (a running study,
issue 23) still imports the old name; delete it once that script imports `litebert.lab.ablate`."""

from litebert.lab.ablate import finetune_sst2, run_lock  # noqa: F401
