"""The documentation works: links resolve, examples run, commands parse, the API page is current.

This is the check that stands in for a warning-free Sphinx build (see docs/index.md):

* every relative link and ``#anchor`` in README.md, CHANGELOG.md and docs/*.md points to a file
  and a heading that exist;
* every ``python`` / ``pycon`` code block of those pages runs (blocks of one page share a
  namespace, in order), unless preceded by ``<!-- not tested: reason -->``;
* every ``$ ntnumba ...`` line of a ``console`` block is a valid command line, and every
  ``pip install ".[extra]"`` names an extra that exists;
* the doctests of every public docstring (the objects of docs/gen_api.py) pass;
* docs/api.md equals what docs/gen_api.py generates.

BLAS runs on one thread here, as the ``ntnumba`` command does: the numba kernels already use the
cores (see the user guide, "Speed").
"""
import doctest
import importlib
import inspect
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md"] + list(DOCS.glob("*.md")))
sys.path.insert(0, str(DOCS))
import gen_api  # noqa: E402

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n"
                   r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


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


def _slugs(path):
    """GitHub's anchors of the headings of a Markdown file (duplicates get -1, -2, ...)."""
    text = FENCE.sub("", path.read_text())
    seen = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M):
        slug = gen_api._slug(m.group(1).replace("`", ""))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


# ------------------------------------------------------------------------------ links
@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_links_resolve(page):
    bad = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I):   # http:, https:, mailto:
            assert target.startswith(("https://", "http://", "mailto:")), target
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: {_rel(dest) if ROOT in dest.parents else dest} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in _slugs(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {_rel(dest)}")
    assert not bad, f"{_rel(page)}: " + "; ".join(bad)


def test_slugs_follow_github():
    assert gen_api._slug("The paper's variant and the default") == \
        "the-papers-variant-and-the-default"
    assert gen_api._slug("Choosing n_similarity (Cs) and n_components (M)") == \
        "choosing-n_similarity-cs-and-n_components-m"
    assert gen_api._slug("ntnumba.NTClustering") == "ntnumbantclustering"


# ------------------------------------------------------------------------------ examples
def _tested(info, before):
    return info in ("python", "pycon") and not before.startswith("<!-- not tested")


def _code_pages():
    """Pages with examples; api.md's examples are the docstrings (test_public_docstrings)."""
    return [p for p in PAGES if p.name != "api.md"
            and any(_tested(info, before) for info, _, _, before in _blocks(p.read_text()))]


@pytest.fixture
def one_blas_thread():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield


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
    """(qualified name, object) of the API reference, class members included."""
    out = []
    for modname, names, _ in gen_api.PUBLIC:
        mod = importlib.import_module(modname)
        out.append((modname, mod))
        for n in names if names is not None else mod.__all__:
            obj = getattr(mod, n)
            out.append((f"{modname}.{n}", obj))
            if inspect.isclass(obj):
                out += [(f"{modname}.{n}.{m}", v) for m, v in vars(obj).items()
                        if not m.startswith("_") and inspect.isfunction(v)]
    return out


def _needs_data_folder(test):
    src = "".join(ex.source for ex in test.examples)
    return re.search(r"load_(coil20|orl|yaleb)\(|get_data_home\(", src) is not None


def _data_folder_available():
    from ntnumba.datasets import get_data_home
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


def test_api_reference_is_current():
    assert (DOCS / "api.md").read_text() == gen_api.generate(), \
        "docs/api.md is out of date: run python docs/gen_api.py"


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
