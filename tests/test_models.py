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

    encoders = {arch: ARCHITECTURES[arch].encoder(ARCHITECTURES[arch].build(tiny_model, train_params(arch), "cpu"))
                for arch in ("ce", "cbe", "be")}
    encoders["mlm"] = masked_lm_from(tiny_model)
    encoders["pretrain"] = build_encoder(tiny_model, "cls", 32, "cpu")[0].auto_model
    assert {name: m.config._attn_implementation for name, m in encoders.items()} == dict.fromkeys(encoders, "sdpa")


def test_r6_a_missing_local_path_shaped_like_a_hub_id_is_refused_while_planning(tmp_path, monkeypatch):
    """Issue 56 R6: `base_model: models/nothere` (a mistyped local path) looked like a hub id (org/name): a dry run
    and a rehearsal (which stands a tiny model in for it) accepted it; only the real job failed, at the hub. A
    reference whose first folder is `models` (the project's folder for local models) or a folder of the project is
    a local path, and a missing one stops planning, in a dry run and in a rehearsal alike; hub ids plan as
    before."""
    from conftest import plan_shipped

    from augsbert.config.load import ConfigError
    from augsbert.config.rehearsal import PROJECT_ENV

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    message = ("model 'models/nothere': no such local directory models/nothere; a reference starting with models/ "
               "names a local path (the project folder for local models), not a hub id: check the path")
    with pytest.raises(ModelResolutionError) as err:
        reference_kind("models/nothere")
    assert str(err.value) == message
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "models" / "mine" / "config.json").write_text("{}")
    (tmp_path / "data").mkdir()
    assert reference_kind("models/mine") == "path"
    with pytest.raises(ModelResolutionError, match=r"no such local directory models/mien \(did you mean models/mine\?\)"):
        reference_kind("models/mien")
    with pytest.raises(ModelResolutionError, match="starting with data/ names a local path .a folder of the project."):
        reference_kind("data/model")  # any folder of the project
    with pytest.raises(ModelResolutionError, match=r"^model './models/x': no such local directory models/x: check"):
        reference_kind("./models/x")
    for hub_id in ("sentence-transformers/all-MiniLM-L6-v2", "google-bert/bert-base-uncased", "bert-base-uncased"):
        assert reference_kind(hub_id) == "hub"  # shipped references keep their kind (and keys)
    # planning: a dry run's and a rehearsal's (the rehearsal reads relative paths from the project, PROJECT_ENV)
    override = {"experiments": {"demo_zeroshot": {"base_model": "models/nothere"}}}
    with pytest.raises(ConfigError, match=f"^experiments.demo_zeroshot.base_model: {message}$".replace("(", r"\(")
                       .replace(")", r"\)")):
        plan_shipped(override, grids=False)
    (tmp_path / ".rehearsal").mkdir()
    monkeypatch.chdir(tmp_path / ".rehearsal")
    monkeypatch.setenv(PROJECT_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match=f"experiments.demo_zeroshot.base_model: model 'models/nothere': no such "
                                          f"local directory {tmp_path}/models/nothere; "):
        plan_shipped({**override, "rehearse": True}, grids=False)
