"""`litebert ARGS` with dist.destroy_process_group wrapped to report, on stderr, how many DistributedDataParallel
wrappers are still alive when it is called. Run under torchrun by test_ddp_teardown.py."""

import gc
import sys

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from litebert.cli import main

destroy_process_group = dist.destroy_process_group


def reporting_destroy_process_group(*args, **kwargs):
    # No gc.collect() here: what counts is what the caller left behind, collected or not.
    live = sum(isinstance(obj, DistributedDataParallel) for obj in gc.get_objects())
    print(f"DDP wrappers alive at process-group teardown: {live}", file=sys.stderr, flush=True)
    destroy_process_group(*args, **kwargs)


if __name__ == "__main__":
    dist.destroy_process_group = reporting_destroy_process_group
    sys.exit(main(sys.argv[1:]))
