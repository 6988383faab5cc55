"""A DDP run tears down in one order on every exit: the DistributedDataParallel wrapper first, then its process
group. The other order leaves gloo's threads to be torn down at interpreter exit, where a rank once aborted
(SIGABRT) after a non-finite-loss stop, so the error run ended in a signal instead of exit code 2. That abort is
rare; the order that causes it is checked here directly."""

from __future__ import annotations

from pathlib import Path

from harness import finish, pretrain_args, start

PROBE = (str(Path(__file__).with_name("ddp_teardown_probe.py")),)


def test_the_ddp_wrapper_is_gone_before_its_process_group_on_every_exit(tiny_data, tmp_path):
    finished = start(pretrain_args(tiny_data, tmp_path / "finished", steps=2, save_every=2), nproc=2, program=PROBE)
    stopped = start(pretrain_args(tiny_data, tmp_path / "stopped", nan_policy="error"), nproc=2,
                    fault="nan_loss:3:1", program=PROBE)
    finished, stopped = finish(finished), finish(stopped)
    finished_err, stopped_err = finished.stderr, stopped.stderr
    assert finished.returncode == 0, finished_err[-3000:]
    assert "step 4: non-finite loss or gradient" in stopped_err and "exitcode  : 2" in stopped_err, stopped_err[-3000:]
    for err in (finished_err, stopped_err):
        reports = [line.split("]:", 1)[-1] for line in err.splitlines() if "process-group teardown" in line]
        assert reports == ["DDP wrappers alive at process-group teardown: 0"] * 2, err[-3000:]
