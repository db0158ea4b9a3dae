"""Tests of ntnumba.datasets: loaders (real and synthetic data folders), resampling, load_file."""
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import ntnumba
from ntnumba import datasets
from ntnumba.datasets import (
    get_data_home,
    load_coil20,
    load_demo,
    load_file,
    load_orl,
    load_yaleb,
    normalize_images,
    resize_images,
)

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
# Demo set (no external files)
# ----------------------------------------------------------------------------------------------
def test_demo_without_data_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("NTNUMBA_DATA", str(tmp_path / "nowhere"))
    X, y = load_demo()
    assert X.shape == (1440, 1024) and X.dtype == np.float64
    assert np.array_equal(np.bincount(y), np.full(20, 72))
    assert _is_unit_rows(X)
    Xp, _ = load_demo("paper")
    assert Xp.shape == (1440, 500)
    raw, _ = load_demo(normalize=False)
    assert raw.min() >= 0 and raw.max() <= 255


def test_demo_files_shipped():
    data_dir = Path(ntnumba.__file__).parent / "data"
    npz = data_dir / "coil20_32x32.npz"
    assert npz.stat().st_size < 1_000_000
    with np.load(npz) as d:
        assert d["images"].dtype == np.uint8 and d["images"].shape == (1440, 32, 32)
    citation = (data_dir / "CITATION.txt").read_text()
    assert "Nene" in citation and "CUCS-005-96" in citation


# ----------------------------------------------------------------------------------------------
# Synthetic data folders: layout, search order, errors, normalisation edge cases
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


def test_normalize_images_edge_cases():
    X = np.array([[3.0, 3.0, 3.0], [0.0, 0.0, 0.0], [0.1, 0.1, 0.1], [1.0, 2.0, 6.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = normalize_images(X)
    assert np.all(Z[:3] == 0.0)
    expected = (X[3] - 3.0) / np.sqrt(np.mean((X[3] - 3.0) ** 2))
    np.testing.assert_allclose(Z[3], expected)
    assert X[3, 0] == 1.0  # input untouched with copy=True
    Y = X.copy()
    out = normalize_images(Y, copy=False)
    assert out is Y
    with pytest.raises(ValueError, match="2-D"):
        normalize_images(np.ones(3))


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


# ----------------------------------------------------------------------------------------------
# Resampling
# ----------------------------------------------------------------------------------------------
def brute_force_area(img, out_shape):
    """Supersample every pixel into ho x wo copies, then average h x w blocks."""
    h, w = img.shape
    ho, wo = out_shape
    fine = np.kron(img, np.ones((ho, wo)))  # (h*ho, w*wo): one output pixel = an h x w block
    return fine.reshape(ho, h, wo, w).mean(axis=(1, 3))


@pytest.mark.parametrize("shape, out", [((32, 32), (20, 25)), ((7, 5), (3, 4)), ((6, 9), (6, 3)),
                                        ((4, 4), (9, 7)), ((5, 8), (5, 8))])
def test_resize_matches_brute_force_area(shape, out):
    rng = np.random.default_rng(shape[0] * 10 + out[1])
    imgs = rng.uniform(0, 255, size=(3, *shape))
    got = resize_images(imgs, shape, out)
    assert got.shape == (3, *out)
    for k in range(3):
        np.testing.assert_allclose(got[k], brute_force_area(imgs[k], out), rtol=1e-12)
    # flat rows, both orders, and chunking give the same result
    flat_c = resize_images(imgs.reshape(3, -1), shape, out, order="C", chunk_size=2)
    flat_f = resize_images(imgs.transpose(0, 2, 1).reshape(3, -1), shape, out, order="F")
    np.testing.assert_allclose(flat_c, got.reshape(3, -1), rtol=1e-12)
    np.testing.assert_allclose(flat_f, got.reshape(3, -1), rtol=1e-12)


def test_resize_errors():
    with pytest.raises(ValueError, match="n_features"):
        resize_images(np.zeros((2, 10)), (3, 3), (2, 2))
    with pytest.raises(ValueError, match="image_shape"):
        resize_images(np.zeros((2, 3, 3)), (3, 4), (2, 2))
    with pytest.raises(ValueError, match="order"):
        resize_images(np.zeros((2, 9)), (3, 3), (2, 2), order="K")
    with pytest.raises(ValueError, match="output_shape"):
        resize_images(np.zeros((2, 9)), (3, 3), (2, -2))


# ----------------------------------------------------------------------------------------------
# load_file
# ----------------------------------------------------------------------------------------------
@pytest.fixture()
def toy():
    rng = np.random.default_rng(11)
    images = rng.integers(0, 256, size=(6, 4, 6)).astype(np.uint8)
    labels = np.array([3, 3, 1, 1, 2, 2])
    return images, labels


def test_load_file_npz_stack_and_flat(tmp_path, toy):
    images, labels = toy
    p = tmp_path / "stack.npz"
    np.savez(p, images=images, labels=labels, names=np.array(list("abcdef")))
    X, y = load_file(p)
    np.testing.assert_array_equal(X, images.reshape(6, -1))
    np.testing.assert_array_equal(y, labels)
    assert X.dtype == np.float64 and y.dtype == np.int64
    X, _ = load_file(p, image_shape=(4, 6))  # consistent shape accepted
    with pytest.raises(ValueError, match="image_shape"):
        load_file(p, image_shape=(6, 4))
    X, _ = load_file(p, resize=(2, 3))
    np.testing.assert_allclose(X, resize_images(images, (4, 6), (2, 3)).reshape(6, -1))
    # flat rows in MATLAB order come back as C-order rows of the image
    q = tmp_path / "flat.npz"
    np.savez(q, data=images.reshape(6, -1, order="F"), target=labels.astype(float))
    X, y = load_file(q, image_shape=(4, 6), order="F")
    np.testing.assert_array_equal(X, images.reshape(6, -1))
    assert y.dtype == np.int64 and np.array_equal(y, labels)
    X, _ = load_file(q)  # no image_shape: rows as stored
    np.testing.assert_array_equal(X, images.reshape(6, -1, order="F"))
    X, _ = load_file(q, image_shape=(4, 6), order="F", resize=(2, 2))
    np.testing.assert_allclose(X, resize_images(images, (4, 6), (2, 2)).reshape(6, -1))


def test_load_file_mat_keys_and_layouts(tmp_path, toy):
    images, labels = toy
    flat_f = images.reshape(6, -1, order="F")
    p = tmp_path / "a.mat"
    scipy.io.savemat(p, {"fea": flat_f, "gnd": labels[:, None], "other": np.ones((2, 2))})
    X, y = load_file(p, image_shape=(4, 6))  # order="F" default
    np.testing.assert_array_equal(X, images.reshape(6, -1))
    np.testing.assert_array_equal(y, labels)
    X, y = load_file(p, data_key="fea", target_key="gnd", image_shape=(4, 6), order="C")
    np.testing.assert_array_equal(X, flat_f)  # C order of a C-flattened image = as stored
    with pytest.raises(ValueError, match="labels"):  # auto-detected gnd has 6 values
        load_file(p, data_key="other")
    X, y = load_file(p, data_key="other", target_key=False)
    assert X.shape == (2, 2) and y is None
    # unknown names: the largest 2-D array is the data, no labels
    q = tmp_path / "b.mat"
    scipy.io.savemat(q, {"small": np.ones((3, 2)), "big": flat_f.astype(float)})
    X, y = load_file(q)
    np.testing.assert_array_equal(X, flat_f)
    assert y is None
    # one column per sample (MATLAB convention), detected from the labels
    r = tmp_path / "c.mat"
    scipy.io.savemat(r, {"X": flat_f.T, "gnd": labels[:, None]})
    X, y = load_file(r, image_shape=(4, 6))
    np.testing.assert_array_equal(X, images.reshape(6, -1))
    # h x w x n MATLAB stack with labels
    s = tmp_path / "d.mat"
    scipy.io.savemat(s, {"images": np.moveaxis(images, 0, -1), "labels": labels})
    X, y = load_file(s)
    np.testing.assert_array_equal(X, images.reshape(6, -1))
    np.testing.assert_array_equal(y, labels)


def test_load_file_key_errors(tmp_path, toy):
    images, labels = toy
    p = tmp_path / "a.mat"
    scipy.io.savemat(p, {"fea": images.reshape(6, -1), "gnd": labels[:, None]})
    with pytest.raises(ValueError, match=r"data_key 'nope' not found.*'fea'.*'gnd'"):
        load_file(p, data_key="nope")
    with pytest.raises(ValueError, match=r"target_key 'nope' not found.*'fea'"):
        load_file(p, target_key="nope")
    with pytest.raises(ValueError, match="n_features=24"):
        load_file(p, image_shape=(5, 5))
    with pytest.raises(ValueError, match="resize needs"):
        load_file(p, resize=(2, 2))
    with pytest.raises(ValueError, match="order"):
        load_file(p, order="X")
    q = tmp_path / "tie.npz"
    np.savez(q, a=np.ones((3, 4)), b=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="data_key"):
        load_file(q)
    X, _ = load_file(q, data_key="b")
    assert X.shape == (4, 3)
    r = tmp_path / "mismatch.npz"
    np.savez(r, X=np.ones((5, 4)), y=np.arange(3))
    with pytest.raises(ValueError, match="labels"):
        load_file(r)
    t = tmp_path / "labels_only.npz"
    np.savez(t, y=np.arange(3))
    with pytest.raises(ValueError, match="available keys"):
        load_file(t)
    with pytest.raises(ValueError, match="2-D or 3-D"):
        load_file(t, data_key="y", target_key=False)


def test_load_file_npy(tmp_path, toy):
    images, _ = toy
    p = tmp_path / "a.npy"
    np.save(p, images)
    X, y = load_file(p)
    np.testing.assert_array_equal(X, images.reshape(6, -1))
    assert y is None
    q = tmp_path / "b.npy"
    np.save(q, images.reshape(6, -1, order="F"))
    X, _ = load_file(q, image_shape=(4, 6), order="F", resize=(4, 3))
    np.testing.assert_allclose(X, resize_images(images, (4, 6), (4, 3)).reshape(6, -1))
    with pytest.raises(ValueError, match="target_key"):
        load_file(p, target_key="y")
    with pytest.raises(ValueError, match="data_key"):
        load_file(p, data_key="x")
    np.save(tmp_path / "c.npy", np.arange(5))
    with pytest.raises(ValueError, match="2-D or 3-D"):
        load_file(tmp_path / "c.npy")


def test_load_file_csv(tmp_path, toy):
    images, labels = toy
    flat = images.reshape(6, -1).astype(float)
    p = tmp_path / "a.csv"
    np.savetxt(p, np.column_stack([flat, labels]), delimiter=",")
    X, y = load_file(p, target_key="last")
    np.testing.assert_array_equal(X, flat)
    np.testing.assert_array_equal(y, labels)
    X, y = load_file(p)  # without target_key every column is data
    assert X.shape == (6, 25) and y is None
    h = tmp_path / "header.CSV"
    header = ",".join(f"p{i}" for i in range(24))
    np.savetxt(h, flat, delimiter=",", header=header, comments="")
    X, y = load_file(h, image_shape=(4, 6), order="C", resize=(2, 3))
    np.testing.assert_allclose(X, resize_images(images, (4, 6), (2, 3)).reshape(6, -1))
    with pytest.raises(ValueError, match="target_key"):
        load_file(p, target_key="label")
    with pytest.raises(ValueError, match="data_key"):
        load_file(p, data_key="x")
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n4,five,6\n")
    with pytest.raises(ValueError, match="numeric"):
        load_file(bad)


def test_load_file_path_errors(tmp_path):
    with pytest.raises(ValueError, match=r"extension '\.xlsx'.*\.mat"):
        load_file(tmp_path / "a.xlsx")
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_file(tmp_path / "missing.npz")


# tables read with pandas: what a user's own files look like
@pytest.fixture(scope="module")
def table():
    """A small iris-like table: 4 numeric features and string classes (the reference)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    X = np.round(rng.uniform(0.1, 9.0, (9, 4)), 2)
    names = np.array(["setosa", "versicolor", "virginica"])[np.arange(9) % 3]
    df = pd.DataFrame(X, columns=["sepal length", "sepal width", "petal length", "petal width"])
    return pd, df, X, names


@pytest.mark.parametrize("write, kwargs, how", [
    (lambda df, p: df.to_csv(p, index=False), {},
     "header row (detected: text 'sepal length' above numbers), delimiter ',' (detected)"),
    (lambda df, p: df.to_csv(p), {},                                            # index column
     "index column (unnamed) dropped (an unnamed first column, as pandas' to_csv writes the "
     "index)"),
    (lambda df, p: df.to_csv(p, sep=";", index=False), {}, "delimiter ';'"),
    (lambda df, p: df.to_csv(p, sep="\t", index=False), {}, "delimiter tab"),
    (lambda df, p: df.to_csv(p, sep=";", decimal=",", index=False), {}, "decimal comma"),
    (lambda df, p: df.to_csv(p, sep="|", index=False), {"delimiter": "|"}, "delimiter '|'"),
    (lambda df, p: df.to_csv(p, sep=" ", index=False), {}, "delimiter whitespace"),
])
def test_load_file_tables(tmp_path, table, write, kwargs, how):
    pd, df, X, names = table
    p = tmp_path / "t.csv"
    write(df.assign(target=names), p)
    Xr, y, info = load_file(p, return_info=True, **kwargs)
    np.testing.assert_array_equal(Xr, X)
    np.testing.assert_array_equal(y, names)
    assert info["feature_names"] == list(df.columns)
    assert info["description"].startswith(
        "9 samples x 4 features, labels from column 'target' (3 classes); ")
    assert how in info["description"]


def test_load_file_table_label_choices(tmp_path, table):
    pd, df, X, names = table
    p = tmp_path / "t.csv"
    df.assign(species=names, id=np.arange(9)).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"column 'species' is not numeric \(e\.g\. 'setosa'\)"
                                         r"\. If it holds the labels, pass target_key='species' "
                                         r"\(--target-key species\); to drop it .*index_col="
                                         r"'species' \(--index-col species\); otherwise encode"):
        load_file(p)                                  # a text column is never a feature
    Xr, y, info = load_file(p, target_key="species", index_col="id", return_info=True)
    assert info["description"].endswith("index column 'id' dropped (as asked)")
    for key in ("species", 4, -2, "SPECIES"):
        Xr, y = load_file(p, target_key=key, index_col="id")
        np.testing.assert_array_equal(Xr, X)
        np.testing.assert_array_equal(y, names)
    Xr, y = load_file(p, target_key="id", index_col="species")
    assert y.tolist() == list(range(9)) and y.dtype == np.int64
    with pytest.raises(ValueError, match=r"target_key 'nope' not found.*'species'"):
        load_file(p, target_key="nope")
    with pytest.raises(ValueError, match="out of range: the file has 6 columns"):
        load_file(p, target_key=6)
    with pytest.raises(ValueError, match="several columns look like labels"):
        df.assign(label=0, target=1).to_csv(p, index=False)
        load_file(p)
    df.assign(target=names).to_csv(p, index=False)        # target_key=False: no labels
    with pytest.raises(ValueError, match="column 'target' is not numeric"):
        load_file(p, target_key=False)
    numeric = np.arange(9) % 3
    df.assign(target=numeric).to_csv(p, index=False)
    Xr, y = load_file(p, target_key=False)
    np.testing.assert_array_equal(Xr, np.c_[X, numeric])
    assert y is None
    with pytest.raises(ValueError, match=r"column 0 is not numeric \(e\.g\. 'sepal length'"):
        load_file(p, header=False)                      # the names are not a row of numbers


def test_load_file_table_numpy_header_and_no_header(tmp_path, toy):
    images, labels = toy
    flat = images.reshape(6, -1).astype(float)
    p = tmp_path / "a.csv"
    np.savetxt(p, np.c_[flat, labels], delimiter=",", header=",".join(
        [f"p{i}" for i in range(24)] + ["label"]))        # '# p0,...,label' (numpy's header)
    X, y, info = load_file(p, return_info=True)
    np.testing.assert_array_equal(X, flat)
    np.testing.assert_array_equal(y, labels)
    assert info["feature_names"][0] == "p0" and info["label_source"] == "column 'label'"
    q = tmp_path / "b.csv"
    np.savetxt(q, np.c_[flat, labels], delimiter=",")
    X, y, info = load_file(q, target_key=-1, return_info=True)
    np.testing.assert_array_equal(y, labels)
    assert info["label_source"] == "column 24" and "no header row" in info["description"]


def test_load_file_bool_and_complex(tmp_path):
    b = tmp_path / "b.npy"
    np.save(b, np.eye(3, dtype=bool))
    X, _ = load_file(b)
    np.testing.assert_array_equal(X, np.eye(3))
    c = tmp_path / "c.npy"
    np.save(c, np.ones((3, 2)) + 1j)
    with pytest.raises(ValueError, match="complex data .* not supported; pass the real part"):
        load_file(c)
    np.savez(tmp_path / "c.npz", X=np.ones((3, 2)) + 1j, y=[0, 1, 0])
    with pytest.raises(ValueError, match="complex data"):
        load_file(tmp_path / "c.npz")


def test_load_file_header_is_detected_by_types(tmp_path, table):
    """A headerless table whose last column holds text labels keeps its first row: the first
    line is a header only when its types differ from the lines below (text above numbers)."""
    pd, df, X, names = table
    p = tmp_path / "iris.csv"
    df.assign(species=names).to_csv(p, header=False, index=False)
    Xr, y, info = load_file(p, target_key="last", return_info=True)
    np.testing.assert_array_equal(Xr, X)
    np.testing.assert_array_equal(y, names)
    assert info["header"] is False and info["feature_names"] is None
    assert "no header row (detected: the first line has the types of the lines below)" in (
        info["description"])
    df.assign(species=names).to_csv(p, index=False)      # the same table with its names
    Xr, y, info = load_file(p, target_key="last", return_info=True)
    np.testing.assert_array_equal(Xr, X)
    assert "header row (detected: text 'sepal length' above numbers)" in info["description"]
    # a text id first, a missing value in the first row: still data
    rows = [f"id{i},{'NA' if i == 0 else X[i, 0]},{X[i, 1]}" for i in range(9)]
    p.write_text("\n".join(rows) + "\n")
    Xr, y = load_file(p, target_key=0)
    assert Xr.shape == (9, 2) and np.isnan(Xr[0, 0]) and y.tolist()[0] == "id0"
    Xr, y, info = load_file(p, target_key=0, header=True, return_info=True)
    assert Xr.shape == (8, 2) and "header row (as asked)" in info["description"]


@pytest.mark.parametrize("suffix, compression", [
    (".csv.gz", "gzip"), (".csv.bz2", "bz2"), (".csv.xz", "xz"), (".csv.zip", "zip"),
    (".TSV.GZ", "gzip")])
def test_load_file_compressed_tables(tmp_path, table, suffix, compression):
    pd, df, X, names = table
    p = tmp_path / f"t{suffix}"
    sep = "\t" if ".tsv" in suffix.lower() else ","
    df.assign(target=names).to_csv(p, sep=sep, index=False, compression=compression)
    Xr, y, info = load_file(p, return_info=True)
    np.testing.assert_array_equal(Xr, X)
    np.testing.assert_array_equal(y, names)
    assert f"; text, {compression}-compressed; header row" in info["description"]
    p.write_bytes(p.read_bytes()[:20])                  # truncated: an error naming the file
    with pytest.raises(ValueError, match=rf"{re.escape(str(p))}: not a readable"):
        load_file(p)


def test_load_file_compressed_errors(tmp_path, table):
    pd, df, X, names = table
    (tmp_path / "x.gz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"unknown file extension '\.gz'.*\.csv\.gz"):
        load_file(tmp_path / "x.gz")
    p = tmp_path / "two.csv.zip"
    import zipfile
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a.csv", "a,b\n1,2\n")
        z.writestr("b.csv", "a,b\n1,2\n")
    with pytest.raises(ValueError, match="must hold exactly one file, it holds 2"):
        load_file(p)


def test_load_file_parquet(tmp_path, table):
    pd, df, X, names = table
    pytest.importorskip("pyarrow")
    p = tmp_path / "t.parquet"
    df.assign(target=names).to_parquet(p)
    Xr, y, info = load_file(p, return_info=True)
    np.testing.assert_array_equal(Xr, X)
    np.testing.assert_array_equal(y, names)
    assert info["feature_names"] == list(df.columns)
    assert info["description"] == ("9 samples x 4 features, labels from column 'target' "
                                   "(3 classes); parquet")
    df.assign(target=names, id=np.arange(9) + 100).set_index("id").to_parquet(p)
    Xr, y, info = load_file(p, return_info=True)
    np.testing.assert_array_equal(Xr, X)
    assert "dropped the file's index 'id'" in info["description"]
    Xr, y = load_file(p, target_key="sepal width", index_col="target")
    np.testing.assert_array_equal(y, X[:, 1])
    np.testing.assert_array_equal(Xr, X[:, [0, 2, 3]])
    with pytest.raises(ValueError, match="column 'target' is not numeric"):
        load_file(p, target_key=False)
    with pytest.raises(ValueError, match="delimiter and header are options of text tables"):
        load_file(p, delimiter=";")
    p.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match=rf"{re.escape(str(p))}: not a readable parquet file"):
        load_file(p)


def test_load_file_says_what_was_not_read(tmp_path, toy):
    images, labels = toy
    p = tmp_path / "m.npz"
    np.savez(p, fea=images.reshape(6, -1), gnd=labels, meta=np.arange(3), names=np.array(["a"]))
    X, y, info = load_file(p, return_info=True)
    assert info["description"].endswith(
        "; data from key 'fea'; dropped key(s) 'meta', 'names' (neither the data nor the labels)")
    q = tmp_path / "n.csv"
    np.savetxt(q, np.c_[images.reshape(6, -1), labels], delimiter=",", header="1,2")
    X, y, info = load_file(q, target_key="last", return_info=True)
    assert X.shape == (6, 24)
    assert "no header row (its first line, '#' and numbers, skipped)" in info["description"]
