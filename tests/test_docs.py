"""The documentation works: the Sphinx site builds warning-free, examples run, commands parse.

* the Sphinx build of docs/ (``-W --keep-going -n``: every warning is an error; every
  cross-reference, page link and ``#anchor`` resolves; the gallery's example scripts run),
  into a temporary folder, and every relative link of README.md resolves in the built site;
* the API page documents every public name (the ``__all__`` of the documented modules);
* every ``python`` / ``pycon`` code block of README.md, CHANGELOG.md and docs/*.md runs (blocks
  of one page share a namespace, in order), unless preceded by ``<!-- not tested: reason -->``;
* every ``$ ntnumba ...`` line of a ``console`` block is a valid command line, and every
  ``pip install ".[extra]"`` names an extra that exists;
* the doctests of every public docstring (the objects of the API page) pass.

BLAS runs on one thread here, as the ``ntnumba`` command does: the numba kernels already use the
cores (see the user guide, "Speed").
"""
import doctest
import importlib
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md"] + list(DOCS.glob("*.md")))

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n"
                   r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
#: the autodoc directives of the API page: (directive, qualified name, options)
AUTODOC = re.compile(r"^\.\. (automodule|autoclass|autofunction):: ([\w.]+)\n"
                     r"((?:   :[\w-]+:.*\n)*)", re.M)


def _rel(path):
    return str(path.relative_to(ROOT))


def _blocks(text):
    """(info string, body, line number, preceding text) of every fenced code block."""
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip().splitlines()
        yield (m.group("info").strip().split(" ")[0], m.group("body"),
               text[:m.start()].count("\n") + 1, before[-1] if before else "")


def _prose(text):
    """The text without fenced code blocks and inline code spans (links there are code)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.S)


def _links(page):
    """Relative link targets of a Markdown page (outside code)."""
    return [t for t in LINK.findall(_prose(page.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t, flags=re.I)]


# ------------------------------------------------------------------------------ the site
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The HTML site, built from a copy of the sources (the gallery writes next to them)."""
    src = tmp_path_factory.mktemp("docs-src")
    skip = shutil.ignore_patterns("_build", "auto_examples", "sg_execution_times.rst",
                                  "__pycache__")
    shutil.copytree(DOCS, src / "docs", ignore=skip)
    shutil.copytree(ROOT / "examples", src / "examples", ignore=skip)
    for name in ("README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, src / name)
    out = src / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q",
                           "-b", "html", str(src / "docs"), str(out)], capture_output=True,
                          text=True, env=dict(os.environ, MPLBACKEND="Agg"), timeout=600)
    return proc, out


@pytest.mark.slow
def test_sphinx_build_has_no_warnings(site):
    proc, out = site
    assert proc.returncode == 0 and not proc.stderr.strip(), \
        f"sphinx build failed (exit {proc.returncode}):\n{proc.stderr}{proc.stdout}"
    pages = ["index", "api", "changelog", "auto_examples/index"] + \
        [p.stem for p in DOCS.glob("*.md")] + \
        [f"auto_examples/{p.stem}" for p in (ROOT / "examples").glob("plot_*.py")]
    missing = [p for p in pages if not (out / f"{p}.html").exists()]
    assert not missing, f"pages not built: {missing}"


@pytest.mark.slow
def test_readme_links_resolve_in_the_site(site):
    """README.md is read on the code host: its links point at the Markdown sources, and each
    of them is a page of the site with the linked #anchor."""
    out = site[1]
    links = _links(ROOT / "README.md")
    bad = []
    for target in links:
        path, _, anchor = target.partition("#")
        if path.startswith("docs/") and path.endswith(".md"):
            html = out / (path[len("docs/"):-len(".md")] + ".html")
            if not html.exists():
                bad.append(f"{target}: no page {html.name} in the site")
            elif anchor and f'id="{anchor}"' not in html.read_text():
                bad.append(f"{target}: no #{anchor} in {html.name}")
        elif not (ROOT / path).exists():
            bad.append(f"{target}: {path} does not exist")
    assert not bad, "README.md: " + "; ".join(bad)
    assert sum(t.startswith("docs/") for t in links) >= 5


def _api_directives():
    return AUTODOC.findall((DOCS / "api.md").read_text())


def test_api_page_documents_every_public_name():
    documented = {name for _, name, _ in _api_directives()}
    modules = [name for kind, name, _ in _api_directives() if kind == "automodule"]
    assert {"ntnumba", "ntnumba.kernels", "ntnumba.datasets", "ntnumba.metrics",
            "ntnumba.plotting", "ntnumba.dask"} <= set(modules)
    missing = []
    for m in modules:
        mod = importlib.import_module(m)
        missing += [f"{m}.{n}" for n in getattr(mod, "__all__", [])
                    if not inspect.ismodule(getattr(mod, n)) and n != "__version__"
                    and f"{m}.{n}" not in documented]
    assert not missing, f"docs/api.md does not document {missing}"


# ------------------------------------------------------------------------------ examples
def _tested(info, before):
    return info in ("python", "pycon") and not before.startswith("<!-- not tested")


def _code_pages():
    """Pages with examples (the API page's are the docstrings: test_public_docstrings)."""
    return [p for p in PAGES
            if any(_tested(info, before) for info, _, _, before in _blocks(p.read_text()))]


@pytest.fixture
def one_blas_thread():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("page", _code_pages(), ids=_rel)
def test_markdown_examples_run(page, tmp_path, monkeypatch, one_blas_thread):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{page.stem}"}
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    ran = 0
    for info, body, line, before in _blocks(page.read_text()):
        if not _tested(info, before):
            continue
        where = f"{_rel(page)}, code block at line {line}"
        if info == "python":
            exec(compile(body, where, "exec"), namespace)
        else:
            test = parser.get_doctest(body, namespace, where, str(page), line)
            result = runner.run(test)
            assert result.failed == 0, f"{where}: doctest failed (output above)"
        ran += 1
    assert ran


def _console_commands():
    out = []
    for page in PAGES:
        for info, body, line, _ in _blocks(page.read_text()):
            if info == "console":
                out += [(f"{_rel(page)}:{line}", ln[2:]) for ln in body.splitlines()
                        if ln.startswith("$ ")]
    return out


@pytest.mark.parametrize("where, command", _console_commands())
def test_console_commands_are_valid(where, command):
    from ntnumba import cli
    for part in command.split("&&"):
        part = part.split(" #")[0].strip()
        words = shlex.split(part)
        if words[0] == "ntnumba":
            try:
                cli.build_parser().parse_args(words[1:])
            except SystemExit as exc:
                pytest.fail(f"{where}: '{part}' is not a valid command line (exit {exc.code})")
        elif words[:4] == ["python", "-m", "pip", "install"]:
            extras = re.findall(r"\.\[([\w,-]+)\]", part)
            declared = set(re.findall(r"^(\w+) = \[", _optional_dependencies(), flags=re.M))
            for extra in ",".join(extras).split(",") if extras else []:
                assert extra in declared, f"{where}: unknown extra {extra!r}"
        elif words[:3] == ["python", "-m", "sphinx"]:   # the build test_docs runs
            assert {"-W", "--keep-going", "-n"} <= set(words), f"{where}: {part}"
        else:
            assert words[:3] == ["python", "-m", "pytest"], f"{where}: unchecked: {part}"


def _optional_dependencies():
    text = (ROOT / "pyproject.toml").read_text()
    return text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]


def test_readme_setup_commands_and_ci():
    """The two commands of the README; .ci/run runs the second, verbatim."""
    readme = (ROOT / "README.md").read_text()
    install = re.search(r"## Install\n(.*?)\n## ", readme, flags=re.S).group(1)
    commands = [ln[2:] for info, body, *_ in _blocks(install) if info == "console"
                for ln in body.splitlines() if ln.startswith("$ ")]
    test_command = 'python -m pip install -e ".[test]" && python -m pytest'
    assert commands == ['python -m pip install -e ".[plot]" && ntnumba demo', test_command]
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


# ------------------------------------------------------------------------------ docstrings
def _public_objects():
    """(qualified name, object) of the API page, class members included."""
    out = []
    for kind, qual, options in _api_directives():
        if kind == "automodule":
            out.append((qual, importlib.import_module(qual)))
            continue
        modname, _, n = qual.rpartition(".")
        obj = getattr(importlib.import_module(modname), n)
        out.append((qual, obj))
        if inspect.isclass(obj) and ":members:" in options:
            out += [(f"{qual}.{m}", v) for m, v in vars(obj).items()
                    if not m.startswith("_") and inspect.isfunction(v)]
    return out


def test_public_docstrings_have_examples():
    """numpydoc docstrings with an Examples section for every class, function and method of
    the API page (modules excepted)."""
    missing = [name for name, obj in _public_objects() if not inspect.ismodule(obj)
               and not re.search(r"^Examples\n-{8}$", inspect.getdoc(obj) or "", flags=re.M)]
    assert not missing, f"no Examples section: {missing}"


def _data_loaders():
    """The loaders of benchmarks.datasets that read the data folder (they take ``data_home``)."""
    from benchmarks import datasets
    return [name for name, fn in inspect.getmembers(datasets, inspect.isfunction)
            if not name.startswith("_") and "data_home" in inspect.signature(fn).parameters]


def _needs_data_folder(test):
    src = "".join(ex.source for ex in test.examples)
    return re.search(r"\b(%s)\(" % "|".join(_data_loaders()), src) is not None


def _data_folder_available():
    from benchmarks.datasets import get_data_home
    try:
        get_data_home()
    except FileNotFoundError:
        return False
    return True


@pytest.mark.parametrize("name, obj", _public_objects(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_public_docstrings(name, obj, tmp_path, monkeypatch, one_blas_thread):
    doc = inspect.getdoc(obj)
    assert doc and doc.strip(), f"{name} has no docstring"
    finder = doctest.DocTestFinder(recurse=False)
    module = obj if inspect.ismodule(obj) else inspect.getmodule(obj)
    tests = [t for t in finder.find(obj, name, module=module, globs={}) if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    monkeypatch.chdir(tmp_path)
    for test in tests:
        if _needs_data_folder(test) and not _data_folder_available():
            pytest.skip("needs the data folder (NTNUMBA_DATA or ../shared/data)")
        result = runner.run(test)
        assert result.failed == 0, f"doctest of {name} failed (output above)"


def _first_table(section):
    readme = (ROOT / "README.md").read_text()
    body = re.search(rf"## {section}\n(.*?)(\n## |\Z)", readme, flags=re.S).group(1)
    return re.search(r"((?:^\|.*\|\n)+)", body, flags=re.M).group(1)


@pytest.mark.parametrize("section, page", [("Results", "results.md"),
                                           ("Performance", "performance.md")])
def test_readme_tables_quote_the_docs(section, page):
    """Every number of the README's results and performance tables is on the page it cites."""
    text = (DOCS / page).read_text()
    numbers = re.findall(r"\d+\.\d+", _first_table(section))
    assert numbers
    missing = [v for v in numbers if not re.search(rf"(?<![\d.]){re.escape(v)}(?!\d)", text)]
    assert not missing, f"README {section} table: {missing} not found in docs/{page}"
