"""The tutorial lessons keep their shape, and no exercise's answer is on screen before its solution is opened.

Every ``notebooks/*.md`` source (and its executed ``.ipynb`` twin) is checked, so lessons added later are held
to the same rules: objectives first, a recap and a link to the next lesson last, enough exercises, a
"What to notice:" sentence after every figure, and the ``.ipynb`` in step with its source. The exercises:
each solution is collapsed, source and output, in JupyterLab (``jupyter.source_hidden`` and
``outputs_hidden``) and behind a click-to-show toggle on the site (myst-nb's ``hide-cell`` tag), and its first
line gives nothing away; an unsolved exercise prints only the prompt to predict; no output or prose a learner
sees before opening a solution (in this lesson or an earlier one) shows its answer; every listed wrong answer
gets a hint of its own. Exercise answers come from ``nbkit.exercises.expected`` with the context the lesson
passes to ``check``; that context must be literal values (or names bound to literals in an earlier cell), so
that the check can be recomputed here.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import pytest

from nbkit.exercises import check, exercises, expected, wrong_answers
from nbkit.notebook.exercises import Choice, exercise

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.md"))
#: Lessons 00-05 ask at least two exercises; later ones at least one.
MIN_EXERCISES = {f"{n:02d}": 2 for n in range(6)}
#: Lessons with a debugging exercise ("here is a file or a log: what went wrong?"), built on evidence().
DEBUGGING = {"03", "04", "05", "09"}
#: The first line of every solution cell: it says what the cell is for, and nothing about the answer.
SOLUTION_FIRST_LINE = re.compile(r"# Solution \(open to compare with your (prediction|answer|policy)\)")


def _number(source: Path) -> str:
    return source.name[:2]


@cache
def _source_cells(source: Path) -> list[Any]:
    return jupytext.read(source).cells


@cache
def _executed_cells(source: Path) -> list[Any]:
    return nbformat.read(source.with_suffix(".ipynb"), as_version=4).cells


def _is_solution(cell: Any) -> bool:
    return "solution" in cell.metadata.get("tags", [])


def _exercise_id(call: ast.Call) -> str:
    """The id a ``check("id", ...)`` call names (a string constant, as :func:`_check_calls` ensures)."""
    first = call.args[0]
    assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(call)
    return first.value


def _check_calls(cell: Any) -> list[ast.Call]:
    """The ``check("id", answer, **context)`` calls in a code cell (IPython magics are skipped)."""
    code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "check"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def _literal_names(cells: list[Any]) -> dict[str, Any]:
    """Names bound to a literal (``ORDERS = 40_000``) at the top level of the given code cells."""
    names: dict[str, Any] = {}
    for cell in cells:
        if cell.cell_type != "code" or _is_solution(cell):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    names[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    names.pop(node.targets[0].id, None)
    return names


def _context(call: ast.Call, known: dict[str, Any], where: str) -> dict[str, Any]:
    """The context a ``check(...)`` call passes (``measured=`` and ``reveal=`` left out), as literal values."""
    context: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg in ("measured", "reveal"):
            continue
        assert keyword.arg is not None, f"{where}: check(**...) cannot be recomputed"
        if isinstance(keyword.value, ast.Name) and keyword.value.id in known:
            context[keyword.arg] = known[keyword.value.id]
        else:
            try:
                context[keyword.arg] = ast.literal_eval(keyword.value)
            except ValueError:
                pytest.fail(f"{where}: {keyword.arg}= is not a literal (nor a name bound to one in an earlier cell)")
    return context


def _exercises(source: Path) -> list[tuple[str, int, dict[str, Any]]]:
    """(id, index of the cell that first asks it, the context it passes) for each exercise of a lesson."""
    cells = _source_cells(source)
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or _is_solution(cell):
            continue
        for call in _check_calls(cell):
            name = _exercise_id(call)
            if name in found:
                continue
            found[name] = (index, _context(call, _literal_names(cells[: index + 1]), f"{source.name}: check({name!r})"))
    return [(name, index, context) for name, (index, context) in found.items()]


EXERCISES = [(source, name, index, context) for source in SOURCES for name, index, context in _exercises(source)]


def _freeze(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


@cache
def _expected(name: str, frozen_context: tuple) -> Any:
    return expected(name, **dict(frozen_context))


def _answer(name: str, context: dict[str, Any]) -> Any:
    # the paths a lesson passes are relative to the notebooks folder, where the lesson runs
    context = {
        k: str(NOTEBOOKS / v) if isinstance(v, str) and (NOTEBOOKS / v).is_file() else v for k, v in context.items()
    }
    return _expected(name, tuple(sorted((k, _freeze(v)) for k, v in context.items()))), context


def _output_text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append(output["text"])
        data = output.get("data", {})
        for kind in ("text/plain", "text/html", "text/markdown"):
            if kind in data:
                parts.append(data[kind])
    return "\n".join(parts)


def _needles(answer: Any) -> list[str]:
    """How an answer would look if an output printed it."""
    needles = {repr(answer), str(answer)}
    if isinstance(answer, int) and not isinstance(answer, bool) and abs(answer) >= 1000:
        needles.add(f"{answer:,}")
    if isinstance(answer, float) and answer.is_integer():
        needles.add(f"{answer:.1f}")
    return sorted(needles)


def _printed(needle: str, text: str) -> bool:
    if re.fullmatch(r"[\w.,]+", needle):  # a bare number or word: match it whole, not inside another one
        return re.search(rf"(?<![\w.]){re.escape(needle)}(?![\w]|\.\d)", text) is not None
    return needle in text


# -- shape -----------------------------------------------------------------------------------------------


def test_every_lesson_has_an_executed_twin():
    assert SOURCES, f"no lesson sources in {NOTEBOOKS}"
    missing = [s.name for s in SOURCES if not s.with_suffix(".ipynb").exists()]
    assert not missing, f"run python tools/build_notebooks.py for {missing}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_first_cell_states_the_objectives(source):
    first = _source_cells(source)[0]
    assert first.cell_type == "markdown"
    text = first.source
    assert text.startswith("# "), "the first cell starts with the lesson's title"
    assert "You will learn" in text
    learn = text[text.index("You will learn") :]
    items = re.findall(r"^\s*(?:\d+\.|[-*])\s+\S", learn.split("Time needed")[0], flags=re.M)
    assert 3 <= len(items) <= 5, f"'You will learn' lists {len(items)} objectives; 3 to 5 wanted"
    assert "Time needed" in text


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_first_code_cell_is_the_one_line_setup(source):
    code = next(c for c in _source_cells(source) if c.cell_type == "code")
    assert f'work = setup("{_number(source)}")' in code.source


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_last_cell_recaps_and_links_to_the_next_lesson(source):
    last = _source_cells(source)[-1]
    assert last.cell_type == "markdown"
    assert "Recap" in last.source
    assert len(re.findall(r"^\s*[-*]\s+\S", last.source, flags=re.M)) >= 2, "the recap says what was shown"
    links = re.findall(r"\]\(([^)]+)\)", last.source)
    later = [s for s in SOURCES if s.name > source.name]
    if later:
        wanted = later[0].with_suffix(".ipynb").name
        assert wanted in links, f"the last cell links to the next lesson, {wanted}"
    else:
        assert any(link.startswith("00-") or link.endswith("README.md") for link in links), (
            "the last lesson links back to 00 or to the README"
        )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_enough_exercises(source):
    names = [name for name, _, _ in _exercises(source)]
    assert len(names) >= MIN_EXERCISES.get(_number(source), 1), f"exercises: {names}"
    assert all(name.startswith(_number(source) + "-") for name in names)
    assert set(names) <= set(exercises()), "every exercise has a check in nbkit.exercises"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_solutions_are_hidden_tagged_and_come_after_their_exercise(source):
    """JupyterLab collapses a solution's source and output; the site hides the cell behind a toggle."""
    cells = _source_cells(source)
    asked = {name: index for name, index, _ in _exercises(source)}
    solved: set[str] = set()
    for index, cell in enumerate(cells):
        collapsed = cell.metadata.get("jupyter", {})
        hidden = collapsed.get("source_hidden") is True or collapsed.get("outputs_hidden") is True
        if _is_solution(cell) or hidden:
            assert cell.cell_type == "code" and _is_solution(cell), f"cell {index}: a collapsed cell is a solution"
            assert collapsed.get("source_hidden") is True and collapsed.get("outputs_hidden") is True, (
                f"cell {index}: a solution has jupyter.source_hidden and jupyter.outputs_hidden, both true "
                "(JupyterLab and Binder then show neither its code nor its output until it is expanded)"
            )
            assert "hide-cell" in cell.metadata["tags"], (
                f"cell {index}: a solution is tagged hide-cell (the site shows it behind a click-to-show toggle)"
            )
            first = cell.source.splitlines()[0]
            assert SOLUTION_FIRST_LINE.fullmatch(first), (
                f"cell {index}: a collapsed solution shows its first line; it must give nothing away, not {first!r}"
            )
            for call in _check_calls(cell):
                name = _exercise_id(call)
                assert name in asked and asked[name] < index, f"cell {index}: the solution of {name} follows it"
                solved.add(name)
    assert solved == set(asked), f"exercises without a solution cell: {set(asked) - solved}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_site_hides_each_solution_behind_a_toggle(source):
    """The docs site renders the executed notebook: its solution cells carry the same hide-cell tag."""
    for index, cell in enumerate(_executed_cells(source)):
        if _is_solution(cell):
            assert "hide-cell" in cell.metadata.get("tags", []), f"cell {index} of the .ipynb is not hide-cell"
            assert cell.metadata.get("jupyter", {}).get("outputs_hidden") is True


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_exercises_progress_and_debugging_lessons_have_one(source):
    """Exercise headings say what kind each is; lessons 03-05 and 09 each have a debugging exercise."""
    headings = re.findall(r"^## Exercise[^\n]*", "\n".join(c.source for c in _source_cells(source)), flags=re.M)
    kinds = [re.search(r"\((recall|application|debugging)\)", h) for h in headings]
    if len(headings) > 1:
        assert all(kinds), f"each exercise heading names its kind (recall, application, debugging): {headings}"
        order = {"recall": 0, "application": 1, "debugging": 2}
        ranks = [order[k.group(1)] for k in kinds if k]
        assert ranks == sorted(ranks), f"exercises go from recall to application: {headings}"
    debugging = [name for name, _, _ in _exercises(source) if exercise(name).scenario is not None]
    if _number(source) in DEBUGGING:
        assert len(debugging) == 1, f"lesson {_number(source)} has one debugging exercise, not {debugging}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_every_figure_is_followed_by_what_to_notice(source):
    cells = _executed_cells(source)
    for index, cell in enumerate(cells):
        figure = any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if figure:
            after = cells[index + 1] if index + 1 < len(cells) else None
            assert after is not None and after.cell_type == "markdown" and after.source.startswith("What to notice:"), (
                f"cell {index} draws a figure; the next cell starts with 'What to notice:'"
            )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_is_in_step_with_its_source(source):
    text = [(c.cell_type, c.source.strip()) for c in _source_cells(source)]
    built = [(c.cell_type, c.source.strip()) for c in _executed_cells(source)]
    assert built == text, f"{source.with_suffix('.ipynb').name} is stale: run python tools/build_notebooks.py"

    def kept(cells: list[Any]) -> list[tuple]:
        return [(c.metadata.get("tags", []), c.metadata.get("jupyter", {})) for c in cells]

    assert kept(_executed_cells(source)) == kept(_source_cells(source)), "tags or collapsed solutions differ"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_executed_without_errors(source):
    for index, cell in enumerate(_executed_cells(source)):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"cell {index} raised {errors[0]['ename']}"


# -- exercises ------------------------------------------------------------------------------------------


def _visible_before_opening(source: Path) -> list[tuple[str, int, str]]:
    """(lesson, cell, text) of everything a learner sees with every solution still collapsed: each
    non-solution cell's markdown or outputs, in this lesson and in every earlier one."""
    seen = []
    for lesson in SOURCES:
        if lesson.name > source.name:
            break
        for index, cell in enumerate(_executed_cells(lesson)):
            if _is_solution(cell):
                continue
            text = cell.source if cell.cell_type == "markdown" else _output_text(cell)
            seen.append((lesson.stem, index, text))
    return seen


def _shown(answer: Any, name: str) -> list[str]:
    """The needles to look for: none for a one-letter choice (a debugging exercise's option letter)."""
    if isinstance(exercise(name).shape, Choice):
        return []
    return _needles(answer)


@pytest.mark.parametrize(("source", "name", "index", "context"), EXERCISES, ids=[e[1] for e in EXERCISES])
def test_no_answer_is_visible_before_its_solution_is_opened(source, name, index, context):
    answer, _ = _answer(name, context)
    for lesson, cell, text in _visible_before_opening(source):
        for needle in _shown(answer, name):
            assert not _printed(needle, text), (
                f"{lesson} cell {cell} shows {needle!r}, the answer to {name}, with every solution collapsed"
            )


@pytest.mark.parametrize(("source", "name", "index", "context"), EXERCISES, ids=[e[1] for e in EXERCISES])
def test_check_accepts_the_answer_and_hints_without_giving_it(source, name, index, context):
    answer, context = _answer(name, context)
    assert check(name, answer, **context)
    for wrong in ("no idea", -1):
        verdict = check(name, wrong, **context)
        assert not verdict and verdict.kind == "wrong"
        assert verdict.message
        for needle in _shown(answer, name):
            assert not _printed(needle, verdict.message), f"the hint for {wrong!r} gives away {needle!r}"


@pytest.mark.parametrize(("source", "name", "index", "context"), EXERCISES, ids=[e[1] for e in EXERCISES])
def test_each_listed_wrong_answer_gets_a_hint_of_its_own(source, name, index, context):
    answer, context = _answer(name, context)
    generic = check(name, "not an answer at all", **context).message
    listed = wrong_answers(name, **context)
    assert 2 <= len(listed) <= 3, f"{name} lists {len(listed)} wrong answers; two or three wanted"
    for wrong, hint in listed:
        verdict = check(name, wrong, **context)
        assert not verdict, f"{name}: the listed wrong answer {wrong!r} is accepted"
        assert hint == verdict.message and hint != generic, f"{name}: {wrong!r} gets the generic hint"
        for needle in _shown(answer, name):
            assert not _printed(needle, hint), f"{name}: the hint for {wrong!r} gives away {needle!r}"
    assert len({hint for _, hint in listed}) == len(listed), f"{name}: two wrong answers share a hint"


@pytest.mark.parametrize(("source", "name", "index", "context"), EXERCISES, ids=[e[1] for e in EXERCISES])
def test_the_unsolved_exercise_cell_prints_only_a_prompt(source, name, index, context):
    outputs = _executed_cells(source)[index].get("outputs", [])
    texts = [t for t in (_output_text({"outputs": [o]}) for o in outputs) if t.strip()]
    assert texts, f"cell {index} asks {name} and prints its prompt"
    assert len(texts) == 1 and texts[0].startswith("Predict first: "), (
        f"cell {index} asks {name} with no prediction yet: it prints only the prompt, not {texts!r}"
    )
    assert "Not yet" not in texts[0] and "Right" not in texts[0]


@pytest.mark.parametrize(("source", "name", "index", "context"), EXERCISES, ids=[e[1] for e in EXERCISES])
def test_the_solution_compares_the_prediction_with_a_measurement(source, name, index, context):
    """Each solution cell calls check(name, prediction, measured=... or reveal=True): it shows the prediction
    beside what ran, and its stored output (no prediction was made when the lesson was built) says Measured."""
    cells = _executed_cells(source)
    solutions = [
        i
        for i, c in enumerate(cells)
        if _is_solution(c) and any(_exercise_id(call) == name for call in _check_calls(c))
    ]
    assert solutions, f"{name} has no solution cell"
    cell = cells[solutions[0]]
    calls = [c for c in _check_calls(cell) if c.args[0].value == name]
    keywords = {k.arg for c in calls for k in c.keywords}
    if not isinstance(exercise(name).shape, Choice) and exercise(name).accept is None:
        assert "measured" in keywords, f"{name}: the solution measures its answer and passes measured="
    else:
        assert keywords & {"measured", "reveal"} or exercise(name).accept is not None
    assert any(isinstance(c.args[1], ast.Name) and c.args[1].id == "prediction" for c in calls if len(c.args) > 1) or (
        exercise(name).accept is not None
    ), f"{name}: the solution compares the learner's own prediction"


@pytest.mark.parametrize(("source", "name", "index", "context"), EXERCISES, ids=[e[1] for e in EXERCISES])
def test_the_exercise_and_its_solution_check_the_same_situation(source, name, index, context):
    """The exercise cell may pass no context and rely on the exercise's own (so that it works run first);
    its solution, which measures the lesson's run, passes the lesson's names: both mean the same values."""
    cells = _source_cells(source)
    asked = exercise(name).with_context(context)
    for at, cell in enumerate(cells):
        if not _is_solution(cell):
            continue
        for call in _check_calls(cell):
            if _exercise_id(call) == name:
                solved = exercise(name).with_context(_context(call, _literal_names(cells[: at + 1]), source.name))
                assert {k: _freeze(v) for k, v in solved.items()} == {k: _freeze(v) for k, v in asked.items()}, (
                    f"{source.name}: cell {index} asks {name} in {asked}, its solution (cell {at}) checks {solved}"
                )


# -- where the lessons are listed -----------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_lesson_is_listed_in_the_readme_and_in_00(source):
    readme = (NOTEBOOKS.parent / "README.md").read_text(encoding="utf-8")
    learn = readme[readme.index("## Learn") :].split("\n## ", 1)[0]
    number = _number(source)
    assert re.search(rf"^\| \[?{number} ", learn, flags=re.M), f"README's Learn table has no row for {number}"
    roadmap = _source_cells(SOURCES[0])[0].source
    assert re.search(rf"(?<!\d){number} ", roadmap), f"00's roadmap does not mention lesson {number}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_no_table_is_cut_by_display_options(source):
    for index, cell in enumerate(_executed_cells(source)):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "<table" in data.get("text/html", ""):
                plain = data.get("text/plain", "")
                assert not re.search(r"(^|\s)\.\.\.(\s|$)", plain, flags=re.M), (
                    f"cell {index}: a table has elided rows or columns ('...'); show fewer, not cut ones"
                )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_no_cell_writes_to_stderr(source):
    """A warning in a recorded output (a busy port, a slow event loop) is noise for the learner and makes
    strict nbval depend on the machine the lesson was built on."""
    for index, cell in enumerate(_executed_cells(source)):
        streams = [o for o in cell.get("outputs", []) if o.get("name") == "stderr"]
        assert not streams, f"cell {index} wrote to stderr: {streams[0]['text'][:200]!r}"
