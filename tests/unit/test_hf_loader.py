"""Where a ``pretrained_model_name_or_path`` is (folder, local Hugging Face cache, hub id, wrong),
what is said when the hub is needed and cannot be reached, and the per-process weight cache:
one read per model, a new module per call, never shared parameters. Tiny models of
tests/hf_models.py; no network (``HF_HUB_OFFLINE`` set where the hub would be asked)."""

from __future__ import annotations

import shutil

import pytest

from ludwig_hpo.data import hf_loader


@pytest.fixture(autouse=True)
def _fresh_cache():
    hf_loader.clear_cache()
    yield
    hf_loader.clear_cache()


def test_a_saved_model_folder_resolves_to_the_folder(tiny_bert_dir):
    found = hf_loader.resolve(str(tiny_bert_dir))
    assert found.kind == "folder" and found.local and found.path == tiny_bert_dir.resolve()


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("./no/such/model", "model folder './no/such/model' not found"),
        ("bad name!!", "is neither a local folder nor a Hugging Face hub id"),
        ("a/b/c", "is neither a local folder nor a Hugging Face hub id"),
    ],
)
def test_a_name_that_is_neither_a_folder_nor_a_hub_id_is_one_line(name, said):
    with pytest.raises(hf_loader.HFModelError) as err:
        hf_loader.resolve(name)
    assert said in str(err.value) and "\n" not in str(err.value) and err.value.fix


def test_a_folder_without_config_json_is_refused(tmp_path):
    with pytest.raises(hf_loader.HFModelError, match="holds no config.json"):
        hf_loader.resolve(str(tmp_path))


def test_a_file_given_for_the_model_folder_names_its_folder(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(hf_loader.HFModelError, match="is a file, not a model folder") as err:
        hf_loader.resolve(str(tmp_path / "config.json"))
    assert err.value.fix and str(tmp_path) in err.value.fix


def test_a_well_formed_hub_id_not_cached_needs_the_hub(monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    found = hf_loader.resolve("owner/some-model")
    assert found.kind == "hub" and not found.local and found.path is None


def _cache_as_hub_download(cache, repo_id, model_dir):
    """Lay ``model_dir`` out as huggingface_hub's cache holds a downloaded ``repo_id``."""
    commit = "0" * 40
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(model_dir, repo / "snapshots" / commit)


def test_a_hub_id_in_the_local_cache_loads_offline(monkeypatch, tmp_path, tiny_bert_dir):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _cache_as_hub_download(tmp_path, "tiny/bert", tiny_bert_dir)
    found = hf_loader.resolve("tiny/bert")
    assert found.kind == "cache" and found.local
    assert hf_loader.read_config_dict(found)["hidden_size"] == 32
    tok = hf_loader.load_tokenizer("tiny/bert")
    assert tok.pad_token_id == 0 and len(tok) == 120


def test_offline_the_hub_is_not_asked_and_the_error_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hf_loader.hub_reachable("bert-base-uncased") == "HF_HUB_OFFLINE is set"
    with pytest.raises(hf_loader.HFModelError) as err:
        hf_loader.load_tokenizer("bert-base-uncased")
    text = str(err.value)
    assert "neither a local folder nor in the local Hugging Face cache" in text and "needs a network" in text


def test_weights_are_read_once_and_each_call_gets_its_own_parameters(tiny_bert_dir):
    import torch

    reads = len(hf_loader.READS)
    first = hf_loader.load_model(str(tiny_bert_dir))
    second = hf_loader.load_model(str(tiny_bert_dir), overrides={"hidden_dropout_prob": 0.3})
    assert len(hf_loader.READS) == reads + 1
    a, b = first.state_dict(), second.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not {id(p) for p in first.parameters()} & {id(p) for p in second.parameters()}
    with torch.no_grad():
        first.embeddings.word_embeddings.weight.add_(1.0)
    third = hf_loader.load_model(str(tiny_bert_dir))
    assert torch.equal(third.embeddings.word_embeddings.weight, b["embeddings.word_embeddings.weight"])
    assert second.config.hidden_dropout_prob == 0.3 and third.config.hidden_dropout_prob == 0.1


def test_another_model_replaces_the_cached_one(tiny_bert_dir, tiny_distilbert_dir):
    hf_loader.load_model(str(tiny_bert_dir))
    hf_loader.load_model(str(tiny_distilbert_dir))
    assert [w.key[0] for w in hf_loader._CACHE] == [str(tiny_distilbert_dir.resolve())]
