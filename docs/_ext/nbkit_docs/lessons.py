"""The tutorial notebooks as pages: copy ``notebooks/*.ipynb`` into ``docs/learn/`` and index them.

The notebooks are executed and checked by strict nbval elsewhere; the site renders their stored outputs
(``nb_execution_mode = "off"``) and never runs them again. Every ``notebooks/NN-*.ipynb`` becomes
``learn/NN-*`` (the Learn toctree globs them, so a new lesson appears without editing the site), and
the ``nbkit-lessons`` directive lists each lesson with the objectives its first cell states ("You will
learn" and the time needed). The self-check (``notebooks/self-check.ipynb``, questions in Markdown
cells only) is copied the same way and listed after the lessons. Glossary links in the notebooks'
Markdown (addresses of the published glossary, so they work in JupyterLab) become ``{term}``
references in the copies (:mod:`.glossary_links`), and links to other pages of the published site
become links to this site's pages (:mod:`.site_links`). The landing page's dashboard figure is the one
lesson 00 draws.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from .glossary_links import defined_terms, rewrite_glossary_links
from .site_links import rewrite_site_links

#: Lesson files: two digits, a dash, a name (the tools/build_notebooks.py naming).
LESSON_GLOB = "[0-9][0-9]-*.ipynb"
#: Notebooks copied in besides the lessons: not lessons (no objectives, no code), listed after them.
EXTRA_NOTEBOOKS = ("self-check.ipynb",)
_LEARN_LINE = re.compile(r"you will learn", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(.*)$")
_TIME_LINE = re.compile(r"(?:\btime\b|\bminutes?\b|\bmin\b)", re.IGNORECASE)


@dataclass(frozen=True)
class Lesson:
    """What the Learn index shows for one notebook."""

    docname: str
    title: str
    objectives: tuple[str, ...]
    time: str | None
    intro: str
    #: What the time paragraph says after the time itself ("This needs the optional extra ..."), if anything.
    note: str = ""


def _paths(app: Sphinx) -> tuple[Path, Path]:
    root = Path(app.confdir).parent
    return root / "notebooks", Path(app.srcdir) / "learn"


def _first_markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if cell["cell_type"] == "markdown":
            source = cell["source"]
            return source if isinstance(source, str) else "".join(source)
    return ""


def _strip_emphasis(text: str) -> str:
    """``**Time needed:** about 15 minutes.`` -> ``Time needed: about 15 minutes.``"""
    return re.sub(r"[*_]+", "", text).lstrip("#> ").strip()


def _objectives(lines: list[str]) -> list[str]:
    """The list items after the line that says "You will learn" (continuation lines joined)."""
    start = next((i for i, line in enumerate(lines) if _LEARN_LINE.search(line)), None)
    if start is None:
        return []
    items: list[str] = []
    for line in lines[start + 1 :]:
        item = _LIST_ITEM.match(line)
        if item:
            items.append(item.group(1).strip())
        elif not line.strip():
            continue
        elif items and line[:1] in (" ", "\t"):
            items[-1] += " " + line.strip()
        else:
            break
    return items


def _split_time(paragraph: str) -> tuple[str, str]:
    """``Time needed: about 15 minutes (...). This needs ...`` -> the time sentence and the rest.

    The time sentence ends at the first ``.`` outside parentheses that is followed by a space (or ends
    the paragraph); a parenthesis may hold a ``;`` or a ``.`` of its own.
    """
    depth = 0
    for i, char in enumerate(paragraph):
        depth += (char == "(") - (char == ")")
        if char == "." and depth == 0 and (i + 1 == len(paragraph) or paragraph[i + 1] == " "):
            return paragraph[: i + 1], paragraph[i + 1 :].strip()
    return paragraph, ""


def _time_paragraph(lines: list[str]) -> str | None:
    """The whole paragraph (continuation lines joined) of the first line that states a time."""
    for i, line in enumerate(lines):
        if _TIME_LINE.search(line) and re.search(r"\d", line) and not _LIST_ITEM.match(line) and len(line) < 160:
            end = i + 1
            while end < len(lines) and lines[end].strip() and not _LIST_ITEM.match(lines[end]):
                end += 1
            return " ".join(" ".join(lines[i:end]).split())
    return None


def _numbered(docname: str, title: str) -> str:
    """The title with the lesson's number in front (``08 · ...``) when its heading leaves it out."""
    number = docname[:2]
    return title if not number.isdigit() or title.startswith(number) else f"{number} · {title}"


def parse_first_cell(docname: str, text: str) -> Lesson:
    """The title, objectives, time needed and opening paragraph of a lesson's first markdown cell."""
    lines = text.splitlines()
    title = _numbered(docname, next((line[2:].strip() for line in lines if line.startswith("# ")), docname))
    paragraph = _time_paragraph(lines)
    time, note = _split_time(paragraph) if paragraph else (None, "")
    if time is not None:
        time = _strip_emphasis(time)
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip() and not p.lstrip().startswith("#")]
    intro = " ".join(paragraphs[0].split()) if paragraphs else ""
    return Lesson(docname, title, tuple(_objectives(lines)), time, intro, note)


def lessons(app: Sphinx) -> list[Lesson]:
    """Every lesson copied into ``learn/``, in name order."""
    _, learn = _paths(app)
    return [parse_first_cell(p.stem, _first_markdown(p)) for p in sorted(learn.glob(LESSON_GLOB))]


def copy_notebooks(app: Sphinx, config: object = None) -> None:
    """Mirror ``notebooks/NN-*.ipynb`` and the self-check into ``docs/learn/`` (unchanged files are left alone)."""
    source, learn = _paths(app)
    learn.mkdir(exist_ok=True)
    lesson_files = {p.name: p for p in sorted(source.glob(LESSON_GLOB))}
    if not lesson_files:
        raise FileNotFoundError(f"no notebooks matching {LESSON_GLOB} in {source}: the Learn pages need them")
    wanted = {**lesson_files, **{name: source / name for name in EXTRA_NOTEBOOKS}}
    for stale in learn.glob(LESSON_GLOB):
        if stale.name not in wanted:
            stale.unlink()
    terms = defined_terms(Path(app.srcdir) / "glossary.md")
    for name, path in wanted.items():
        target = learn / name
        data = site_copy(path, terms, app.config.nbkit_repository, docs=Path(app.srcdir), notebooks=source)
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
    _write_dashboard(sorted(lesson_files.values())[0], Path(app.srcdir) / "_static" / "generated" / "dashboard.png")


def run_links(notebook: Path, repository: str) -> str:
    """The line under a lesson page's title: open it on Binder, or download the ``.ipynb`` to run locally.

    The download is the repository's own notebook (``notebooks/NN-*.ipynb``), as JupyterLab opens it;
    the page's copy differs only in its glossary links.
    """
    binder = f"https://mybinder.org/v2/gh/{repository.removeprefix('https://github.com/')}/HEAD"
    return (
        ":::{container} nbkit-lesson-links\n"
        f"[Run this lesson on Binder]({binder}?urlpath=lab/tree/notebooks/{notebook.name}) (nothing to install)"
        f" · {{download}}`Download the notebook <../../notebooks/{notebook.name}>`"
        f" ({notebook.stat().st_size // 1024} KB, with its outputs) to run it in your own JupyterLab\n"
        ":::\n"
    )


def site_copy(notebook: Path, terms: dict[str, str], repository: str, *, docs: Path, notebooks: Path) -> bytes:
    """The notebook as the site renders it: a lesson gets the run links under its title; links of Markdown
    cells to the published site (glossary terms, pages this site builds) are made local."""
    nb = json.loads(notebook.read_bytes())
    first = fnmatch.fnmatch(notebook.name, LESSON_GLOB)  # the self-check is no lesson to run
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if first:
            head, _, rest = source.partition("\n")
            source = f"{head}\n\n{run_links(notebook, repository)}\n{rest}" if head.startswith("# ") else source
            first = False
        source = rewrite_glossary_links(source, terms)
        cell["source"] = rewrite_site_links(source, docs, notebooks, "learn")
    return (json.dumps(nb, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def _write_dashboard(notebook: Path, target: Path) -> None:
    """The landing page's figure: the PNG of lesson 00's ``dashboard(...)`` cell (else its first PNG)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    pngs: list[tuple[bool, str]] = []
    for cell in cells:
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                pngs.append(("dashboard(" in source, png if isinstance(png, str) else "".join(png)))
    if not pngs:
        raise ValueError(f"{notebook} has no PNG output: the landing page shows lesson 00's dashboard figure")
    data = base64.b64decode(next((png for is_dashboard, png in pngs if is_dashboard), pngs[0][1]))
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or target.read_bytes() != data:
        target.write_bytes(data)


class LessonsDirective(SphinxDirective):
    """``nbkit-lessons``: one entry per lesson (link, time needed, objectives) from the notebooks."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        """Parse the generated Markdown in place, so links are ordinary ``{doc}`` references."""
        text: list[str] = []
        for lesson in lessons(self.env.app):
            self.env.note_dependency(str(Path(self.env.srcdir) / "learn" / f"{lesson.docname}.ipynb"))
            text.append(f"**[{lesson.title}]({lesson.docname}.ipynb)**")
            text.append("")
            if lesson.time:
                text += [f"*{lesson.time}* {lesson.note}".rstrip(), ""]
            if lesson.objectives:
                text.append("You will learn:")
                text.append("")
                text.extend(f"- {objective}" for objective in lesson.objectives)
            else:
                text.append(lesson.intro)
            text.append("")
        container = nodes.container(classes=["nbkit-lessons"])
        self.state.nested_parse(StringList(text, source="nbkit-lessons"), self.content_offset, container)
        return [container]


def setup(app: Sphinx) -> dict[str, Any]:
    """Copy the notebooks before Sphinx looks for sources (config-inited); register the directive."""
    app.add_config_value("nbkit_repository", "https://github.com/nbkit/nbkit", "env")
    app.connect("config-inited", copy_notebooks, priority=400)
    app.add_directive("nbkit-lessons", LessonsDirective)
    return {"parallel_read_safe": True}
