"""booktools.gluecheck: a number typed in the prose where the notebook glues it is caught."""

from __future__ import annotations

import pytest

from booktools import gluecheck


def glued(name: str, value, prefix: str = "application/papermill.record/") -> dict:
    """The output that ``myst_nb.glue(name, value, display=False)`` leaves in a notebook."""
    return {"output_type": "display_data", "data": {prefix + "text/plain": repr(value)},
            "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}}}


def notebook(markdown: str | list[str], outputs: list[dict]) -> dict:
    texts = [markdown] if isinstance(markdown, str) else markdown
    return {"cells": [{"cell_type": "code", "source": "glue(...)", "outputs": outputs},
                      *({"cell_type": "markdown", "source": t} for t in texts)]}


ACC = [glued("acc", 0.8312), glued("n_steps", 800), glued("label", "'a string'")]


def typed(markdown, outputs=ACC) -> list[tuple[str, str, str]]:
    return [(t.text, t.name, t.spec)
            for t in gluecheck.typed_glued_numbers(notebook(markdown, outputs))]


def test_a_typed_number_is_caught_with_its_glue_name():
    found = typed("We reach {glue:text}`acc:.2f`; the model reaches 0.83 after training.")
    assert found == [("0.83", "acc", ".2f")]
    t = gluecheck.typed_glued_numbers(notebook("reaches 0.83.\n{glue:text}`acc:.2f`", ACC))[0]
    assert t.cell == 1
    assert t.describe() == ("markdown cell 1 types 0.83, the value glued as 'acc': "
                            "write {glue:text}`acc:.2f`")


def test_a_typed_number_beside_a_chapter_reference_is_caught():
    assert typed("{glue:text}`n_steps` steps here, against the 800 of chapters 4 and 5") == [
        ("800", "n_steps", "")]


def test_a_glued_number_passes():
    assert typed("We reach {glue:text}`acc:.2f` after {glue:text}`n_steps` steps.") == []


def test_each_value_is_tried_at_the_formats_of_its_own_roles():
    assert typed("{glue:text}`acc:.2f` and {glue:text}`acc:.1f`; about 0.8 of them") == [
        ("0.8", "acc", ".1f")]
    assert typed("{glue:text}`acc:.2f` and {glue:text}`x:.1f`; about 0.8 of them") == []
    assert typed("{glue:text}`acc:.2f`; we trained for 800 steps") == []  # n_steps not shown
    assert typed("{glue:text}`acc:.2f` {glue:text}`n_steps`; 800 steps") == [
        ("800", "n_steps", "")]
    many = [glued("n_tokens", 1234567)]
    assert typed("{glue:text}`n_tokens:,.0f`, i.e. 1,234,567 tokens", many) == [
        ("1,234,567", "n_tokens", ",.0f")]
    assert typed("{glue:text}`n_tokens:,.0f`, 100-dimensional", [glued("n_tokens", 100)]) == [
        ("100", "n_tokens", ",.0f")]


def test_one_and_two_digit_whole_values_are_not_searched():
    outputs = [glued("n_layers", 4), glued("loss", 4.2), glued("ratio", 30.4)]
    assert typed("{glue:text}`n_layers` layers, loss {glue:text}`loss:.0f`; size 4", outputs) == []
    assert typed("{glue:text}`loss:.1f`; size 4.2", outputs) == [("4.2", "loss", ".1f")]
    assert typed("{glue:text}`ratio:.0f` times; sentences of 30 to 60 words", outputs) == []
    assert typed("{glue:text}`ratio:.1f` times; 30.4 again", outputs) == [
        ("30.4", "ratio", ".1f")]


@pytest.mark.parametrize("markdown", [
    "In 2017 {cite}`vaswani2017attention` showed it; chapter 4 and Exercise 2.1 too.",
    "{glue:text}`n_steps` steps; see chapter 8 and {numref}`fig-800`",
    "{glue:text}`n_steps` steps, as in chapters 4, 800 and 8 and exercises 800 to 802",
    "{glue:text}`n_steps` steps\n\n800. a numbered list item\n\n**800. An exercise.**",
    "{glue:text}`n_steps` steps for 32 800 or 800 000 tokens",
    "the loss {glue:text}`acc:.2f` falls below $0.83$ and $$L = 800$$ too",
    "call `fit(steps=800)` or\n```python\nfit(steps=800)\n```\n{glue:text}`n_steps`",
    "[a link](https://example.org/800) <!-- 800 --> {glue:text}`n_steps`",
    "{glue:text}`n_steps` and 8000 or 800.5 or 1800 or v800, 0.831 and 10.83 {glue:text}`acc:.2f`",
])
def test_years_chapters_math_code_and_longer_numbers_are_not_caught(markdown):
    assert typed(markdown) == []


def test_a_year_is_caught_when_it_equals_a_glued_value_at_a_used_format():
    outputs = [glued("n_pairs", 2017.4)]
    assert typed("In 2017 we counted {glue:text}`n_pairs:.1f` pairs", outputs) == []
    assert typed("In 2017 we counted {glue:text}`n_pairs:.0f` pairs", outputs) == [
        ("2017", "n_pairs", ".0f")]


def test_glued_values_are_numbers_only():
    outputs = [*ACC, glued("flag", True), glued("t", "np.float64(0.25)", prefix=""),
               glued("bad", float("nan"))]
    outputs[4]["data"] = {"text/plain": "np.float64(0.25)"}
    assert gluecheck.glued_numbers(notebook("", outputs)) == {
        "acc": 0.8312, "n_steps": 800, "t": 0.25}


def test_formats_of_the_roles():
    nb = notebook(["{glue:text}`a:.2f` {glue}`b` {glue:text}`c` {glue:text}`a:,.0f`"], [])
    assert gluecheck.glue_formats(nb) == {"a": {".2f", ",.0f"}, "b": {""}, "c": {""}}
    assert gluecheck.render(0.8312, ".2f") == "0.83" and gluecheck.render(800, ".1f") == "800.0"
    assert gluecheck.render(2.5, "d") == "2"  # as myst-nb shows it
    assert gluecheck.render(0.5, "q") is None  # not a format


def test_a_constant_that_the_code_writes_is_not_a_typed_result():
    """A threshold quoted in the prose is not caught when a result rounds to it; the same
    number is caught when the code does not write it."""
    outputs = [glued("slope", 0.9913)]
    markdown = "the weight exceeds 0.99 on {glue:text}`slope:.2f` of the queries"
    nb = notebook(markdown, outputs)
    assert [t.text for t in gluecheck.typed_glued_numbers(nb)] == ["0.99"]
    nb["cells"][0]["source"] = "saturated = (w.max(-1).values > 0.99).float().mean()"
    assert gluecheck.typed_glued_numbers(nb) == []
    nb["cells"][0]["source"] = "x = 10.99 + 1_000"
    assert [t.text for t in gluecheck.typed_glued_numbers(nb)] == ["0.99"]
    assert gluecheck.code_literals(nb) == {"10.99", "1000"}


def test_a_whole_float_literal_is_the_whole_number_typed_in_prose():
    """``base=100.0`` in the code is the "base 100" of the prose, not a result that rounds to
    100; ``100.5`` is not 100."""
    markdown = "Use base 100 here; the loss was {glue:text}`loss:.0f`"
    nb = notebook(markdown, [glued("loss", 100.2)])
    assert [t.text for t in gluecheck.typed_glued_numbers(nb)] == ["100"]
    nb["cells"][0]["source"] = "pe = sinusoidal(400, 8, base=100.0)"
    assert gluecheck.typed_glued_numbers(nb) == []
    nb["cells"][0]["source"] = "pe = sinusoidal(400, 8, base=100.5)"
    assert [t.text for t in gluecheck.typed_glued_numbers(nb)] == ["100"]
    assert gluecheck.code_literals(nb) == {"400", "8", "100.5"}


@pytest.mark.parametrize("name", ["train_seconds", "seconds_rnn", "ms_s4d", "loop_ms",
                                  "bench_compile_s", "gpt_tokens_per_s"])
def test_wall_clock_times_are_not_searched(name):
    """A time changes from run to run: a typed 103 that meets it is a coincidence."""
    assert typed(f"{{glue:text}}`{name}:.0f` s, on 103 lines", [glued(name, 103.2)]) == []


@pytest.mark.parametrize("name", ["mse_tmax", "rms_ratio", "pk_exact_second", "n_steps"])
def test_names_that_only_look_like_times_are_searched(name):
    assert typed(f"{{glue:text}}`{name}:.0f`, on 103 lines", [glued(name, 103.2)]) == [
        ("103", name, ".0f")]
