"""bench/train_check.py's tiny CPU configuration: fastattn's CPU backend and torch's SDPA train the
same model from the same seed to the same loss curve (float32: the gap must be within the seed
noise, and the first step must agree to 1e-4). The GPU run (bf16, 300 steps) is the lead's."""
import importlib.util
import json
import pathlib

import pytest

pytest.importorskip("torch", reason="torch is not installed: the training check is skipped")
pytest.importorskip("matplotlib", reason="matplotlib is not installed: the training check is skipped")


def test_train_check_cpu(tmp_path):
    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "train_check.py"
    spec = importlib.util.spec_from_file_location("train_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--device", "cpu", "--steps", "20", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "train_check.json").read_text())
    assert record["verdict"]["passed"] and all(record["verdict"]["checks"].values())
    assert {len(c) for c in record["curves"].values()} == {20}
    assert (tmp_path / "train_check.png").stat().st_size > 10_000
