"""The documentation site builds from the repository with warnings as errors, and has every page.

One build per test run (``built_site``, tests/site_build.py): nitpicky, ``-W --keep-going``, from
scratch. The checks follow the site's promises: every lesson notebook is a page, in order, with its
objectives on the Learn index; every public name has an API page with examples; the CLI page shows
every subcommand and option argparse knows; widget snapshots load their JavaScript from the site
itself (no CDN); a broken cross-reference fails the build.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docstring_rules import public_objects
from site_build import ROOT, SPHINX, built_site  # noqa: F401  (built_site is a fixture)

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from nbkit_docs.cli_reference import subcommands  # noqa: E402
from nbkit_docs.lessons import parse_first_cell  # noqa: E402

from nbkit.cli import build_parser  # noqa: E402
from nbkit.cli_examples import EXAMPLES  # noqa: E402

pytestmark = pytest.mark.timeout(600)
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})  # Sphinx's smart quotes
CDN = re.compile(r"https?://(cdn\.jsdelivr\.net|unpkg\.com|cdnjs\.cloudflare\.com)")


def page(site, name: str) -> str:
    path = site.html / name
    assert path.is_file(), f"{name} is not in the built site"
    return path.read_text(encoding="utf-8")


def text_of(markup: str) -> str:
    """The visible text of some HTML (or Markdown), whitespace collapsed."""
    markup = re.sub(r"<script.*?</script>", " ", markup, flags=re.S)
    markup = re.sub(r"<[^>]+>", " ", markup)
    markup = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markup)  # Markdown links: their text
    plain = html.unescape(markup).translate(QUOTES).replace("`", "").replace("*", "")
    return " ".join(plain.split())


def squash(markup: str) -> str:
    """:func:`text_of` without any whitespace (inline tags leave spaces where the text has none)."""
    return "".join(text_of(markup).split())


def test_site_builds_without_warnings(built_site):  # noqa: F811
    command = " ".join([*SPHINX, "docs", "OUT"])
    print(f"{command}: {built_site.seconds:.0f} s")
    assert built_site.returncode == 0 and "WARNING" not in built_site.output, built_site.output[-6000:]


def test_every_lesson_is_a_page_and_the_learn_index_lists_them_in_order(built_site):  # noqa: F811
    assert LESSONS, "no notebooks/NN-*.ipynb"
    index = page(built_site, "learn/index.html")
    body = index.split("<article", 1)[-1]
    positions = []
    for notebook in LESSONS:
        page(built_site, f"learn/{notebook.stem}.html")
        href = f'href="{notebook.stem}.html"'
        assert href in body, f"the Learn index does not link {notebook.stem}"
        positions.append(body.index(href))
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        first = "".join(cells[0]["source"])
        lesson = parse_first_cell(notebook.stem, first)
        shown = text_of(body)
        for objective in lesson.objectives or (lesson.intro,):
            assert squash(objective) in squash(shown), f"{notebook.stem}: {objective!r} is not on the Learn index"
    assert positions == sorted(positions), "the Learn index lists the lessons out of order"


def test_the_self_check_is_listed_after_the_lessons_and_links_this_sites_pages(built_site):  # noqa: F811
    body = page(built_site, "learn/index.html").split("<article", 1)[-1]
    href = 'href="self-check.html"'
    assert href in body, "the Learn index does not link the self-check"
    assert all(body.index(f'href="{nb.stem}.html"') < body.index(href) for nb in LESSONS)
    quiz = page(built_site, "learn/self-check.html")
    assert quiz.count("<details><summary>") >= 12 * 3
    # the notebook links the published guide and lessons (so it works in JupyterLab); the site's copy links its own
    assert 'href="../guide/outcomes.html#the-rules-row-by-row"' in quiz
    published = re.findall(r'href="(https://nbkit\.readthedocs\.io/en/latest/(?:guide|learn)/[^"]*)"', quiz)
    assert not published, f"links to the published site left in the site's copy: {published[:5]}"


def _recap_items(notebook: Path) -> list[str]:
    """The bullets of a lesson's "## Recap" cell (continuation lines joined)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    (recap,) = [
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## Recap")
    ]
    items: list[str] = []
    for line in recap.splitlines()[1:]:
        if line.startswith("- "):
            items.append(line[2:])
        elif line.startswith(" ") and items:
            items[-1] += " " + line.strip()
        elif line.strip():
            break
    return items


@pytest.mark.parametrize("notebook", LESSONS, ids=lambda p: p.stem)
def test_the_instructor_guide_shows_each_lessons_recap_as_its_key_points(built_site, notebook):  # noqa: F811
    """Key points and recap match on the lesson's page and on the guide's (tests/docs/test_instructors.py holds
    the guide's Markdown to the recap word for word; this checks what the site renders from both)."""
    lesson = squash(page(built_site, f"learn/{notebook.stem}.html"))
    guide = page(built_site, "learn/instructors.html")
    section = re.search(rf"<h3>{notebook.stem[:2]} (.*?)</section>", guide, flags=re.S)  # a lesson's own section
    assert section, f"the guide has no section for {notebook.stem}"
    items = _recap_items(notebook)
    assert items, f"{notebook.stem} has no recap"
    for item in items:
        assert squash(item) in lesson, f"{notebook.stem}: its page does not show the recap's {item!r}"
        assert squash(item) in squash(section.group(1)), f"{notebook.stem}: the guide does not show {item!r}"


@pytest.mark.parametrize("notebook", LESSONS, ids=lambda p: p.stem)
def test_every_solution_is_behind_a_click_to_show_toggle(built_site, notebook):  # noqa: F811
    """myst-nb renders a ``hide-cell`` cell inside a closed ``<details>``: code and output behind one click."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    wanted = sum("solution" in c["metadata"].get("tags", []) for c in cells)
    text = page(built_site, f"learn/{notebook.stem}.html")
    blocks = re.findall(r'<div class="cell tag_solution[^"]*"[^>]*>(.*?)</details>', text, flags=re.S)
    assert len(blocks) == wanted, f"{notebook.stem}: {len(blocks)} of {wanted} solutions are in a toggle"
    for block in blocks:
        assert re.match(r'\s*<details class="[^"]*\bhide\b[^"]*">', block), block[:200]
        assert "<details open" not in block


def test_landing_page_shows_the_dashboard_and_the_two_commands(built_site):  # noqa: F811
    landing = page(built_site, "index.html")
    image = re.search(r'<img[^>]+src="(_images/dashboard\.png)"', landing)
    assert image and (built_site.html / image.group(1)).stat().st_size > 10_000
    assert "nbkit demo --out demo-out" in text_of(landing) and "nbkit run service:app" in text_of(landing)


@pytest.mark.parametrize("name", sorted(dict(public_objects())))
def test_every_public_name_has_an_api_page_with_examples(built_site, name):  # noqa: F811
    text = page(built_site, f"api/generated/{name}.html")
    assert f'id="{name}"' in text, f"the page of {name} does not document it"
    assert "Examples" in text


def test_cli_page_shows_every_subcommand_and_option(built_site):  # noqa: F811
    cli = page(built_site, "cli.html")
    shown = text_of(cli)
    for name, parser in subcommands(build_parser()):
        assert f'id="cli-nbkit-{name}"' in cli, f"no section for nbkit {name}"
        assert text_of(parser.format_usage()) in shown, f"nbkit {name}: usage line missing"
        for action in parser._actions:
            for option in action.option_strings:
                assert option in shown, f"nbkit {name}: {option} missing"


def test_widget_outputs_are_still_pictures_of_their_own_cell(built_site):  # noqa: F811
    with_widgets = [nb for nb in LESSONS if "widgets" in json.loads(nb.read_text(encoding="utf-8"))["metadata"]]
    assert with_widgets, "no lesson stores a widget"
    for notebook in with_widgets:
        text = page(built_site, f"learn/{notebook.stem}.html")
        assert "class='nbkit-snapshot'" in text and "A still picture of this" in text, notebook.stem
        assert "Binder" in text and "cursor:not-allowed" in text  # where to run it; controls drawn inert
        assert 'type="application/vnd.jupyter.widget-view+json"' not in text  # no live-looking view
    panel = page(built_site, "learn/03-retries-and-dead-letters.html")
    assert "A still picture of this panel at clock 2024-01-01T00:00:05Z" in panel  # its own cell's moment
    for path in built_site.html.rglob("*.html"):
        assert not CDN.search(path.read_text(encoding="utf-8")), f"{path} loads from a CDN"


def test_cli_page_shows_each_subcommands_examples(built_site):  # noqa: F811
    shown = squash(page(built_site, "cli.html"))  # highlighting splits a line into tokens
    for name, _ in subcommands(build_parser()):
        examples = EXAMPLES[name]
        assert examples, f"nbkit {name} has no examples"
        for line in examples:
            assert squash(line) in shown, f"nbkit {name}: example {line!r} is not on the CLI page"


SIGNATURE = re.compile(r'<dt class="sig sig-object py" id="([^"]+)">(.*?)</dt>', re.S)


def _plain(markup: str) -> str:
    """A signature's text with no whitespace, its ``*`` kept (:func:`squash` drops them)."""
    return "".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


def test_api_signatures_are_the_real_ones(built_site):  # noqa: F811
    """No class shows ``(*args, **kwargs)`` borrowed from a base's ``__new__`` (ipywidgets, Protocol)."""
    for path in sorted((built_site.html / "api" / "generated").glob("*.html")):
        for name, signature in SIGNATURE.findall(path.read_text(encoding="utf-8")):
            assert "*args,**kwargs" not in _plain(signature), name
    panel = SIGNATURE.search(page(built_site, "api/generated/nbkit.widgets.SessionPanel.html"))
    assert panel and "(session,*,plot=True,log_lines=8,timeline_lanes=12)" in _plain(panel.group(2))


@pytest.mark.parametrize(
    "name",
    ["nbkit.read_stream", "nbkit.read_arrow", "nbkit.StreamReader", "nbkit.App", "nbkit.FileBroker",
     "nbkit.StdioBroker", "nbkit.Session", "nbkit.lineage", "nbkit.redrive", "nbkit.plot.dashboard"],
)  # fmt: skip
def test_key_api_pages_say_see_also_and_link_nbkit_types(built_site, name):  # noqa: F811
    text = page(built_site, f"api/generated/{name}.html")
    see_also = re.search(r'<div class="admonition seealso">(.*?)</div>', text, re.S)
    assert see_also and 'href="nbkit.' in see_also.group(1), f"{name}: no See also with links"


def test_parameter_types_that_name_nbkit_classes_link_to_their_pages(built_site):  # noqa: F811
    text = page(built_site, "api/generated/nbkit.read_stream.html")
    assert re.search(r'<span class="classifier"><a class="reference internal" href="nbkit.FilePosition.html', text)


@pytest.mark.parametrize("notebook", LESSONS, ids=lambda p: p.stem)
def test_lesson_pages_link_binder_and_their_notebook(built_site, notebook):  # noqa: F811
    text = page(built_site, f"learn/{notebook.stem}.html")
    body = text.split("<article", 1)[-1]
    links = body[: body.index("</h1>") + 1500]  # right under the title
    assert f"mybinder.org/v2/gh/nbkit/nbkit/HEAD?urlpath=lab/tree/notebooks/{notebook.name}" in links
    download = re.search(r'href="(\.\./_downloads/[^"]+\.ipynb)"', links)
    assert download, f"{notebook.stem}: no download link under the title"
    served = (built_site.html / "learn" / download.group(1)).resolve()
    assert served.read_bytes() == notebook.read_bytes(), "the download is not the repository's notebook"
    assert "_sources/" not in text and "Show Source" not in text


def test_the_learn_index_gives_whole_time_lines_and_numbered_titles(built_site):  # noqa: F811
    shown = text_of(page(built_site, "learn/index.html").split("<article", 1)[-1])
    assert "This needs the optional)" not in shown
    assert "This needs the optional extra scale (installed on Binder)" in shown
    for notebook in LESSONS:
        number = notebook.stem[:2]
        assert re.search(rf"\b{number} · ", shown), f"the Learn index shows lesson {number} without its number"


def test_top_level_pages_and_the_repository_link(built_site):  # noqa: F811
    landing = page(built_site, "index.html")
    assert 'href="https://github.com/nbkit/nbkit"' in landing  # the navbar's icon link
    for name in ("install", "changelog", "license", "contributing"):
        assert f'href="{name}.html"' in landing, f"the site does not link {name}"
    install = text_of(page(built_site, "install.html"))
    for extra in ("scale", "arrow", "lessons", "docs", "dev", "s3"):
        assert extra in install
    assert "nbkit-ruststream" in install and "Binder" in install
    license_text = text_of(page(built_site, "license.html"))
    assert text_of((ROOT / "LICENSE").read_text(encoding="utf-8")) in license_text
    assert "0.1.0 (unreleased)" in text_of(page(built_site, "changelog.html"))
    assert 'href="development.html"' in page(built_site, "contributing.html")


NAV_LINK = re.compile(r'<a class="nav-link[^"]*"[^>]*>\s*(.*?)\s*</a>', re.S)


def test_navbar_titles_are_short_and_single_pages_have_no_empty_sidebar(built_site):  # noqa: F811
    """A long title in the navbar pushed the search box to a second row; a page without children had an
    empty "Section Navigation" column."""
    landing = page(built_site, "index.html")
    titles = [text_of(title) for title in NAV_LINK.findall(landing.split('<div class="bd-container', 1)[0])]
    assert "Reliability" in titles and all(len(title) <= 20 for title in titles), titles
    for name in ("glossary.html", "cli.html", "install.html", "reliability.html"):
        assert "Section Navigation" not in page(built_site, name), name
    assert "Section Navigation" in page(built_site, "learn/index.html")


HREF = re.compile(r'<a [^>]*href="([^"]+)"')
IDS = re.compile(r'\sid="([^"]+)"')


def test_every_internal_link_of_the_site_reaches_its_page_and_anchor(built_site):  # noqa: F811
    ids: dict[Path, set[str]] = {}

    def anchors(path: Path) -> set[str]:
        if path not in ids:
            ids[path] = set(IDS.findall(path.read_text(encoding="utf-8")))
        return ids[path]

    broken = []
    for path in sorted(built_site.html.rglob("*.html")):
        for href in HREF.findall(path.read_text(encoding="utf-8")):
            href = html.unescape(href)
            if re.match(r"[a-z][a-z0-9+.-]*:", href) or href.startswith("//"):
                continue  # another site (checked by hand, never fetched in tests) or mailto:
            target, _, anchor = href.partition("#")
            target_path = (path.parent / target.split("?")[0]).resolve() if target else path
            if target_path.is_dir():
                target_path = target_path / "index.html"
            where = f"{path.relative_to(built_site.html)} -> {href}"
            if not target_path.is_file():
                broken.append(f"{where}: no such file")
            elif anchor and target_path.suffix == ".html" and anchor not in anchors(target_path):
                broken.append(f"{where}: no such anchor")
    assert not broken, "\n".join(broken[:40])


def test_glossary_terms_have_lower_case_anchors_and_diagrams_use_the_sites_mermaid(built_site):  # noqa: F811
    glossary = page(built_site, "glossary.html")
    for anchor in ("term-eos-mark", "term-dead-letter-key", "term-out_retry", "term-at-least-once"):
        assert f'id="{anchor}"' in glossary, anchor
    with_diagrams = [
        p for p in built_site.html.rglob("*.html") if '<pre class="mermaid">' in p.read_text(encoding="utf-8")
    ]
    assert with_diagrams, "no page has a diagram"
    bundle = built_site.html / "_static" / "mermaid" / "mermaid.min.js"
    assert bundle.is_file() and bundle.stat().st_size > 1_000_000
    for path in with_diagrams:
        text = path.read_text(encoding="utf-8")
        assert "_static/mermaid/mermaid.min.js" in text and "_static/nbkit-mermaid.js" in text, path
    assert "mermaid.min.js" not in page(built_site, "cli.html"), "a page without diagrams loads the bundle"


# -- a broken internal reference fails the build --------------------------------------------------------
CONF = """
import sys
sys.path[:0] = [{root!r}, {ext!r}]
extensions = ["nbkit_docs.public_refs"]
nitpicky = True
"""
PAGE = """
Check
=====

.. py:class:: nbkit.App

:class:`nbkit.runtime.app.App` is the public App; :mod:`nbkit.wire.envelope` has no page.

.. py:class:: nbkit.Session

   :class:`PendingView`, named as the code of ``Session`` names it, lives in its defining module.

{extra}
"""


def _tiny_build(tmp_path: Path, extra: str) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF.format(root=str(ROOT), ext=str(ROOT / "docs" / "_ext")))
    (src / "index.rst").write_text(PAGE.format(extra=extra))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [*SPHINX, "-d", str(tmp_path / "doctrees"), str(src), str(tmp_path / "html")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_references_to_implementation_modules_resolve_to_public_pages(tmp_path):
    done = _tiny_build(tmp_path, "")
    assert done.returncode == 0, done.stderr
    assert 'href="#nbkit.App"' in (tmp_path / "html" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "extra, named",
    [
        (":class:`nbkit.NoSuchThing`", "nbkit.NoSuchThing"),
        (":doc:`no-such-page`", "no-such-page"),
        (":term:`no such term`", "no such term"),
    ],
)
def test_a_broken_internal_reference_fails_the_build(tmp_path, extra, named):
    done = _tiny_build(tmp_path, extra)
    assert done.returncode != 0 and named in done.stderr, done.stderr


def test_read_the_docs_builds_the_same_site():
    import tomllib

    import yaml

    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert config["version"] == 2 and config["sphinx"]["configuration"] == "docs/conf.py"
    assert config["sphinx"]["fail_on_warning"] is True
    assert "nodejs" in config["build"]["tools"], "the build fetches the widget JavaScript with npm"
    (install,) = config["python"]["install"]
    assert install["path"] == "." and {"docs", "scale"} <= set(install["extra_requirements"]) <= set(extras)
