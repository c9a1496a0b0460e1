import os
from pathlib import Path

import pytest

from augsbert.models import ModelResolutionError, resolve_device, resolve_model
from augsbert.store.model_refs import reference_kind


def test_alias_resolves_to_packaged_model(minilm_path):
    # the packaged model's own path is the expected value; nothing is loaded
    path = resolve_model("minilm-l6")
    assert path == minilm_path and (Path(path) / "config.json").is_file()


def test_local_path(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path / "m")) == str((tmp_path / "m").resolve())


def test_a_directory_or_file_that_is_not_a_model(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelResolutionError) as err:
        reference_kind(str(tmp_path / "empty"))
    assert str(err.value) == (
        f"model '{tmp_path / 'empty'}': the directory {tmp_path / 'empty'} holds no config.json, so it is not a "
        "model; give a directory saved by save_pretrained / SentenceTransformer.save (or downloaded with `hf download`)")
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(ModelResolutionError, match="weights.bin is a file; give a model directory"):
        reference_kind(str(tmp_path / "weights.bin"))


def test_missing_local_path_is_an_error(tmp_path):
    with pytest.raises(ModelResolutionError, match="no such local directory"):
        resolve_model(str(tmp_path / "absent"))
    with pytest.raises(ModelResolutionError):
        reference_kind("./models/absent")


def test_unreachable_hub_id_explains_offline_use(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert reference_kind("sentence-transformers/all-mpnet-base-v2") == "hub"
    with pytest.raises(ModelResolutionError) as err:
        resolve_model("sentence-transformers/all-mpnet-base-v2")
    msg = str(err.value)
    assert "could not provide it" in msg and "hf download sentence-transformers/all-mpnet-base-v2" in msg
    assert "base_model: models/all-mpnet-base-v2" in msg


def test_device_selection(monkeypatch):
    import torch

    monkeypatch.delenv("AUGSBERT_DEVICE", raising=False)
    assert resolve_device("cpu") == "cpu"
    monkeypatch.setenv("AUGSBERT_DEVICE", "cpu")
    assert resolve_device() == "cpu"
    from augsbert.config.load import ConfigError

    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            resolve_device("cuda")
        monkeypatch.setenv("AUGSBERT_DEVICE", "auto")
        assert resolve_device() in {"cpu", "mps"}
    # issue 26 case 5: `cuda:99` was accepted and failed later with a message that said `cuda`
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == "cuda:1"
    for wrong in ("cuda:2", "cuda:99"):
        with pytest.raises(ConfigError, match=f"device '{wrong}' requested, but torch sees 2 CUDA GPU\\(s\\): "
                                              "cuda:0 to cuda:1"):
            resolve_device(wrong)
    for wrong in ("cuda:x", "banana"):  # issue 41: not a device at all (banana ended in torch's RuntimeError)
        with pytest.raises(ConfigError, match=f"device '{wrong}': not a device; use auto, cpu, cuda, cuda:N"):
            resolve_device(wrong)


def test_every_trainer_builds_its_model_with_sdpa_attention(tiny_model):
    """PyTorch's scaled-dot-product attention (fused kernels on a GPU) in every trained model: transformers picks it
    for every architecture that supports it (BERT does), and nothing of ours asks for another (issue 25 item 5)."""
    from augsbert.models.architectures import ARCHITECTURES
    from augsbert.models.mlm import masked_lm_from
    from augsbert.training.pretrain import build_encoder
    from conftest import train_params

    params = train_params()
    encoders = {arch: ARCHITECTURES[arch].encoder(ARCHITECTURES[arch].build(tiny_model, params, "cpu"))
                for arch in ("ce", "cbe", "be")}
    encoders["mlm"] = masked_lm_from(tiny_model)
    encoders["pretrain"] = build_encoder(tiny_model, "cls", 32, "cpu")[0].auto_model
    assert {name: m.config._attn_implementation for name, m in encoders.items()} == dict.fromkeys(encoders, "sdpa")
