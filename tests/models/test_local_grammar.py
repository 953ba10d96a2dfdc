"""LocalModel's grammars: a value decoded under one honours the schema's constraints.

Each grammar is checked with llama.cpp's own grammar sampler over the model's vocabulary
(loaded alone, without the weights' tensors): a string is accepted when every one of its
tokens is allowed in turn and the grammar may then end.
"""

from __future__ import annotations

import ctypes
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

llama_cpp = pytest.importorskip(
    "llama_cpp", reason="the embedded model's grammars need the `local` extra (llama-cpp-python)"
)

from plait.messages import Message, ToolCall  # noqa: E402
from plait.models._grammar import bound_pattern, schema_to_gbnf  # noqa: E402
from plait.models._local_prompt import build_step  # noqa: E402
from plait.models.local import LocalModel, default_weights  # noqa: E402

Accepts = Callable[[dict[str, Any], object], bool]


class Raw(str):
    """Text checked as it is (any other value is checked as its JSON)."""


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _quiet(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Keep llama.cpp's loading messages out of the test output."""


@pytest.fixture(scope="module")
def accepts() -> Iterator[Accepts]:
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(default_weights()).encode(), params)
    assert model
    vocab = llama_cpp.llama_model_get_vocab(model)
    eos = llama_cpp.llama_vocab_eos(vocab)

    def tokens(text: str) -> list[int]:
        data = text.encode()
        out = (llama_cpp.llama_token * (len(data) + 8))()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), out, len(data) + 8, False, False)
        return list(out[:n])

    def check(schema: dict[str, Any], value: object) -> bool:
        text = value if isinstance(value, Raw) else json.dumps(value, ensure_ascii=False)
        sampler = llama_cpp.llama_sampler_init_grammar(
            vocab, schema_to_gbnf(schema).encode(), b"root"
        )
        assert sampler, "llama.cpp rejected the grammar"
        one = (llama_cpp.llama_token_data * 1)()
        array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(one, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        try:
            for token in [*tokens(text), eos]:
                one[0].id, one[0].logit, one[0].p = token, 0.0, 0.0
                array.size, array.selected = 1, -1
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
                if one[0].logit == -math.inf:
                    return False
                if token != eos:
                    llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)

    yield check
    llama_cpp.llama_model_free(model)


def test_an_integer_range_admits_exactly_the_integers_in_it(accepts: Accepts) -> None:
    schema = {"type": "integer", "minimum": -15, "maximum": 123}
    admitted = [n for n in range(-200, 200) if accepts(schema, n)]
    assert admitted == list(range(-15, 124))
    assert not accepts(schema, 1.5)
    assert not accepts(schema, Raw("007"))


def test_exclusive_bounds_leave_their_ends_out(accepts: Accepts) -> None:
    schema = {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}
    assert [n for n in range(-5, 15) if accepts(schema, n)] == list(range(1, 10))


def test_a_number_range_admits_decimals_inside_it_and_nothing_outside(accepts: Accepts) -> None:
    schema = {"type": "number", "minimum": -2, "maximum": 3}
    for inside in ("3", "2.99", "0.5", "-1.5", "-2", "0"):
        assert accepts(schema, Raw(inside)), inside
    for outside in ("3.5", "3.01", "-2.5", "-3", "4", "1e3"):
        assert not accepts(schema, Raw(outside)), outside


def test_a_pattern_with_max_length_admits_only_matching_strings_up_to_it(
    accepts: Accepts,
) -> None:
    schema = {"type": "string", "pattern": r"^[0-9+*/() .-]+$", "maxLength": 8}
    assert accepts(schema, "(4 + 6)*7") is False  # 9 characters
    assert accepts(schema, "(4+6)*7")
    assert accepts(schema, "2 * 21")
    assert not accepts(schema, "2 * 21 = 42")
    assert not accepts(schema, "12 times 12")
    assert not accepts(schema, "")


def test_a_pattern_with_a_fixed_head_is_bounded_exactly(accepts: Accepts) -> None:
    schema = {"type": "string", "pattern": r"^[A-Z][a-z]*$", "maxLength": 5}
    assert accepts(schema, "Paris")
    assert not accepts(schema, "Berlin")
    assert not accepts(schema, "paris")
    assert bound_pattern(r"^[A-Z][a-z]*$", 5) == r"^[A-Z][a-z]{0,4}$"
    assert bound_pattern(r"^(ab)+[*+]\+$", 7) == r"^(ab){1,7}[*+]\+$"


def test_enum_and_max_length_are_honoured(accepts: Accepts) -> None:
    assert accepts({"enum": ["Tokyo", "Paris"]}, "Paris")
    assert not accepts({"enum": ["Tokyo", "Paris"]}, "Rome")
    assert accepts({"type": "string", "maxLength": 3}, "abc")
    assert not accepts({"type": "string", "maxLength": 3}, "abcd")


def test_a_range_no_integer_fits_is_refused() -> None:
    with pytest.raises(ValueError, match="no number"):
        schema_to_gbnf({"type": "integer", "minimum": 2, "maximum": 1})


def _answer_schema(result: str, request: str) -> dict[str, Any]:
    """The schema LocalModel decodes a final answer under after `result`."""
    model = LocalModel()
    messages = [
        Message.user(request),
        Message.assistant("", (ToolCall(id="c1", name="calculator", arguments="{}"),)),
        Message.tool(result, "c1", name="calculator"),
    ]
    step = build_step(
        messages,
        [],
        None,
        None,
        steer=model.steer,
        answer_chars=model.answer_chars,
        string_chars=model.string_chars,
    )
    schema: dict[str, Any] = step.options["answer"]
    return schema


def test_an_answer_after_a_result_states_its_number_and_invents_none(accepts: Accepts) -> None:
    schema = _answer_schema("42", "Calculate 2 * 21")
    assert accepts(schema, "2 * 21 is 42.")
    assert accepts(schema, "It is 42 now.")
    assert not accepts(schema, "It is 42 in Basel.")  # a word of neither request nor result
    assert not accepts(schema, "It is 42.0000.")  # a number the tool did not return
    assert not accepts(schema, "It is 420.")
    assert not accepts(schema, "It is 43.")
    assert not accepts(schema, "It is 42 ½.")
    assert not accepts(schema, "I do not know.")  # the result is not stated


def test_an_answer_after_a_result_without_numbers_quotes_its_text(accepts: Accepts) -> None:
    result = json.dumps({"city": "Oslo", "error": "no report for this city"})
    schema = _answer_schema(result, "What's the weather in Oslo?")
    assert accepts(schema, "Sorry, there is no report for this city.")
    assert not accepts(schema, "It is sunny in Oslo.")
    assert not accepts(schema, "Sorry, there is no report for this city from Bern to Basel.")
    assert not accepts(schema, "It is 3500 metres, no report for this city.")
