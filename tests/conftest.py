import os

import pytest

from litebert.lab.shared_data import shared_data_dir


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data. Skips when absent, except under CI, where its absence is a failure."""
    root = shared_data_dir()
    if not root.is_dir():
        msg = f"shared data not found at {root} (set LITEBERT_SHARED_DATA to its folder)"
        if os.environ.get("CI"):
            pytest.fail(msg + "; CI must have it")
        pytest.skip(msg)
    return root


@pytest.fixture(scope="session")
def en_tokenizer_dir(shared_data, tmp_path_factory):
    """The official ALBERT 30k SentencePiece vocabulary, saved as a tokenizer directory."""
    from litebert.tokenizer import AlbertTokenizer

    out = tmp_path_factory.mktemp("tok_en")
    AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model").save_pretrained(out)
    return out


# --------------------------------------------------------------------------------------------- the GPU tier
# `pytest -m gpu` (and `make gpu-check`) run tests/test_gpu*.py on the device this fixture names: CUDA by default,
# skipped with the reason where there is none, so CI stays green without one. LITEBERT_GPU_TEST_DEVICE=cpu runs the
# same tests' logic on the CPU, to check the tests themselves on a machine without a GPU.
GPU_TEST_DEVICE = "LITEBERT_GPU_TEST_DEVICE"


@pytest.fixture(scope="session")
def gpu_device():
    import torch

    name = os.environ.get(GPU_TEST_DEVICE, "cuda")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"no CUDA device (torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}); "
                    f"{GPU_TEST_DEVICE}=cpu runs these tests' logic on the CPU")
    if device.type not in ("cuda", "cpu"):
        pytest.fail(f"{GPU_TEST_DEVICE}={name}: expected cuda, cuda:N or cpu")
    return device


def threads_per_test() -> int:
    """Torch threads per test process: the cores shared among pytest-xdist's workers (`make test` runs one per
    core), at most 2. Tests are small: more threads than cores only adds noise on the 2-core CI machine, and
    threads that wait for each other across workers train several times slower (docs/recipes.md)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, min(2, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _torch_threads():
    import torch

    torch.set_num_threads(threads_per_test())
    yield


# --------------------------------------------------------------------------------------------- the test tiers
# `make test-fast` runs the modules below (unit tests of each layer, parity with the references; about a minute
# of CPU); `make test` runs everything, as CI does. A module belongs here when all of it stays cheap: pick by the
# CPU seconds that `LITEBERT_TEST_CPU=cpu.json pytest ...` records (CPU, not wall clock: it does not depend on
# what else the machine runs; under pytest-xdist each worker writes cpu.json.gwN).
FAST_MODULES = {
    "test_config", "test_layering", "test_metrics", "test_optim", "test_option_checks", "test_json_files",
    "test_progress", "test_device", "test_model", "test_parity_hf", "test_tasks", "test_corpus", "test_heads",
    "test_tokenizer", "test_tokenizer_json", "test_health", "test_hub_cache", "test_batching",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in FAST_MODULES:
            item.add_marker(pytest.mark.fast)


_cpu_seconds: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get("LITEBERT_TEST_CPU"):
        yield
        return
    import resource

    def used():
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    start = used()
    yield
    _cpu_seconds[item.nodeid] = used() - start


def pytest_sessionfinish(session):
    path = os.environ.get("LITEBERT_TEST_CPU")
    if path and _cpu_seconds:
        import json

        if worker := os.environ.get("PYTEST_XDIST_WORKER"):  # each xdist worker records its own tests
            path = f"{path}.{worker}"

        with open(path, "w") as f:
            json.dump(dict(sorted(_cpu_seconds.items(), key=lambda kv: -kv[1])), f, indent=1)
