"""Ludwig's image ``augmentation``: the schema (true = Ludwig's default list, the docs' and the
schema's key spellings, bad values in one line), each operation against a hand-computed result,
and the seeding by (seed, epoch, rank, batch)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ludwig_hpo.config import augmentation as aug
from ludwig_hpo.config.features import ImageInputFeature
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.train import augment as A


def _feature(augmentation) -> ImageInputFeature:
    return ImageInputFeature(name="img", type="image", augmentation=augmentation)


def test_true_is_ludwigs_default_list_and_false_is_none():
    ops = _feature(True).augmentation
    assert [o.type for o in ops] == ["random_horizontal_flip", "random_rotate"]
    assert ops[1].degree == 15
    assert _feature(False).augmentation == () and ImageInputFeature(name="i", type="image").augmentation == ()


def test_the_docs_min_max_spelling_and_the_schemas_are_the_same_operation():
    docs = _feature([{"type": "random_brightness", "min_brightness": 0.3, "max_brightness": 1.5}]).augmentation[0]
    schema = _feature([{"type": "random_brightness", "min": 0.3, "max": 1.5}]).augmentation[0]
    assert docs == schema and (docs.min, docs.max) == (0.3, 1.5)
    contrast = _feature([{"type": "random_contrast"}]).augmentation[0]
    assert (contrast.min, contrast.max) == (0.5, 2.0)
    assert _feature([{"type": "random_blur"}]).augmentation[0].kernel_size == 3


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ([{"type": "random_blur", "kernel_size": 4}], "kernel_size must be odd, got 4"),
        ([{"type": "random_contrast", "min": 2.0, "max": 1.0}], "min 2.0 is above max 1.0"),
        ([{"type": "random_crop"}], "random_crop"),
        ({"type": "random_rotate"}, "a list of operations"),
        ([{"type": "random_brightness", "min": 0.5, "min_brightness": 0.4}], "min and min_brightness are both set"),
    ],
)
def test_bad_operations_are_refused(value, match):
    with pytest.raises(ValueError, match=match):
        _feature(value)


def _img(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.uint8).view(1, 1, *np.shape(rows))


def test_flips():
    x = _img([[1, 2], [3, 4]])
    assert A.hflip(x)[0, 0].tolist() == [[2, 1], [4, 3]]
    assert A.vflip(x)[0, 0].tolist() == [[3, 4], [1, 2]]


def test_rotate_by_90_degrees_is_a_counter_clockwise_quarter_turn_and_0_is_identity():
    x = torch.arange(16, dtype=torch.uint8).view(1, 1, 4, 4).repeat(2, 3, 1, 1)
    assert torch.equal(A.rotate(x, 0.0), x)
    assert torch.equal(A.rotate(x, 90.0), torch.rot90(x, 1, dims=(-2, -1)))
    assert torch.equal(A.rotate(x, -90.0), torch.rot90(x, -1, dims=(-2, -1)))


def test_rotate_by_180_degrees_of_a_non_square_image_is_both_flips():
    x = torch.arange(15, dtype=torch.uint8).view(1, 1, 3, 5)
    assert torch.equal(A.rotate(x, 180.0), x.flip(-1).flip(-2))
    floats = x.float() / 14
    assert torch.equal(A.rotate(floats, -180.0), floats.flip(-1).flip(-2))


def test_rotate_by_45_degrees_keeps_the_centre_and_blanks_the_corners():
    x = torch.full((1, 1, 5, 5), 9, dtype=torch.uint8)
    out = A.rotate(x, 45.0)[0, 0]
    assert out[2, 2] == 9 and out[0, 0] == 0 and out[4, 4] == 0 and out.dtype == torch.uint8


def test_blur_weights_are_gaussian_and_a_flat_image_stays_flat():
    s = 0.15 * 3 + 0.35
    w = [math.exp(-0.5 * (t / s) ** 2) for t in (-1, 0, 1)]
    k1 = [v / sum(w) for v in w]
    np.testing.assert_allclose(A.gaussian_kernel(3).numpy(), np.outer(k1, k1), rtol=1e-6)
    flat = torch.full((2, 3, 5, 5), 77, dtype=torch.uint8)
    assert torch.equal(A.blur(flat, 3), flat)
    impulse = torch.zeros((1, 1, 5, 5))
    impulse[0, 0, 2, 2] = 1000.0
    np.testing.assert_allclose(A.blur(impulse, 3)[0, 0, 1:4, 1:4].numpy(), 1000 * np.outer(k1, k1), rtol=1e-5)


def test_brightness_multiplies_clips_and_truncates_like_torchvision():
    x = _img([[100, 200, 101]])
    assert A.brightness(x, 2.0)[0, 0].tolist() == [[200, 255, 202]]
    assert A.brightness(x, 0.5)[0, 0].tolist() == [[50, 100, 50]]  # 50.5 -> 50
    floats = torch.tensor([[[[4.0, 12.0]]]])
    assert A.brightness(floats, 2.0, scale=16.0)[0, 0].tolist() == [[8.0, 16.0]]


def test_contrast_blends_with_the_mean_grey_level():
    x = _img([[0, 100]])  # mean 50
    assert A.contrast(x, 2.0)[0, 0].tolist() == [[0, 150]]  # -50 clipped
    assert A.contrast(x, 0.0)[0, 0].tolist() == [[50, 50]]
    rgb = torch.zeros((1, 3, 1, 2), dtype=torch.uint8)
    rgb[0, 0] = 100  # red only: grey = int(0.2989 * 100) = 29 per pixel
    out = A.contrast(rgb, 0.5)
    assert out[0, 0].tolist() == [[64, 64]] and out[0, 1].tolist() == [[14, 14]]  # 0.5*100 + 0.5*29 = 64.5


def _augmenter(rank: int, ops=None) -> A.Augmentation:
    feat = _feature(ops if ops is not None else [{"type": "random_horizontal_flip"}, {"type": "random_brightness"}])
    meta = {"img": FeatureMeta("img", "image", shape=(1, 4, 4), stats={"scale": 255.0, "imagenet1k": 0.0})}
    return A.Augmentation([feat], meta, seed=42, rank=rank)


def _batch() -> dict[str, torch.Tensor]:
    return {"img": torch.arange(2 * 16, dtype=torch.uint8).view(2, 1, 4, 4) * 7, "n": torch.ones(2, 1)}


def test_the_same_seed_epoch_rank_and_batch_augment_the_same_way_and_ranks_differ():
    a0, again, a1 = _augmenter(0), _augmenter(0), _augmenter(1)
    runs = [(a0(_batch(), e, b)["img"], again(_batch(), e, b)["img"]) for e in (1, 2) for b in range(8)]
    assert all(torch.equal(x, y) for x, y in runs)
    by_rank = [(a0(_batch(), 1, b)["img"], a1(_batch(), 1, b)["img"]) for b in range(8)]
    assert any(not torch.equal(x, y) for x, y in by_rank)
    by_epoch = [(a0(_batch(), 1, b)["img"], a0(_batch(), 2, b)["img"]) for b in range(8)]
    assert any(not torch.equal(x, y) for x, y in by_epoch)
    # about half the batches are flipped or brightened at all (each op: probability 0.5)
    changed = sum(not torch.equal(a0(_batch(), 1, b)["img"], _batch()["img"]) for b in range(64))
    assert 32 <= changed <= 64


def test_other_inputs_and_models_without_augmentation_pass_unchanged():
    batch = _batch()
    out = _augmenter(0)(batch, 1, 0)
    assert out["n"] is batch["n"]
    none = _augmenter(0, ops=[])
    assert not none and none(batch, 1, 0) is batch


def test_one_op_runs_with_probability_one_half_and_one_parameter_per_batch():
    rng = np.random.default_rng(0)
    draws = [rng.random() for _ in range(2)]
    x = torch.full((3, 1, 2, 2), 100, dtype=torch.uint8)
    out = A.apply_ops(x, (aug.RandomBrightness(type="random_brightness"),), np.random.default_rng(0))
    if draws[0] < 0.5:
        factor = draws[1] * 1.5 + 0.5
        assert torch.equal(out, torch.full_like(x, min(255, int(100 * factor))))
    else:
        assert torch.equal(out, x)


@pytest.mark.gpu
def test_the_operations_give_the_same_pixels_on_a_gpu():
    x = torch.randint(0, 256, (4, 3, 9, 11), dtype=torch.uint8)
    ops = [
        lambda t: A.rotate(t, 33.0),
        lambda t: A.blur(t, 5),
        lambda t: A.brightness(t, 1.7),
        lambda t: A.contrast(t, 0.6),
        A.hflip,
        A.vflip,
    ]
    for op in ops:
        cpu, gpu = op(x), op(x.cuda()).cpu()
        assert gpu.dtype == torch.uint8 and (cpu.int() - gpu.int()).abs().max() <= 1  # float rounding only


def test_defaults_image_augmentation_applies_to_features_without_their_own(tmp_path):
    from ludwig_hpo.config import load_sweep

    path = tmp_path / "model.yaml"
    path.write_text(
        "input_features:\n"
        "  - {name: a, type: image}\n"
        "  - {name: b, type: image, augmentation: [{type: random_vertical_flip}]}\n"
        "  - {name: c, type: image, augmentation: false}\n"
        "output_features: [{name: y, type: category}]\n"
        "defaults: {image: {augmentation: true}}\n"
    )
    feats = load_sweep(path, tmp_path / "data.csv", search=False).config.input_features
    assert [[o.type for o in f.augmentation] for f in feats] == [
        ["random_horizontal_flip", "random_rotate"],
        ["random_vertical_flip"],
        [],
    ]


def test_an_unknown_key_of_an_operation_is_named_at_its_line_with_the_operations_keys(tmp_path):
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.errors import ConfigError

    path = tmp_path / "model.yaml"
    path.write_text(
        "input_features:\n"
        "  - name: img\n"
        "    type: image\n"
        "    augmentation:\n"
        "      - type: random_rotate\n"
        "        p: 0.3\n"
        "output_features: [{name: y, type: category}]\n"
    )
    with pytest.raises(ConfigError) as e:
        load_sweep(path, tmp_path / "data.csv", search=False)
    text = str(e.value)
    assert "model.yaml:6:" in text and "input_features[img].augmentation[0].p: unknown key 'p'" in text
    assert "allowed keys: degree, type" in text
