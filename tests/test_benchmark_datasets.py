"""Tests of benchmarks.datasets, the loaders of the benchmark data sets (real and synthetic data
folders); the real ones are skipped without the data folder."""
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from benchmarks import datasets
from benchmarks.datasets import get_data_home, load_coil20, load_orl, load_yaleb
from ntnumba.datasets import load_demo, load_file, normalize_images, resize_images

REPO_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    """Tests start without NTNUMBA_DATA so that the default search is what they see."""
    monkeypatch.delenv("NTNUMBA_DATA", raising=False)


@pytest.fixture(scope="module")
def real_home():
    """The real benchmark data folder (../shared/data); skip when it is absent."""
    env = os.environ.get("NTNUMBA_DATA")
    for home in ([Path(env)] if env else []) + [REPO_DATA, Path.cwd().parent / "shared" / "data"]:
        if (home / "coil20" / "COIL20_32x32.mat").is_file():
            return home
    pytest.skip(
        "real data sets not found: set NTNUMBA_DATA to a folder holding coil20/, orl/, yaleb/ "
        "(or put it at ../shared/data); where to get the files: docs/datasets.md, "
        "'Getting the data'"
    )


@pytest.fixture(scope="module")
def yale_paper(real_home):
    return load_yaleb(data_home=real_home)


def _is_unit_rows(X):
    return np.allclose(X.mean(axis=1), 0, atol=1e-12) and np.allclose(X.std(axis=1), 1, atol=1e-12)


def _upright_face_score(X, shape):
    """Mean over images of corr(img, left-right flip) - corr(img, top-bottom flip)."""
    imgs = X.reshape(-1, *shape)

    def corr(a, b):
        a = a.reshape(len(a), -1) - a.reshape(len(a), -1).mean(1, keepdims=True)
        b = b.reshape(len(b), -1) - b.reshape(len(b), -1).mean(1, keepdims=True)
        return np.sum(a * b, 1) / np.sqrt(np.sum(a * a, 1) * np.sum(b * b, 1))

    return float(np.mean(corr(imgs, imgs[:, :, ::-1]) - corr(imgs, imgs[:, ::-1, :])))


# ----------------------------------------------------------------------------------------------
# Real data sets
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loader, resolution, n, d, n_classes, per_class",
    [
        (load_coil20, "paper", 1440, 20 * 25, 20, (72, 72)),
        (load_coil20, "32x32", 1440, 1024, 20, (72, 72)),
        (load_orl, "paper", 400, 24 * 24, 40, (10, 10)),
        (load_orl, "32x32", 400, 1024, 40, (10, 10)),
        (load_yaleb, "32x32", 2414, 1024, 38, (59, 64)),
    ],
)
def test_real_shapes_labels_normalisation(
    real_home, loader, resolution, n, d, n_classes, per_class
):
    X, y = loader(resolution, data_home=real_home)
    assert X.shape == (n, d) and X.dtype == np.float64 and X.flags.c_contiguous
    assert y.shape == (n,) and y.dtype.kind == "i"
    counts = np.bincount(y)
    assert len(counts) == n_classes and y.min() == 0
    assert (counts.min(), counts.max()) == per_class
    assert np.all(np.diff(y) >= 0)  # file order, sorted by class
    assert _is_unit_rows(X)


def test_real_yale_paper(yale_paper):
    X, y = yale_paper
    assert X.shape == (2414, 21 * 21)
    assert np.bincount(y).sum() == 2414 and len(np.bincount(y)) == 38
    assert _is_unit_rows(X)


def test_real_yale_48x42_is_4x4_block_mean(real_home):
    with np.load(real_home / "yaleb" / "CroppedYale_192x168.npz") as d:
        good = ~d["is_bad"]
        assert good.sum() == 2414
        first = d["images"][np.flatnonzero(good)[:50]].astype(float)
    X, y = load_yaleb("48x42", data_home=real_home)
    assert X.shape == (2414, 48 * 42) and _is_unit_rows(X)
    assert len(np.bincount(y)) == 38 and np.bincount(y).min() == 59
    blocks = first.reshape(50, 48, 4, 42, 4).mean(axis=(2, 4)).reshape(50, -1)
    np.testing.assert_allclose(X[:50], normalize_images(blocks), rtol=1e-10, atol=1e-12)


def test_real_raw_values_and_mean_preserved(real_home):
    raw32, y32 = load_coil20("32x32", data_home=real_home, normalize=False)
    raw, y = load_coil20((20, 25), data_home=real_home, normalize=False)
    assert raw32.min() >= 0 and raw32.max() <= 255 and raw32.max() > 200
    np.testing.assert_array_equal(raw32, np.round(raw32))  # uint8 grey levels, not resampled
    np.testing.assert_allclose(raw.mean(1), raw32.mean(1), rtol=1e-12)  # area averaging
    np.testing.assert_array_equal(y, y32)
    np.testing.assert_allclose(normalize_images(raw), load_coil20(data_home=real_home)[0])


def test_real_images_are_upright(real_home, yale_paper):
    """Faces are left-right, not top-bottom, symmetric: catches a wrong C/F reshape (a transposed
    image swaps the two correlations). ORL per image; Yale (side lighting) on the mean face."""
    for res, shape in [("32x32", (32, 32)), ("paper", (24, 24))]:
        X, _ = load_orl(res, data_home=real_home)
        assert _upright_face_score(X, shape) > 0.1, res
    X32, _ = load_yaleb("32x32", data_home=real_home)
    for X, shape in [(X32, (32, 32)), (yale_paper[0], (21, 21))]:
        assert _upright_face_score(X.mean(axis=0, keepdims=True), shape) > 0.3, shape


def test_real_yale_mat_matches_resampled_originals(real_home):
    """The .mat 32x32 Yale images are the originals downscaled: same order and orientation."""
    X32, y32 = load_yaleb("32x32", data_home=real_home)
    with np.load(real_home / "yaleb" / "CroppedYale_192x168.npz") as d:
        good = ~d["is_bad"]
        np.testing.assert_array_equal(y32 + 1, d["labels"][good])
        first = d["images"][np.flatnonzero(good)[:200]]
    R = normalize_images(resize_images(first, (192, 168), (32, 32)).reshape(200, -1))
    assert np.mean(np.sum(R * X32[:200], axis=1) / 1024) > 0.85


def test_real_resolution_aliases(real_home):
    a = load_coil20("paper", data_home=real_home)[0]
    np.testing.assert_array_equal(a, load_coil20("20x25", data_home=real_home)[0])
    np.testing.assert_array_equal(a, load_coil20((20, 25), data_home=real_home)[0])
    b = load_orl((32, 32), data_home=real_home)[0]
    np.testing.assert_array_equal(b, load_orl("32x32", data_home=real_home)[0])
    assert load_orl((16, 12), data_home=real_home)[0].shape == (400, 192)
    assert load_orl("original", data_home=real_home)[0].shape == (400, 112 * 92)


def test_demo_equals_coil20(real_home):
    for res in ("32x32", "paper"):
        Xd, yd = load_demo(res)
        Xc, yc = load_coil20(res, data_home=real_home)
        np.testing.assert_array_equal(Xd, Xc)
        np.testing.assert_array_equal(yd, yc)


def test_real_mnist_columns_per_sample(real_home):
    X, y = load_file(real_home / "mnist" / "MNIST_subset604.mat", image_shape=(28, 28), order="C")
    assert X.shape == (604, 784)
    assert len(np.unique(y)) == 10
    assert X.max() > 200


# ----------------------------------------------------------------------------------------------
# Synthetic data folders: layout, search order, errors
# ----------------------------------------------------------------------------------------------
def _image(h, w, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(h, w)).astype(np.uint8)


def make_fake_home(root, n_per=2, n_classes=3, constant_first=False):
    """A data folder with the real files' layouts, small."""
    n = n_per * n_classes
    labels = np.repeat(np.arange(1, n_classes + 1), n_per)
    imgs32 = np.stack([_image(32, 32, i) for i in range(n)])
    if constant_first:
        imgs32[0] = 77
    for sub, name, key_x, key_y in [
        ("coil20", "COIL20_32x32.mat", "X", "Y"),
        ("orl", "ORL_32x32.mat", "fea", "gnd"),
        ("yaleb", "YaleB_32x32.mat", "fea", "gnd"),
    ]:
        (root / sub).mkdir(parents=True, exist_ok=True)
        flat = imgs32.reshape(n, -1, order="F")  # MATLAB column order
        scipy.io.savemat(root / sub / name, {key_x: flat, key_y: labels[:, None].astype(np.uint8)})
    orl = np.stack([_image(112, 92, 100 + i) for i in range(n)])
    np.savez(root / "orl" / "ORL_112x92.npz", images=orl, labels=labels.astype(np.int16))
    yale = np.stack([_image(192, 168, 200 + i) for i in range(n + 2)])
    yale_labels = np.concatenate([labels, [1, n_classes]]).astype(np.int16)
    is_bad = np.zeros(n + 2, bool)
    is_bad[-2:] = True
    yale[-2:] = 0
    np.savez(root / "yaleb" / "CroppedYale_192x168.npz", images=yale, labels=yale_labels,
             is_bad=is_bad)
    return imgs32, labels, orl, yale[:n]


def test_fake_loaders_orientation_and_labels(tmp_path):
    imgs32, labels, orl, yale = make_fake_home(tmp_path)
    X, y = load_coil20("32x32", data_home=tmp_path, normalize=False)
    np.testing.assert_array_equal(X, imgs32.reshape(len(imgs32), -1).astype(float))
    np.testing.assert_array_equal(y, labels - 1)
    X, y = load_orl("original", data_home=tmp_path, normalize=False)
    np.testing.assert_array_equal(X, orl.reshape(len(orl), -1).astype(float))
    X, y = load_yaleb("original", data_home=tmp_path, normalize=False)
    assert X.shape == (6, 192 * 168)  # the two is_bad images are gone
    np.testing.assert_array_equal(X, yale.reshape(6, -1).astype(float))
    np.testing.assert_array_equal(y, labels - 1)
    X, _ = load_yaleb(data_home=tmp_path)
    assert X.shape == (6, 441) and _is_unit_rows(X)
    X, _ = load_orl(data_home=tmp_path)
    assert X.shape == (6, 576) and _is_unit_rows(X)
    assert load_yaleb("32x32", data_home=tmp_path)[0].shape == (6, 1024)


def test_zero_variance_image_becomes_zeros(tmp_path):
    make_fake_home(tmp_path, constant_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for res in ("32x32", "paper"):
            X, _ = load_coil20(res, data_home=tmp_path)
            assert np.all(X[0] == 0.0)
            assert _is_unit_rows(X[1:])


def test_missing_file_error_names_path(tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        load_coil20(data_home=tmp_path)
    msg = str(exc.value)
    assert str(tmp_path / "coil20" / "COIL20_32x32.mat") in msg
    assert "NTNUMBA_DATA" in msg and "data_home" in msg
    with pytest.raises(FileNotFoundError, match="ORL_112x92.npz"):
        load_orl(data_home=tmp_path)
    with pytest.raises(FileNotFoundError, match="YaleB_32x32.mat"):
        load_yaleb("32x32", data_home=tmp_path)


def test_env_var_and_precedence(tmp_path, monkeypatch):
    env_home = tmp_path / "env"
    arg_home = tmp_path / "arg"
    imgs_env, *_ = make_fake_home(env_home, n_per=2)
    make_fake_home(arg_home, n_per=3)
    monkeypatch.setenv("NTNUMBA_DATA", str(env_home))
    assert load_coil20(normalize=False)[0].shape == (6, 500)
    assert get_data_home() == env_home
    assert load_coil20(data_home=arg_home)[0].shape == (9, 500)  # the argument wins
    monkeypatch.setenv("NTNUMBA_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="NTNUMBA_DATA") as exc:
        load_coil20()
    assert str(tmp_path / "missing" / "coil20" / "COIL20_32x32.mat") in str(exc.value)
    with pytest.raises(FileNotFoundError, match="missing"):
        get_data_home()


def test_default_search_relative_to_cwd(tmp_path, monkeypatch):
    work = tmp_path / "project"
    work.mkdir()
    make_fake_home(tmp_path / "shared" / "data", n_per=1)
    monkeypatch.chdir(work)
    X, y = load_coil20()
    assert X.shape == (3, 500)  # the fake set, found before the repository's
    assert get_data_home() == tmp_path / "shared" / "data"


def test_default_search_relative_to_repository(real_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing at tmp_path/../shared/data
    if (tmp_path.parent / "shared" / "data").exists():
        pytest.skip("tmp_path/../shared/data exists")
    repo_home = Path(datasets.__file__).resolve().parents[1].parent / "shared" / "data"
    if not repo_home.is_dir():
        pytest.skip(f"{repo_home} absent")
    assert get_data_home().resolve() == repo_home.resolve()
    assert load_coil20("32x32")[0].shape == (1440, 1024)


def test_resolution_errors(tmp_path):
    make_fake_home(tmp_path)
    with pytest.raises(ValueError, match="unknown resolution"):
        load_coil20("huge", data_home=tmp_path)
    with pytest.raises(ValueError, match="resolution"):
        load_coil20((0, 5), data_home=tmp_path)
    with pytest.raises(ValueError, match="resolution"):
        load_orl((24, 24, 1), data_home=tmp_path)
