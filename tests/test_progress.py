"""Progress output: readable at 80 columns, visible on a 0-column pseudo-terminal, log lines above the bar."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from litebert.progress import eta, format_seconds, make_bar


def test_the_bar_with_a_pretraining_postfix_fits_80_columns():
    bar = make_bar(125000, 1200, "pretrain", file=io.StringIO(), columns=80)
    bar.set_postfix_str("loss=5.21 mlm=0.123 sop=0.512 lr=0.00176")
    shown = str(bar)
    assert len(shown) <= 80 and shown.endswith(", loss=5.21 mlm=0.123 sop=0.512 lr=0.00176"), shown
    assert "1200/125000" in shown


def test_a_terminal_that_reports_0_columns_gets_an_80_column_bar():
    bar = make_bar(10, 5, "finetune", file=io.StringIO(), columns=0)
    shown = str(bar)
    assert "5/10" in shown and len(shown) == 80 and "#####" in shown  # the bar itself is drawn


def test_on_a_0_column_pty_log_lines_land_above_the_bar():
    code = ("from litebert.progress import make_bar, say\n"
            "bar = make_bar(4, desc='finetune')\n"
            "for i in range(4):\n"
            "    bar.update(1)\n"
            "    say(f'step {i}: dev accuracy=0.5')\n"
            "bar.close()\n")
    parent, child = pty.openpty()  # a fresh pty reports 0 rows and 0 columns
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=child, stdout=child, stderr=child)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(parent, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(parent)
    text = b"".join(chunks).decode()
    assert proc.returncode == 0, text
    assert "4/4" in text  # the bar was drawn
    for i in range(4):  # each message on a line of its own, not glued into the bar
        assert any(line.strip().endswith(f"step {i}: dev accuracy=0.5") and "%|" not in line
                   for line in text.replace("\r", "\n").splitlines()), text


def test_elapsed_and_eta_read_as_clock_times():
    assert format_seconds(3723) == "1:02:03" and format_seconds(75) == "1:15" and format_seconds(None) == "?"
    assert eta(10.0, 5, 15) == 30.0 and eta(0.0, 0, 10) is None
    # another budget that ends the run sooner wins; one that ends later, or none, leaves the pace's estimate
    assert eta(10.0, 5, 15, 12.0) == 12.0 and eta(10.0, 5, 15, 90.0, None) == 30.0 and eta(10.0, 5, 15, -3.0) == 0.0
    assert eta(0.0, 0, 10, 20.0) == 20.0
