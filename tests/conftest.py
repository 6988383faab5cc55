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


@pytest.fixture(autouse=True)
def _torch_threads():
    # Tests are small: more threads than cores only adds noise on the 2-core CI machine.
    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    yield
