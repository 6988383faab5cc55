"""Moved to `litebert.lab.shared_data`. This re-export stays only while experiments/sst2_transfer.py (a running
study, issue 23) still imports the old name; delete it once that script imports `litebert.lab.shared_data`."""

from litebert.lab.shared_data import shared_data_dir  # noqa: F401
