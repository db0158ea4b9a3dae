"""Sphinx configuration of the ntnumba documentation.

Build (from the repository root, with ``pip install -e ".[docs]"``)::

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

The pages are the Markdown files of this folder (MyST), the API reference is autodoc +
numpydoc over the docstrings, and the example gallery (sphinx-gallery) runs the scripts of
``examples/`` at build time. ``tests/test_docs.py`` runs this build, warnings as errors.
"""
import os
import sys
from pathlib import Path

import ntnumba

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

project = "ntnumba"
author = "the ntnumba developers"
copyright = "2026, the ntnumba developers"
release = ntnumba.__version__          # the version lives in pyproject.toml only
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
if os.environ.get("NTNUMBA_DOCS_GALLERY", "1") != "0":
    extensions.append("sphinx_gallery.gen_gallery")

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "**/README.md", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.json", "auto_examples/*.md5"]

# every cross-reference must resolve (the build runs with -n -W)
nitpicky = True
# targets outside this site (no intersphinx: the build is offline) and private modules
nitpick_ignore = [("py:func", "numpy.roots"), ("py:class", "matplotlib.figure.Figure"),
                  ("py:mod", "argparse"), ("py:class", "argparse.ArgumentParser")]
nitpick_ignore_regex = [(r"py:.*", r"ntnumba\._\w+(\..*)?"),
                        # the internal layers are not part of the API reference
                        (r"py:.*", r"ntnumba\.(core|model|partition|engine|io|estimators)(\..*)?")]

# ---- Markdown (MyST): the pages stay readable on the code host
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 4          # GitHub-style #anchors of headings, as the pages link them
myst_fence_as_directive = ["math"]  # ```math blocks, as the code host renders them

# ---- API pages
autodoc_member_order = "bysource"
autodoc_typehints = "none"
# scikit-learn's generated metadata-routing setters (documented by scikit-learn)
autodoc_default_options = {
    "exclude-members": "set_fit_request, set_partial_fit_request, set_predict_request, "
                       "set_score_request, set_transform_request",
}
autosummary_generate = False       # the API page lists its objects itself (nothing generated)
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# ---- example gallery: the scripts of ../examples, run at build time
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "plot_gallery": "True",
    "reset_modules": (),
    "line_numbers": False,
    "min_reported_time": 1,
}

# ---- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"ntnumba {release}"
html_static_path = []
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_show_sourcelink = True
html_copy_source = False
