"""Tests of ntnumba.datasets: the demo set, resampling, normalisation, load_file."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import ntnumba
from ntnumba.datasets import load_demo, load_file, normalize_images, resize_images


def _is_unit_rows(X):
    return np.allclose(X.mean(axis=1), 0, atol=1e-12) and np.allclose(X.std(axis=1), 1, atol=1e-12)


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
# Normalisation
# ----------------------------------------------------------------------------------------------
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
