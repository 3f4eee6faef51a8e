"""Fixtures of the CLI tests: tiny ONNX models on disk and a helper that runs the command in-process."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cli_models as models  # noqa: E402

from taso_relay.cli import main  # noqa: E402


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli_models")
    models.save(models.small_cnn(), d / "small.onnx")
    models.save(models.dynamic_batch(), d / "dynamic_batch.onnx")
    models.save(models.dynamic_pad(), d / "dynamic_pad.onnx")
    models.save(models.einsum(), d / "einsum.onnx")
    models.save(models.einsum(head=True), d / "einsum_head.onnx")
    return d


@pytest.fixture(scope="session")
def small(model_dir) -> Path:
    return model_dir / "small.onnx"


@pytest.fixture
def cli(capsys):
    """cli(*argv) -> (exit status, stdout, stderr) of `taso-relay argv...` run in this process."""
    def run(*argv):
        status = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return status, out, err
    return run
