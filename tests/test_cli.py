"""The ``ntnumba`` console script, run for real in a subprocess, and its PNG outputs.

The demo runs with numba compilation, as a user runs it. The other subprocess calls run on tiny
data with ``NUMBA_DISABLE_JIT=1``: the same code, without paying ~20 s of compilation per
process. Error cases that need no subprocess call :func:`ntnumba.cli.main` directly.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import ntnumba
from ntnumba import cli, plotting

_BIN = os.path.dirname(sys.executable)
_SCRIPT = shutil.which("ntnumba", path=_BIN) or shutil.which("ntnumba")
COMMAND = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "ntnumba"]


def run(args, cwd, jit=False, timeout=300):
    env = dict(os.environ)
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    return subprocess.run(COMMAND + list(args), cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def decode_png(path):
    """Check a PNG without a screenshot: signature, chunk CRCs, header, compressed pixel data.

    Returns (width, height, pixels) with the pixels decoded by matplotlib.
    """
    raw = open(path, "rb").read()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, chunks = 8, []
    while pos < len(raw):
        length, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        data = raw[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", raw[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + data) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        chunks.append((kind, data))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, color = struct.unpack(">IIBB", chunks[0][1][:10])
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    pixels = zlib.decompress(b"".join(d for k, d in chunks if k == b"IDAT"))
    assert len(pixels) == height * (1 + width * channels * depth // 8)
    from matplotlib.image import imread
    img = imread(path)
    assert img.shape[:2] == (height, width)
    return width, height, img


@pytest.fixture(scope="module")
def blobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 10)
    X = 5.0 * rng.standard_normal((3, 6))[y] + rng.standard_normal((30, 6))
    np.savez(d / "blobs.npz", X=X, y=y)
    np.savetxt(d / "blobs.csv", np.c_[X, y], delimiter=",", header="a,b,c,d,e,f,label")
    np.save(d / "X.npy", X)
    return d


# ------------------------------------------------------------------------------ demo
@pytest.mark.slow
def test_demo_runs_and_draws(tmp_path):
    pytest.importorskip("matplotlib")
    res = run(["demo"], cwd=tmp_path, jit=True)
    assert res.returncode == 0, res.stderr
    out, err = res.stdout, res.stderr
    rows = {m[0]: tuple(map(float, m[1:]))
            for m in re.findall(r"^\s+(NTClustering|KMeans)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
                                out, flags=re.M)}
    assert set(rows) == {"NTClustering", "KMeans"}
    for ca, nmi, ari in rows.values():
        assert 0.3 < ca <= 1 and 0.5 < nmi <= 1 and 0 < ari <= 1
    # the README quotes these numbers (the demo is deterministic)
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    table = readme.split("What `ntnumba demo` prints", 1)[1].split("\n\n", 2)[1]
    quoted = {m[0]: tuple(map(float, m[1:])) for m in re.findall(
        r"^\| (NTClustering|KMeans) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", table,
        flags=re.M)}
    assert quoted == rows, "README's demo table differs from what ntnumba demo prints"
    # says what it is doing, one progress line per iteration on stderr
    for step in ("[1/4] compiling", "[2/4] NTClustering", "[3/4] KMeans", "[4/4] drawing"):
        assert step in err
    its = re.findall(r"^iteration\s+(\d+)\s+objective .* elapsed .* eta ", err, flags=re.M)
    n_iter = 1  # the demo runs the graph mode with one iteration (ntnumba/cli.py)
    assert its and int(its[-1]) == n_iter
    expected = {"clusters.png": (680, 1040), "scores.png": (600, 350)}
    if n_iter > 1:
        expected["objective.png"] = (700, 320)
    # by default into a new temporary folder, nothing in the working directory
    assert os.listdir(tmp_path) == []
    folder = re.search(r"^wrote (.+)[/\\]clusters\.png ", out, flags=re.M).group(1)
    assert os.path.basename(folder).startswith("ntnumba-demo-")
    assert sorted(os.listdir(folder)) == sorted(expected)
    for name, size in expected.items():
        path = os.path.join(folder, name)
        assert f"wrote {path} ({size[0]} x {size[1]} px" in out
        w, h, img = decode_png(path)
        assert (w, h) == size
        assert float(np.std(img[..., :3])) > 0.05       # not a blank picture
    assert plotting.montage_size(20, cli.DEMO["n_per_cluster"]) == (680, 1040)
    shutil.rmtree(folder)


def test_demo_writes_into_the_named_folder(monkeypatch, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["demo", "-q", "--resolution", "8x8", "--n-components", "64",
                     "--out", "pics"])
    out = capsys.readouterr().out
    assert code == 0
    assert os.listdir(tmp_path) == ["pics"]
    assert sorted(os.listdir(tmp_path / "pics")) == ["clusters.png", "scores.png"]
    assert f"wrote {os.path.join('pics', 'clusters.png')} (" in out


def test_demo_without_matplotlib_says_so(monkeypatch, capsys, tmp_path):
    """In-process, tiny settings: the demo still prints its table, and explains."""
    import builtins
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["demo", "-q", "--resolution", "8x8", "--n-components", "64",
                     "--max-iter", "2"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "matplotlib is not installed" in err and "ntnumba[plot]" in err
    assert "NTClustering" in out and "KMeans" in out and "wrote" not in out
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------ fit, predict, evaluate
@pytest.mark.slow
def test_fit_predict_evaluate(blobs):
    pytest.importorskip("matplotlib")
    res = run(["fit", "blobs.npz", "-k", "3", "--n-components", "12", "--max-iter", "6",
               "--seed", "0", "-o", "model", "--plot-objective", "obj.png"], cwd=blobs)
    assert res.returncode == 0, res.stderr
    assert "wrote model  model.npz" in res.stdout
    assert "wrote labels model.labels.csv (30 samples, 3 clusters)" in res.stdout
    assert "CA 1.000  NMI 1.000  ARI 1.000" in res.stdout          # labels found in the file
    assert len(re.findall(r"^iteration ", res.stderr, flags=re.M)) == 6   # verbose by default
    assert decode_png(blobs / "obj.png")[:2] == (700, 320)
    model = ntnumba.load(blobs / "model.npz")
    labels = np.loadtxt(blobs / "model.labels.csv", skiprows=1, dtype=np.int64)
    np.testing.assert_array_equal(labels, model.labels_)

    # predict: to standard output, and to a .npy file, from other file types
    res = run(["predict", "model.npz", "X.npy"], cwd=blobs)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(np.array(res.stdout.split(), dtype=np.int64),
                                  model.predict(np.load(blobs / "X.npy")))
    res = run(["predict", "model.npz", "blobs.csv", "--target-key", "last", "-o", "p.npy"],
              cwd=blobs)
    assert res.returncode == 0 and "wrote labels p.npy (30 samples)" in res.stdout
    np.testing.assert_array_equal(np.load(blobs / "p.npy"), labels)

    # evaluate: a labels file against the labels of a data file, or another labels file
    res = run(["evaluate", "model.labels.csv", "blobs.npz"], cwd=blobs)
    assert res.returncode == 0, res.stderr
    assert "30 samples, 3 clusters, 3 classes" in res.stdout
    res = run(["evaluate", "p.npy", "blobs.csv", "--key", "last", "--json"], cwd=blobs)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"ca": 1.0, "nmi": 1.0, "ari": 1.0}


@pytest.mark.slow
def test_fit_reads_a_users_table(blobs):
    """A pandas table with an index, ';' and string classes: the labels are not a feature."""
    pd = pytest.importorskip("pandas")
    X = np.load(blobs / "X.npy")
    y = np.load(blobs / "blobs.npz")["y"]
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])
    df.assign(target=np.array(["ant", "bee", "cat"])[y]).to_csv(blobs / "t.csv", sep=";")
    res = run(["fit", "t.csv", "-k", "3", "--n-components", "12", "--seed", "0", "-o", "t"],
              cwd=blobs)
    assert res.returncode == 0, res.stderr
    assert ("read t.csv: 30 samples x 6 features, labels from column 'target' (3 classes); "
            "header row (detected: text 'f0' above numbers), delimiter ';' (detected); "
            "index column (unnamed) dropped (an unnamed first column, as pandas' to_csv "
            "writes the index)") in res.stderr
    assert "against the labels in t.csv: CA 1.000" in res.stdout
    model = ntnumba.load(blobs / "t.npz")
    assert model.n_features_in_ == 6
    res = run(["evaluate", "t.labels.csv", "t.csv", "--key", "target"], cwd=blobs)
    assert res.returncode == 0 and "CA 1.000" in res.stdout, res.stderr
    res = run(["evaluate", "t.labels.csv", "t.csv"], cwd=blobs)     # found by name
    assert res.returncode == 0 and "CA 1.000" in res.stdout, res.stderr
    # boolean data, as the estimator accepts them
    np.save(blobs / "bool.npy", X > 0)
    res = run(["fit", "bool.npy", "-k", "2", "--n-components", "12", "-q", "-o", "b"], cwd=blobs)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(np.loadtxt(blobs / "b.labels.csv", skiprows=1),
                                  ntnumba.load(blobs / "b.npz").predict(X > 0))


@pytest.mark.slow
def test_fit_scaling_and_auto_components(blobs):
    """Columns in different units: a one-line warning, and --scaling standard as the fix."""
    X = np.load(blobs / "X.npy") * np.array([1e-3, 1.0, 1.0, 5e3, 1.0, 1.0])
    y = np.load(blobs / "blobs.npz")["y"]
    np.savetxt(blobs / "units.csv", np.c_[X, y], delimiter=",",
               header="a,b,c,d,e,f,target", comments="")
    base = ["fit", "units.csv", "-k", "3", "--seed", "0", "--n-components", "12"]
    # the default graph rule weights the features itself: the objective rule warns
    res = run(base + ["-o", "u1", "--assign", "objective", "--init", "k-means++"], cwd=blobs)
    assert res.returncode == 0, res.stderr
    warn = [ln for ln in res.stderr.splitlines() if "feature scales" in ln]
    assert len(warn) == 1 and warn[0].startswith("ntnumba fit: warning: X: the feature scales "
                                                 "differ by orders of magnitude"), res.stderr
    assert "--scaling standard" in warn[0]
    res = run(base + ["-o", "u2", "--scaling", "standard"], cwd=blobs)
    assert res.returncode == 0 and "feature scales" not in res.stderr, res.stderr
    assert "CA 1.000" in res.stdout
    model = ntnumba.load(blobs / "u2.npz")
    assert model.scaling == "standard"
    np.testing.assert_allclose(model.feature_mean_, X.mean(axis=0))


@contextlib.contextmanager
def _sigint_default():
    """Children started inside get SIGINT at its default action, as in a terminal. A test run
    started as a background job of a non-interactive shell has SIGINT ignored, a child would
    inherit that, and Python then installs no KeyboardInterrupt handler (Ctrl-C is lost).
    A caught signal is reset to its default across exec (an ignored one is inherited), so this
    process (main thread) catches SIGINT while the child starts and restores its handler after;
    ``preexec_fn`` would do it in the child, but is unsafe in a process with threads."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


@pytest.mark.slow
def test_ctrl_c_keeps_last_iterate(blobs):
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    with _sigint_default():
        p = subprocess.Popen(COMMAND + ["fit", "blobs.npz", "-k", "3", "--n-components", "12",
                                        "--max-iter", "100000", "--tol", "0", "--seed", "0",
                                        "-o", "stopped.npz"],
                             cwd=blobs, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            if line.startswith("iteration    3"):
                p.send_signal(signal.SIGINT)
                break
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130
    n = int(re.search(r"interrupted: kept (\d+) iteration", out).group(1))
    model = ntnumba.load(blobs / "stopped.npz")
    assert n >= 3 and model.n_iter_ == n and len(model.objective_history_) == n
    assert (blobs / "stopped.labels.csv").is_file()
    assert "Traceback" not in err


# ------------------------------------------------------------------------------ errors
@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["fit", "blobs.npz", "-k", "0", "-o", "m"], "ntnumba fit: error: argument -k/--n-clusters"),
    (["predict", "blobs.npz", "X.npy"], "ntnumba predict: error: path: blobs.npz is not an "
                                        "ntnumba model file"),
])
def test_errors_in_subprocess(blobs, args, message):
    res = run(args, cwd=blobs)
    assert res.returncode in (1, 2)
    assert res.stderr.startswith(message), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


@pytest.mark.parametrize("args, code, message", [
    (["fit", "blobs.npz", "-o", "m"], 2, "required: -k/--n-clusters"),
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--resize", "3"], 2, "expected HxW"),
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--lambda0", "-1"], 2, "must be a finite"),
    (["fit", "blobs.npz", "-k", "3", "-o", "/no/such/folder/m"], 1, "does not exist"),
    (["fit", "damaged.mat", "-k", "3", "-o", "m"], 1,
     "damaged.mat: not a readable MATLAB .mat file (truncated or corrupted: "),
    (["fit", "truncated.npz", "-k", "3", "-o", "m"], 1,
     "truncated.npz: not a readable .npz archive (truncated or corrupted: BadZipFile"),
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--labels", "m.txt"], 1,
     "unsupported extension"),
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--data-key", "nope"], 1,
     "data_key 'nope' not found"),
    (["fit", "notes.xlsx", "-k", "3", "-o", "m"], 1, "unknown file extension"),
    (["predict", "missing.npz", "X.npy"], 1, "no such model file"),
    (["fit", "missing.npz", "-k", "3", "-o", "m"], 1, "data file not found"),
    (["frobnicate"], 2, "argument COMMAND: invalid choice"),
    (["predict", "truncated.npz", "X.npy"], 1, "not an ntnumba model file"),
    (["evaluate", "X.npy", "blobs.npz"], 1, "expected a vector of labels"),
    (["evaluate", "y.csv", "X.npy"], 1, "expected a vector of labels"),
    (["evaluate", "y.csv", "short.csv"], 1, "has 30 labels"),
    (["evaluate", "y.csv", "blobs.npz", "--key", "nope"], 1, "target_key 'nope' not found"),
    (["evaluate", "y.csv", "X.npz"], 1, "no labels found"),
    (["fit", "complex.npy", "-k", "3", "-o", "m"], 1,
     "complex data (dtype complex128) are not supported; pass the real part"),
    (["predict", "m.npz", "X.npy", "--n-jobs", "0"], 2,
     "argument --n-jobs: must be a positive number of threads or -1"),
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--n-jobs", "0"], 2, "argument --n-jobs"),
    (["fit", "blobs.csv", "-k", "3", "-o", "m", "--target-key", "nope"], 1,
     "target_key 'nope' not found"),
    # the removed options have no flags
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--relabel", "1", "--max-iter", "2"], 2,
     "unrecognized arguments: --relabel 1"),
    (["fit", "blobs.npz", "-k", "3", "-o", "m", "--prototypes"], 2,
     "unrecognized arguments: --prototypes"),
])
def test_errors_are_one_line(blobs, capsys, monkeypatch, args, code, message):
    monkeypatch.chdir(blobs)
    (blobs / "notes.xlsx").write_text("hello\n")
    (blobs / "truncated.npz").write_bytes((blobs / "blobs.npz").read_bytes()[:50])
    (blobs / "y.csv").write_text("label\n" + "0\n1\n2\n" * 10)
    (blobs / "short.csv").write_text("0\n1\n")
    np.savez(blobs / "X.npz", X=np.ones((30, 2)))
    np.save(blobs / "complex.npy", np.ones((30, 2)) + 1j)
    (blobs / "damaged.mat").write_bytes(b"MATLAB 5.0 MAT-file" + bytes(120) + b"garbage" * 20)
    assert cli.main(args) == code
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith(("fitting on", "read "))]
    assert len(lines) == 1 and message in lines[0], err
    assert lines[0].startswith((f"ntnumba {args[0]}: error: ", "ntnumba: error: "))


def test_an_unwritable_output_folder_is_found_before_reading_the_data(
        blobs, capsys, monkeypatch):
    """/proc takes no new file, even from root (whom os.access lets write anywhere): fit and
    predict say so before reading any data or fitting."""
    if not os.path.isdir("/proc/self") or os.access("/proc", os.W_OK) is False:
        pytest.skip("needs /proc, a folder that takes no file but passes os.access")
    monkeypatch.chdir(blobs)

    def read(*args, **kwargs):
        raise AssertionError("the data were read before the output was checked")

    monkeypatch.setattr(cli, "_load_data", read)
    for args in (["fit", "X.npy", "-k", "3", "-o", "/proc/m"],
                 ["fit", "X.npy", "-k", "3", "-o", "m", "--labels", "/proc/labels.csv"],
                 ["predict", "m.npz", "X.npy", "-o", "/proc/labels.csv"]):
        assert cli.main(args) == 1
        err = capsys.readouterr().err
        assert re.fullmatch(r"ntnumba (fit|predict): error: (--out|--labels): /proc/\S+: cannot "
                            r"write in folder /proc \(.+\); choose another output path\n", err)


def test_fit_flag_defaults_are_the_library_defaults():
    """Without flags, ``fit`` builds the estimator with every parameter at the library's
    default; the flags reach it."""
    base = ["fit", "d.npz", "-k", "3", "-o", "m"]
    parse = cli.build_parser().parse_args
    default = cli._model_from_args(parse(base), verbose=0).get_params()
    assert default == ntnumba.NTClustering(3).get_params()
    got = cli._model_from_args(parse(base + ["--max-iter", "3", "--n-neighbors", "7"]),
                               verbose=0).get_params()
    assert (got["max_iter"], got["n_neighbors"]) == (3, 7)


def test_traceback_option_reraises(blobs, monkeypatch):
    monkeypatch.chdir(blobs)
    with pytest.raises(cli.CLIError, match="data file not found"):
        cli.main(["--traceback", "fit", "missing.npz", "-k", "3", "-o", "m"])


@pytest.mark.slow
def test_help_imports_no_heavy_module():
    """'ntnumba --help' (and 'import ntnumba') stay fast: no numba, NumPy, SciPy, scikit-learn
    or pandas (the measured time is in the report; no timed test)."""
    code = ("import sys; from ntnumba.cli import main; main(['--help']); import ntnumba; "
            "print(sorted(m for m in ('numba', 'numpy', 'scipy', 'sklearn', 'pandas') "
            "if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "usage: ntnumba" in res.stdout and res.stdout.strip().endswith("[]"), res.stdout


def test_version_and_help(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ntnumba {ntnumba.__version__}"
    for command in ("demo", "fit", "predict", "evaluate"):
        assert cli.main([command, "--help"]) == 0
        assert f"usage: ntnumba {command}" in capsys.readouterr().out


def test_read_labels_reads_every_line(tmp_path):
    """A labels file longer than the lines sampled to recognise its format (200) is read whole,
    with and without a header line."""
    labels = np.arange(1000) % 7
    cli.write_labels(str(tmp_path / "l.csv"), labels)
    np.testing.assert_array_equal(cli.read_labels(str(tmp_path / "l.csv")), labels)
    (tmp_path / "h.csv").write_text("label\n" + "\n".join(map(str, labels)) + "\n")
    np.testing.assert_array_equal(cli.read_labels(str(tmp_path / "h.csv")), labels)


def test_read_labels_formats(tmp_path):
    (tmp_path / "a.csv").write_text("label\n3\n1\n3\n")
    (tmp_path / "b.txt").write_text("cat\ndog\ncat\n")
    np.save(tmp_path / "c.npy", np.array([[1], [2], [1]]))
    np.testing.assert_array_equal(cli.read_labels(str(tmp_path / "a.csv")), [3, 1, 3])
    assert cli.read_labels(str(tmp_path / "b.txt")).tolist() == ["cat", "dog", "cat"]
    (tmp_path / "c.txt").write_text("species\nIris setosa\nIris virginica\n")
    assert cli.read_labels(str(tmp_path / "c.txt")).tolist() == ["Iris setosa", "Iris virginica"]
    (tmp_path / "t.csv").write_text("a;b;species\n1;2;x\n3;4;y\n")      # a data table
    assert cli.read_labels(str(tmp_path / "t.csv"), "species").tolist() == ["x", "y"]
    assert cli.read_labels(str(tmp_path / "t.csv"), "-1").tolist() == ["x", "y"]
    np.testing.assert_array_equal(cli.read_labels(str(tmp_path / "c.npy")), [1, 2, 1])
    cli.write_labels(str(tmp_path / "d.csv"), [0, 2])
    assert (tmp_path / "d.csv").read_text().split() == ["label", "0", "2"]


# ------------------------------------------------------------------------------ plots
def test_plot_files_have_the_documented_size(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    images = rng.random((40, 6 * 5))
    labels = np.repeat([0, 1, 2, -1], 10)            # -1: rejected, drawn as the last row
    fig = plotting.plot_cluster_montage(images, labels, (6, 5), n_per_cluster=5,
                                        order=rng.random(40), true_labels=labels % 2,
                                        path=tmp_path / "m.png", dpi=50)
    assert fig.axes[0].get_yticklabels()[-1].get_text().startswith("rejected  n=10")
    assert decode_png(tmp_path / "m.png")[:2] == plotting.montage_size(4, 5, dpi=50) == (215, 120)
    plotting.plot_objective([5.0, 3.0, 2.5, 2.6], path=tmp_path / "o.png", dpi=50)
    assert decode_png(tmp_path / "o.png")[:2] == (350, 160)
    margin = rng.gamma(2.0, size=200)
    fig = plotting.plot_score_histogram(margin, threshold=0.5, higher_is_worse=False,
                                        path=tmp_path / "h.png")
    label = fig.axes[0].get_legend().get_texts()[0].get_text()
    assert label == f"rejected: {int(np.sum(margin < 0.5))} of 200 " \
                    f"({np.mean(margin < 0.5):.1%})"
    assert decode_png(tmp_path / "h.png")[:2] == (600, 350)


def test_plot_errors():
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match="labels: expected 4 values"):
        plotting.plot_cluster_montage(np.ones((4, 9)), [0, 1])
    with pytest.raises(ValueError, match="image_shape"):
        plotting.plot_cluster_montage(np.ones((4, 10)), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="reject_quantile"):
        plotting.plot_score_histogram([1.0, 2.0], reject_quantile=1.5)
    with pytest.raises(ValueError, match="history is empty"):
        plotting.plot_objective([])
