"""Model persistence: ``NTClustering.save`` / ``ntnumba.load`` (versioned .npz) and pickling."""
import json
import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ntnumba
from ntnumba import NTClustering
from ntnumba.io import persistence as _persistence


def _data(seed=0, n_per=12, N=5):
    rng = np.random.default_rng(seed)
    centers = 4.0 * rng.standard_normal((3, N))
    return np.repeat(centers, n_per, axis=0) + rng.standard_normal((3 * n_per, N))


@pytest.fixture(scope="module")
def X():
    return _data()


@pytest.fixture(scope="module")
def model(X):
    return NTClustering(3, n_components=10, max_iter=4, random_state=0).fit(X)


@pytest.fixture
def saved(model, tmp_path):
    return model.save(tmp_path / "model.npz")


def _rewrite(src, dst, drop=(), **replace):
    """Copy the archive ``src`` to ``dst`` without the keys ``drop``, with entries replaced."""
    with np.load(src, allow_pickle=False) as f:
        data = {k: f[k] for k in f.files if k not in drop}
    data.update(replace)
    np.savez(dst, **data)
    return dst


# ------------------------------------------------------------------------------ round trips
def _fitted_public(m):
    """The public fitted attributes (scikit-learn's convention: a name ending with ``_``)."""
    return sorted(a for a in vars(m) if a.endswith("_") and not a.startswith("_"))


def _assert_same_model(a, b, X):
    """Nothing lost: every public fitted attribute of ``a``, found generically, is in ``b``
    with the same type, dtype, shape and values (and ``b`` has no other); the reference set
    of the graph rule's vote is the same; predictions, representations and scores agree."""
    names = _fitted_public(a)
    assert _fitted_public(b) == names
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        assert type(x) is type(y), name
        if isinstance(x, np.ndarray):
            assert (x.dtype, x.shape) == (y.dtype, y.shape), name
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert a.get_params() == b.get_params()
    assert (a._fitted.ref_X is None) == (b._fitted.ref_X is None)
    if a._fitted.ref_X is not None:
        np.testing.assert_array_equal(a._fitted.ref_X, b._fitted.ref_X)
        np.testing.assert_array_equal(a._fitted.reference_labels(a.labels_),
                                      b._fitted.reference_labels(b.labels_))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.predict(X, reject="auto"), b.predict(X, reject="auto"))
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    assert a.score(X) == b.score(X)


def test_round_trip_is_exact(model, saved, X):
    assert "initial_labels_" in _fitted_public(model)  # the generic list sees it
    _assert_same_model(model, ntnumba.load(saved), X)


@pytest.mark.parametrize("kwargs", [dict(learn_transform=False), dict(assign="paper"),
                                    dict(n_similarity=1, scaling=None),
                                    dict(assign="graph", n_shared=(0, 1), n_neighbors=4),
                                    dict(scaling="standard")])
def test_round_trip_variants(kwargs, X, tmp_path):
    m = NTClustering(3, n_components=10, max_iter=3, random_state=1, **kwargs).fit(X)
    _assert_same_model(m, ntnumba.load(m.save(tmp_path / "m.npz")), X)


def test_round_trip_float32(X, tmp_path):
    X32 = X.astype(np.float32)
    m = NTClustering(3, n_components=10, max_iter=3, random_state=2).fit(X32)
    loaded = ntnumba.load(m.save(tmp_path / "m32"))
    assert loaded.components_.dtype == np.float32
    assert loaded.transform(X32).dtype == np.float32
    _assert_same_model(m, loaded, X32)


@pytest.mark.parametrize("assign", ["graph", "objective"])
def test_round_trip_streamed(X, tmp_path, assign):
    """``fit(X, chunk_size=...)`` and ``partial_fit`` (chunks of different sizes: the graph
    rule's reference set, the first chunk, is not the rows of ``labels_``, the last chunk's)."""
    kw = dict(n_components=10, random_state=0, assign=assign,
              init="graph" if assign == "graph" else "k-means++")
    m = NTClustering(3, **kw).fit(X.astype(np.float32), chunk_size=10)
    _assert_same_model(m, ntnumba.load(m.save(tmp_path / "c")), X.astype(np.float32))
    rows = np.random.default_rng(0).permutation(len(X))
    s = NTClustering(3, **kw)
    for chunk in (X[rows[:14]], X[rows[14:]]):
        s.partial_fit(chunk, forget=0.9)
    loaded = ntnumba.load(s.save(tmp_path / "s"))
    _assert_same_model(s, loaded, X)
    with warnings.catch_warnings():  # the running sums are in the file: nothing restarts
        warnings.simplefilter("error", RuntimeWarning)
        for est in (s, loaded):
            est.partial_fit(X[rows[:9]], forget=0.9)
    _assert_same_model(s, loaded, X)


def test_suffix_added_and_path_like(model, tmp_path):
    path = model.save(tmp_path / "no_suffix")
    assert path == str(tmp_path / "no_suffix.npz") and os.path.isfile(path)
    assert ntnumba.load(Path(path)).n_iter_ == model.n_iter_


def test_save_leaves_no_temporary_file_and_overwrites(model, tmp_path):
    model.save(tmp_path / "m.npz")
    model.save(tmp_path / "m.npz")
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]


def test_interrupted_save_keeps_the_old_file(model, tmp_path, monkeypatch):
    path = model.save(tmp_path / "m.npz")
    before = Path(path).read_bytes()

    def broken(file, **arrays):  # writes half a file, then fails
        file.write(before[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(_persistence.np, "savez_compressed", broken)
    with pytest.raises(KeyboardInterrupt):
        model.save(path)
    assert Path(path).read_bytes() == before
    assert os.listdir(tmp_path) == ["m.npz"]


def test_save_keeps_the_mode_of_an_existing_file_and_uses_the_umask_for_a_new_one(
        model, tmp_path):
    import stat
    path = model.save(tmp_path / "m.npz")
    os.chmod(path, 0o600)                   # the file holds the scaled training rows
    model.save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o640)
    model.save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    old = os.umask(0o027)
    try:
        new = model.save(tmp_path / "new.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "new.npz"]


def test_save_writes_through_a_symbolic_link(model, X, tmp_path):
    (tmp_path / "models").mkdir()
    target = tmp_path / "models" / "v1.npz"
    target.write_bytes(b"an older model")
    os.chmod(target, 0o600)
    link = tmp_path / "current.npz"
    link.symlink_to(os.path.join("models", "v1.npz"))
    assert model.save(link) == str(link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("models", "v1.npz")
    assert (target.stat().st_mode & 0o777) == 0o600
    np.testing.assert_array_equal(ntnumba.load(target).predict(X), model.predict(X))
    assert sorted(os.listdir(tmp_path / "models")) == ["v1.npz"]
    dangling = tmp_path / "next.npz"          # a link to a file still to be written
    dangling.symlink_to(tmp_path / "models" / "v2.npz")
    model.save(dangling)
    assert dangling.is_symlink() and (tmp_path / "models" / "v2.npz").is_file()


def test_save_syncs_the_file_and_the_folder(model, tmp_path, monkeypatch):
    import stat
    synced = []
    fsync = os.fsync

    def record(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", record)
    model.save(tmp_path / "m.npz")
    assert synced == [False, True]      # the temporary file before the rename, the folder after


def test_save_removes_stale_temporary_files_of_killed_saves(model, tmp_path):
    """A save killed by SIGKILL leaves its hidden temporary file: the next save into the
    folder removes those of its own pattern untouched for an hour, nothing else."""
    import time
    names = {"stale": ".m.npz.4242-0123abcd.tmp.npz", "recent": ".m.npz.4243-89abcdef.tmp.npz",
             "other": ".m.npz.tmp.npz", "mine": "notes.4242-0123abcd.tmp.npz.txt"}
    for name in names.values():
        (tmp_path / name).write_bytes(b"partial")
    hour_ago = time.time() - 3700
    for key in ("stale", "other", "mine"):
        os.utime(tmp_path / names[key], (hour_ago, hour_ago))
    model.save(tmp_path / "m.npz")
    left = set(os.listdir(tmp_path))
    assert left == {"m.npz", names["recent"], names["other"], names["mine"]}


def test_loaded_model_warm_starts(model, X, tmp_path):
    loaded = ntnumba.load(model.save(tmp_path / "m"))
    loaded.set_params(warm_start=True, max_iter=model.n_iter_ + 2, tol=0.0).fit(X)
    assert loaded.n_iter_ == model.n_iter_ + 2
    np.testing.assert_array_equal(loaded.objective_history_[:model.n_iter_],
                                  model.objective_history_)


def test_round_trip_reference_sample(X, tmp_path, monkeypatch):
    """A graph fit whose reference set is a sample of the rows (more than ``REFERENCE_SIZE``):
    every row's labels and scores kept, and a warm start continues on the same sample."""
    from ntnumba.engine import loop as _driver
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 20)
    m = NTClustering(3, n_components=10, max_iter=1, random_state=0).fit(X, chunk_size=10)
    assert m._fitted.ref_rows() is not None and m.labels_.shape == (len(X),)
    loaded = ntnumba.load(m.save(tmp_path / "m"))
    _assert_same_model(m, loaded, X)
    np.testing.assert_array_equal(loaded._fitted.ref_rows(), m._fitted.ref_rows())
    for est in (m, loaded):
        est.set_params(warm_start=True, max_iter=2, tol=0.0).fit(X, chunk_size=10)
    _assert_same_model(m, loaded, X)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(assign="objective", init="k-means++", online_fraction=0.5),  # random subsets
])
def test_warm_start_of_a_loaded_model_equals_the_original(X, tmp_path, kwargs):
    """Continuing a reloaded model gives the bits of continuing the original, every public
    fitted attribute (``initial_labels_``, the start of the fit, included)."""
    m = NTClustering(3, n_components=10, max_iter=1, random_state=0, **kwargs).fit(X)
    loaded = ntnumba.load(m.save(tmp_path / "m"))
    for est in (m, loaded):
        est.set_params(warm_start=True, max_iter=3, tol=0.0).fit(X)
    assert m.n_iter_ == 3
    _assert_same_model(m, loaded, X)


# ------------------------------------------------------------------------------ removed options
_REMOVED = dict(relabel=0, prototypes=False, n_dissimilarity=None)  # their defaults


def _with_removed_options(src, dst, pending=False, copies=1, drop=(), replace=None, **options):
    """The archive ``src`` as the versions with ``relabel``, ``prototypes`` and
    ``n_dissimilarity`` wrote it: those parameters in ``params`` (the JSON of
    ``get_params()``, defaults unless given in ``options``), ``graph_copies_`` (the near-copy
    factor of the partition's graph, written by every graph fit) and, for a fit interrupted
    inside its prototype step, ``prototypes_pending_ = 1``; ``drop`` / ``replace``: other
    entries left out / replaced."""
    with np.load(src, allow_pickle=False) as f:
        params = json.loads(str(f["params"]))
        graph = "fit_X_" in f.files
    assert not set(_REMOVED) & set(params)   # this version writes none of them
    params.update({**_REMOVED, **options})
    extra = dict(replace or {}, params=np.array(json.dumps(params)))
    if graph:
        extra["graph_copies_"] = np.array(copies)
    if pending:
        extra["prototypes_pending_"] = np.array(1)
    return _rewrite(src, dst, drop=drop, **extra)


@pytest.mark.parametrize("kwargs", [dict(), dict(assign="objective", init="k-means++")])
@pytest.mark.parametrize("options", [dict(), dict(n_dissimilarity=3)])
def test_file_with_removed_options_at_defaults_loads_as_before(X, tmp_path, kwargs, options):
    """A file of the removed options at their defaults (``n_dissimilarity=3``: its only other
    valid value, ``n_clusters``) is the model that was saved: every fitted attribute,
    prediction and score, and a warm start continues as the original does."""
    m = NTClustering(3, n_components=10, max_iter=1, random_state=0, **kwargs).fit(X)
    path = _with_removed_options(m.save(tmp_path / "m"), tmp_path / "old.npz", **options)
    with np.load(path) as f:  # the file holds what the versions with the options wrote
        assert {"relabel", "prototypes", "n_dissimilarity"} <= set(json.loads(str(f["params"])))
        assert ("graph_copies_" in f.files) == ("assign" not in kwargs)
    loaded = ntnumba.load(path)
    _assert_same_model(m, loaded, X)
    for est in (m, loaded):
        est.set_params(warm_start=True, max_iter=3, tol=0.0).fit(X)
    _assert_same_model(m, loaded, X)


@pytest.mark.parametrize("assign", ["graph", "objective"])
def test_file_saved_with_removed_options_on_loads_with_its_fitted_arrays(X, tmp_path, assign):
    """A file saved with ``relabel > 0`` or ``prototypes=True`` (a prototype step pending,
    an ``n_dissimilarity`` that was refused, a near-copy factor no fit measures): the
    options are ignored and the fitted arrays are the file's. The partition of the file
    (here a graph partition with five samples moved, as a relabel or prototype step moves
    them; ``assign="objective"`` files were written before the options were refused with
    it) is ``labels_``, ``predict`` gives it on the training rows and votes with it
    elsewhere, exactly as the same file without the removed keys."""
    kw = dict(init="k-means++") if assign == "objective" else {}
    m = NTClustering(3, n_components=10, max_iter=2, random_state=0, assign=assign,
                     **kw).fit(X)
    src = m.save(tmp_path / "m")
    moved = m.labels_.copy()
    moved[:5] = (moved[:5] + 1) % 3
    assert np.count_nonzero(moved != m.labels_) == 5
    entries = {"labels_": moved}
    if assign == "graph":
        entries["fit_labels_"] = moved
    plain = _rewrite(src, tmp_path / "plain.npz", **entries)
    old = _with_removed_options(src, tmp_path / "old.npz", pending=True, copies=10 ** 6,
                                replace=entries, relabel=2, prototypes=True,
                                n_dissimilarity=4)
    loaded, reference = ntnumba.load(old), ntnumba.load(plain)
    np.testing.assert_array_equal(loaded.labels_, moved)
    if assign == "graph":
        np.testing.assert_array_equal(loaded.predict(X), moved)
    Xnew = X + 0.3 * np.random.default_rng(1).standard_normal(X.shape)
    _assert_same_model(reference, loaded, Xnew)
    assert "relabel" not in loaded.get_params()
    for est in (reference, loaded):  # continued without the removed steps
        est.set_params(warm_start=True, max_iter=3, tol=0.0).fit(X)
    _assert_same_model(reference, loaded, X)


def test_version_2_files_load_without_the_new_fields(X, tmp_path):
    """A file of the previous format version (no ``initial_labels_``, ``rng_state_``,
    ``fit_labels_``) loads, predicts as before and has no ``initial_labels_``."""
    m = NTClustering(3, n_components=10, max_iter=1, random_state=0).fit(X)
    path = _rewrite(m.save(tmp_path / "m"), tmp_path / "v2.npz", format_version=np.array(2),
                    drop=("initial_labels_", "rng_state_", "fit_labels_"))
    old = ntnumba.load(path)
    assert not hasattr(old, "initial_labels_")
    assert set(_fitted_public(m)) - set(_fitted_public(old)) == {"initial_labels_"}
    np.testing.assert_array_equal(old.predict(X), m.predict(X))
    np.testing.assert_array_equal(old._fitted.reference_labels(old.labels_), m._fitted.ref_labels)
    old.set_params(warm_start=True, max_iter=2).fit(X)   # the random stream restarts
    assert old.n_iter_ == 2 and not hasattr(old, "initial_labels_")


@pytest.fixture(scope="module")
def stream_model(X):
    s = NTClustering(3, n_components=10, random_state=0, assign="objective", init="k-means++")
    return s.partial_fit(X[:14]).partial_fit(X[14:])


@pytest.mark.parametrize("key, value, match", [
    ("stream_count_", -np.ones((3, 2)), "negative counts"),
    ("stream_sum_yy_", np.full((3, 10), -1.0), "negative counts"),
    ("stream_sum_q_", np.ones((3, 2, 9)), "stream_sum_q_ has shape"),
    ("stream_gram_", np.full((5, 5), np.nan), "NaN or inf"),
    ("stream_gram_", np.ones((5, 5), dtype=object), "stream_gram_"),
    ("stream_target_sq_", np.array(-1.0), "negative"),
    ("stream_n_seen_", np.array(1.5), "stream_n_seen_"),
    ("stream_cross_", None, r"missing \['stream_cross_'\]"),
])
def test_crafted_stream_entries(stream_model, tmp_path, key, value, match):
    src = stream_model.save(tmp_path / "s")
    path = _craft(src, tmp_path / "bad.npz",
                  **{key: None if value is None else _npy_bytes(value)})
    with pytest.raises(ValueError, match=match):
        ntnumba.load(path)


def test_unsaveable_random_state_is_dropped(X, tmp_path):
    m = NTClustering(3, n_components=10, max_iter=2,
                     random_state=np.random.RandomState(0)).fit(X)
    assert ntnumba.load(m.save(tmp_path / "m")).random_state is None


def test_save_unfitted_raises(tmp_path):
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        NTClustering(2).save(tmp_path / "m")
    assert os.listdir(tmp_path) == []


def test_pickle_round_trip(model, X):
    _assert_same_model(model, pickle.loads(pickle.dumps(model)), X)


def test_feature_names_kept(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_data(), columns=[f"f{i}" for i in range(5)])
    m = NTClustering(3, n_components=10, max_iter=2, random_state=0).fit(df)
    loaded = ntnumba.load(m.save(tmp_path / "m"))
    assert list(loaded.feature_names_in_) == list(df.columns)
    np.testing.assert_array_equal(loaded.predict(df), m.predict(df))


# ------------------------------------------------------------------------------ the format
def test_file_matches_the_documented_format(X, tmp_path):
    """Every key of a saved file is in the module's table, with the documented content."""
    documented = set(re.findall(r"^``(\w+)``\s", _persistence.__doc__, flags=re.M))
    graph_keys = {"n_shared_", "graph_cut_", "shared_mean_", "shared_components_", "fit_X_",
                  "fit_labels_"}
    standard_keys = {"feature_mean_", "feature_scale_"}        # scaling="standard" only
    # ref_rows_: only when the reference set is a sample (test_round_trip_reference_sample)
    standard_keys |= {"ref_rows_"}
    assert standard_keys <= documented
    for assign, expected in (("objective", documented - {"feature_names_in_"} - graph_keys
                              - standard_keys),
                             ("graph", documented - {"feature_names_in_"} - standard_keys)):
        m = NTClustering(3, n_components=10, max_iter=2, random_state=0, assign=assign).fit(X)
        with np.load(m.save(tmp_path / assign), allow_pickle=False) as f:  # no pickle needed
            data = {k: f[k] for k in f.files}
        assert set(data) == expected, assign
        assert str(data["format"]) == "ntnumba-model" and int(data["format_version"]) == 3
        assert str(data["ntnumba_version"]) == ntnumba.__version__
        assert json.loads(str(data["params"]))["assign"] == assign
        assert data["labels_"].dtype == np.int64 == data["initial_labels_"].dtype
        assert data["rng_state_"].shape == (627,)
        assert data["objective_history_"].dtype == np.float64
        assert zipfile.is_zipfile(tmp_path / f"{assign}.npz")


def test_unknown_keys_are_ignored(saved, tmp_path, X):
    path = _rewrite(saved, tmp_path / "extra.npz", future_key=np.arange(3))
    np.testing.assert_array_equal(ntnumba.load(path).predict(X), ntnumba.load(saved).predict(X))


# ------------------------------------------------------------------------------ bad files
def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no such model file"):
        ntnumba.load("/nonexistent/model.npz")


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_truncated_file(saved, tmp_path, fraction):
    raw = Path(saved).read_bytes()
    bad = tmp_path / "truncated.npz"
    bad.write_bytes(raw[:int(fraction * len(raw))])
    with pytest.raises(ValueError, match=re.escape(str(bad)) + ".*(truncated|not an ntnumba)"):
        ntnumba.load(bad)


def test_an_entry_marked_encrypted_is_a_corrupted_file(saved, tmp_path):
    """A flipped flag bit that marks an entry encrypted (model files never are) is the
    reader's ValueError naming the file, not zipfile's RuntimeError asking for a password
    (found by the fuzz test)."""
    raw = bytearray(Path(saved).read_bytes())
    at = raw.find(b"PK\x01\x02")  # the first entry of the central directory
    raw[at + 8] |= 1               # its general purpose flags: bit 0, encrypted
    bad = tmp_path / "encrypted.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"path: .* is marked encrypted"):
        ntnumba.load(bad)


def test_corrupted_bytes(saved, tmp_path):
    """Damage inside the compressed data (the zip directory intact): CRC or zlib error."""
    raw = bytearray(Path(saved).read_bytes())
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo("components_.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for j in range(start + 10, start + 40):
        raw[j] ^= 0xFF
    bad = tmp_path / "corrupted.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="truncated or corrupted"):
        ntnumba.load(bad)


def test_foreign_files(tmp_path):
    npz = tmp_path / "foreign.npz"
    np.savez(npz, X=np.ones((3, 2)))
    with pytest.raises(ValueError, match="not an ntnumba model file.*marker"):
        ntnumba.load(npz)
    npy = tmp_path / "array.npy"
    np.save(npy, np.ones(3))
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    for path in (npy, text):
        with pytest.raises(ValueError, match="not an ntnumba model file"):
            ntnumba.load(path)
    with pytest.raises(ValueError, match="directory"):
        ntnumba.load(tmp_path)


def test_newer_version_refused(saved, tmp_path):
    path = _rewrite(saved, tmp_path / "v4.npz", format_version=np.array(4))
    with pytest.raises(ValueError, match="format version 4, newer than this ntnumba reads "
                                         r"\(3\); upgrade"):
        ntnumba.load(path)
    path = _rewrite(saved, tmp_path / "v0.npz", format_version=np.array(0))
    with pytest.raises(ValueError, match="invalid model format version 0"):
        ntnumba.load(path)


def test_version_1_graph_models_refused_other_rules_load(tmp_path, X):
    """Version 1 stored the graph rule's directions in the codes' space: such a file must not
    load into the new rule (with n_components == n_features its shapes would even fit)."""
    for assign in ("graph", "objective"):
        m = NTClustering(3, n_components=X.shape[1], max_iter=2, random_state=0,
                         assign=assign).fit(X)
        path = _rewrite(m.save(tmp_path / assign), tmp_path / f"{assign}-v1.npz",
                        format_version=np.array(1))
        if assign == "graph":
            with pytest.raises(ValueError, match="format version 1.*fit the model again"):
                ntnumba.load(path)
        else:
            np.testing.assert_array_equal(ntnumba.load(path).predict(X), m.predict(X))


@pytest.mark.parametrize("key", ["components_", "params", "scale_", "format_version"])
def test_missing_entry(saved, tmp_path, key):
    path = _rewrite(saved, tmp_path / "missing.npz", drop=(key,))
    with pytest.raises(ValueError, match="missing|format_version"):
        ntnumba.load(path)


def test_missing_graph_entry(X, tmp_path):
    g = NTClustering(3, n_components=10, max_iter=2, random_state=0, assign="graph").fit(X)
    path = _rewrite(g.save(tmp_path / "g"), tmp_path / "bad.npz", drop=("fit_X_",))
    with pytest.raises(ValueError, match=r"missing \['fit_X_'\] \(needed by assign='graph'\)"):
        ntnumba.load(path)


@pytest.mark.parametrize("replace, match", [
    (dict(components_=np.ones((10, 4))), "components_ has shape"),
    (dict(dissimilarity_=np.ones((2, 10))), "dissimilarity_ has shape"),
    (dict(similarity_=np.ones((2, 9))), "similarity_ has shape"),
    (dict(labels_=np.ones(3)), "labels_"),
    (dict(scale_=np.array(-1.0)), "scale_"),
    (dict(n_iter_=np.array("four")), "n_iter_"),
    (dict(params=np.array("{not json")), "unreadable parameters"),
    (dict(params=np.array(json.dumps({"no_such_parameter": 1}))), "unreadable parameters"),
    (dict(params=np.array(json.dumps({"n_clusters": 3, "assign": "bogus"}))),
     "invalid parameters"),
    (dict(format=np.array(7)), "marker"),
])
def test_inconsistent_entries(saved, tmp_path, replace, match):
    path = _rewrite(saved, tmp_path / "bad.npz", **replace)
    with pytest.raises(ValueError, match=match):
        ntnumba.load(path)


# ------------------------------------------------------------------------------ untrusted files
def _npy_bytes(array=None, *, descr=None, shape=None, data=b""):
    """An .npy file: a real array, or a crafted header (any descr/shape) followed by ``data``."""
    import io
    buf = io.BytesIO()
    if array is not None:
        np.lib.format.write_array(buf, np.asarray(array), allow_pickle=True)
        return buf.getvalue()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + data


def _craft(src, dst, compress=zipfile.ZIP_DEFLATED, **entries):
    """Copy ``src`` to ``dst`` with entries replaced by raw .npy bytes (``None``: dropped)."""
    with zipfile.ZipFile(src) as z:
        raw = {n[:-4]: z.read(n) for n in z.namelist()}
    for k, v in entries.items():
        if v is None:
            raw.pop(k, None)
        else:
            raw[k] = v
    with zipfile.ZipFile(dst, "w", compression=compress) as z:
        for k, v in raw.items():
            z.writestr(k + ".npy", v)
    return dst


@pytest.fixture(scope="module")
def graph_model(X):
    return NTClustering(3, n_components=10, max_iter=2, random_state=0, assign="graph",
                        n_shared=(0, 1), n_neighbors=4).fit(X)


def test_ignored_keys_are_not_decompressed(saved, tmp_path, X):
    """A 50 MB entry of zeros (50 kB compressed) that the format does not know: not read."""
    import tracemalloc
    path = tmp_path / "bomb.npz"
    _craft(saved, path)
    header = _npy_bytes(descr="|u1", shape=(50 << 20,))
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("padding.npy", "w", force_zip64=True) as w:
            w.write(header)
            zeros = bytes(1 << 20)
            for _ in range(50):
                w.write(zeros)
    assert os.path.getsize(path) < 1 << 20
    tracemalloc.start()
    try:
        loaded = ntnumba.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 << 20, peak
    np.testing.assert_array_equal(loaded.predict(X), ntnumba.load(saved).predict(X))


@pytest.mark.parametrize("key, shape", [
    ("components_", (1 << 40, 5)),          # 72 TiB declared in a few bytes
    ("labels_", (1 << 44,)),                # the free dimension n: bounded by the data's size
    ("objective_history_", (1 << 40,)),
])
def test_huge_declared_shapes_are_refused_before_allocation(saved, tmp_path, key, shape):
    descr = "<i8" if key == "labels_" else "<f8"
    path = _craft(saved, tmp_path / "huge.npz",
                  **{key: _npy_bytes(descr=descr, shape=shape, data=bytes(4096))})
    with pytest.raises(ValueError, match=rf"{key}.*(has shape|declares)|n_iter_ is \d+ with "
                                         rf"{shape[0]} objective values"):
        ntnumba.load(path)


def test_the_entries_are_bounded_before_they_are_read(saved, model, tmp_path, monkeypatch):
    """The per-sample entries repeat the n of labels_, and the bytes the entries declare in
    all stay within half the available memory: a 32 MiB labels_ of zeros (32 kB compressed)
    is refused from its header when only 16 MiB are available, before any allocation."""
    import time
    import tracemalloc
    n = model.labels_.size
    path = _craft(saved, tmp_path / "scores.npz",
                  outlier_scores_=_npy_bytes(np.zeros(n + 1)))
    with pytest.raises(ValueError, match=rf"outlier_scores_ has shape \({n + 1},\), "
                                         rf"expected \({n},\)"):
        ntnumba.load(path)
    big = 1 << 22
    path = _craft(saved, tmp_path / "big.npz", labels_=_npy_bytes(np.zeros(big, np.int64)),
                  similarity_labels_=_npy_bytes(np.zeros(big, np.int64)))
    assert os.path.getsize(path) < 1 << 20
    monkeypatch.setattr("ntnumba.partition.graph.available_memory", lambda: 16 << 20)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=rf"path: {re.escape(str(path))}: entry "
                                             r"'(similarity_)?labels_' declares \d+ bytes .* "
                                             r"more than half of the 16777216 bytes of memory "
                                             r"available: not loaded"):
            ntnumba.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20 and time.perf_counter() - t0 < 5, peak
    monkeypatch.setattr("ntnumba.partition.graph.available_memory", lambda: 1 << 30)
    assert ntnumba.load(saved).labels_.size == n   # a model within the budget loads


def _load_in_thread(path, timeout):
    """``ntnumba.load(path)`` in a daemon thread: ``(finished, exception)`` after at most
    ``timeout`` seconds (a blocked load is left behind, never waited for)."""
    import threading
    out = {}

    def target():
        try:
            ntnumba.load(path)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out["exc"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive(), out.get("exc")


def test_devices_and_fifos_are_refused_at_once(tmp_path):
    if not hasattr(os, "mkfifo") or not os.path.exists("/dev/null"):
        pytest.skip("needs POSIX FIFOs and /dev/null")
    done, exc = _load_in_thread("/dev/null", 10)
    assert done and isinstance(exc, ValueError)
    assert str(exc).startswith("path: /dev/null is a character device, not an ntnumba model "
                               "file: pass the .npz file written by NTClustering.save")
    fifo = tmp_path / "model.npz"
    os.mkfifo(fifo)
    try:
        done, exc = _load_in_thread(fifo, 10)
    finally:   # unblock a reader stuck in open() (none when the FIFO was refused)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert done, "load of a FIFO blocked"
    assert isinstance(exc, ValueError) and f"{fifo} is a FIFO (named pipe)" in str(exc)


@pytest.mark.slow
def test_dev_zero_is_refused_at_once():
    """``/dev/zero`` reads forever: refused from its type, in a subprocess limited to 2 GiB of
    address space and 120 s (the reader before grew by 3 GB in 4.5 s)."""
    import subprocess
    import sys
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import resource, time\n"
            "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
            "import ntnumba\n"
            "from ntnumba import NTClustering  # the imports, not the load, take time\n"
            "t = time.perf_counter()\n"
            "try:\n    ntnumba.load('/dev/zero')\n"
            "except ValueError as exc:\n    print(f'{time.perf_counter() - t:.3f}', exc)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    elapsed, message = proc.stdout.strip().split(" ", 1)
    assert message.startswith("path: /dev/zero is a character device, not an ntnumba model")
    assert float(elapsed) < 1.0


def test_declared_size_must_match_the_data(saved, tmp_path):
    """A header declaring fewer elements than stored, or more: refused, not misread."""
    for shape in ((30,), (40,)):
        path = _craft(saved, tmp_path / "lie.npz",
                      labels_=_npy_bytes(descr="<i8", shape=shape, data=bytes(8 * 36)))
        with pytest.raises(ValueError, match="labels_"):
            ntnumba.load(path)


def _graph_entries(model):
    return {"labels_": model.labels_, "similarity_labels_": model.similarity_labels_}


@pytest.mark.parametrize("which", ["plain", "graph"])
@pytest.mark.parametrize("key, value, match", [
    ("components_", lambda m: np.where(np.eye(10, 5) > 0, np.nan, m.components_), "NaN"),
    ("dissimilarity_", lambda m: m.dissimilarity_.astype(np.float32), "dtypes"),
    ("labels_", lambda m: np.full_like(m.labels_, -1), r"labels_ range from -1"),
    ("labels_", lambda m: np.full_like(m.labels_, 3), r"outside \[0, 3\)"),
    ("labels_", lambda m: np.full(m.labels_.shape, np.nan), "'labels_' has dtype"),
    ("similarity_labels_", lambda m: m.similarity_labels_ + 5, "similarity_labels_ outside"),
    ("similarity_labels_", lambda m: m.similarity_labels_[:-1], "similarity_labels_ has shape"),
    ("objective_history_", lambda m: np.r_[m.objective_history_, np.inf], "objective"),
    ("objective_history_", lambda m: np.ones((2, 2)), "objective_history_ has shape"),
    ("components_", lambda m: m.components_.astype(object), "components_"),
    ("components_", lambda m: m.components_.astype(np.complex128), "dtype complex"),
    ("n_iter_", lambda m: np.array(np.inf), "n_iter_"),
    ("n_iter_", lambda m: np.array(1.5), "n_iter_"),
    ("n_iter_", lambda m: np.array(-1), "n_iter_"),
    ("n_features_in_", lambda m: np.array(10 ** 18), "components_ has shape"),
    ("n_features_in_", lambda m: np.array(True), "n_features_in_"),
    ("scale_", lambda m: np.array("1.0"), "scale_"),
    ("scale_", lambda m: np.array(np.nan), "scale_"),
    ("reject_threshold_", lambda m: np.array(np.nan), "reject_threshold_"),
    ("initial_labels_", lambda m: np.full_like(m.initial_labels_, 3), "initial_labels_ or"),
    ("initial_labels_", lambda m: np.full_like(m.initial_labels_, -1), "initial_labels_ or"),
    ("initial_labels_", lambda m: m.initial_labels_ + 0.5, "'initial_labels_' has dtype"),
    ("initial_labels_", lambda m: m.initial_labels_.reshape(-1, 1), "initial_labels_ has shape"),
    ("rng_state_", lambda m: np.zeros(626), "rng_state_ has shape"),
    ("rng_state_", lambda m: np.r_[np.zeros(624), 625, 0, 0.0], "rng_state_ is not"),
    ("rng_state_", lambda m: np.r_[np.full(624, 2.0 ** 32), 0, 0, 0.0], "rng_state_ is not"),
    ("rng_state_", lambda m: np.r_[np.zeros(623), 0.5, 0, 0, 0.0], "rng_state_ is not"),
    ("rng_state_", lambda m: np.r_[np.zeros(624), 0, 2, 0.0], "rng_state_ is not"),
    ("rng_state_", lambda m: np.r_[np.zeros(624), 0, 1, np.nan], "rng_state_ is not"),
    ("outlier_scores_", lambda m: np.full(m.labels_.shape, np.nan), "outlier_scores_"),
    ("probabilities_", lambda m: np.full(m.labels_.shape, 1.5), "probabilities_"),
    ("probabilities_", lambda m: m.probabilities_.astype(object), "probabilities_"),
    ("params", lambda m: np.array("[" * 100000 + "]" * 100000), "unreadable parameters"),
    ("params", lambda m: np.array("[1, 2]"), "unreadable parameters"),
    ("params", lambda m: np.array('{"n_clusters": {"a": 1}}'), "unreadable parameters"),
    ("params", lambda m: np.array('{"n_clusters": 1e400}'), "parameters"),
    ("params", lambda m: np.array('{"n_clusters": 3, "n_components": 1000000000000}'),
     "components_ has shape"),
    ("format", lambda m: np.array(b"ntnumba-model"), "'format' has dtype"),
    ("format_version", lambda m: np.array(1.0), "format_version"),
    ("format_version", lambda m: np.array([1, 1]), "format_version has shape"),
])
def test_crafted_entries(model, graph_model, tmp_path, which, key, value, match):
    m = model if which == "plain" else graph_model
    src = m.save(tmp_path / "m")
    path = _craft(src, tmp_path / "bad.npz", **{key: _npy_bytes(value(m))})
    with pytest.raises(ValueError, match=match):
        ntnumba.load(path)


@pytest.mark.parametrize("key, value, match", [
    ("fit_X_", lambda m: np.where(np.arange(5) == 2, np.nan, m._fitted.ref_X), "fit_X_"),
    ("fit_X_", lambda m: m._fitted.ref_X[:, :4], "fit_X_ has shape"),
    ("fit_X_", lambda m: m._fitted.ref_X[:-1], "fit_X_ has shape"),
    ("shared_mean_", lambda m: np.full_like(m.shared_mean_, np.inf), "shared_mean_"),
    ("shared_mean_", lambda m: m.shared_mean_[:3], "shared_mean_ has shape"),
    ("shared_components_", lambda m: np.ones((1, 10)), "shared_components_ has shape"),
    ("shared_components_", lambda m: np.full((m.n_shared_, 10), np.nan)[:, :9],
     "shared_components_ has shape"),
    ("n_shared_", lambda m: np.array(11), "n_shared_ is 11"),
    ("n_shared_", lambda m: np.array(-1), "n_shared_ is -1"),
    ("graph_cut_", lambda m: np.array(np.inf), "graph_cut_"),
    ("fit_labels_", lambda m: m._fitted.ref_labels[:-1], "fit_X_ has shape"),
    ("fit_labels_", lambda m: np.full_like(m._fitted.ref_labels, 3), "fit_labels_ outside"),
    ("fit_labels_", lambda m: m._fitted.ref_labels.astype(np.float64), "'fit_labels_' has dtype"),
    ("fit_labels_", lambda m: m._fitted.ref_labels.reshape(-1, 1), "fit_labels_ has shape"),
    ("ref_rows_", lambda m: np.arange(len(m._fitted.ref_labels))[::-1], "ref_rows_ must be incr"),
    ("ref_rows_", lambda m: np.arange(len(m._fitted.ref_labels)) + 1, r"ref_rows_ .*\[0, 36\)"),
    ("ref_rows_", lambda m: np.arange(len(m._fitted.ref_labels) - 1), "ref_rows_ has shape"),
])
def test_crafted_graph_entries(graph_model, tmp_path, key, value, match):
    src = graph_model.save(tmp_path / "g")
    path = _craft(src, tmp_path / "bad.npz", **{key: _npy_bytes(value(graph_model))})
    with pytest.raises(ValueError, match=match):
        ntnumba.load(path)


def _fuzz_cases(raw, rng, n_trunc, n_flip):
    for _ in range(n_trunc):
        yield raw[:int(rng.integers(0, len(raw)))]
    for _ in range(n_flip):
        b = bytearray(raw)
        for j in rng.integers(0, len(b), size=int(rng.integers(1, 4))):
            b[j] ^= 1 << int(rng.integers(0, 8))
        yield bytes(b)


@pytest.mark.parametrize("which", ["plain", "graph"])
@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_fuzz_truncations_and_bit_flips(model, graph_model, X, tmp_path, which, compress):
    """Every damaged file either loads into a model that predicts, or raises ValueError.

    Uncompressed archives (``np.savez``) let the flips reach the .npy headers and the numbers;
    compressed ones exercise the zip and zlib layers."""
    m = model if which == "plain" else graph_model
    raw = Path(_craft(m.save(tmp_path / "m"), tmp_path / "src.npz", compress)).read_bytes()
    rng = np.random.default_rng(17 + compress)
    bad = tmp_path / "fuzz.npz"
    outcomes = {"ValueError": 0, "loaded": 0}
    for case in _fuzz_cases(raw, rng, n_trunc=40, n_flip=120):
        bad.write_bytes(case)
        try:
            loaded = ntnumba.load(bad)
        except ValueError as exc:
            assert str(exc).startswith("path:"), exc
            outcomes["ValueError"] += 1
            continue
        outcomes["loaded"] += 1
        with np.errstate(all="ignore"):
            labels = loaded.predict(X)
        assert labels.shape == (len(X),) and labels.min() >= 0
        assert labels.max() < loaded.n_clusters
    assert outcomes["ValueError"] > 0


@pytest.mark.slow   # 2101 x 2101 maps: ~50 s
def test_files_of_the_earlier_auto_rule_load_and_continue(tmp_path):
    # n_components="auto" was max(2100, N): such a file holds an N x N map above 2100 features
    import json
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 2101)) + 3.0 * np.repeat(rng.standard_normal((2, 2101)), 6, 0)
    old = NTClustering(2, n_components=2101, random_state=0).fit(X)
    params = dict(old.get_params(), n_components="auto")
    path = _craft(old.save(tmp_path / "m"), tmp_path / "old.npz",
                  params=_npy_bytes(np.array(json.dumps(params))))
    model = ntnumba.load(path)
    assert model.n_components == "auto" and model.components_.shape == (2101, 2101)
    np.testing.assert_array_equal(model.transform(X), old.transform(X))
    model.partial_fit(X)   # continues the 2101 x 2101 map
    assert model.components_.shape == (2101, 2101)
    assert NTClustering(2, random_state=0).fit(X).components_.shape == (2100, 2101)
