"""Generate ``docs/api.md`` (the API reference) from the package's numpydoc docstrings.

Run ``python docs/gen_api.py`` after changing a public docstring; ``tests/test_docs.py`` fails
when ``docs/api.md`` differs from what this script writes. ``--check`` only compares.

The conversion handles the numpydoc subset the package uses: a summary, paragraphs, the
sections Parameters / Returns / Raises / Attributes (``name : type`` items with indented
descriptions), Notes, Examples (doctest blocks become ``pycon`` code blocks), indented blocks
(formulas, kept as code) and the inline roles ``:func:``, ``:class:``, ``:meth:``, ``:mod:``.
"""
import importlib
import inspect
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "api.md"

#: (module, names, title): what is public, in the order of the page.
PUBLIC = [
    ("ntnumba", ["NTClustering", "load"], "Estimator and saved models"),
    ("ntnumba.kernels", None, "Kernels: arrays in, arrays out"),
    ("ntnumba.datasets", None, "Data sets"),
    ("ntnumba.metrics", None, "Metrics"),
    ("ntnumba.plotting", None, "Plots (optional extra: matplotlib)"),
    ("ntnumba.dask", ["NTClustering"], "Dask backend (optional extra: dask)"),
    ("ntnumba.cli", ["main", "build_parser"], "Command line"),
]
_ITEM_SECTIONS = {"Parameters", "Returns", "Yields", "Raises", "Attributes", "Other Parameters",
                  "Warns"}
_SECTIONS = _ITEM_SECTIONS | {"Notes", "Examples", "See Also", "References", "Warnings"}


def _inline(text):
    """RST inline markup -> Markdown."""
    text = re.sub(r":(?:func|class|meth|mod|attr|data|obj):`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    return text


def _sections(doc):
    """Split a docstring into [(section name or None, lines)]."""
    lines = doc.splitlines()
    out = [(None, [])]
    i = 0
    while i < len(lines):
        if (i + 1 < len(lines) and lines[i].strip() in _SECTIONS
                and re.fullmatch(r"-{3,}", lines[i + 1].strip())):
            out.append((lines[i].strip(), []))
            i += 2
            continue
        out[-1][1].append(lines[i])
        i += 1
    return out


def _paragraphs(lines):
    """Plain text: paragraphs joined; indented blocks and doctest blocks as code blocks."""
    md = []
    para = []
    i = 0

    def flush():
        if para:
            md.append(_inline(" ".join(s.strip() for s in para)))
            md.append("")
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(">>>"):
            flush()
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i].strip() if lines[i].lstrip().startswith((">>>", "..."))
                             else lines[i].rstrip())
                i += 1
            md += ["```pycon"] + [b.strip() for b in block] + ["```", ""]
            continue
        if line.startswith("    ") and line.strip():
            flush()
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:].rstrip())
                i += 1
            while block and not block[-1]:
                block.pop()
            md += ["```text"] + block + ["```", ""]
            continue
        if not line.strip():
            flush()
        elif re.match(r"^\s*[-*] ", line) and para == []:
            md.append(_inline(line.rstrip()))
            if i + 1 < len(lines) and not lines[i + 1].strip():
                md.append("")
        else:
            para.append(line)
        i += 1
    flush()
    return md


def _items(lines):
    """``name : type`` items with indented descriptions -> a Markdown list."""
    md = []
    item = None
    desc = []

    def flush():
        if item is not None:
            name, _, typ = item.partition(" : ")
            head = f"- `{name.strip()}`" + (f" : *{_inline(typ.strip())}*" if typ else "")
            text = _inline(" ".join(d.strip() for d in desc if d.strip()))
            md.append(head + (f" — {text}" if text else ""))

    for line in lines:
        if line.strip() and not line.startswith(" "):
            flush()
            item, desc = line.strip(), []
        elif item is not None:
            desc.append(line)
    flush()
    return md + [""]


def _doc_md(obj, level):
    doc = inspect.getdoc(obj) or ""
    md = []
    for name, lines in _sections(doc):
        if name is None:
            md += _paragraphs(lines)
        elif name in _ITEM_SECTIONS:
            md += [f"**{name}**", ""] + _items(lines)
        else:
            md += [f"**{name}**", ""] + _paragraphs(lines)
    return md


def _signature(name, obj):
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return None
    return f"{name}{sig}"


def _heading_entry(qual):
    return f"`{qual}`"


def _object_md(qual, obj, level):
    md = [f"{'#' * level} {_heading_entry(qual)}", ""]
    sig = _signature(qual.rsplit(".", 1)[-1], obj)
    if sig:
        md += ["```python", sig, "```", ""]
    md += _doc_md(obj, level)
    if inspect.isclass(obj):
        own = [n for n, v in vars(obj).items()
               if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))]
        inherited = sorted(n for n in dir(obj) if not n.startswith("_") and n not in own
                           and callable(getattr(obj, n, None)))
        for n in own:
            member = getattr(obj, n)
            md += _object_md(f"{qual}.{n}", member, level + 1)
        if inherited:
            md += [f"Inherited from scikit-learn: {', '.join(f'`{n}`' for n in inherited)}.",
                   ""]
    return md


def _slug(heading):
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def generate():
    """The Markdown text of the API reference."""
    toc = []
    body = []
    for modname, names, title in PUBLIC:
        mod = importlib.import_module(modname)
        names = names if names is not None else list(mod.__all__)
        body += [f"## {title}", ""]
        toc.append(f"- [{title}](#{_slug(title)})")
        summary = (inspect.getdoc(mod) or "").split("\n\n")[0].replace("\n", " ")
        if modname != "ntnumba":
            body += [f"`{modname}`: {_inline(summary)}", ""]
        for n in names:
            obj = getattr(mod, n)
            qual = f"{modname}.{n}"
            toc.append(f"  - [`{qual}`](#{_slug(qual)})")
            body += _object_md(qual, obj, 3)
    head = ["# API reference", "",
            "<!-- Generated by docs/gen_api.py from the docstrings: do not edit by hand. -->", "",
            "Every public function and class, from its docstring (numpydoc). The examples are "
            "run by the test suite (`tests/test_docs.py`).", ""]
    text = "\n".join(head + toc + [""] + body)
    text = re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"
    return text


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    text = generate()
    if "--check" in argv:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
